#ifndef TAPEGRAD_LORA_FINETUNE_H
#define TAPEGRAD_LORA_FINETUNE_H
/* What the files of lora_finetune share: the options (lora_finetune.c), and the fine-tuning
 * runs made from them (finetune.c). */
#include <stdbool.h>
#include <stddef.h>

#include "analysis/finetune_base.h"
#include "autograd/mem.h"
#include "data/tasks.h"
#include "nn/gpt.h"

enum { MAX_RANKS = 8 };

typedef struct {
    const char *pretrain_task, *task;
    int         layers, heads, embd;
    long        pretrain_steps, steps;
    int         batch, pretrain_batch;
    double      lr_pretrain, lr_full, lr_lora;
    int         pretrain_decay;      /* SchedDecay of the pretraining: constant or cosine */
    long        pretrain_eval_every; /* print the old task's scores while pretraining; 0: no */
    double      alpha;           /* the adapters' alpha: a float in LoraConfig */
    unsigned    targets;
    int         ranks[MAX_RANKS], n_ranks;
    int         qlora_rank;
    unsigned    methods;             /* bit m set: run Method m; none: only the base */
    long        seed;
    int         threads;
    int         eval_examples;
    const char *base_path;           /* a base to load instead of pretraining, or NULL */
    const char *cache_dir;           /* where a pretrained base is kept between runs */
    const char *log_path, *plot_path;
} Options;

/* finetune.c: the library's runs (analysis/finetune.h, finetune_base.h) with these options and
 * a progress line. The base's settings; the base pretrained on old and saved to path. */
FinetuneBaseSpec base_spec(const Options *o);
void   make_base(const FinetuneBaseSpec *spec, const GptConfig *cfg, const Task *old,
                 const char *dir, const char *path);
/* The base in base_path before fine-tuning: its size and its scores on both tasks. */
FinetuneResult base_result(const char *base_path, const Task *task, const Task *old,
                           const Options *o);
/* Fine-tunes a copy of the base in base_path on o->task with one method and measures it; old is
 * the pretraining task, scored after fine-tuning for forgetting. */
FinetuneResult finetune(const char *base_path, FinetuneMethod method, int rank,
                        const Task *task, const Task *old, const Options *o);

#endif

#ifndef TAPEGRAD_LORA_FINETUNE_H
#define TAPEGRAD_LORA_FINETUNE_H
/* What the files of lora_finetune share: the options (lora_finetune.c), and one fine-tuning run
 * with its measurements (finetune.c). */
#include <stdbool.h>
#include <stddef.h>

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

/* METHOD_BASE is the base before fine-tuning: its scores, for reference. */
typedef enum { METHOD_FULL, METHOD_LORA, METHOD_QLORA, METHOD_BASE } Method;

/* One fine-tuning run, measured. Bytes are the peaks of each memory category over the training
 * steps (the model, its adapters and the optimizer state all exist by then). */
typedef struct {
    Method method;
    int    rank;                     /* 0 for full fine-tuning */
    size_t params, trainable;        /* scalars in the model, scalars trained */
    size_t peak[MEM_NCAT];           /* param, grad, optim, act, temp */
    size_t frozen_bytes;             /* the frozen base's storage: 0 for full fine-tuning */
    size_t base_fp32_bytes;          /* the same base in fp32 */
    /* The fastest step: what a step costs when nothing else runs. Every step does the same
     * work, so the slower ones measure the machine's other load, which a median would mix in
     * (a small shared machine makes it vary several-fold between runs). */
    double ms_per_step;
    double final_loss;               /* mean training loss of the last steps */
    double acc_new, acc_old;         /* greedy exact match on the new task and on the old one */
    double loss_old;                 /* validation loss on the old task (forgetting, graded) */
    /* The old task once the adapter is removed (LoRA, QLoRA; NAN otherwise): the frozen base
     * again, so LoRA's equals the base's, which is the sense in which LoRA keeps the old task;
     * QLoRA's base comes back dequantized from NF4, not exactly. */
    double acc_old_off;
} Result;

const char *method_name(Method m);   /* "full", "lora", "qlora", "base" */
/* "full", "lora r=8", "qlora r=8" into buf. */
const char *run_name(Method m, int rank, char *buf, size_t len);

/* Pretraining: `steps` full AdamW steps on `task` from a fresh model (lr with a warmup). */
void   pretrain(Gpt *model, const Task *task, const Options *o);
/* Exact match by greedy decoding over the first o->eval_examples validation examples. */
double greedy_accuracy(const Gpt *m, const Task *task, const Options *o);
/* Teacher-forced cross-entropy over the answer tokens of the same examples. */
double validation_loss(const Gpt *m, const Task *task, const Options *o);
/* The base in base_path before fine-tuning: its size and its scores on both tasks. */
Result base_result(const char *base_path, const Task *task, const Task *old, const Options *o);
/* Fine-tunes a copy of the base in base_path on o->task with one method and measures it; old is
 * the pretraining task, scored after fine-tuning for forgetting. */
Result finetune(const char *base_path, Method method, int rank, const Task *task,
                const Task *old, const Options *o);

#endif

#ifndef TAPEGRAD_FINETUNE_BASE_H
#define TAPEGRAD_FINETUNE_BASE_H
/* The base a fine-tuning study starts from, and what its runs add up to (examples/
 * lora_finetune, docs/lora.md; the runs themselves: analysis/finetune.h).
 *
 * A pretrained base is kept in a cache folder under a name made of every setting that decides
 * its weights, so a second study (another rank, another learning rate) starts from the same
 * base without pretraining again. The kernel mode is part of the name, since the two modes sum
 * in different orders and train different bases from the same seed; in the fast mode so is the
 * thread count, which decides how the library splits its sums. The portable mode trains the
 * same base on every count. In: the settings and the tasks; out: a snapshot file (nn/
 * gpt_snapshot.h), and a check that a base fits the tasks. */
#include <stdbool.h>
#include <stddef.h>

#include "analysis/finetune.h"

/* A base pretrained by the study: its task's name, its shape and its pretraining. */
typedef struct {
    const char      *task;
    int              layers, heads, embd;
    FinetunePretrain pretrain;
} FinetuneBaseSpec;

/* dir/base-TASK-L..-H..-C..-steps..-lr..-DECAY-batch..-seed..-MODE.safetensors into path. */
const char *finetune_base_cache_path(const FinetuneBaseSpec *s, const char *dir, char *path,
                                     size_t len);
/* The shape of the base: TASK_VOCAB, rows as long as the longer of the two tasks', tied
 * embeddings, separate q, k, v (every LoRA target allowed). */
GptConfig   finetune_base_config(const FinetuneBaseSpec *s, const Task *old, const Task *task);
/* A fresh model of cfg (seeded by the pretraining's seed) pretrained on old and saved to path
 * (its folder made if missing). False with the message in err when it cannot be saved. */
bool        finetune_base_make(const FinetuneBaseSpec *s, const GptConfig *cfg, const Task *old,
                               const FinetuneWatch *watch, const char *dir, const char *path,
                               char *err, size_t errlen);

/* The base in path: its shape into *m, and whether it covers both tasks (the vocabulary and
 * the rows of each). False with a message in err: the file cannot be read, or
 * "PATH: V = .., T = .. does not fit tasks OLD and NEW (V .., rows of .. and ..)". */
bool        finetune_base_covers(const char *path, const Task *old, const Task *task,
                                 GptConfig *m, char *err, size_t errlen);

/* The study's headline numbers from its rows: LoRA at r = 8 against full fine-tuning, and the
 * QLoRA base against the same base in fp32. */
typedef struct {
    bool   lora8;               /* both rows there, and full fine-tuning solved something */
    double lora8_trainable;     /* the share of the parameters LoRA r = 8 trains, % */
    double lora8_states;        /* its grad + optim bytes over full fine-tuning's */
    double lora8_accuracy;      /* its exact match on the new task, % of full fine-tuning's */
    bool   qlora;               /* a QLoRA row is there */
    size_t qlora_frozen, qlora_fp32;    /* its frozen base's bytes; the same base in fp32 */
} FinetuneSummary;

FinetuneSummary finetune_summary(const FinetuneResult *res, int n);

#endif

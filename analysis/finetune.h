#ifndef TAPEGRAD_FINETUNE_H
#define TAPEGRAD_FINETUNE_H
/* Fine-tuning measured (examples/lora_finetune, docs/lora.md): a pretrained GPT trained further
 * on a new task by full fine-tuning, LoRA or QLoRA (nn/gpt_lora.h), each run from a fresh copy
 * of the base read from its snapshot, with what each costs (the peak bytes of every memory
 * category over the training steps, the fastest step) and what it gives and takes: exact match
 * on the new task, and on the pretraining task afterwards (forgetting).
 *
 * One training loop serves the pretraining and every method: AdamW with beta2 0.99 over the
 * trained tensors, gradients clipped to norm 1 (a step whose norm is not finite is skipped),
 * the rate warmed up gradually over the first tenth of the steps (at most 100), then decayed.
 * Full fine-tuning trains every weight with weight decay 0.1; LoRA and QLoRA train only their
 * adapters, without decay, at their own rate. Scores are over the first eval_examples
 * validation examples of a task: exact match by greedy decoding (task_accuracy_greedy) and the
 * teacher-forced cross-entropy over the answer tokens, which also shows a partial loss of
 * skill. */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/mem.h"
#include "data/tasks.h"
#include "nn/gpt.h"

/* FINETUNE_BASE is the base before fine-tuning: its scores, for reference. */
typedef enum { FINETUNE_FULL, FINETUNE_LORA, FINETUNE_QLORA, FINETUNE_BASE } FinetuneMethod;

/* Who watches a loop's steps (a program's progress line): begin before the first step, step
 * after each (its loss and tokens), scores at every eval_every-th step of a loop that asks for
 * them (validation loss and exact match on the loop's task), end after the last. The library
 * prints nothing itself; any of them may be NULL. */
typedef struct {
    void (*begin)(void *ctx, long steps);
    void (*step)(void *ctx, long step, double loss, long long tokens, const char *label);
    void (*scores)(void *ctx, const char *label, long step, double loss, double val_loss,
                   double exact);
    void (*end)(void *ctx);
    void *ctx;
} FinetuneWatch;

/* The pretraining: every weight of a fresh model trained on a task. */
typedef struct {
    double lr;
    long   steps;
    int    batch;
    int    decay;               /* SchedDecay after the warmup (optim/schedule.h) */
    long   seed;                /* the data's stream */
    long   eval_every;          /* the watch's scores every so many steps; 0: never */
    int    eval_examples;
} FinetunePretrain;

/* The fine-tuning runs. */
typedef struct {
    double   lr_full, lr_lora;  /* full fine-tuning's peak rate; LoRA's and QLoRA's */
    long     steps;
    int      batch;
    double   alpha;             /* the adapters' alpha */
    unsigned targets;           /* LoraTarget bits: which projections get adapters */
    long     seed;              /* the data's stream is seed + 1, the adapters' init seed + 2 */
    int      eval_examples;
} FinetuneConfig;

/* One fine-tuning run, measured. Bytes are the peaks of each memory category over the training
 * steps (the model, its adapters and the optimizer state all exist by then). */
typedef struct {
    FinetuneMethod method;
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
} FinetuneResult;

const char *finetune_method_name(FinetuneMethod m);   /* "full", "lora", "qlora", "base" */
/* "full", "lora r=8", "qlora r=8" into buf. */
const char *finetune_run_name(FinetuneMethod m, int rank, char *buf, size_t len);

/* Trains every weight of model on task (a fresh model: the pretraining of a base). */
void   finetune_pretrain(Gpt *model, const Task *task, const FinetunePretrain *p,
                         const FinetuneWatch *watch);

/* Exact match by greedy decoding over the first eval_examples validation examples. */
double finetune_greedy_accuracy(const Gpt *m, const Task *task, int eval_examples);
/* Teacher-forced cross-entropy over the answer tokens of the same examples. */
double finetune_validation_loss(const Gpt *m, const Task *task, int eval_examples);

/* The base in base_path before fine-tuning: its size and its scores on task and old. False
 * with a message in err when the snapshot cannot be read. */
bool   finetune_base(const char *base_path, const Task *task, const Task *old,
                     int eval_examples, FinetuneResult *r, char *err, size_t errlen);
/* Fine-tunes a copy of the base in base_path on task with one method (rank: the adapters'
 * rank; 0 for full fine-tuning) and measures it; old is the pretraining task, scored after
 * fine-tuning for forgetting. The peaks are reset when the model is ready. False with a
 * message in err when the snapshot cannot be read or the adapters do not fit the base. */
bool   finetune_run(const char *base_path, FinetuneMethod method, int rank, const Task *task,
                    const Task *old, const FinetuneConfig *c, const FinetuneWatch *watch,
                    FinetuneResult *r, char *err, size_t errlen);

#endif

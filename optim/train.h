#ifndef TAPEGRAD_TRAIN_H
#define TAPEGRAD_TRAIN_H
/* The training step: everything one update of a GPT needs, in one place, as a short sequence of
 * named stages that later work (gradient accumulation, loss scaling, checkpointing strategies)
 * can extend one stage at a time:
 *
 *     forward    tokens -> loss, recorded on the trainer's tape
 *     backward   tape_backward: every parameter's gradient
 *     clip       the global gradient norm, measured before clipping, and clipping to cfg.clip
 *     update     optim_step with the caller's learning rate (skipped when the norm is not
 *                finite: one bad batch must not turn every weight into NaN)
 *     release    zero the gradients, tape_reset (activations freed, arrays kept for reuse)
 *
 * The trainer owns the model, the optimizer and the tape, and holds the state a resumed run
 * needs besides the tensors: the step counter and the data RNG. It does not know where batches
 * come from (that is the program's business, examples/common/dataset.h): the program draws each
 * batch with &trainer->data_rng, so saving that RNG in a snapshot (optim/train_snapshot.h)
 * makes the resumed run see exactly the batches the uninterrupted one would have.
 *
 *     TrainerConfig cfg = trainer_config_default();
 *     cfg.model = ...;                          // V, T, L, H, C
 *     Trainer *tr = trainer_new(&cfg);
 *     for (...) {
 *         dataset_train_batch(ds, &tr->data_rng, B, tokens, targets);
 *         TrainStepResult r = trainer_step(tr, tokens, targets, B, T, lr);
 *     }
 *     trainer_free(tr);
 *
 * Memory: after the first step every allocation of a step is served by the allocator's cache
 * (autograd/mem.h), since each step asks for the same sizes in the same order; the tape keeps
 * its node arrays across tape_reset. */
#include <stdbool.h>
#include <stdint.h>

#include "autograd/rng.h"
#include "autograd/tape.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "optim/optim.h"
#include "optim/sgd.h"

typedef enum {
    TRAIN_ADAMW,
    TRAIN_SGD,
} TrainOptimizer;

typedef struct {
    GptConfig      model;
    uint64_t       seed;        /* initial weights (RNG_STREAM_INIT) and data (RNG_STREAM_DATA) */
    TrainOptimizer optimizer;
    AdamWConfig    adamw;       /* used when optimizer is TRAIN_ADAMW */
    SgdConfig      sgd;         /* used when optimizer is TRAIN_SGD */
    double         clip;        /* largest global gradient norm; 0 means no clipping */
} TrainerConfig;

typedef struct {
    TrainerConfig cfg;
    Gpt          *model;
    Optim        *optim;
    Tape         *tape;
    long          step;         /* trainer_step calls so far (batches consumed) */
    Rng           data_rng;     /* the program draws batches with it */
} Trainer;

typedef struct {
    double loss;                /* mean cross-entropy over the batch's counted targets */
    double grad_norm;           /* global norm of the gradients before clipping */
    bool   updated;             /* false when the norm was not finite and the update skipped */
} TrainStepResult;

/* gpt_config_default's model, seed 1, AdamW with PyTorch's defaults, clipping at 1. */
TrainerConfig trainer_config_default(void);
/* "adamw", "sgd"; the TrainOptimizer of a name (false if none). */
const char   *trainer_optimizer_name(TrainOptimizer o);
bool          trainer_optimizer_parse(const char *name, TrainOptimizer *out);

/* A model initialised from cfg->seed, its optimizer, a tape, step 0, the data RNG at the start
 * of its stream. An invalid model config is a programming error (check with gpt_config_check). */
Trainer      *trainer_new(const TrainerConfig *cfg);
/* Frees the model, the optimizer and the tape. NULL is allowed. */
void          trainer_free(Trainer *t);

/* One update on a batch: tokens and targets are [B * T] (targets < 0 are not counted), lr the
 * learning rate of this step. */
TrainStepResult trainer_step(Trainer *t, const int *tokens, const int *targets, int B, int T,
                             double lr);

/* Evaluation without recording: the logits [B, T, V] of a forward pass on the trainer's tape and,
 * when targets is not NULL, the mean cross-entropy in *loss. Both are valid until
 * trainer_eval_done, which frees them. */
Tensor       *trainer_eval(Trainer *t, const int *tokens, const int *targets, int B, int T,
                           double *loss);
void          trainer_eval_done(Trainer *t);

#endif

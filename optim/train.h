#ifndef TAPEGRAD_TRAIN_H
#define TAPEGRAD_TRAIN_H
/* The trainer: the model, its optimizer and tape, and the state a resumed run needs, with the
 * single-process training step. The step itself, its stages and the strategies that spread it
 * over ranks, is optim/step.h's driver:
 *
 *     forward, backward  each micro-batch through the one GPT pass (nn/gpt_pass.h), the loss's
 *                        gradient seeded with S/K (S the loss scale, 1 without loss scaling)
 *     unscale            one pass over the gradients: multiplied by 1/S, checked for inf and NaN
 *     clip               the global gradient norm of the unscaled gradients, measured before
 *                        clipping, and clipping to cfg.clip
 *     update             optim_step with the caller's learning rate, or a skip when a gradient
 *                        is inf or NaN (one bad batch, or a scale too large, must not turn every
 *                        weight into NaN); then the loss scaler's update (optim/loss_scale.h)
 *     release            zero the gradients, tape_reset (activations freed, arrays kept)
 *
 * trainer_step and trainer_step_accum are that step with no strategy (one process); gradient
 * accumulation over K micro-batches is described in optim/step.h.
 *
 * Mixed precision (autograd/policy.h): cfg.policy goes on the tape (none for fp32) and, when
 * parameters are stored in a low format, the optimizer keeps fp32 master weights and refreshes
 * the packed parameters after each update (optim/optim.h). The model's parameters then hold
 * no fp32 data between steps: code that reads them as fp32 wraps itself in
 * optim_expose_masters / optim_pack_masters. Checkpointing over the blocks runs its tapes under
 * the same policy, with the same numbers (nn/gpt_pass.h), except with fp8's delayed
 * scaling, which it refuses. LoRA keeps its frozen base packed, without masters (below).
 *
 * The trainer owns the model, the optimizer and the tape, and holds the state a resumed run
 * needs besides the tensors: the step counter and the data RNG. It does not know where batches
 * come from (that is the program's business, data/dataset.h): the program draws each
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

#include "autograd/checkpoint.h"
#include "autograd/rng.h"
#include "autograd/tape.h"
#include "nn/gpt.h"
#include "autograd/snapshot.h"
#include "nn/gpt_lora.h"
#include "optim/adafactor.h"
#include "optim/adam8bit.h"
#include "optim/adamw.h"
#include "optim/loss_scale.h"
#include "optim/optim.h"
#include "optim/sgd.h"

typedef enum {
    TRAIN_ADAMW,
    TRAIN_SGD,
    TRAIN_ADAM8BIT,             /* adamw's hyperparameters, moments in 8 bits (adam8bit.h) */
    TRAIN_ADAFACTOR,
} TrainOptimizer;

typedef enum { TRAIN_OFFLOAD_NONE, TRAIN_OFFLOAD_OPTIMIZER } TrainOffload;
/* "none", "optimizer" (NULL-terminated, indexed by TrainOffload). */
extern const char *const TRAIN_OFFLOAD_NAMES[];

/* The trainer's run-only settings: they change memory, time and traffic, never the numbers (the
 * gradients and the update are the same bits), so a snapshot never holds them and a resumed run
 * keeps its own (a plain assignment of TrainerConfig's local after the snapshot's config). */
typedef struct {
    CkptStrategy   checkpoint;  /* over the blocks (docs/checkpointing.md); vanilla: one tape */
    /* Where the optimizer's masters and state live and its update runs: TRAIN_OFFLOAD_NONE
     * (the device, the default) or TRAIN_OFFLOAD_OPTIMIZER (the host pool, optim/offload.h). */
    TrainOffload   offload;
} TrainerLocal;

typedef struct {
    GptConfig      model;
    uint64_t       seed;        /* initial weights (RNG_STREAM_INIT), data (RNG_STREAM_DATA) and
                                 * 8-bit Adam's stochastic rounding (RNG_STREAM_OPTIM) */
    TrainOptimizer optimizer;
    AdamWConfig    adamw;       /* used when optimizer is TRAIN_ADAMW or TRAIN_ADAM8BIT */
    Adam8bitRounding adam8bit_rounding;   /* TRAIN_ADAM8BIT: how its moments are re-encoded */
    SgdConfig      sgd;         /* used when optimizer is TRAIN_SGD */
    AdafactorConfig adafactor;  /* used when optimizer is TRAIN_ADAFACTOR */
    double         clip;        /* largest global gradient norm; 0 means no clipping */
    PrecisionPolicy policy;     /* the "fp32" preset by default (autograd/policy.h) */
    LossScaleConfig loss_scale; /* none by default (optim/loss_scale.h) */
    TrainerLocal   local;       /* checkpointing and offload: in no snapshot (above) */
} TrainerConfig;

typedef struct {
    TrainerConfig cfg;
    Gpt          *model;
    Optim        *optim;
    Tape         *tape;
    long          step;         /* trainer_step calls so far (batches consumed) */
    Rng           data_rng;     /* the program draws batches with it */
    GptLora      *lora;         /* NULL unless trainer_use_lora: the only tensors trained */
    LossScaler    scaler;       /* S, its growth count, the checks and skips so far */
    /* The FLOPs of every training step so far (forward, backward and recompute, counted by the
     * tape: docs/autograd.md, "Counting FLOPs"); evaluation is not counted. Zero it to count
     * from now. Not in snapshots: a resumed run counts from where it resumed. */
    TapeFlops     flops;
} Trainer;

typedef struct {
    double loss;                /* mean cross-entropy over the batch's counted targets */
    double grad_norm;           /* global norm of the unscaled gradients before clipping */
    bool   updated;             /* false when a gradient was inf or NaN and the update skipped */
    bool   skipped;             /* !updated */
    double loss_scale;          /* S, the scale this step's backward was seeded with */
} TrainStepResult;

/* gpt_config_default's model, seed 1, AdamW with PyTorch's defaults, clipping at 1. Adafactor's
 * defaults here are the absolute-lr mode without parameter scaling (the lr argument of each
 * step is its step size, as for AdamW), no first moment. */
TrainerConfig trainer_config_default(void);
/* Every setting of a TrainerConfig but the model (GPT_SCHEMA, nn/gpt.h), each declared once:
 * its key ("optim.beta1"), range, default, help, the keys it must agree with, and whether a
 * snapshot keeps it. Its own rows (seed, clip, the optimizer's kind, 8-bit Adam's rounding)
 * are in optim/snapshot_keys.c; the configs inside it are rows that stand for their struct's
 * schema, declared beside that struct: ADAMW_SCHEMA, ADAFACTOR_SCHEMA, SGD_SCHEMA
 * (optim/adamw.h, adafactor.h, sgd.h), POLICY_SCHEMA (autograd/policy.h), LOSS_SCALE_SCHEMA
 * (optim/loss_scale.h), and TRAINER_LOCAL_SCHEMA below as "run.*". The ranges are the ones a
 * file's value and train_gpt's flag are both held to, each inside what the library itself
 * requires (AdamW's betas in [0, 1), ...), so a config that passes never makes trainer_new
 * abort; a NaN is in no range. */
extern const Schema TRAINER_SCHEMA;
/* TrainerLocal's rows, "checkpoint" and "offload" ("run.checkpoint", "run.offload" in
 * TRAINER_SCHEMA), every one run-only (kept false): no snapshot holds them; train_gpt's
 * --checkpoint and --offload reference them. */
extern const Schema TRAINER_LOCAL_SCHEMA;
/* The model valid (gpt_config_check), then every value of c a snapshot keeps within its range
 * and rules (optim/snapshot_keys.h's table: the enums known, Nesterov with momentum > 0, the
 * loss scaling factors as the dynamic mode takes them), then the loss scaling valid
 * (loss_scale_check): true; otherwise false with one sentence naming the key and the value in
 * why. */
bool          trainer_config_check(const TrainerConfig *c, char *why, size_t len);

/* "adamw", "sgd", "adam8bit", "adafactor" (NULL-terminated in TRAIN_OPTIMIZER_NAMES, indexed by
 * TrainOptimizer); the TrainOptimizer of a name (false if none). */
extern const char *const TRAIN_OPTIMIZER_NAMES[];
const char   *trainer_optimizer_name(TrainOptimizer o);
bool          trainer_optimizer_parse(const char *name, TrainOptimizer *out);

/* A model initialised from cfg->seed, its optimizer (with master weights when cfg->policy
 * stores parameters in a low format), a tape under cfg->policy, a loss scaler at its initial
 * scale, step 0, the data RNG at the start of its stream. An invalid model or loss scaling
 * config is a programming error (check with gpt_config_check and loss_scale_check). */
Trainer      *trainer_new(const TrainerConfig *cfg);
/* The same with an optimizer (and master weights) over the parameters keep(name, ctx) accepts
 * only, in gpt_params order: a pipeline stage's (dist/pipeline.h). The model is still built
 * whole from cfg->seed, so every stage draws the same weights; the others are left untouched
 * (fp32, never updated). keep NULL keeps all: trainer_new. */
typedef bool (*TrainerKeepFn)(const char *name, void *ctx);
Trainer      *trainer_new_part(const TrainerConfig *cfg, TrainerKeepFn keep, void *ctx);
/* The same around a model made by the caller (of shape cfg->model), which the trainer owns from
 * then on. When keep accepts no parameter, t->optim is NULL: the caller must set one before
 * the first step. */
Trainer      *trainer_new_around(const TrainerConfig *cfg, Gpt *model, TrainerKeepFn keep,
                                 void *ctx);
/* The optimizer cfg->optimizer names, with its config, over params (no master weights): what
 * trainer_new makes, for code that trains other tensors (dist/zero.h's shards). */
Optim        *trainer_make_optimizer(const TrainerConfig *cfg, Tensor *const *params, int n);
/* trainer_make_optimizer with cfg->policy's master weights and packing (optim_use_policy) and,
 * under cfg->local.offload, its state, masters and update in the host pool (optim/offload.h):
 * the trainer's optimizer, made the one way for a whole model, a pipeline stage or LoRA's
 * adapters. */
Optim        *trainer_new_optimizer(const TrainerConfig *cfg, Tensor *const *params, int n);
/* A trainer made without offload (a resumed run's: train_snapshot_load) offloaded now: its
 * optimizer's state and masters moved to the host (optim_offload), cfg.local.offload set. */
void          trainer_offload(Trainer *t);
/* Frees the model, the optimizer and the tape. NULL is allowed. */
void          trainer_free(Trainer *t);
/* LoRA or QLoRA (nn/gpt_lora.h): freezes the model, attaches adapters (A drawn from seed) and
 * replaces the optimizer by one of the same kind over the adapters alone, so state exists for
 * them only. Call before the first step, after loading the base's weights into t->model
 * (through the masters under a policy). Under a policy with a low parameter dtype the frozen
 * base stays packed, without masters, and the adapters get fp32 masters. An invalid cfg is a
 * programming error (check it with lora_config_check). */
void          trainer_use_lora(Trainer *t, const LoraConfig *cfg, uint64_t seed);
/* trainer_new then trainer_use_lora on the base in the file base_path (nn/gpt_snapshot.h or a
 * train_gpt --save snapshot; its shape must be cfg->model), built so that the setting up holds
 * no more than the run will (optim/train_lora.c): no optimizer over the frozen base (no state,
 * no masters), the base read straight into the model (no second copy), packed in place under a
 * policy, and under QLoRA each block weight read, quantized and freed before the next (the
 * model is made without storage for them), so the fp32 base never exists whole. The numbers
 * are trainer_new + reading the base + trainer_use_lora's, bit for bit. NULL with err filled
 * when the file cannot be read or does not hold that model, or lc does not suit it
 * (lora_config_check); an error while reading a weight
 * after the checks (a failing disk, a non-finite value) ends the program with the message. */
Trainer      *trainer_new_lora(const TrainerConfig *cfg, const LoraConfig *lc, uint64_t seed,
                               const char *base_path, SnapshotError *err);

/* One update on a batch: tokens and targets are [B * T] (targets < 0 are not counted), lr the
 * learning rate of this step. */
TrainStepResult trainer_step(Trainer *t, const int *tokens, const int *targets, int B, int T,
                             double lr);
/* The same with K micro-batches: tokens and targets are [K * B * T], row-major, micro-batch k
 * in rows k B .. (k + 1) B - 1. The loss reported is the mean of the K micro-batch losses. K = 1
 * is trainer_step, bit for bit. */
TrainStepResult trainer_step_accum(Trainer *t, const int *tokens, const int *targets, int B,
                                   int T, int K, double lr);
/* The forward and backward stages alone: every parameter's gradient accumulated over the K
 * micro-batches (loss / K each, backward seeded with the current loss scale S, so the
 * gradients are S times the mean loss's: the mean loss's own without loss scaling), nothing
 * unscaled, clipped, updated or zeroed; returns the mean loss. For tests and for looking at
 * gradients; clear them with optim_zero_grad(t->optim). */
double        trainer_accumulate(Trainer *t, const int *tokens, const int *targets, int B,
                                 int T, int K);

/* Evaluation without recording: the logits [B, T, V] of a forward pass on the trainer's tape and,
 * when targets is not NULL, the mean cross-entropy in *loss. Both are valid until
 * trainer_eval_done, which frees them. */
Tensor       *trainer_eval(Trainer *t, const int *tokens, const int *targets, int B, int T,
                           double *loss);
void          trainer_eval_done(Trainer *t);

#endif

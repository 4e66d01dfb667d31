#ifndef TAPEGRAD_STEP_H
#define TAPEGRAD_STEP_H
/* The training step: one driver for every way of running it. A single process, data parallel
 * training (dist/ddp.h), ZeRO 1-3 (dist/zero.h) and the pipeline schedules (dist/pipeline.h)
 * are strategies: a struct of callbacks the driver raises at fixed points of the one step
 * below. A single process is the strategy that does nothing (NULL).
 *
 *     step_run(t, s, batch, K, lr):
 *         step_accumulate: for k in 0 .. K-1              s->micro_start(k, K)
 *             gpt_forward_backward (nn/gpt_pass.h)        s->on_unit: a unit's weights are
 *                 loss / (N K), seeded with S                 about to be read (GATHER), are
 *                                                             done with (RELEASE), its
 *                                                             gradients are final (GRADS_FINAL)
 *         (or s->micro_batches: the strategy runs them in its own order, a pipeline schedule)
 *                                                         s->grads_done: the last reductions
 *         step_finish, the tail, once:
 *             unscale, check for inf and NaN              s->all_ok: every rank agrees
 *             the global norm, clip                       s->sum: the ranks' sums of squares;
 *                                                             s->counted: a tensor two ranks hold
 *             update, or skip on inf or NaN               s->updated: ZeRO encodes and gathers
 *             the loss scaler's update
 *             release: gradients zeroed, tape reset       s->released
 *
 * which is llm.c's forward, zero_grad, backward, update, with the places where the ranks talk
 * named. N is s->ranks (1 for a single process, the data-parallel ranks for DDP and ZeRO): each
 * rank's micro-batch is one of N K, so the gradients summed over the ranks are the mean loss's.
 *
 * The micro-batches: each micro-batch's loss is divided by N K (the seed of the backward is
 * (1/(N K)) S, the float op_scale's backward would pass on), so the gradients add up to those of
 * the mean loss over all N K B rows, and the tape is reset after each backward but the last, so
 * the activations held are one micro-batch's. The equality with one batch of K B rows holds
 * when every micro-batch counts the same number of targets (a task's rows all do; text rows
 * count every position). The check, the unscaling and the scaler's update happen once per
 * update, after the last micro-batch. */
#include <stdbool.h>

#include "nn/gpt_pass.h"
#include "optim/train.h"

typedef struct StepStrategy {
    const char *name;           /* "ddp", "zero-2", "pipeline" */
    void       *ctx;            /* handed to every callback */
    int         ranks;          /* N, the ranks whose micro-batches make one batch; 0 means 1 */
    /* The unit events of each micro-batch's pass (nn/gpt_pass.h). */
    void      (*on_unit)(int unit, GptUnitEvent event, void *ctx);
    void      (*micro_start)(int k, int K, void *ctx);
    /* Called often during backward (nn/gpt_pass.h's tick): messages in flight moved on. */
    void      (*progress)(void *ctx);
    /* A parameter's gradient is final (nn/gpt_pass.h's on_param_final; vanilla only). */
    void      (*param_final)(const Tensor *param, void *ctx);
    /* Runs the K micro-batches itself (forward, backward, accumulated gradients) and returns
     * the step's mean loss, the same on every rank; replaces step_accumulate's loop. */
    double    (*micro_batches)(Trainer *t, const int *tokens, const int *targets, int B, int T,
                               int K, void *ctx);
    void      (*grads_done)(void *ctx);
    /* The collectives, each the same on every rank. sum: the losses' sum over the N ranks (in
     * rank order); sum_squares: the norm's, over the ranks that hold different gradients (ZeRO's
     * shards, the pipeline's stages; NULL when each holds them all, as in DDP); all_ok: true
     * iff ok on every rank (NULL when all hold the same gradients); counted: whether this
     * rank's copy of a tensor enters the norm (false for the second holder of a tensor two
     * ranks keep). */
    double    (*sum)(double x, void *ctx);
    double    (*sum_squares)(double x, void *ctx);
    bool      (*all_ok)(bool ok, void *ctx);
    bool      (*counted)(const Tensor *p, void *ctx);
    void      (*updated)(void *ctx);
    void      (*released)(void *ctx);
} StepStrategy;

/* One update on K micro-batches of this rank: tokens and targets [K * B * T], micro-batch k in
 * rows k B .. (k + 1) B - 1 (targets < 0 not counted); lr the learning rate of this step. s may
 * be NULL (a single process). Collective over the strategy's ranks. */
TrainStepResult step_run(Trainer *t, const StepStrategy *s, const int *tokens,
                         const int *targets, int B, int T, int K, double lr);
/* The forward and backward of the K micro-batches alone (the first half of step_run): every
 * gradient accumulated, nothing unscaled, clipped or updated. Returns this rank's mean loss
 * over its K micro-batches (s->micro_batches: the step's). */
double          step_accumulate(Trainer *t, const StepStrategy *s, const int *tokens,
                                const int *targets, int B, int T, int K);
/* One micro-batch through the GPT pass with the strategy's unit events (s may be NULL), its
 * backward seeded with seed (the rule above: (1/(N K)) S), the gradients added to the
 * parameters' own; the tape is not reset. Returns its loss. */
double          step_micro_batch(Trainer *t, const StepStrategy *s, const int *tokens,
                                 const int *targets, int B, int T, float seed);
/* The tail on the gradients in place: one update (or a skip), filling grad_norm, updated and
 * skipped in *r. step_run counts the step (t->step: global batches); a caller that runs the
 * tail itself counts its own. */
void            step_finish(Trainer *t, const StepStrategy *s, double lr, TrainStepResult *r);

#endif

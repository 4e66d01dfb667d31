/* The training step's one driver (optim/step.h). */
#include "optim/step.h"

#include <math.h>

#include "optim/clip.h"

static int ranks_of(const StepStrategy *s) { return s && s->ranks > 0 ? s->ranks : 1; }

/* The unit events go to the strategy's callbacks with its context. */
static void on_unit(int unit, GptUnitEvent event, void *ctx)
{
    const StepStrategy *s = ctx;
    if (s->on_unit)
        s->on_unit(unit, event, s->ctx);
}

static void on_tick(void *ctx)
{
    const StepStrategy *s = ctx;
    s->progress(s->ctx);
}

static void on_param_final(const Tensor *param, void *ctx)
{
    const StepStrategy *s = ctx;
    s->param_final(param, s->ctx);
}

double step_micro_batch(Trainer *t, const StepStrategy *s, const int *tokens,
                        const int *targets, int B, int T, float seed)
{
    GptUnitHooks hooks = { 0 };
    if (s && (s->on_unit || s->progress || s->param_final))
        hooks = (GptUnitHooks){ .on_unit = on_unit, .tick = s->progress ? on_tick : NULL,
                                .on_param_final = s->param_final ? on_param_final : NULL,
                                .ctx = (void *)s };
    return gpt_forward_backward(t->model, t->tape, t->cfg.local.checkpoint, tokens, targets, B, T,
                                seed, &hooks, NULL);
}

/* The sum of this rank's K micro-batch losses, every gradient accumulated. */
static double accumulate_sum(Trainer *t, const StepStrategy *s, const int *tokens,
                             const int *targets, int B, int T, int K)
{
    if (K < 1)
        tensor_fatal("step_accumulate: %d micro-batches", K);
    float S = loss_scale_value(&t->scaler);
    bool vanilla = t->cfg.local.checkpoint.kind == CKPT_VANILLA;
    size_t rows = (size_t)B * T;
    double sum = 0.0;
    /* BEGIN SOLUTION grad_accumulation */
    /* loss / (N K), seeded with S: the seed (1/(N K)) S, the float op_scale's backward would
     * hand the loss. */
    float seed = S * (1.0f / (float)(ranks_of(s) * K));
    for (int k = 0; k < K; k++) {
        if (s && s->micro_start)
            s->micro_start(k, K, s->ctx);
        sum += step_micro_batch(t, s, tokens + k * rows, targets + k * rows, B, T, seed);
        /* Only the last micro-batch's tape is left for the release: the activations held are
         * one micro-batch's. */
        if (vanilla && k + 1 < K)
            tape_reset(t->tape);
    }
    /* STUDENT
    float seed = S * (1.0f / (float)ranks_of(s));
    (void)rows;
    (void)vanilla;
    if (s && s->micro_start)
        s->micro_start(0, 1, s->ctx);
    sum += step_micro_batch(t, s, tokens, targets, B, T, seed);
    K = 1;
    */
    /* END SOLUTION grad_accumulation */
    if (s && s->grads_done)
        s->grads_done(s->ctx);
    return sum;
}

double step_accumulate(Trainer *t, const StepStrategy *s, const int *tokens, const int *targets,
                       int B, int T, int K)
{
    if (s && s->micro_batches) {
        double loss = s->micro_batches(t, tokens, targets, B, T, K, s->ctx);
        if (s->grads_done)
            s->grads_done(s->ctx);
        return loss;
    }
    return accumulate_sum(t, s, tokens, targets, B, T, K) / K;
}

/* ---- the tail ------------------------------------------------------------------------------ */

/* Once per update, after every micro-batch: a check for inf and NaN in the same pass that
 * divides the gradients by S; any rank's inf skips the step on all. */
static bool unscale(Trainer *t, const StepStrategy *s)
{
    bool found_inf = loss_scale_unscale_grads(&t->scaler, t->optim->params, t->optim->n);
    if (s && s->all_ok)
        found_inf = !s->all_ok(!found_inf, s->ctx);
    return found_inf;
}

/* The norm is measured whether or not clipping is on: it is the first thing to look at when a
 * run diverges. It is the unscaled gradients' norm, so cfg.clip means the same at any scale.
 * Each rank's double sum over its tensors in order, then the ranks' sums in rank order. */
static double global_norm(Trainer *t, const StepStrategy *s)
{
    Optim *o = t->optim;
    double sum = 0.0;
    for (int i = 0; i < o->n; i++)
        if (!(s && s->counted) || s->counted(o->params[i], s->ctx))
            sum += clip_grad_sum_squares(o->params[i]);
    if (s && s->sum_squares)
        sum = s->sum_squares(sum, s->ctx);
    return sqrt(sum);
}

/* One rule for skipping, whatever the loss scaling: an inf or NaN gradient. (The norm is not
 * finite then too; a norm of finite floats, summed in double, always is.) */
static bool update(Trainer *t, const StepStrategy *s, double lr, bool found_inf)
{
    if (found_inf)
        return false;
    optim_step(t->optim, lr);
    if (s && s->updated)
        s->updated(s->ctx);
    return true;
}

static void release(Trainer *t, const StepStrategy *s)
{
    optim_zero_grad(t->optim);
    tape_reset(t->tape);
    if (s && s->released)
        s->released(s->ctx);
}

void step_finish(Trainer *t, const StepStrategy *s, double lr, TrainStepResult *r)
{
    bool found_inf = unscale(t, s);
    r->grad_norm = global_norm(t, s);
    if (t->cfg.clip > 0.0)
        clip_grads_for_norm(t->optim->params, t->optim->n, r->grad_norm, t->cfg.clip);
    r->updated = update(t, s, lr, found_inf);
    r->skipped = !r->updated;
    /* S moves for the next step's backward; this step's update has already used the unscaled
     * gradients, so the order does not change a bit. */
    loss_scale_update(&t->scaler, found_inf);
    release(t, s);
}

TrainStepResult step_run(Trainer *t, const StepStrategy *s, const int *tokens,
                         const int *targets, int B, int T, int K, double lr)
{
    TrainStepResult r = { .loss_scale = loss_scale_value(&t->scaler) };
    if (s && s->micro_batches) {
        r.loss = step_accumulate(t, s, tokens, targets, B, T, K);
    } else {
        /* Each rank's sum, then the ranks' in rank order, over all N K micro-batches. */
        double sum = accumulate_sum(t, s, tokens, targets, B, T, K);
        if (s && s->sum)
            sum = s->sum(sum, s->ctx);
        r.loss = sum / (ranks_of(s) * K);
    }
    step_finish(t, s, lr, &r);
    t->step++;
    return r;
}

#include "nn/gpt_checkpoint.h"

typedef struct {
    const Gpt  *model;
    GptUnitHook hook;
    void       *ctx;
} Units;

static void unit_event(const Units *u, int unit, GptUnitEvent event)
{
    if (u->hook)
        u->hook(unit, event, u->ctx);
}

static Tensor *block_segment(Tape *tape, Tensor *x, int layer, void *ctx)
{
    const Units *u = ctx;
    unit_event(u, layer, GPT_UNIT_GATHER);
    Tensor *y = gpt_block(u->model, layer, tape, x);
    unit_event(u, layer, GPT_UNIT_RELEASE);
    return y;
}

/* A block's backward reads its weights, and is the last to add to its gradients. */
static void block_reverse(int layer, bool done, void *ctx)
{
    const Units *u = ctx;
    if (!done) {
        unit_event(u, layer, GPT_UNIT_GATHER);
        return;
    }
    unit_event(u, layer, GPT_UNIT_RELEASE);
    unit_event(u, layer, GPT_UNIT_GRADS_FINAL);
}

static Tape *tape_under(const PrecisionPolicy *policy)
{
    Tape *tape = tape_new();
    tape->policy = policy;
    return tape;
}

float gpt_checkpoint_forward_backward_hooked(const Gpt *model, CkptStrategy strategy,
                                             const PrecisionPolicy *policy, const int *tokens,
                                             const int *targets, int B, int T,
                                             float loss_scale, GptUnitHook hook, void *hook_ctx,
                                             CkptStats *stats)
{
    Units units = { .model = model, .hook = hook, .ctx = hook_ctx };
    Tape *embed = tape_under(policy), *head = tape_under(policy);
    TapeFlops ends = { 0 };     /* the embedding's and the head's, which are not segments */
    embed->flops = head->flops = &ends;
    unit_event(&units, GPT_UNIT_ENDS, GPT_UNIT_GATHER);
    Tensor *x = gpt_embed(model, embed, tokens, B, T);

    CkptChain chain = { .fn = block_segment, .ctx = &units, .n = model->cfg.n_layer,
                        .policy = policy, .on_reverse = block_reverse, .on_reverse_ctx = &units };
    CkptRun *run = ckpt_run_new(&chain, strategy);
    Tensor *h = ckpt_forward(run, x);
    Tensor *loss = op_cross_entropy(head, gpt_head(model, head, h), targets);
    float value = loss->data[0];
    /* The seed loss_scale is the gradient op_scale's backward would hand the loss: 1 x s. */
    tape_backward_seeded(head, loss, &loss_scale);
    tape_free(head);            /* dL/dh stays on h, which the run owns */
    unit_event(&units, GPT_UNIT_ENDS, GPT_UNIT_RELEASE);
    ckpt_backward(run);
    CkptStats run_stats = ckpt_stats(run);
    ckpt_run_free(run);

    /* dL/dx is on the embedding's output: hand it to the embedding tape as its seed (added to
     * a zero buffer, so exactly the same value). A frozen embedding (LoRA) gets none: no
     * gradient reached x, and there is nothing to run. */
    float *dx = x->grad;
    x->grad = NULL;
    if (dx)
        tape_backward_seeded(embed, x, dx);
    mem_free(dx);
    tape_free(embed);
    unit_event(&units, GPT_UNIT_ENDS, GPT_UNIT_GRADS_FINAL);
    if (stats) {
        tape_flops_add(&run_stats.flops, &ends);
        *stats = run_stats;
    }
    return value;
}

float gpt_checkpoint_forward_backward_policy(const Gpt *model, CkptStrategy strategy,
                                             const PrecisionPolicy *policy, const int *tokens,
                                             const int *targets, int B, int T,
                                             float loss_scale, CkptStats *stats)
{
    return gpt_checkpoint_forward_backward_hooked(model, strategy, policy, tokens, targets, B, T,
                                                  loss_scale, NULL, NULL, stats);
}

float gpt_checkpoint_forward_backward_scaled(const Gpt *model, CkptStrategy strategy,
                                             const int *tokens, const int *targets, int B,
                                             int T, float loss_scale, CkptStats *stats)
{
    return gpt_checkpoint_forward_backward_policy(model, strategy, NULL, tokens, targets, B, T,
                                                  loss_scale, stats);
}

float gpt_checkpoint_forward_backward(const Gpt *model, CkptStrategy strategy,
                                      const int *tokens, const int *targets, int B, int T,
                                      CkptStats *stats)
{
    return gpt_checkpoint_forward_backward_scaled(model, strategy, tokens, targets, B, T, 1.0f,
                                                  stats);
}

#include "nn/gpt_checkpoint.h"

static Tensor *block_segment(Tape *tape, Tensor *x, int layer, void *ctx)
{
    return gpt_block(ctx, layer, tape, x);
}

static Tape *tape_under(const PrecisionPolicy *policy)
{
    Tape *tape = tape_new();
    tape->policy = policy;
    return tape;
}

float gpt_checkpoint_forward_backward_policy(const Gpt *model, CkptStrategy strategy,
                                             const PrecisionPolicy *policy, const int *tokens,
                                             const int *targets, int B, int T,
                                             float loss_scale, CkptStats *stats)
{
    Tape *embed = tape_under(policy), *head = tape_under(policy);
    TapeFlops ends = { 0 };     /* the embedding's and the head's, which are not segments */
    embed->flops = head->flops = &ends;
    Tensor *x = gpt_embed(model, embed, tokens, B, T);

    /* The chain only reads the model; its segment type carries a plain void pointer. */
    CkptChain chain = { .fn = block_segment, .ctx = (void *)model, .n = model->cfg.n_layer,
                        .policy = policy };
    CkptRun *run = ckpt_run_new(&chain, strategy);
    Tensor *h = ckpt_forward(run, x);
    Tensor *loss = op_cross_entropy(head, gpt_head(model, head, h), targets);
    float value = loss->data[0];
    /* The seed loss_scale is the gradient op_scale's backward would hand the loss: 1 x s. */
    tape_backward_seeded(head, loss, &loss_scale);
    tape_free(head);            /* dL/dh stays on h, which the run owns */
    ckpt_backward(run);
    CkptStats run_stats = ckpt_stats(run);
    ckpt_run_free(run);

    /* dL/dx is on the embedding's output: hand it to the embedding tape as its seed (added to
     * a zero buffer, so exactly the same value). */
    float *dx = x->grad;
    x->grad = NULL;
    tape_backward_seeded(embed, x, dx);
    mem_free(dx);
    tape_free(embed);
    if (stats) {
        tape_flops_add(&run_stats.flops, &ends);
        *stats = run_stats;
    }
    return value;
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

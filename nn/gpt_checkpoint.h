#ifndef TAPEGRAD_NN_GPT_CHECKPOINT_H
#define TAPEGRAD_NN_GPT_CHECKPOINT_H
/* One training forward + backward of the GPT with gradient checkpointing over its L blocks
 * (autograd/checkpoint.h; docs/checkpointing.md):
 *
 *     embedding on a tape  ->  blocks 0..L-1 as a checkpointed chain  ->  head and loss on a
 *     tape of their own;  backward: head and loss, the chain (recomputing what the strategy
 *     dropped), then the embedding.
 *
 * The gradients are those of gpt_loss + tape_backward, bit for bit, whatever the strategy: the
 * same ops run on the same values and their backward steps run in the same order (the head's
 * term reaches a tied wte before the embedding's, as on one tape). Only the memory held and the
 * number of block forwards differ.
 *
 * Under a precision policy every one of those tapes carries it, so the same holds against one
 * tape with that policy: activations (checkpoints included) stored packed in the act dtype,
 * gradients rounded after every node, bit for bit (docs/mixed_precision.md). fp8's delayed
 * scaling is refused (autograd/checkpoint.h says why). */
#include "autograd/checkpoint.h"
#include "nn/gpt.h"

/* The mean cross-entropy loss of tokens against targets (as gpt_loss), with every parameter
 * gradient accumulated (as tape_backward on gpt_loss would). stats, if not NULL, receives the
 * chain's counters: forwards counts block forward evaluations; flops counts every op of the
 * step, the embedding's and the head's included (they run forward once: never recomputed). */
float gpt_checkpoint_forward_backward(const Gpt *model, CkptStrategy strategy,
                                      const int *tokens, const int *targets, int B, int T,
                                      CkptStats *stats);
/* The same with the gradient of loss_scale x loss (the loss returned is unscaled): 1/K is what
 * tape_backward on op_scale(loss, 1/K) gives, for K accumulated micro-batches, bit for bit. */
float gpt_checkpoint_forward_backward_scaled(const Gpt *model, CkptStrategy strategy,
                                             const int *tokens, const int *targets, int B,
                                             int T, float loss_scale, CkptStats *stats);
/* The same under a precision policy (NULL: fp32), equal to gpt_loss on a tape whose policy it
 * is, backpropagated with the seed loss_scale (the loss scaler's S, times 1/K when
 * accumulating). The policy must outlive the call. */
float gpt_checkpoint_forward_backward_policy(const Gpt *model, CkptStrategy strategy,
                                             const PrecisionPolicy *policy, const int *tokens,
                                             const int *targets, int B, int T,
                                             float loss_scale, CkptStats *stats);

/* Units for code that keeps weights or gradients somewhere else between their uses (ZeRO-3 and
 * FSDP keep a shard of each, dist/zero.h): unit l in 0..L-1 is block l's parameters, and
 * GPT_UNIT_ENDS the others (wte, wpe, ln_f, an untied head), which the embedding and the head
 * read. The events, in the order a step raises them:
 *     GPT_UNIT_GATHER       the unit's weights are about to be read;
 *     GPT_UNIT_RELEASE      they will not be read again before the next GATHER;
 *     GPT_UNIT_GRADS_FINAL  the unit's gradients take no more terms this step.
 * A block raises GATHER and RELEASE around each forward evaluation (recomputations included)
 * and around its backward, which ends with GRADS_FINAL. The ends are gathered once, before the
 * embedding, and released after the head's backward (the head's forward and backward run back
 * to back; the embedding's backward reads no weight); their GRADS_FINAL comes after the
 * embedding's backward, the last term of a tied wte's gradient. */
enum { GPT_UNIT_ENDS = -1 };
typedef enum { GPT_UNIT_GATHER, GPT_UNIT_RELEASE, GPT_UNIT_GRADS_FINAL } GptUnitEvent;
typedef void (*GptUnitHook)(int unit, GptUnitEvent event, void *ctx);

/* gpt_checkpoint_forward_backward_policy with the unit events above (hook NULL: none). */
float gpt_checkpoint_forward_backward_hooked(const Gpt *model, CkptStrategy strategy,
                                             const PrecisionPolicy *policy, const int *tokens,
                                             const int *targets, int B, int T,
                                             float loss_scale, GptUnitHook hook, void *hook_ctx,
                                             CkptStats *stats);

#endif

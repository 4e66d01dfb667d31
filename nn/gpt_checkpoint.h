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

#endif

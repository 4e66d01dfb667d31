#ifndef TAPEGRAD_CLIP_H
#define TAPEGRAD_CLIP_H
/* Gradient clipping by the global norm, as torch.nn.utils.clip_grad_norm_: one norm over the
 * gradients of all the parameters together,
 *     norm = sqrt(sum over every parameter and element of g^2),
 * and, when it is too large, every gradient scaled by the same factor, so the direction of the
 * update is kept and only its length limited. Parameters whose gradient is NULL count as 0.
 *
 * The sum is accumulated in double, in a fixed order (clip_sum_squares), in parameter order:
 * exact enough that the norm is the norm of the float gradients to double precision, and the
 * same whatever the thread count or vector width (a float sum over millions of squares would
 * lose digits, and a parallel reduction would depend on the split). */
#include <stddef.h>

#include "autograd/tensor.h"

double clip_grad_norm(Tensor *const *params, int n);

/* The sum of g[j]^2 over j < n, in double: element j goes into running sum j mod 8 and the
 * eight are added in order at the end. The sums are independent, so the loop vectorizes (one
 * serial double sum waits on each add: 2.4% of a one-rank large-case step, 0.5% now; the
 * command is in docs/distributed.md), and the order is fixed, so every ISA gives the same bits. */
double clip_sum_squares(const float *g, size_t n);
/* That sum over p's gradient (a packed one read as floats; none: 0). The step's norm adds these
 * in parameter order, then over the ranks (optim/step.c). */
double clip_grad_sum_squares(Tensor *p);

/* Computes the norm; if max_norm / (norm + 1e-6) < 1, multiplies every gradient by that factor
 * (rounded to float), as PyTorch does. Returns the norm before clipping. A norm that is not
 * finite (an overflow, a NaN) is returned and nothing is scaled: the caller should skip the
 * step, as dynamic loss scaling does. */
double clip_grad_norm_to(Tensor *const *params, int n, double max_norm);
/* The second half of clip_grad_norm_to, for a norm measured elsewhere (over shards held by many
 * ranks, dist/zero.h): the same factor, applied to these gradients. */
void   clip_grads_for_norm(Tensor *const *params, int n, double norm, double max_norm);

#endif

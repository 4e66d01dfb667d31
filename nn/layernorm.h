#ifndef TAPEGRAD_NN_LAYERNORM_H
#define TAPEGRAD_NN_LAYERNORM_H
/* Layer normalisation over the last dimension with a learned scale and shift:
 *     y = weight * (x - mean) / sqrt(var + eps) + bias,   weight, bias [C]
 * The same as PyTorch's nn.LayerNorm(C) (eps 1e-5, biased variance): the tensors copy over
 * unchanged (ours.weight = torch.weight, ours.bias = torch.bias). */
#include "autograd/ops.h"
#include "nn/params.h"

#define LAYERNORM_EPS 1e-5f

typedef struct {
    Tensor *weight;     /* [C], initialised to 1 */
    Tensor *bias;       /* [C], initialised to 0 */
    float   eps;
} LayerNorm;

/* Adds NAME.weight and NAME.bias to the list. */
void    nn_layernorm_init(LayerNorm *ln, NnParams *p, const char *name, int C);
Tensor *nn_layernorm_forward(const LayerNorm *ln, Tape *tape, Tensor *x);

#endif

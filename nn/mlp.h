#ifndef TAPEGRAD_NN_MLP_H
#define TAPEGRAD_NN_MLP_H
/* The transformer's feed-forward layer: x [..., C] -> GELU(x Wfc + bfc) Wproj + bproj, with a
 * hidden width of 4C and the tanh form of GELU (GPT-2's; PyTorch's nn.GELU(approximate="tanh")).
 * Parameters NAME.fc.{weight [C, 4C], bias} and NAME.proj.{weight [4C, C], bias}. */
#include "nn/linear.h"

typedef struct {
    Linear fc;
    Linear proj;        /* a residual projection */
} Mlp;

void    nn_mlp_init(Mlp *m, NnParams *p, const char *name, int C, float std, float proj_std);
Tensor *nn_mlp_forward(const Mlp *m, Tape *tape, Tensor *x);

#endif

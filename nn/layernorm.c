#include "nn/layernorm.h"

void nn_layernorm_init(LayerNorm *ln, NnParams *p, const char *name, int C)
{
    ln->weight = nn_params_add(p, name, "weight", 1, (int[]){ C }, (NnInit){ NN_INIT_ONES, 0 });
    ln->bias = nn_params_add(p, name, "bias", 1, (int[]){ C }, (NnInit){ NN_INIT_ZEROS, 0 });
    ln->eps = LAYERNORM_EPS;
}

Tensor *nn_layernorm_forward(const LayerNorm *ln, Tape *tape, Tensor *x)
{
    return op_layernorm(tape, x, ln->weight, ln->bias, ln->eps);
}

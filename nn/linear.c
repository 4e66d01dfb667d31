#include "nn/linear.h"

void linear_init(Linear *l, NnParams *p, const char *name, int in, int out, bool bias, float std)
{
    l->weight = nn_params_add(p, name, "weight", 2, (int[]){ in, out },
                              (NnInit){ NN_INIT_NORMAL, std });
    l->bias = bias ? nn_params_add(p, name, "bias", 1, (int[]){ out }, (NnInit){ NN_INIT_ZEROS, 0 })
                   : NULL;
}

Tensor *linear_forward(const Linear *l, Tape *tape, Tensor *x)
{
    Tensor *y = op_matmul(tape, x, l->weight, false);
    return l->bias ? op_bias_add(tape, y, l->bias) : y;
}

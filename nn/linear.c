#include "nn/linear.h"

#include "nn/lora.h"

void nn_linear_init(Linear *l, NnParams *p, const char *name, int in, int out, bool bias, float std)
{
    l->weight = nn_params_add(p, name, "weight", 2, (int[]){ in, out },
                              (NnInit){ NN_INIT_NORMAL, std });
    l->bias = bias ? nn_params_add(p, name, "bias", 1, (int[]){ out }, (NnInit){ NN_INIT_ZEROS, 0 })
                   : NULL;
    l->lora = NULL;
    l->quant = NULL;
}

Tensor *nn_linear_forward(const Linear *l, Tape *tape, Tensor *x)
{
    /* op_linear (and op_qmatmul) add the bias inside the product, keeping one activation
     * fewer. */
    Tensor *y = l->quant ? lora_quant_matmul(l->quant, tape, x, l->bias)
                         : op_linear(tape, x, l->weight, l->bias);
    return l->lora ? lora_adapter_add(l->lora, tape, x, y) : y;
}

#include "nn/mlp.h"

void nn_mlp_init(Mlp *m, NnParams *p, const char *name, int C, float std, float proj_std)
{
    char sub[TENSOR_NAME_LEN];
    nn_params_name(sub, name, "fc");
    nn_linear_init(&m->fc, p, sub, C, 4 * C, true, std);
    nn_params_name(sub, name, "proj");
    nn_linear_init(&m->proj, p, sub, 4 * C, C, true, proj_std);
}

Tensor *nn_mlp_forward(const Mlp *m, Tape *tape, Tensor *x)
{
    return nn_linear_forward(&m->proj, tape, op_gelu(tape, nn_linear_forward(&m->fc, tape, x)));
}

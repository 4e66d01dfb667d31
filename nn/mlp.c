#include "nn/mlp.h"

void mlp_init(Mlp *m, NnParams *p, const char *name, int C, float std, float proj_std)
{
    char sub[TENSOR_NAME_LEN];
    nn_params_name(sub, name, "fc");
    linear_init(&m->fc, p, sub, C, 4 * C, true, std);
    nn_params_name(sub, name, "proj");
    linear_init(&m->proj, p, sub, 4 * C, C, true, proj_std);
}

Tensor *mlp_forward(const Mlp *m, Tape *tape, Tensor *x)
{
    return linear_forward(&m->proj, tape, op_gelu(tape, linear_forward(&m->fc, tape, x)));
}

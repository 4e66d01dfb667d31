#include "nn/attention.h"

void nn_attention_init(Attention *a, NnParams *p, const char *name, int C, int n_head,
                       bool fused, float std, float proj_std)
{
    char sub[TENSOR_NAME_LEN];
    *a = (Attention){ .n_head = n_head, .fused = fused };
    if (fused) {
        nn_params_name(sub, name, "qkv");
        nn_linear_init(&a->qkv, p, sub, C, 3 * C, true, std);
    } else {
        Linear *parts[3] = { &a->q, &a->k, &a->v };
        const char *tags[3] = { "q", "k", "v" };
        for (int i = 0; i < 3; i++) {
            nn_params_name(sub, name, tags[i]);
            nn_linear_init(parts[i], p, sub, C, C, true, std);
        }
    }
    nn_params_name(sub, name, "proj");
    nn_linear_init(&a->proj, p, sub, C, C, true, proj_std);
}

Tensor *nn_attention_forward(const Attention *a, Tape *tape, Tensor *x)
{
    Tensor *heads;
    if (a->fused) {
        Tensor *qkv = nn_linear_forward(&a->qkv, tape, x);
        heads = a->tiled ? op_attention_qkv_tiled(tape, qkv, a->n_head)
                         : op_attention_qkv(tape, qkv, a->n_head);
    } else {
        Tensor *q = nn_linear_forward(&a->q, tape, x);
        Tensor *k = nn_linear_forward(&a->k, tape, x);
        Tensor *v = nn_linear_forward(&a->v, tape, x);
        heads = a->tiled ? op_attention_tiled(tape, q, k, v, a->n_head)
                         : op_attention(tape, q, k, v, a->n_head);
    }
    return nn_linear_forward(&a->proj, tape, heads);
}

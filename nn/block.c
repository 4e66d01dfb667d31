#include "nn/block.h"

void block_init(Block *b, NnParams *p, const char *name, int C, int n_head, bool fused_qkv,
                float std, float proj_std)
{
    char sub[TENSOR_NAME_LEN];
    nn_params_name(sub, name, "ln1");
    layernorm_init(&b->ln1, p, sub, C);
    nn_params_name(sub, name, "attn");
    attention_init(&b->attn, p, sub, C, n_head, fused_qkv, std, proj_std);
    nn_params_name(sub, name, "ln2");
    layernorm_init(&b->ln2, p, sub, C);
    nn_params_name(sub, name, "mlp");
    mlp_init(&b->mlp, p, sub, C, std, proj_std);
}

Tensor *block_forward(const Block *b, Tape *tape, Tensor *x)
{
    x = op_add(tape, x, attention_forward(&b->attn, tape, layernorm_forward(&b->ln1, tape, x)));
    return op_add(tape, x, mlp_forward(&b->mlp, tape, layernorm_forward(&b->ln2, tape, x)));
}

#include "nn/block.h"

void nn_block_init(Block *b, NnParams *p, const char *name, int C, int n_head, bool fused_qkv,
                   float std, float proj_std)
{
    char sub[TENSOR_NAME_LEN];
    nn_params_name(sub, name, "ln1");
    nn_layernorm_init(&b->ln1, p, sub, C);
    nn_params_name(sub, name, "attn");
    nn_attention_init(&b->attn, p, sub, C, n_head, fused_qkv, std, proj_std);
    nn_params_name(sub, name, "ln2");
    nn_layernorm_init(&b->ln2, p, sub, C);
    nn_params_name(sub, name, "mlp");
    nn_mlp_init(&b->mlp, p, sub, C, std, proj_std);
}

/* x + attn(ln1(x)), then + mlp(ln2(.)). A recorded block keeps the block rows of
 * nn/gpt_acts.c, in this order: ln1's statistics and output, q k v, the attention's output and
 * P (tiled: L), its proj, the first residual, ln2, fc, gelu, the MLP's proj, the second
 * residual; a block that is not recorded keeps the outputs only. */
Tensor *nn_block_forward(const Block *b, Tape *tape, Tensor *x)
{
    Tensor *a = nn_attention_forward(&b->attn, tape, nn_layernorm_forward(&b->ln1, tape, x));
    x = op_add(tape, x, a);
    Tensor *m = nn_mlp_forward(&b->mlp, tape, nn_layernorm_forward(&b->ln2, tape, x));
    return op_add(tape, x, m);
}

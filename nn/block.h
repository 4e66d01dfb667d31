#ifndef TAPEGRAD_NN_BLOCK_H
#define TAPEGRAD_NN_BLOCK_H
/* One pre-LayerNorm transformer block (GPT-2):
 *     x = x + attn(ln1(x))
 *     x = x + mlp(ln2(x))
 * Parameters NAME.ln1, NAME.attn, NAME.ln2, NAME.mlp, in that order. */
#include <stdbool.h>

#include "nn/attention.h"
#include "nn/layernorm.h"
#include "nn/mlp.h"

typedef struct {
    LayerNorm ln1;
    Attention attn;
    LayerNorm ln2;
    Mlp       mlp;
} Block;

/* std for the weights read from the residual stream, proj_std for the two projections that
 * write back into it (attn.proj, mlp.proj). */
void    nn_block_init(Block *b, NnParams *p, const char *name, int C, int n_head,
                      bool fused_qkv, float std, float proj_std);
Tensor *nn_block_forward(const Block *b, Tape *tape, Tensor *x);

#endif

#ifndef TAPEGRAD_NN_ATTENTION_H
#define TAPEGRAD_NN_ATTENTION_H
/* Causal multi-head self-attention: x [B, T, C] -> [B, T, C].
 *
 *     q, k, v = x Wq + bq, x Wk + bk, x Wv + bv          (each [B, T, C], H heads of D = C/H)
 *     a_h     = softmax(q_h k_h^T / sqrt(D), causal) v_h   per head h
 *     y       = concat_h(a_h) Wproj + bproj
 *
 * Two layouts of the input projection:
 *   fused (default): one Linear NAME.qkv with weight [C, 3C] whose columns are [q | k | v]
 *     (GPT-2's c_attn); one matrix product, and op_attention_qkv reads q, k, v in place.
 *   separate: three Linears NAME.q, NAME.k, NAME.v of [C, C] each, so that q and v can be
 *     adapted on their own (LoRA targets them). Same function: Wq, Wk, Wv are the three column
 *     blocks of the fused weight, bq, bk, bv the three blocks of its bias.
 * PyTorch's nn.MultiheadAttention(C, H, batch_first=True) with a causal mask computes the same
 * thing: in_proj_weight = qkv.weight.T, in_proj_bias = qkv.bias, out_proj.weight = proj.weight.T,
 * out_proj.bias = proj.bias. */
#include <stdbool.h>

#include "nn/linear.h"

typedef struct {
    int    n_head;
    bool   fused;
    Linear qkv;         /* fused only: [C, 3C] */
    Linear q, k, v;     /* separate only: [C, C] each */
    Linear proj;        /* [C, C], a residual projection */
    bool   tiled;       /* op_attention*_tiled: saves the output and a logsumexp per row
                         * [B, H, T] instead of the probabilities [B, H, T, T]; the same
                         * results within fp32 rounding (docs/attention_memory.md) */
} Attention;

/* Adds NAME.qkv.{weight,bias} (or NAME.q, NAME.k, NAME.v) then NAME.proj.{weight,bias}. The
 * input projections draw from N(0, std^2), the output projection from N(0, proj_std^2). */
void    nn_attention_init(Attention *a, NnParams *p, const char *name, int C, int n_head,
                          bool fused, float std, float proj_std);
Tensor *nn_attention_forward(const Attention *a, Tape *tape, Tensor *x);

#endif

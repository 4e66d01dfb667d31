#ifndef TAPEGRAD_OPS_H
#define TAPEGRAD_OPS_H
/* Every op: `Tensor *op_x(Tape *tape, ...)` computes its output into a tensor the tape owns and,
 * when recording and some input requires a gradient, appends a node (autograd/tape.h). Each op's
 * forward and backward stand side by side in one file, with the math in a comment above them.
 *
 * Shapes: ops acting on the last dimension treat all leading dimensions as rows, so x may be
 * [N, C], [B, T, C] or [B, H, T, C] alike. Shapes that do not fit are a programming error
 * (tensor_fatal). */
#include <stdbool.h>

#include "autograd/tape.h"
#include "precision/format.h"
#include "precision/quant.h"

/* ops_matmul.c ---------------------------------------------------------------------------- */
/* y = x w (trans_w false: w is [K, N]) or y = x w^T (trans_w true: w is [N, K], the layout of a
 * tied embedding table). x is [..., K], y is [..., N]. */
Tensor *op_matmul(Tape *tape, Tensor *x, Tensor *w, bool trans_w);
/* Batched product over the leading dimensions: a [..., M, K] times b [..., K, N], or b^T with b
 * [..., N, K] when trans_b. Both must have the same leading dimensions. */
Tensor *op_bmm(Tape *tape, Tensor *a, Tensor *b, bool trans_b);
/* y = x w + bias, w [K, N], bias [N] (or NULL): op_bias_add(op_matmul(x, w, false), bias) in one
 * op, which never stores the product without the bias (one activation fewer per layer). */
Tensor *op_linear(Tape *tape, Tensor *x, Tensor *w, Tensor *bias);

/* ops_elementwise.c ----------------------------------------------------------------------- */
Tensor *op_add(Tape *tape, Tensor *a, Tensor *b);          /* same shapes */
Tensor *op_mul(Tape *tape, Tensor *a, Tensor *b);          /* same shapes */
Tensor *op_bias_add(Tape *tape, Tensor *x, Tensor *bias);  /* x [..., N] + bias [N] per row */
Tensor *op_scale(Tape *tape, Tensor *x, float s);
Tensor *op_relu(Tape *tape, Tensor *x);
Tensor *op_gelu(Tape *tape, Tensor *x);                    /* tanh approximation, as GPT-2 */
/* The sum of all elements: a scalar, handy as a loss in tests. */
Tensor *op_sum(Tape *tape, Tensor *x);

/* ops_norm.c ------------------------------------------------------------------------------ */
/* Normalise each row of x [..., C] to zero mean and unit variance (biased variance, eps inside
 * the square root, as PyTorch), then gamma * xhat + beta with gamma, beta [C]. */
Tensor *op_layernorm(Tape *tape, Tensor *x, Tensor *gamma, Tensor *beta, float eps);
/* Softmax over the last dimension. */
Tensor *op_softmax(Tape *tape, Tensor *x);

/* ops_attention.c ------------------------------------------------------------------------- */
/* Causal multi-head self-attention in one op: q, k, v are [B, T, C] with C = n_head * D;
 * out[b, t, h*D:(h+1)*D] = sum_{s<=t} softmax_s(q_t . k_s / sqrt(D)) v_s, per head h. */
Tensor *op_attention(Tape *tape, Tensor *q, Tensor *k, Tensor *v, int n_head);
/* The same on a fused projection qkv [B, T, 3C] laid out as [q | k | v] along the last axis. */
Tensor *op_attention_qkv(Tape *tape, Tensor *qkv, int n_head);
/* Attention probabilities: x is [..., T, T] scores; row i keeps columns j <= i, scaled by
 * `scale`, and softmaxed; masked entries are exactly 0. */
Tensor *op_causal_softmax(Tape *tape, Tensor *x, float scale);
/* The parts, to build attention from smaller ops (and test the whole against them):
 * [B, T, C] -> [B, H, T, D] and back. */
Tensor *op_split_heads(Tape *tape, Tensor *x, int n_head);
Tensor *op_merge_heads(Tape *tape, Tensor *x);

/* ops_attention_tiled.c ------------------------------------------------------------------- */
/* The same results as op_attention / op_attention_qkv (within fp32 rounding), computed tile by
 * tile with an online softmax (FlashAttention-style): the forward keeps only the output and two
 * statistics per row (running max and sum), never the [T, T] probabilities, and the backward
 * recomputes the scores tile by tile. Activation memory grows as T instead of T^2. */
Tensor *op_attention_tiled(Tape *tape, Tensor *q, Tensor *k, Tensor *v, int n_head);
Tensor *op_attention_qkv_tiled(Tape *tape, Tensor *qkv, int n_head);

/* ops_embedding.c ------------------------------------------------------------------------- */
/* Rows of table [V, C] picked by ids (B*T of them, each in [0, V)): out is [B, T, C]. */
Tensor *op_embedding(Tape *tape, Tensor *table, const int *ids, int B, int T);
/* Mean cross-entropy of logits [..., V] against one target per row; rows whose target is
 * negative are ignored (not counted in the mean). A scalar; 0 when no row counts. */
Tensor *op_cross_entropy(Tape *tape, Tensor *logits, const int *targets);

/* ops_shape.c ----------------------------------------------------------------------------- */
/* The same elements in another shape (a view: no copy, no bytes). */
Tensor *op_reshape(Tape *tape, Tensor *x, int ndim, const int *shape);
/* Swap dimensions d0 and d1 (a copy). */
Tensor *op_transpose(Tape *tape, Tensor *x, int d0, int d1);

/* ops_qmatmul.c --------------------------------------------------------------------------- */
/* y = x W + bias with W [K, N] frozen and stored quantized (QLoRA's NF4 base weights) and bias
 * [N] or NULL: W is dequantized into a temp buffer for each product, forward and backward, and
 * freed at once; x (dy in backward) and W are rounded to `compute` (bf16 in QLoRA, FMT_FP32 for
 * none) before an fp32-accumulating sgemm. W gets no gradient; x and bias do. w must outlive
 * the tape. */
Tensor *op_qmatmul(Tape *tape, Tensor *x, const QuantTensor *w, Tensor *bias, int K, int N,
                   Format compute);

#endif

/* A matrix product with a frozen, quantized weight: QLoRA's base layers, whose weights are NF4.
 *
 * The weight is not a tensor: it is a QuantTensor (precision/quant.h) of K*N values, the
 * row-major [K, N] layout of a Linear's weight, whose bytes the caller owns (QLoRA places them in
 * the param category with quant_bind). Every use dequantizes it into a temp buffer that is freed
 * as soon as the product is done, so the fp32 weight never outlives one sgemm: the forward and
 * the backward each dequantize it again instead of keeping it. That is the QLoRA trade: 4.127
 * bits per weight at rest, one dequantization per use. */
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"

/* The weight dequantized into a new temp buffer, each value rounded to the compute format.
 * Rows are independent, so they split across the threads with identical results. */
static float *dequantize_weight(const QuantTensor *w, int K, int N, Format compute)
{
    float *buf = mem_alloc(MEM_TEMP, (size_t)K * N * sizeof *buf);
    #pragma omp parallel for schedule(static) if (par_worth(8.0 * K * N))
    for (int k = 0; k < K; k++) {
        float *row = buf + (size_t)k * N;
        quant_dequantize_range(w, (size_t)k * N, (size_t)N, row);
        if (compute != FMT_FP32)
            fmt_round_array(compute, row, row, (size_t)N, (Rounding){ 0 }, 0);
    }
    return buf;
}

/* src rounded to the compute format: src itself for fp32, else a new temp copy (src is an
 * activation or a gradient the op must not change). */
static const float *rounded_input(const float *src, int rows, int cols, Format compute,
                                  float **owned)
{
    *owned = NULL;
    if (compute == FMT_FP32)
        return src;
    float *dst = mem_alloc(MEM_TEMP, (size_t)rows * cols * sizeof *dst);
    #pragma omp parallel for schedule(static) if (par_worth(8.0 * rows * cols))
    for (int i = 0; i < rows; i++)
        fmt_round_array(compute, src + (size_t)i * cols, dst + (size_t)i * cols, (size_t)cols,
                        (Rounding){ 0 }, 0);
    *owned = dst;
    return dst;
}

/* Y = X W + b with X [M, K], W [K, N] frozen and quantized, b [N] (or none); c(.) rounds to
 * the compute format (nearest-even), and the products accumulate in fp32 onto rows that start
 * as copies of b (so X W is never a tensor of its own):
 *   forward   Y   = c(X) c(deq(W)) + b
 *   backward  dX += c(dY) c(deq(W))^T        W is frozen: no dW, so X is not needed again
 *             db += sum over the rows of dY  (each column in row order: deterministic)
 * FLOPs: 2MNK matmul each way (dX only), MN other for the bias each way; dequantizing and
 * rounding to the compute format are conversions, not counted. */
typedef struct {
    const QuantTensor *w;   /* not owned: the weight outlives the tape */
    int K, N;
    Format compute;
} QmatmulState;

static void op_qmatmul_backward(Node *n)
{
    const QmatmulState *s = node_state(n, sizeof *s);
    const QuantTensor *w = s->w;
    Tensor *x = n->in[0], *bias = n->in[1], *y = n->out;
    int M = (int)tensor_rows(x), K = s->K, N = s->N;
    Format compute = s->compute;
    node_count(n, 2 * (int64_t)M * N * K * x->requires_grad,
               (int64_t)M * N * (bias && bias->requires_grad));
    if (bias && bias->requires_grad) {
        float *db = tensor_grad(bias);
        #pragma omp parallel for schedule(static) if (par_worth((double)M * N))
        for (int j = 0; j < N; j++)
            for (int r = 0; r < M; r++)
                db[j] += y->grad[(size_t)r * N + j];
    }
    if (!x->requires_grad)
        return;
    float *wbuf = dequantize_weight(w, K, N, compute), *dy_owned;
    const float *dy = rounded_input(y->grad, M, N, compute, &dy_owned);
    par_sgemm(false, true, M, K, N, 1.0f, dy, N, wbuf, N, 1.0f, tensor_grad(x), K);
    mem_free(dy_owned);
    mem_free(wbuf);
}

static void check_qmatmul(const Tensor *x, const QuantTensor *w, const Tensor *bias, int K, int N,
                          Format compute)
{
    if (K < 1 || N < 1 || w->n != (size_t)K * N || tensor_last_dim(x) != K) {
        char xs[64];
        tensor_fatal("op_qmatmul: x %s and a quantized weight of %zu values as [%d, %d] do not "
                     "fit", tensor_shape_str(x, xs, sizeof xs), w->n, K, N);
    }
    if (bias && (bias->ndim != 1 || bias->shape[0] != N)) {
        char bs[64];
        tensor_fatal("op_qmatmul: bias %s for %d outputs",
                     tensor_shape_str(bias, bs, sizeof bs), N);
    }
    if ((unsigned)compute >= FMT_COUNT)
        tensor_fatal("op_qmatmul: compute format %d is not a format", (int)compute);
}

Tensor *op_qmatmul(Tape *tape, Tensor *x, const QuantTensor *w, Tensor *bias, int K, int N,
                   Format compute)
{
    tape_use(tape, 2, (Tensor *[]){ x, bias });
    check_qmatmul(x, w, bias, K, N, compute);
    int shape[TENSOR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        shape[d] = x->shape[d];
    shape[x->ndim - 1] = N;
    Tensor *y = tape_tensor(tape, x->ndim, shape);
    int M = (int)tensor_rows(x);
    for (int r = 0; r < M; r++) {
        if (bias)
            memcpy(y->data + (size_t)r * N, bias->data, (size_t)N * sizeof(float));
        else
            memset(y->data + (size_t)r * N, 0, (size_t)N * sizeof(float));
    }
    float *wbuf = dequantize_weight(w, K, N, compute), *x_owned;
    const float *xr = rounded_input(x->data, M, K, compute, &x_owned);
    par_sgemm(false, false, M, N, K, 1.0f, xr, K, wbuf, N, 1.0f, y->data, N);
    tape_count(tape, 2 * (int64_t)M * N * K, bias ? (int64_t)M * N : 0);
    mem_free(x_owned);
    mem_free(wbuf);
    Tensor *in[2] = { x, bias };
    Node *n = tape_record(tape, "qmatmul", op_qmatmul_backward, y, bias ? 2 : 1, in);
    if (n) {
        QmatmulState *s = node_state(n, sizeof *s);
        *s = (QmatmulState){ .w = w, .K = K, .N = N, .compute = compute };
    }
    return y;
}

/* Matrix products: the linear layer's y = x w and attention's batched products. */
#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"

static void check_matmul(const Tensor *x, const Tensor *w, bool trans_w, int *K, int *N)
{
    *K = tensor_last_dim(x);
    int wk = trans_w ? w->shape[1] : w->shape[0];
    if (w->ndim != 2 || wk != *K) {
        char xs[64], ws[64];
        tensor_fatal("op_matmul: x %s and w %s%s do not fit", tensor_shape_str(x, xs, sizeof xs),
                     tensor_shape_str(w, ws, sizeof ws), trans_w ? "^T" : "");
    }
    *N = trans_w ? w->shape[0] : w->shape[1];
}

/* x's shape with the last dimension replaced by N. */
static Tensor *matmul_output(Tape *tape, const Tensor *x, int N)
{
    int shape[TENSOR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        shape[d] = x->shape[d];
    shape[x->ndim - 1] = N;
    return tape_tensor(tape, x->ndim, shape);
}

/* ---- one product under a precision policy --------------------------------------------------
 * C = op(A) op(B) + beta C, A [M, K] after op, B [K, N] after op, both contiguous. Without a
 * policy this is par_sgemm. With one, A and B are first rounded to their compute formats (fa,
 * fb: the policy's compute format, or grad_compute for a dY) and multiplied with fp32
 * accumulation, as tensor cores do; with accumulate_low every partial sum is rounded to fa as
 * well, by a plain loop, to show what summing K products in 16 bits loses. */
static float element(const float *X, bool trans, int rows, int cols, int r, int c)
{
    return trans ? X[(size_t)c * rows + r] : X[(size_t)r * cols + c];
}

static void product_low_accumulate(Format f, bool ta, bool tb, int M, int N, int K,
                                   const float *A, const float *B, float beta, float *C)
{
    Rounding rne = { 0 };
    /* Each multiply-add here is a few roundings in software: tens of FLOPs of a plain loop. */
    #pragma omp parallel for schedule(static) if (par_worth(32.0 * M * N * K))
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = fmt_round(f, beta == 0.0f ? 0.0f : beta * C[(size_t)i * N + j], rne, 0);
            for (int k = 0; k < K; k++)
                acc = fmt_round(f, acc + element(A, ta, M, K, i, k) * element(B, tb, K, N, k, j),
                                rne, 0);
            C[(size_t)i * N + j] = acc;
        }
}

static void product(const PrecisionPolicy *p, Format fa, Format fb, bool ta, bool tb,
                    int M, int N, int K, const float *A, const float *B, float beta, float *C)
{
    if (!p || (fa == FMT_FP32 && fb == FMT_FP32 && !p->accumulate_low)) {
        par_sgemm(ta, tb, M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, beta, C, N);
        return;
    }
    float *a_copy, *b_copy;
    const float *a = policy_compute_input(fa, A, (size_t)M * K, &a_copy);
    const float *b = policy_compute_input(fb, B, (size_t)K * N, &b_copy);
    if (p->accumulate_low)
        product_low_accumulate(fa, ta, tb, M, N, K, a, b, beta, C);
    else
        par_sgemm(ta, tb, M, N, K, 1.0f, a, ta ? M : K, b, tb ? K : N, beta, C, N);
    mem_free(a_copy);
    mem_free(b_copy);
}

/* Y = X W with X [M, K], W [K, N] (or Y = X W^T with W [N, K]).
 *   dX = dY W^T                  (or dX = dY W)
 *   dW += X^T dY  [K, N]         (or dW += dY^T X  [N, K])
 * FLOPs: 2MNK forward; 2MNK for each of dX and dW computed (all matmul).
 * Every product runs in fp32 with fp32 accumulation through par_sgemm, on inputs rounded to
 * the policy's compute formats when the tape has one. */
typedef struct {
    bool trans_w;
} MatmulState;

/* Whether backward rounds dY to the gradient compute format in place rather than in a copy:
 * only when dY needs rounding and the tape frees it once the node is done (a gradient kept for
 * inspection, tape->keep_grads, must keep its values), and not with accumulate_low, whose
 * partial sums are rounded to the first operand's format (dY's, for dX). */
static bool rounds_dy_in_place(const Node *n)
{
    return policy_grad_operand_format(n->policy) != FMT_FP32 && n->out_grad_is_scratch &&
           !n->policy->accumulate_low;
}

static void op_matmul_backward(Node *n)
{
    const MatmulState *s = node_state(n, sizeof *s);
    Tensor *x = n->in[0], *w = n->in[1], *y = n->out;
    bool trans_w = s->trans_w;
    int M = (int)tensor_rows(x), K = tensor_last_dim(x), N = tensor_last_dim(y);
    Format fx = policy_operand_format(n->policy, x), fw = policy_operand_format(n->policy, w);
    Format fg = policy_grad_operand_format(n->policy);
    node_count(n, 2 * (int64_t)M * N * K * (x->requires_grad + w->requires_grad), 0);
    if (rounds_dy_in_place(n)) {
        /* dY is read by these two products only (a linear's bias has summed it already) and
         * freed after them: rounded where it lies, it needs no copy in each product, which
         * under tf32 (fp32 gradients, tf32 compute) was the step's largest scratch. The same
         * values as policy_compute_input's copy, so no bit changes. */
        tensor_round_values(y->grad, y->grad, y->size, fg,
                            policy_current_scale(fg, y->grad, y->size));
        fg = FMT_FP32;
    }
    /* The inputs are decoded here, not by the tape (backward_ignores_inputs): dW first, while X
     * is decoded, and X's copy freed before dX is allocated, so a packed X and its fp32
     * gradient (each M x K) are never in temp together. The two products are independent:
     * their order changes no bit. */
    tensor_unpack(w);
    if (w->requires_grad) {
        tensor_unpack(x);
        /* BEGIN SOLUTION matmul_backward */
        if (trans_w)
            product(n->policy, fg, fx, true, false, N, K, M, y->grad, x->data, 1.0f,
                    tensor_grad(w));
        else
            product(n->policy, fx, fg, true, false, K, N, M, x->data, y->grad, 1.0f,
                    tensor_grad(w));
        /* STUDENT
        (void)trans_w, (void)fx, (void)fg;
        (void)tensor_grad(w);
        */
        /* END SOLUTION matmul_backward */
        if (x != w)
            tensor_release(x);
    }
    if (x->requires_grad) {
        /* BEGIN SOLUTION matmul_backward */
        bool fresh;     /* a new dX: stored by the product (beta 0), not added to zeros */
        float *dx = tensor_grad_begin(x, &fresh);
        product(n->policy, fg, fw, false, !trans_w, M, K, N, y->grad, w->data,
                fresh ? 0.0f : 1.0f, dx);
        /* STUDENT
        (void)fw;
        (void)tensor_grad(x);
        */
        /* END SOLUTION matmul_backward */
    }
}

Tensor *op_matmul(Tape *tape, Tensor *x, Tensor *w, bool trans_w)
{
    tape_use(tape, 2, (Tensor *[]){ x, w });
    int K, N;
    check_matmul(x, w, trans_w, &K, &N);
    Tensor *y = matmul_output(tape, x, N);
    int M = (int)tensor_rows(x);
    const PrecisionPolicy *p = tape->policy;
    product(p, policy_operand_format(p, x), policy_operand_format(p, w), false, trans_w, M, N, K,
            x->data, w->data, 0.0f, y->data);
    tape_count(tape, 2 * (int64_t)M * N * K, 0);
    Node *n = tape_record(tape, "matmul", op_matmul_backward, y, 2, (Tensor *[]){ x, w });
    if (n) {
        MatmulState *s = node_state(n, sizeof *s);
        s->trans_w = trans_w;
        n->backward_ignores_inputs = true;      /* op_matmul_backward decodes them itself */
    }
    return y;
}

/* A linear layer in one op: Y = X W + b with X [M, K], W [K, N], b [N] added to every row
 * (b may be NULL: then it is op_matmul).
 *   dX = dY W^T,   dW += X^T dY,   db += sum over the rows of dY
 * The same numbers as op_bias_add(op_matmul(x, w)) up to the rounding of one addition, but the
 * rows of Y start as copies of b and the product is accumulated onto them (sgemm with beta 1),
 * so the unbiased X W is never a tensor of its own: one [M, N] activation fewer per layer, and
 * one pass fewer over it in each direction.
 * FLOPs: op_matmul's, plus MN other for the bias forward and MN for db (a sum of M rows). */
static void linear_bias_backward(Node *n)
{
    Tensor *bias = n->in[2];
    if (bias && bias->requires_grad) {
        size_t M = tensor_rows(n->out);
        int N = tensor_last_dim(n->out);
        node_count(n, 0, (int64_t)M * N);
        par_sum_rows(n->out->grad, M, N, tensor_grad(bias));
    }
}

/* db sums dY as it is, so it goes first when the products round dY in place. Otherwise last:
 * under a packed-parameter policy the bias's working copy (tensor_grad) then joins the products'
 * scratch only at the end. The order of independent sums changes no bit. */
static void op_linear_backward(Node *n)
{
    bool dy_rounded = rounds_dy_in_place(n);
    if (dy_rounded)
        linear_bias_backward(n);
    op_matmul_backward(n);
    if (!dy_rounded)
        linear_bias_backward(n);
}

Tensor *op_linear(Tape *tape, Tensor *x, Tensor *w, Tensor *bias)
{
    tape_use(tape, 3, (Tensor *[]){ x, w, bias });
    if (!bias)
        return op_matmul(tape, x, w, false);
    int K, N;
    check_matmul(x, w, false, &K, &N);
    if (bias->ndim != 1 || bias->shape[0] != N) {
        char ws[64], bs[64];
        tensor_fatal("op_linear: w %s and bias %s do not fit", tensor_shape_str(w, ws, sizeof ws),
                     tensor_shape_str(bias, bs, sizeof bs));
    }
    Tensor *y = matmul_output(tape, x, N);
    long M = (long)tensor_rows(x);
    #pragma omp parallel for schedule(static) if (par_worth((double)M * N))
    for (long r = 0; r < M; r++)
        memcpy(y->data + r * N, bias->data, (size_t)N * sizeof(float));
    const PrecisionPolicy *p = tape->policy;
    product(p, policy_operand_format(p, x), policy_operand_format(p, w), false, false, (int)M, N,
            K, x->data, w->data, 1.0f, y->data);
    tape_count(tape, 2 * (int64_t)M * N * K, (int64_t)M * N);
    Node *n = tape_record(tape, "linear", op_linear_backward, y, 3, (Tensor *[]){ x, w, bias });
    if (n) {
        MatmulState *s = node_state(n, sizeof *s);     /* read by op_matmul_backward */
        s->trans_w = false;
        n->backward_ignores_inputs = true;      /* op_matmul_backward decodes x and w; the bias's
                                                 * values are not read */
    }
    return y;
}

/* Batched: C_b = A_b B_b (or A_b B_b^T) for every leading index b, A_b [M, K].
 *   dA_b = dC_b B_b^T            (or dA_b = dC_b B_b)
 *   dB_b += A_b^T dC_b           (or dB_b += dC_b^T A_b)
 * FLOPs: 2MNK per b forward; 2MNK per b for each of dA and dB computed (all matmul).
 * The batch loop is the parallel one; each product is single-threaded BLAS. */
static void bmm_dims(const Tensor *a, const Tensor *b, bool trans_b, int *batch, int *M, int *K,
                     int *N)
{
    bool ok = a->ndim >= 3 && a->ndim == b->ndim;
    for (int d = 0; ok && d < a->ndim - 2; d++)
        ok = a->shape[d] == b->shape[d];
    *M = a->shape[a->ndim - 2];
    *K = a->shape[a->ndim - 1];
    int bk = trans_b ? b->shape[b->ndim - 1] : b->shape[b->ndim - 2];
    *N = trans_b ? b->shape[b->ndim - 2] : b->shape[b->ndim - 1];
    if (!ok || bk != *K) {
        char as[64], bs[64];
        tensor_fatal("op_bmm: a %s and b %s%s do not fit", tensor_shape_str(a, as, sizeof as),
                     tensor_shape_str(b, bs, sizeof bs), trans_b ? "^T" : "");
    }
    *batch = (int)(a->size / ((size_t)*M * *K));
}

typedef struct {
    bool trans_b;
} BmmState;

static void op_bmm_backward(Node *n)
{
    const BmmState *s = node_state(n, sizeof *s);
    Tensor *a = n->in[0], *b = n->in[1], *c = n->out;
    bool trans_b = s->trans_b;
    int batch, M, K, N;
    bmm_dims(a, b, trans_b, &batch, &M, &K, &N);
    float *da = a->requires_grad ? tensor_grad(a) : NULL;
    float *db = b->requires_grad ? tensor_grad(b) : NULL;
    node_count(n, 2 * (int64_t)batch * M * N * K * ((da != NULL) + (db != NULL)), 0);
    #pragma omp parallel for schedule(static) \
        if (par_worth_madds((double)batch * M * N * K * ((da != NULL) + (db != NULL))))
    for (int i = 0; i < batch; i++) {
        const float *ai = a->data + (long)i * M * K, *bi = b->data + (long)i * K * N;
        const float *dci = c->grad + (long)i * M * N;
        if (da)
            par_sgemm_serial(false, !trans_b, M, K, N, 1.0f, dci, N, bi, trans_b ? K : N, 1.0f,
                             da + (long)i * M * K, K);
        if (db && trans_b)
            par_sgemm_serial(true, false, N, K, M, 1.0f, dci, N, ai, K, 1.0f,
                             db + (long)i * K * N, K);
        else if (db)
            par_sgemm_serial(true, false, K, N, M, 1.0f, ai, K, dci, N, 1.0f,
                             db + (long)i * K * N, N);
    }
}

Tensor *op_bmm(Tape *tape, Tensor *a, Tensor *b, bool trans_b)
{
    tape_use(tape, 2, (Tensor *[]){ a, b });
    int batch, M, K, N;
    bmm_dims(a, b, trans_b, &batch, &M, &K, &N);
    int shape[TENSOR_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++)
        shape[d] = a->shape[d];
    shape[a->ndim - 1] = N;
    Tensor *c = tape_tensor(tape, a->ndim, shape);
    #pragma omp parallel for schedule(static) if (par_worth_madds((double)batch * M * N * K))
    for (int i = 0; i < batch; i++)
        par_sgemm_serial(false, trans_b, M, N, K, 1.0f, a->data + (long)i * M * K, K,
                         b->data + (long)i * K * N, trans_b ? K : N, 0.0f,
                         c->data + (long)i * M * N, N);
    tape_count(tape, 2 * (int64_t)batch * M * N * K, 0);
    Node *n = tape_record(tape, "bmm", op_bmm_backward, c, 2, (Tensor *[]){ a, b });
    if (n) {
        BmmState *s = node_state(n, sizeof *s);
        s->trans_b = trans_b;
    }
    return c;
}

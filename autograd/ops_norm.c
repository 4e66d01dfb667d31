/* The ops that normalise along the last dimension: layer normalisation and softmax.
 *
 * Both work row by row (every leading dimension is a row), so the forward and the per-row part of
 * the backward run one row per iteration of an OpenMP loop, and the inner loops over a row are
 * plain loops the compiler vectorises. Every sum has a fixed order, so results are reproducible. */
#include <math.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/reduce.h"
#include "autograd/vexp.h"

/* Parameter gradients are sums over rows. Giving each block of COL_BLOCK columns to one thread,
 * which adds the rows in order, makes every sum run in the same order whatever the thread count:
 * bit-identical gradients with 1 or 64 threads, and no atomics. 16 floats are one cache line. */
enum { COL_BLOCK = 16 };

static void check_layernorm(const Tensor *x, const Tensor *gamma, const Tensor *beta, float eps)
{
    int C = tensor_last_dim(x);
    if (!gamma || !beta)
        tensor_fatal("op_layernorm: gamma and beta are required (use ones and zeros for none)");
    if (gamma->ndim != 1 || gamma->shape[0] != C || beta->ndim != 1 || beta->shape[0] != C) {
        char xs[64], gs[64], bs[64];
        tensor_fatal("op_layernorm: x %s needs gamma and beta [%d], got %s and %s",
                     tensor_shape_str(x, xs, sizeof xs), C, tensor_shape_str(gamma, gs, sizeof gs),
                     tensor_shape_str(beta, bs, sizeof bs));
    }
    if (!(eps >= 0.0f))
        tensor_fatal("op_layernorm: eps is %g (must be >= 0)", (double)eps);
}

/* Mean and 1/sqrt(var + eps) of one row, with the biased variance (divide by C, as PyTorch).
 * Two passes (mean first, then squared deviations) rather than E[x^2] - E[x]^2, which cancels
 * catastrophically when the mean is large compared with the spread. */
static void row_stats(const float *x, int C, float eps, float *mean, float *rstd)
{
    float m = red_sum(x, C) / (float)C;
    float v = red_sum_sq_dev(x, m, C);
    *mean = m;
    *rstd = 1.0f / sqrtf(v / (float)C + eps);
}

/* Per row of C values, with mu and rstd the row's statistics:
 *   xhat = (x - mu) rstd,   rstd = 1 / sqrt(mean((x - mu)^2) + eps),   y = gamma xhat + beta
 * Backward, with dxhat = dy gamma (elementwise):
 *   dx     = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat))        (means over the row)
 *   dgamma += sum_rows dy xhat,    dbeta += sum_rows dy
 * The dx line comes from d xhat_i / d x_k = rstd (delta_ik - 1/C - xhat_i xhat_k / C): the
 * mean term removes the shift the row mean absorbs, the xhat term the stretch rstd absorbs.
 * Forward saves only mu and rstd per row (LayernormState's stats, [rows][2], category act);
 * backward recomputes xhat from x, which the tape keeps anyway.
 * FLOPs per row (other): forward 8C + 5 (mean C + 1, variance 3C + 4, y 4C); backward
 * 13C + 2 for dx (sums 6C + 2, then 7C), 4C for dgamma, C for dbeta. */
static void layernorm_dx(const Node *n, const float *stats)
{
    const Tensor *x = n->in[0];
    const float *gamma = n->in[1]->data, *dy = n->out->grad;
    float *dx = tensor_grad(n->in[0]);
    size_t rows = tensor_rows(x);
    int C = tensor_last_dim(x);
    /* BEGIN SOLUTION layernorm_backward */
    #pragma omp parallel for schedule(static) if (par_worth((double)rows * 13 * C))
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x->data + r * C, *dyr = dy + r * C;
        float mu = stats[2 * r], rstd = stats[2 * r + 1];
        /* sum_j dxhat_j and sum_j dxhat_j xhat_j, with rstd taken out of the second sum */
        float sum_d = red_dot(dyr, gamma, C);
        float sum_dx = red_dot_dev(dyr, gamma, xr, mu, C) * rstd;
        float mean_d = sum_d / (float)C, mean_dx = sum_dx / (float)C;
        float *dxr = dx + r * C;
        #pragma omp simd
        for (int j = 0; j < C; j++) {
            float xhat = (xr[j] - mu) * rstd;
            dxr[j] += rstd * (dyr[j] * gamma[j] - mean_d - xhat * mean_dx);
        }
    }
    /* STUDENT
    (void)stats, (void)gamma, (void)dy, (void)dx, (void)rows, (void)C;
    */
    /* END SOLUTION layernorm_backward */
}

static void layernorm_dparams(const Node *n, const float *stats)
{
    const Tensor *x = n->in[0];
    const float *dy = n->out->grad;
    float *dgamma = n->in[1]->requires_grad ? tensor_grad(n->in[1]) : NULL;
    float *dbeta = n->in[2]->requires_grad ? tensor_grad(n->in[2]) : NULL;
    if (!dgamma && !dbeta)
        return;
    size_t rows = tensor_rows(x);
    int C = tensor_last_dim(x), blocks = (C + COL_BLOCK - 1) / COL_BLOCK;
    /* BEGIN SOLUTION layernorm_backward */
    #pragma omp parallel for schedule(static) if (blocks > 1 && par_worth((double)rows * 3 * C))
    for (int b = 0; b < blocks; b++) {
        int j0 = b * COL_BLOCK, w = C - j0 < COL_BLOCK ? C - j0 : COL_BLOCK;
        float acc_g[COL_BLOCK] = { 0 }, acc_b[COL_BLOCK] = { 0 };
        for (size_t r = 0; r < rows; r++) {
            const float *xr = x->data + r * C + j0, *dyr = dy + r * C + j0;
            float mu = stats[2 * r], rstd = stats[2 * r + 1];
            #pragma omp simd
            for (int j = 0; j < w; j++) {
                acc_g[j] += dyr[j] * ((xr[j] - mu) * rstd);
                acc_b[j] += dyr[j];
            }
        }
        for (int j = 0; j < w; j++) {
            if (dgamma)
                dgamma[j0 + j] += acc_g[j];
            if (dbeta)
                dbeta[j0 + j] += acc_b[j];
        }
    }
    /* STUDENT
    (void)stats, (void)dy, (void)rows, (void)blocks;
    */
    /* END SOLUTION layernorm_backward */
}

typedef struct {
    const float *stats;     /* [rows][2]: mu, rstd */
} LayernormState;

static void op_layernorm_backward(Node *n)
{
    const LayernormState *s = node_state(n, sizeof *s);
    const float *stats = s->stats;
    int64_t rows = (int64_t)tensor_rows(n->in[0]), C = tensor_last_dim(n->in[0]);
    node_count(n, 0, rows * ((13 * C + 2) * n->in[0]->requires_grad +
                             4 * C * n->in[1]->requires_grad + C * n->in[2]->requires_grad));
    if (n->in[0]->requires_grad)
        layernorm_dx(n, stats);
    layernorm_dparams(n, stats);
}

Tensor *op_layernorm(Tape *tape, Tensor *x, Tensor *gamma, Tensor *beta, float eps)
{
    tape_use(tape, 3, (Tensor *[]){ x, gamma, beta });
    check_layernorm(x, gamma, beta, eps);
    Tensor *in[3] = { x, gamma, beta };
    size_t rows = tensor_rows(x);
    int C = tensor_last_dim(x);
    /* Statistics are kept only when a backward pass will read them. */
    float *stats = tape_wants_grad(tape, 3, in)
                       ? tape_buffer(tape, MEM_ACT, 2 * rows * sizeof(float)) : NULL;
    Tensor *y = tape_tensor(tape, x->ndim, x->shape);
    const float *g = gamma->data, *b = beta->data;
    #pragma omp parallel for schedule(static) if (par_worth((double)rows * 8 * C))
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x->data + r * C;
        float *yr = y->data + r * C;
        float mu, rstd;
        row_stats(xr, C, eps, &mu, &rstd);
        #pragma omp simd
        for (int j = 0; j < C; j++)
            yr[j] = (xr[j] - mu) * rstd * g[j] + b[j];
        if (stats) {
            stats[2 * r] = mu;
            stats[2 * r + 1] = rstd;
        }
    }
    tape_count(tape, 0, (int64_t)rows * (8 * C + 5));
    Node *n = tape_record(tape, "layernorm", op_layernorm_backward, y, 3, in);
    if (n) {
        LayernormState *s = node_state(n, sizeof *s);
        s->stats = stats;
    }
    return y;
}

/* y_i = exp(x_i - m) / sum_j exp(x_j - m) over one row, m = max_j x_j. Subtracting the maximum
 * changes nothing mathematically and keeps every exponent <= 0, so nothing overflows (a row of
 * 1000 and 0 gives 1 and 0, not inf/inf). A row whose maximum is +inf, or that is all -inf,
 * gives NaN, as in PyTorch.
 * Backward: dy_i/dx_k = y_i (delta_ik - y_k), so
 *   dx_k += y_k (dy_k - sum_i dy_i y_i)
 * which needs only the output y, already kept by the tape: nothing extra is saved.
 * FLOPs per row (other): forward 5C + 1 (max, subtract, exp, sum, 1/s, scale), backward 4C. */
static void softmax_row(const float *x, float *y, int C)
{
    float m = x[0];
    #pragma omp simd reduction(max:m)
    for (int j = 1; j < C; j++)
        m = x[j] > m ? x[j] : m;
    #pragma omp simd
    for (int j = 0; j < C; j++)
        y[j] = vexp_nonpos(x[j] - m);
    float inv = 1.0f / red_sum(y, C);
    #pragma omp simd
    for (int j = 0; j < C; j++)
        y[j] *= inv;
}

static void op_softmax_backward(Node *n)
{
    const Tensor *y = n->out;
    const float *dy = y->grad;
    float *dx = tensor_grad(n->in[0]);
    size_t rows = tensor_rows(y);
    int C = tensor_last_dim(y);
    node_count(n, 0, (int64_t)rows * 4 * C);
    #pragma omp parallel for schedule(static) if (par_worth((double)rows * 4 * C))
    for (size_t r = 0; r < rows; r++) {
        const float *yr = y->data + r * C, *dyr = dy + r * C;
        float dot = red_dot(dyr, yr, C);
        float *dxr = dx + r * C;
        #pragma omp simd
        for (int j = 0; j < C; j++)
            dxr[j] += yr[j] * (dyr[j] - dot);
    }
}

Tensor *op_softmax(Tape *tape, Tensor *x)
{
    tape_use(tape, 1, (Tensor *[]){ x });
    Tensor *y = tape_tensor(tape, x->ndim, x->shape);
    size_t rows = tensor_rows(x);
    int C = tensor_last_dim(x);
    #pragma omp parallel for schedule(static) if (par_worth((double)rows * 5 * C))
    for (size_t r = 0; r < rows; r++)
        softmax_row(x->data + r * C, y->data + r * C, C);
    tape_count(tape, 0, (int64_t)rows * (5 * C + 1));
    Node *n = tape_record(tape, "softmax", op_softmax_backward, y, 1, (Tensor *[]){ x });
    if (n)
        n->backward_reads_out = true;
    return y;
}

/* Shape ops: reshape (a view, free) and transpose (a copy, since every tensor is contiguous).
 * Neither does arithmetic: they count no FLOPs. */
#include "autograd/ops.h"
#include "autograd/parallel.h"

/* y = x with another shape of the same size: y shares x's storage (tensor_view) and owns no
 * bytes, so the act category does not grow. The view has its own gradient buffer, though: the
 * tape frees a b node's gradient once consumed, and x's may be a parameter's that persists.
 *   dx += dy   (elementwise: the same element order on both sides)
 * A size that does not fit is reported by tensor_view ("cannot view [2, 3] as [4, 2]").
 * Like any view, y must not outlive x: the tape frees y before anything created earlier, and a
 * leaf x must be freed only after the tape is reset. */
static void op_reshape_backward(Node *n)
{
    const float *dy = n->out->grad;
    float *dx = tensor_grad(n->in[0]);
    #pragma omp parallel for simd schedule(static) if (par_worth((double)n->out->size))
    for (size_t i = 0; i < n->out->size; i++)
        dx[i] += dy[i];
}

Tensor *op_reshape(Tape *tape, Tensor *x, int ndim, const int *shape)
{
    tape_use(tape, 1, (Tensor *[]){ x });
    Tensor *y = tape_own(tape, tensor_view(x, ndim, shape));
    Node *n = tape_record(tape, "reshape", op_reshape_backward, y, 1, (Tensor *[]){ x });
    if (n)
        n->backward_ignores_inputs = true;
    return y;
}

/* Swapping dims d0 < d1 of x sees x as five blocks [A, n0, M, n1, I] (A the product of the dims
 * before d0, M of those between, I of those after d1) and writes y [A, n1, M, n0, I]:
 *   y[a, j, m, i, k] = x[a, i, m, j, k]
 * Backward is the same swap applied to dy (a transpose is its own inverse):
 *   dx[a, i, m, j, k] += dy[a, j, m, i, k]
 * swap_blocks does both: dst [A, q, M, p, I] from src [A, p, M, q, I], assigning or adding.
 * For each (a, m) that is a p x q matrix of I-vectors transposed, done in TILE x TILE tiles:
 * when I = 1 (swapping the last dim) reading a column of src touches one cache line per row,
 * and a tile reuses each line TILE times instead of once (2x faster at [4096, 384], measured). */
enum { TILE = 16 };

typedef struct {
    size_t A, M, I;
    int    n0, n1;
} SwapDims;

static SwapDims swap_dims(const Tensor *x, int d0, int d1)
{
    SwapDims s = { 1, 1, 1, x->shape[d0], x->shape[d1] };
    for (int d = 0; d < d0; d++)
        s.A *= (size_t)x->shape[d];
    for (int d = d0 + 1; d < d1; d++)
        s.M *= (size_t)x->shape[d];
    for (int d = d1 + 1; d < x->ndim; d++)
        s.I *= (size_t)x->shape[d];
    if (d0 == d1)
        s.n1 = 1;       /* a dim swapped with itself: n1 = M = 1 makes the swap a plain copy */
    return s;
}

/* One tile: rows j0..j1 of dst from columns j0..j1 of src, for i in i0..i1. Swapping the last
 * dim (I = 1) moves single floats, and gets a loop of its own without the k loop around them. */
static void swap_tile(const float *src, size_t src_row, float *dst, size_t dst_row, size_t I,
                      size_t i0, size_t i1, size_t j0, size_t j1, bool accumulate)
{
    for (size_t j = j0; j < j1; j++) {
        float *d = dst + j * dst_row;
        if (I == 1 && accumulate) {
            for (size_t i = i0; i < i1; i++)
                d[i] += src[i * src_row + j];
        } else if (I == 1) {
            for (size_t i = i0; i < i1; i++)
                d[i] = src[i * src_row + j];
        } else {
            for (size_t i = i0; i < i1; i++) {
                const float *s = src + i * src_row + j * I;
                for (size_t k = 0; k < I; k++)
                    d[i * I + k] = accumulate ? d[i * I + k] + s[k] : s[k];
            }
        }
    }
}

static void swap_blocks(const float *src, float *dst, size_t A, int p, size_t M, int q, size_t I,
                        bool accumulate)
{
    size_t tiles = ((size_t)q + TILE - 1) / TILE, src_row = M * q * I, dst_row = M * p * I;
    /* Each iteration owns the dst rows j of one tile of one (a, m): no two threads write the
     * same element, so the adding form needs no atomics and gives the same bits any way. */
    #pragma omp parallel for schedule(static) if (par_worth((double)A * p * M * q * I))
    for (size_t it = 0; it < A * M * tiles; it++) {
        size_t am = it / tiles, a = am / M, m = am % M;
        size_t j0 = it % tiles * TILE, j1 = j0 + TILE < (size_t)q ? j0 + TILE : (size_t)q;
        const float *s = src + (a * p * M + m) * q * I;
        float *d = dst + (a * q * M + m) * p * I;
        for (size_t i0 = 0; i0 < (size_t)p; i0 += TILE) {
            size_t i1 = i0 + TILE < (size_t)p ? i0 + TILE : (size_t)p;
            swap_tile(s, src_row, d, dst_row, I, i0, i1, j0, j1, accumulate);
        }
    }
}

typedef struct {
    int d0, d1;         /* d0 < d1 */
} TransposeState;

static void op_transpose_backward(Node *n)
{
    const TransposeState *st = node_state(n, sizeof *st);
    SwapDims s = swap_dims(n->in[0], st->d0, st->d1);
    swap_blocks(n->out->grad, tensor_grad(n->in[0]), s.A, s.n1, s.M, s.n0, s.I, true);
}

Tensor *op_transpose(Tape *tape, Tensor *x, int d0, int d1)
{
    tape_use(tape, 1, (Tensor *[]){ x });
    if (d0 < 0 || d0 >= x->ndim || d1 < 0 || d1 >= x->ndim) {
        char xs[64];
        tensor_fatal("op_transpose: dims %d and %d do not exist in %s (0 to %d)", d0, d1,
                     tensor_shape_str(x, xs, sizeof xs), x->ndim - 1);
    }
    if (d0 > d1) {
        int t = d0;
        d0 = d1;
        d1 = t;
    }
    int shape[TENSOR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        shape[d] = x->shape[d];
    shape[d0] = x->shape[d1];
    shape[d1] = x->shape[d0];
    Tensor *y = tape_tensor(tape, x->ndim, shape);
    SwapDims s = swap_dims(x, d0, d1);
    swap_blocks(x->data, y->data, s.A, s.n0, s.M, s.n1, s.I, false);
    Node *n = tape_record(tape, "transpose", op_transpose_backward, y, 1, (Tensor *[]){ x });
    if (n) {
        TransposeState *st = node_state(n, sizeof *st);
        st->d0 = d0;
        st->d1 = d1;
        n->backward_ignores_inputs = true;
    }
    return y;
}

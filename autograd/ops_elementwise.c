/* Elementwise ops: add, mul, bias add, scale, relu, gelu, and a sum to make scalar losses.
 * FLOPs (all "other"): one per +, -, *, /, comparison and tanh of the formula per element;
 * adding a gradient into a buffer (+=) is not counted, so passing dy on unchanged counts 0. */
#include <math.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/vexp.h"

static void check_same(const char *op, const Tensor *a, const Tensor *b)
{
    if (!tensor_same_shape(a, b)) {
        char as[64], bs[64];
        tensor_fatal("%s: shapes %s and %s differ", op, tensor_shape_str(a, as, sizeof as),
                     tensor_shape_str(b, bs, sizeof bs));
    }
}

static Tensor *like(Tape *tape, const Tensor *x) { return tape_tensor(tape, x->ndim, x->shape); }

/* y = a + b.   da += dy,  db += dy.
 * When a and b are the same tensor (x + x) both terms land in the same buffer: 2 dy.
 * FLOPs per element: forward 1, backward 0. */
static void op_add_backward(Node *n)
{
    const float *dy = n->out->grad;
    for (int k = 0; k < 2; k++) {
        if (!n->in[k]->requires_grad)
            continue;
        bool fresh;     /* a new gradient is not zero-filled: 0 + dy is stored */
        float *g = tensor_grad_begin(n->in[k], &fresh);
        #pragma omp parallel for simd schedule(static) if (par_worth((double)n->out->size))
        for (size_t i = 0; i < n->out->size; i++)
            g[i] = (fresh ? 0.0f : g[i]) + dy[i];
    }
}

Tensor *op_add(Tape *tape, Tensor *a, Tensor *b)
{
    tape_use(tape, 2, (Tensor *[]){ a, b });
    check_same("op_add", a, b);
    Tensor *y = like(tape, a);
    const float *pa = a->data, *pb = b->data;
    float *py = y->data;
    size_t size = y->size;
    #pragma omp parallel for simd schedule(static) if (par_worth((double)size))
    for (size_t i = 0; i < size; i++)
        py[i] = pa[i] + pb[i];
    tape_count(tape, 0, (int64_t)y->size);
    Node *n = tape_record(tape, "add", op_add_backward, y, 2, (Tensor *[]){ a, b });
    if (n)
        n->backward_ignores_inputs = true;
    return y;
}

/* y = a * b.   da += dy * b,  db += dy * a.   (x * x gets dy*x + dy*x = 2 x dy.)
 * FLOPs per element: forward 1, backward 1 per input gradient. */
static void op_mul_backward(Node *n)
{
    Tensor *a = n->in[0], *b = n->in[1];
    const float *dy = n->out->grad;
    node_count(n, 0, (int64_t)a->size * (a->requires_grad + b->requires_grad));
    if (a->requires_grad) {
        float *g = tensor_grad(a);
        #pragma omp parallel for simd schedule(static) if (par_worth((double)a->size))
        for (size_t i = 0; i < a->size; i++)
            g[i] += dy[i] * b->data[i];
    }
    if (b->requires_grad) {
        float *g = tensor_grad(b);
        #pragma omp parallel for simd schedule(static) if (par_worth((double)b->size))
        for (size_t i = 0; i < b->size; i++)
            g[i] += dy[i] * a->data[i];
    }
}

Tensor *op_mul(Tape *tape, Tensor *a, Tensor *b)
{
    tape_use(tape, 2, (Tensor *[]){ a, b });
    check_same("op_mul", a, b);
    Tensor *y = like(tape, a);
    const float *pa = a->data, *pb = b->data;
    float *py = y->data;
    size_t size = y->size;
    #pragma omp parallel for simd schedule(static) if (par_worth((double)size))
    for (size_t i = 0; i < size; i++)
        py[i] = pa[i] * pb[i];
    tape_count(tape, 0, (int64_t)y->size);
    tape_record(tape, "mul", op_mul_backward, y, 2, (Tensor *[]){ a, b });
    return y;
}

/* y[r, j] = x[r, j] + bias[j].   dx += dy,  dbias[j] += sum_r dy[r, j].
 * The bias sum walks dy row by row (par_sum_rows), each column's sum in row order, so it is
 * contiguous, vectorized and bit-identical for any thread count.
 * FLOPs per element: forward 1, backward 1 for dbias (dx is dy passed on). */
static void op_bias_add_backward(Node *n)
{
    Tensor *x = n->in[0], *bias = n->in[1];
    const float *dy = n->out->grad;
    if (x->requires_grad) {
        float *g = tensor_grad(x);
        #pragma omp parallel for simd schedule(static) if (par_worth((double)x->size))
        for (size_t i = 0; i < x->size; i++)
            g[i] += dy[i];
    }
    if (bias->requires_grad) {
        node_count(n, 0, (int64_t)x->size);
        par_sum_rows(dy, tensor_rows(x), tensor_last_dim(x), tensor_grad(bias));
    }
}

Tensor *op_bias_add(Tape *tape, Tensor *x, Tensor *bias)
{
    tape_use(tape, 2, (Tensor *[]){ x, bias });
    int N = tensor_last_dim(x);
    if (bias->ndim != 1 || bias->shape[0] != N) {
        char xs[64], bs[64];
        tensor_fatal("op_bias_add: x %s and bias %s do not fit", tensor_shape_str(x, xs, sizeof xs),
                     tensor_shape_str(bias, bs, sizeof bs));
    }
    Tensor *y = like(tape, x);
    size_t rows = tensor_rows(x);
    const float *px = x->data, *pb = bias->data;
    float *py = y->data;
    #pragma omp parallel for schedule(static) if (par_worth((double)y->size))
    for (size_t r = 0; r < rows; r++)
        for (int j = 0; j < N; j++)
            py[r * N + j] = px[r * N + j] + pb[j];
    tape_count(tape, 0, (int64_t)y->size);
    Node *n = tape_record(tape, "bias_add", op_bias_add_backward, y, 2, (Tensor *[]){ x, bias });
    if (n)
        n->backward_ignores_inputs = true;
    return y;
}

/* y = s x.   dx += s dy.   FLOPs per element: forward 1, backward 1. */
typedef struct {
    float s;
} ScaleState;

static void op_scale_backward(Node *n)
{
    const ScaleState *st = node_state(n, sizeof *st);
    float s = st->s, *g = tensor_grad(n->in[0]);
    const float *dy = n->out->grad;
    node_count(n, 0, (int64_t)n->out->size);
    #pragma omp parallel for simd schedule(static) if (par_worth((double)n->out->size))
    for (size_t i = 0; i < n->out->size; i++)
        g[i] += s * dy[i];
}

Tensor *op_scale(Tape *tape, Tensor *x, float s)
{
    tape_use(tape, 1, (Tensor *[]){ x });
    Tensor *y = like(tape, x);
    const float *px = x->data;
    float *py = y->data;
    size_t size = y->size;
    #pragma omp parallel for simd schedule(static) if (par_worth((double)size))
    for (size_t i = 0; i < size; i++)
        py[i] = s * px[i];
    tape_count(tape, 0, (int64_t)y->size);
    Node *n = tape_record(tape, "scale", op_scale_backward, y, 1, (Tensor *[]){ x });
    if (n) {
        ScaleState *st = node_state(n, sizeof *st);
        st->s = s;
        n->backward_ignores_inputs = true;
    }
    return y;
}

/* y = max(x, 0).   dx += dy where x > 0 (the derivative at 0 is taken as 0).
 * FLOPs per element: forward 1, backward 1 (a comparison each). */
static void op_relu_backward(Node *n)
{
    const float *x = n->in[0]->data, *dy = n->out->grad;
    float *g = tensor_grad(n->in[0]);
    node_count(n, 0, (int64_t)n->out->size);
    #pragma omp parallel for simd schedule(static) if (par_worth((double)n->out->size))
    for (size_t i = 0; i < n->out->size; i++)
        g[i] += x[i] > 0.0f ? dy[i] : 0.0f;
}

Tensor *op_relu(Tape *tape, Tensor *x)
{
    tape_use(tape, 1, (Tensor *[]){ x });
    Tensor *y = like(tape, x);
    const float *px = x->data;
    float *py = y->data;
    size_t size = y->size;
    #pragma omp parallel for simd schedule(static) if (par_worth((double)size))
    for (size_t i = 0; i < size; i++)
        py[i] = px[i] > 0.0f ? px[i] : 0.0f;
    tape_count(tape, 0, (int64_t)y->size);
    tape_record(tape, "relu", op_relu_backward, y, 1, (Tensor *[]){ x });
    return y;
}

/* GELU, tanh form (GPT-2):  y = x/2 (1 + tanh u),  u = sqrt(2/pi) (x + 0.044715 x^3).
 *   dy/dx = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 * The backward recomputes tanh u from the saved input rather than keeping a second tensor.
 * tanh is vtanh (autograd/vexp.h), which vectorizes where libm's tanhf does not.
 * FLOPs per element: forward 9 (6 *, 2 +, tanh); backward 19 (tanh u again: 6; du: 4; 9). */
static const float GELU_C = 0.7978845608028654f;   /* sqrt(2/pi) */
static const float GELU_A = 0.044715f;

static void gelu_backward_span(const float *x, const float *dy, float *g, size_t n)
{
    /* BEGIN SOLUTION gelu_backward */
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float xi = x[i];
        float t = vtanh(GELU_C * (xi + GELU_A * xi * xi * xi));
        float du = GELU_C * (1.0f + 3.0f * GELU_A * xi * xi);
        g[i] += dy[i] * (0.5f * (1.0f + t) + 0.5f * xi * (1.0f - t * t) * du);
    }
    /* STUDENT
    (void)x, (void)dy, (void)g, (void)n;
    */
    /* END SOLUTION gelu_backward */
}

/* The input is read a chunk at a time: a packed one is decoded into a small buffer per thread
 * rather than a whole fp32 copy in temp, which beside dy and dx (4 C per token each) would
 * make gelu's backward the largest scratch of a step under a policy. */
enum { GELU_CHUNK = 2048 };

static void op_gelu_backward(Node *n)
{
    const Tensor *x = n->in[0];
    const float *dy = n->out->grad;
    bool fresh;
    float *g = tensor_grad_begin(n->in[0], &fresh);
    node_count(n, 0, 19 * (int64_t)n->out->size);
    long size = (long)n->out->size, chunks = (size + GELU_CHUNK - 1) / GELU_CHUNK;
    #pragma omp parallel for schedule(static) if (par_worth(19.0 * size))
    for (long c = 0; c < chunks; c++) {
        size_t i0 = (size_t)c * GELU_CHUNK;
        size_t m = (size_t)size - i0 < GELU_CHUNK ? (size_t)size - i0 : GELU_CHUNK;
        float buf[GELU_CHUNK];
        const float *xc = x->data ? x->data + i0 : buf;
        if (!x->data)
            tensor_unpack_range(x, i0, m, buf);
        if (fresh)      /* zeroed a chunk at a time, in cache, rather than in a pass of its own */
            memset(g + i0, 0, m * sizeof *g);
        gelu_backward_span(xc, dy + i0, g + i0, m);
    }
}

Tensor *op_gelu(Tape *tape, Tensor *x)
{
    tape_use(tape, 1, (Tensor *[]){ x });
    Tensor *y = like(tape, x);
    const float *px = x->data;
    float *py = y->data;
    size_t size = y->size;
    #pragma omp parallel for simd schedule(static) if (par_worth(9.0 * size))
    for (size_t i = 0; i < size; i++) {
        float xi = px[i];
        py[i] = 0.5f * xi * (1.0f + vtanh(GELU_C * (xi + GELU_A * xi * xi * xi)));
    }
    tape_count(tape, 0, 9 * (int64_t)y->size);
    Node *n = tape_record(tape, "gelu", op_gelu_backward, y, 1, (Tensor *[]){ x });
    if (n)
        n->backward_ignores_inputs = true;      /* it decodes x itself, a chunk at a time */
    return y;
}

/* y = sum_i x_i (accumulated in double).   dx_i += dy.   FLOPs: forward n, backward 0. */
static void op_sum_backward(Node *n)
{
    float dy = n->out->grad[0], *g = tensor_grad(n->in[0]);
    for (size_t i = 0; i < n->in[0]->size; i++)
        g[i] += dy;
}

Tensor *op_sum(Tape *tape, Tensor *x)
{
    tape_use(tape, 1, (Tensor *[]){ x });
    Tensor *y = tape_tensor(tape, 1, (int[]){ 1 });
    double acc = 0.0;
    for (size_t i = 0; i < x->size; i++)
        acc += x->data[i];
    y->data[0] = (float)acc;
    tape_count(tape, 0, (int64_t)x->size);
    Node *n = tape_record(tape, "sum", op_sum_backward, y, 1, (Tensor *[]){ x });
    if (n)
        n->backward_ignores_inputs = true;
    return y;
}

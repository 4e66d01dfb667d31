/* Causal multi-head self-attention: the fused op and the parts it can be built from
 * (split_heads, causal_softmax, merge_heads; the products are op_bmm in ops_matmul.c).
 *
 * The fused op keeps the probabilities P [B, H, T, T] for backward: "standard" attention, whose
 * saved activations grow as T^2. Everything it does to one (batch, head) pair is in the two
 * kernels head_forward / head_backward below; a tiled (flash) kernel that recomputes P from
 * saved row statistics would sit beside them and be chosen in all_heads_forward/backward. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/reduce.h"
#include "autograd/vexp.h"

/* ---- one causal softmax row, shared by the fused op and op_causal_softmax -------------------
 * y[j] = exp(scale x[j] - m) / sum_{j'<=i} exp(scale x[j'] - m) for j <= i, m the row maximum;
 * y[j] = 0 for i < j < n.  Backward: dx[j] = scale y[j] (dy[j] - sum_j' dy[j'] y[j']).
 * FLOPs (other) of a row with n = i + 1 unmasked entries: forward 7n + 1 (scale and compare,
 * scale, subtract, exp, sum; 1/sum; normalise), backward 5n (the dot 2n, then 3n).
 *
 * The exponentials use vexp_nonpos (autograd/vexp.h), which vectorizes where libm's expf
 * does not. */
static void causal_softmax_row(const float *x, float *y, int i, int n, float scale)
{
    float m = -INFINITY;
    #pragma omp simd reduction(max:m)
    for (int j = 0; j <= i; j++)
        m = scale * x[j] > m ? scale * x[j] : m;
    #pragma omp simd
    for (int j = 0; j <= i; j++)
        y[j] = vexp_nonpos(scale * x[j] - m);
    float inv = 1.0f / red_sum(y, i + 1);
    for (int j = 0; j <= i; j++)
        y[j] *= inv;
    for (int j = i + 1; j < n; j++)
        y[j] = 0.0f;
}

/* Unmasked entries of a causal T x T matrix: the rows have 1, 2, ..., T. */
static int64_t causal_entries(int64_t T) { return T * (T + 1) / 2; }

/* ---- where the heads are --------------------------------------------------------------------
 * q, k, v and their gradients are [B, T, *] with row stride ld: C for three separate tensors,
 * 3C for a fused [q | k | v] projection. Head h of batch b is the D columns starting at
 * b*T*ld + h*D. The output and its gradient are [B, T, C]. A NULL gradient pointer means that
 * input needs none. When q, k and v are one tensor the three gradient pointers coincide: every
 * update is +=, and one (b, h) pair is handled by one thread, so all three terms land. */
typedef struct {
    int          B, T, H, D, ld;
    float        scale;            /* 1 / sqrt(D) */
    const float *q, *k, *v;
    float       *dq, *dk, *dv;
    bool         zero_grads;       /* dq, dk, dv are new (tensor_grad_begin): zeroed per head */
} AttnHeads;

static long in_offset(const AttnHeads *a, int b, int h)
{
    return (long)b * a->T * a->ld + (long)h * a->D;
}

static long out_offset(const AttnHeads *a, int b, int h)
{
    return (long)b * a->T * a->H * a->D + (long)h * a->D;
}

/* ---- the standard kernel, one (b, h) pair ---------------------------------------------------
 * Forward:   S = Q K^T / sqrt(D),  P = softmax_rows(S) with s > t masked,  O = P V
 * Backward:  dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dP * P))  (0 where masked),
 *            dQ = dS K / sqrt(D),  dK = dS^T Q / sqrt(D)
 * The 1/sqrt(D) of the backward is folded into dS once rather than into both products.
 * FLOPs: each product counts as the dense T x T product, 2 T^2 D (matmul), as the model's
 * 12LTC does, although the kernel skips most of the masked half (docs/autograd.md); the
 * softmax rows count their unmasked entries (other). Forward: QK^T and PV; backward: dP and dS
 * always, dQ, dK, dV as wanted.
 *
 * Causality halves the work: query t needs keys 0..t only. The products run on blocks of TILE
 * query rows, each against the keys up to the block's end, so only the upper half of the
 * diagonal blocks is computed in vain (then zeroed by the mask). Measured with 2 threads at
 * B=16 T=64 H=4 D=32 and B=8 T=128 H=6 D=64 (bench/bench_attention.c): TILE 32 beat 16, 24,
 * 48 and whole-matrix products (by 12% and 25%), and beat plain vectorized loops by 2x. */
enum { TILE = 32 };

static int tile_end(int r0, int T) { return r0 + TILE < T ? r0 + TILE : T; }

static void head_forward(const AttnHeads *a, int b, int h, float *p, float *o)
{
    int T = a->T, D = a->D, ld = a->ld, ldo = a->H * D;
    long off = in_offset(a, b, h);
    const float *q = a->q + off, *k = a->k + off, *v = a->v + off;
    for (int r0 = 0; r0 < T; r0 += TILE) {
        int r1 = tile_end(r0, T);
        float *pr = p + (long)r0 * T;
        par_sgemm_serial(false, true, r1 - r0, r1, D, 1.0f, q + (long)r0 * ld, ld, k, ld, 0.0f,
                         pr, T);
        for (int t = r0; t < r1; t++)
            causal_softmax_row(p + (long)t * T, p + (long)t * T, t, T, a->scale);
        par_sgemm_serial(false, false, r1 - r0, D, r1, 1.0f, pr, T, v, ld, 0.0f,
                         o + (long)r0 * ldo, ldo);
    }
}

/* dS for query rows r0..r1-1, in place over dP (columns 0..r1-1; those beyond t set to 0). */
static void head_ds_rows(const float *p, float *ds, int r0, int r1, int T, float scale)
{
    /* BEGIN SOLUTION attention_backward */
    for (int t = r0; t < r1; t++) {
        const float *pt = p + (long)t * T;
        float *dst = ds + (long)t * T;
        float dot = red_dot(pt, dst, t + 1);
        #pragma omp simd
        for (int s = 0; s <= t; s++)
            dst[s] = scale * pt[s] * (dst[s] - dot);
        for (int s = t + 1; s < r1; s++)
            dst[s] = 0.0f;
    }
    /* STUDENT
    (void)p, (void)ds, (void)r0, (void)r1, (void)T, (void)scale;
    */
    /* END SOLUTION attention_backward */
}

static void head_backward(const AttnHeads *a, int b, int h, const float *p, const float *dout,
                          float *ds)
{
    int T = a->T, D = a->D, ld = a->ld, ldo = a->H * D;
    long off = in_offset(a, b, h);
    const float *q = a->q + off, *k = a->k + off, *v = a->v + off;
    /* BEGIN SOLUTION attention_backward */
    /* By blocks of query rows t: dP, dS, dQ. */
    for (int r0 = 0; r0 < T; r0 += TILE) {
        int r1 = tile_end(r0, T);
        float *dsr = ds + (long)r0 * T;
        par_sgemm_serial(false, true, r1 - r0, r1, D, 1.0f, dout + (long)r0 * ldo, ldo, v, ld,
                         0.0f, dsr, T);
        head_ds_rows(p, ds, r0, r1, T, a->scale);
        if (a->dq)
            par_sgemm_serial(false, false, r1 - r0, D, r1, 1.0f, dsr, T, k, ld, 1.0f,
                             a->dq + off + (long)r0 * ld, ld);
    }
    /* By blocks of key rows s, each seen by queries s..T-1: dV, dK. */
    for (int c0 = 0; c0 < T; c0 += TILE) {
        int c1 = tile_end(c0, T);
        long corner = (long)c0 * T + c0;
        if (a->dv)
            par_sgemm_serial(true, false, c1 - c0, D, T - c0, 1.0f, p + corner, T,
                             dout + (long)c0 * ldo, ldo, 1.0f, a->dv + off + (long)c0 * ld, ld);
        if (a->dk)
            par_sgemm_serial(true, false, c1 - c0, D, T - c0, 1.0f, ds + corner, T,
                             q + (long)c0 * ld, ld, 1.0f, a->dk + off + (long)c0 * ld, ld);
    }
    /* STUDENT
    (void)p, (void)dout, (void)ds, (void)T, (void)D, (void)ld, (void)ldo, (void)q, (void)k, (void)v;
    (void)head_ds_rows;
    */
    /* END SOLUTION attention_backward */
}

/* ---- the heads in parallel ------------------------------------------------------------------
 * One (b, h) pair per iteration, static schedule. A pair's arithmetic is the same whatever
 * thread runs it, so results do not even depend on the thread count. p_all is [B, H, T, T]
 * when P is kept for backward; otherwise NULL, and each thread reuses one T x T scratch. */
static float *per_thread_scratch(long TT)
{
    return mem_alloc(MEM_TEMP, (size_t)omp_get_max_threads() * TT * sizeof(float));
}

/* Whether the heads are worth the other threads: by the multiply-adds of their products
 * (parallel.h), or by their softmax's FLOPs when T is long and D short. */
static bool heads_worth_threads(const AttnHeads *a, int products, int softmax_flops)
{
    double pairs = (double)a->B * a->H, T = a->T;
    return par_worth_madds(pairs * products * T * T * a->D) ||
           par_worth(pairs * softmax_flops * causal_entries(a->T));
}

static void all_heads_forward(const AttnHeads *a, float *p_all, float *out)
{
    long TT = (long)a->T * a->T;
    float *scratch = p_all ? NULL : per_thread_scratch(TT);
    #pragma omp parallel for schedule(static) if (heads_worth_threads(a, 2, 7))
    for (int bh = 0; bh < a->B * a->H; bh++) {
        int b = bh / a->H, h = bh % a->H;
        float *p = p_all ? p_all + bh * TT : scratch + omp_get_thread_num() * TT;
        head_forward(a, b, h, p, out + out_offset(a, b, h));
    }
    mem_free(scratch);
}

static void count_forward(Tape *tape, const AttnHeads *a)
{
    int64_t pairs = (int64_t)a->B * a->H, T = a->T;
    tape_count(tape, pairs * 2 * 2 * T * T * a->D, pairs * (7 * causal_entries(T) + T));
}

static void count_backward(Node *n, const AttnHeads *a)
{
    int64_t pairs = (int64_t)a->B * a->H, T = a->T;
    int products = 1 + (a->dq != NULL) + (a->dk != NULL) + (a->dv != NULL);
    node_count(n, pairs * products * 2 * T * T * a->D, pairs * 5 * causal_entries(T));
}

/* A new gradient is zeroed a head at a time, by the thread about to add that head's dq, dk and
 * dv into it (T rows of D floats each, in cache), rather than by tensor_grad in a pass of its
 * own over the whole [B, T, 3C] on one thread. The heads' columns cover the tensor. */
static void zero_head_grads(const AttnHeads *a, int b, int h)
{
    long off = in_offset(a, b, h);
    for (int t = 0; t < a->T; t++) {
        long row = off + (long)t * a->ld;
        memset(a->dq + row, 0, (size_t)a->D * sizeof(float));
        memset(a->dk + row, 0, (size_t)a->D * sizeof(float));
        memset(a->dv + row, 0, (size_t)a->D * sizeof(float));
    }
}

static void all_heads_backward(const AttnHeads *a, const float *p_all, const float *dout)
{
    long TT = (long)a->T * a->T;
    float *scratch = per_thread_scratch(TT);
    #pragma omp parallel for schedule(static) if (heads_worth_threads(a, 4, 5))
    for (int bh = 0; bh < a->B * a->H; bh++) {
        int b = bh / a->H, h = bh % a->H;
        float *ds = scratch + omp_get_thread_num() * TT;
        if (a->zero_grads)
            zero_head_grads(a, b, h);
        head_backward(a, b, h, p_all + bh * TT, dout + out_offset(a, b, h), ds);
    }
    mem_free(scratch);
}

/* ---- the two public forms: separate q, k, v, or one fused [q | k | v] ------------------------
 * x is [B, T, width * C] (width 1 for q, k, v alone, 3 for the fused projection), C = H * D. */
static AttnHeads heads_of(const char *op, const Tensor *x, int n_head, int width)
{
    int C = x->ndim == 3 ? x->shape[2] / width : 0;
    if (x->ndim != 3 || n_head < 1 || C * width != x->shape[2] || C % n_head != 0) {
        char xs[64];
        tensor_fatal("%s: %s does not split into %d heads%s", op,
                     tensor_shape_str(x, xs, sizeof xs), n_head,
                     width == 3 ? " of a [q | k | v] projection" : "");
    }
    int D = C / n_head;
    return (AttnHeads){ .B = x->shape[0], .T = x->shape[1], .H = n_head, .D = D,
                        .ld = x->shape[2], .scale = 1.0f / sqrtf((float)D) };
}

/* What both forms keep besides P (saved[0]): the number of heads. */
typedef struct {
    int heads;
} AttentionState;

static Tensor *attention_run(Tape *tape, const char *op, NodeBackward backward,
                             const AttnHeads *a, int n_in, Tensor *const *in)
{
    Tensor *out = tape_tensor(tape, 3, (int[]){ a->B, a->T, a->H * a->D });
    Tensor *p = NULL;
    if (tape_wants_grad(tape, n_in, in))
        p = tape_tensor(tape, 4, (int[]){ a->B, a->H, a->T, a->T });
    all_heads_forward(a, p ? p->data : NULL, out->data);
    count_forward(tape, a);
    Node *n = tape_record(tape, op, backward, out, n_in, in);
    if (n) {
        AttentionState *s = node_state(n, sizeof *s);
        s->heads = a->H;
        n->saved[0] = p;
    }
    return out;
}

static float *grad_or_null(Tensor *t) { return t->requires_grad ? tensor_grad(t) : NULL; }

static void op_attention_backward(Node *n)
{
    const AttentionState *s = node_state(n, sizeof *s);
    Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    AttnHeads a = heads_of("op_attention", q, s->heads, 1);
    a.q = q->data, a.k = k->data, a.v = v->data;
    a.dq = grad_or_null(q), a.dk = grad_or_null(k), a.dv = grad_or_null(v);
    count_backward(n, &a);
    all_heads_backward(&a, n->saved[0]->data, n->out->grad);
}

Tensor *op_attention(Tape *tape, Tensor *q, Tensor *k, Tensor *v, int n_head)
{
    tape_use(tape, 3, (Tensor *[]){ q, k, v });
    AttnHeads a = heads_of("op_attention", q, n_head, 1);
    if (!tensor_same_shape(q, k) || !tensor_same_shape(q, v)) {
        char qs[64], ks[64], vs[64];
        tensor_fatal("op_attention: q %s, k %s and v %s differ", tensor_shape_str(q, qs, sizeof qs),
                     tensor_shape_str(k, ks, sizeof ks), tensor_shape_str(v, vs, sizeof vs));
    }
    a.q = q->data, a.k = k->data, a.v = v->data;
    return attention_run(tape, "attention", op_attention_backward, &a, 3,
                         (Tensor *[]){ q, k, v });
}

/* q, k and v of the fused layout start C floats apart in every row, as do their gradients. */
static void point_into_qkv(AttnHeads *a, const float *x, float *grad)
{
    int C = a->H * a->D;
    a->q = x, a->k = x + C, a->v = x + 2 * C;
    if (grad)
        a->dq = grad, a->dk = grad + C, a->dv = grad + 2 * C;
}

static void op_attention_qkv_backward(Node *n)
{
    const AttentionState *s = node_state(n, sizeof *s);
    Tensor *qkv = n->in[0];
    AttnHeads a = heads_of("op_attention_qkv", qkv, s->heads, 3);
    point_into_qkv(&a, qkv->data, tensor_grad_begin(qkv, &a.zero_grads));
    count_backward(n, &a);
    all_heads_backward(&a, n->saved[0]->data, n->out->grad);
}

Tensor *op_attention_qkv(Tape *tape, Tensor *qkv, int n_head)
{
    tape_use(tape, 1, (Tensor *[]){ qkv });
    AttnHeads a = heads_of("op_attention_qkv", qkv, n_head, 3);
    point_into_qkv(&a, qkv->data, NULL);
    return attention_run(tape, "attention_qkv", op_attention_qkv_backward, &a, 1,
                         (Tensor *[]){ qkv });
}

/* ---- op_causal_softmax ----------------------------------------------------------------------
 * y[i, j] = softmax_{j' <= i}(scale x[i, j']) for j <= i, exactly 0 for j > i.
 * dx[i, j] += scale y[i, j] (dy[i, j] - sum_j' dy[i, j'] y[i, j']).
 * FLOPs (other): causal_softmax_row's, for each of the rows / T matrices. */
typedef struct {
    float scale;
} CausalSoftmaxState;

static void op_causal_softmax_backward(Node *n)
{
    const CausalSoftmaxState *s = node_state(n, sizeof *s);
    Tensor *x = n->in[0], *y = n->out;
    int T = tensor_last_dim(x);
    long rows = (long)tensor_rows(x);
    float scale = s->scale, *dx = tensor_grad(x);
    const float *dy = y->grad;
    int64_t flops = rows / T * 5 * causal_entries(T);
    node_count(n, 0, flops);
    #pragma omp parallel for schedule(static) if (par_worth((double)flops))
    for (long r = 0; r < rows; r++) {
        int i = (int)(r % T);
        const float *yr = y->data + r * T, *dyr = dy + r * T;
        float dot = red_dot(yr, dyr, i + 1);
        for (int j = 0; j <= i; j++)
            dx[r * T + j] += scale * yr[j] * (dyr[j] - dot);
    }
}

Tensor *op_causal_softmax(Tape *tape, Tensor *x, float scale)
{
    tape_use(tape, 1, (Tensor *[]){ x });
    if (x->ndim < 2 || x->shape[x->ndim - 1] != x->shape[x->ndim - 2]) {
        char xs[64];
        tensor_fatal("op_causal_softmax: x %s is not [..., T, T]",
                     tensor_shape_str(x, xs, sizeof xs));
    }
    int T = tensor_last_dim(x);
    long rows = (long)tensor_rows(x);
    Tensor *y = tape_tensor(tape, x->ndim, x->shape);
    int64_t flops = rows / T * (7 * causal_entries(T) + T);
    #pragma omp parallel for schedule(static) if (par_worth((double)flops))
    for (long r = 0; r < rows; r++)
        causal_softmax_row(x->data + r * T, y->data + r * T, (int)(r % T), T, scale);
    tape_count(tape, 0, flops);
    Node *n = tape_record(tape, "causal_softmax", op_causal_softmax_backward, y, 1,
                          (Tensor *[]){ x });
    if (n) {
        CausalSoftmaxState *s = node_state(n, sizeof *s);
        s->scale = scale;
        n->backward_reads_out = true;
    }
    return y;
}

/* ---- split and merge heads ------------------------------------------------------------------
 * [B, T, H*D] <-> [B, H, T, D]: x[b, t, h*D + d] is y[b, h, t, d]. A copy each way; the backward
 * of one is the other (accumulated). FLOPs: none. */
static void move_heads(const float *src, float *dst, int B, int T, int H, int D, bool to_heads,
                       bool accumulate)
{
    #pragma omp parallel for schedule(static) if (par_worth((double)B * H * T * D))
    for (int bh = 0; bh < B * H; bh++) {
        int b = bh / H, h = bh % H;
        for (int t = 0; t < T; t++) {
            long merged = ((long)b * T + t) * H * D + (long)h * D;
            long split = ((long)bh * T + t) * D;
            const float *from = src + (to_heads ? merged : split);
            float *to = dst + (to_heads ? split : merged);
            if (accumulate)
                for (int d = 0; d < D; d++)
                    to[d] += from[d];
            else
                memcpy(to, from, (size_t)D * sizeof(float));
        }
    }
}

static void op_split_heads_backward(Node *n)
{
    const Tensor *y = n->out;
    move_heads(y->grad, tensor_grad(n->in[0]), y->shape[0], y->shape[2], y->shape[1],
               y->shape[3], false, true);
}

Tensor *op_split_heads(Tape *tape, Tensor *x, int n_head)
{
    tape_use(tape, 1, (Tensor *[]){ x });
    int D = heads_of("op_split_heads", x, n_head, 1).D, B = x->shape[0], T = x->shape[1];
    Tensor *y = tape_tensor(tape, 4, (int[]){ B, n_head, T, D });
    move_heads(x->data, y->data, B, T, n_head, D, true, false);
    Node *n = tape_record(tape, "split_heads", op_split_heads_backward, y, 1, (Tensor *[]){ x });
    if (n)
        n->backward_ignores_inputs = true;
    return y;
}

static void op_merge_heads_backward(Node *n)
{
    const Tensor *x = n->in[0];
    move_heads(n->out->grad, tensor_grad(n->in[0]), x->shape[0], x->shape[2], x->shape[1],
               x->shape[3], true, true);
}

Tensor *op_merge_heads(Tape *tape, Tensor *x)
{
    tape_use(tape, 1, (Tensor *[]){ x });
    if (x->ndim != 4) {
        char xs[64];
        tensor_fatal("op_merge_heads: x %s is not [B, H, T, D]",
                     tensor_shape_str(x, xs, sizeof xs));
    }
    int B = x->shape[0], H = x->shape[1], T = x->shape[2], D = x->shape[3];
    Tensor *y = tape_tensor(tape, 3, (int[]){ B, T, H * D });
    move_heads(x->data, y->data, B, T, H, D, false, false);
    Node *n = tape_record(tape, "merge_heads", op_merge_heads_backward, y, 1, (Tensor *[]){ x });
    if (n)
        n->backward_ignores_inputs = true;
    return y;
}

/* Tiled causal self-attention with an online softmax (FlashAttention-style): the same function
 * as op_attention / op_attention_qkv (ops_attention.c), whose saved activations grow as T, not
 * T^2. The standard op keeps the probabilities P [B, H, T, T] for backward; this one keeps only
 * the output O and one number per query row, and recomputes P tile by tile in the backward.
 *
 * Layout, as in ops_attention.c: q, k, v and their gradients are [B, T, *] with row stride ld
 * (C for separate tensors, 3C for a fused [q | k | v] projection); head h of batch b is the D
 * columns starting at b*T*ld + h*D, so one kernel per (b, h) pair serves both forms. The output
 * and its gradient are [B, T, C] with row stride C. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/reduce.h"
#include "autograd/vexp.h"

/* Query rows per block (BR) and key columns per block (BC). Measured on one thread, one forward
 * + backward at B=1 H=4 D=64, T = 256 and 1024, median of 7, repeated: tiles of 32 x 32,
 * 64 x 64, 128 x 128, 64 x 128 and 128 x 64 all took 1.5-2 ms and 21-26 ms, differences within
 * the run-to-run noise of a shared machine, so 64 x 64, the middle, is kept. The same kernel
 * with plain vectorized loops for the tile products instead of par_sgemm_serial took 5.2 ms and
 * 70-116 ms: single-threaded BLAS is about 3x faster even on tiles this small. */
enum { BR = 64, BC = 64 };

typedef struct {
    int          B, T, H, D, ld;
    float        scale;            /* 1 / sqrt(D) */
    const float *q, *k, *v;
    float       *dq, *dk, *dv;     /* NULL where no gradient is wanted */
} Heads;

static int imin(int a, int b) { return a < b ? a : b; }

/* First element of head h of batch b in q, k, v (and their gradients), and in the output. */
static long head_in(const Heads *a, int b, int h)
{
    return (long)b * a->T * a->ld + (long)h * a->D;
}

static long head_out(const Heads *a, int b, int h)
{
    return (long)b * a->T * a->H * a->D + (long)h * a->D;
}

/* ---- one block of query rows against one block of keys ---------------------------------------
 * Rows i0..i1-1 against keys j0..j1-1 (j1 <= i1: keys after the block's last query are all
 * masked and never computed). valid() is how many of a row's columns survive the causal mask:
 * key s is seen by query t only when s <= t, so it may be zero when BR > BC. */
typedef struct {
    int i0, i1, j0, j1;
} Block;

static int valid(const Block *blk, int t) { return imin(t + 1, blk->j1) - blk->j0; }

static Block block_of(int i0, int j0, int T)
{
    int i1 = imin(i0 + BR, T);
    return (Block){ i0, i1, j0, imin(j0 + BC, i1) };
}

/* S = Q_i K_j^T / sqrt(D) into s [rows, BC]. */
static void block_scores(const Heads *a, long off, const Block *blk, float *s)
{
    par_sgemm_serial(false, true, blk->i1 - blk->i0, blk->j1 - blk->j0, a->D, a->scale,
                     a->q + off + (long)blk->i0 * a->ld, a->ld, a->k + off + (long)blk->j0 * a->ld,
                     a->ld, 0.0f, s, BC);
}

/* ---- forward ----------------------------------------------------------------------------------
 * Per query row t, over the key blocks in order, with m the running maximum of the scores seen,
 * l the running sum of their exponentials and o the running (unnormalised) output:
 *     S_j   = Q_t K_j^T / sqrt(D)                      (masked: key s > t is skipped)
 *     m'    = max(m, max S_j)
 *     P_j   = exp(S_j - m')
 *     l'    = l exp(m - m') + rowsum(P_j)
 *     o'    = o exp(m - m') + P_j V_j
 * and at the end O_t = o / l and L_t = m + log(l), the row's logsumexp. Rescaling by
 * exp(m - m') keeps every exponent <= 0 (no overflow) yet gives exactly softmax(S) V, because
 * each earlier term was scaled by exp(-m_old) and is now scaled by exp(-m_new). Only O (the
 * op's output) and L [B, H, T] are saved; P never exists beyond one BR x BC tile. */

/* The online update of one row: turns its scores into P_j in place (0 where masked) and
 * returns the factor exp(m - m') that the row's earlier sum and output must be scaled by. */
static float online_row(float *s, int n, int width, float *m, float *l)
{
    if (n <= 0) {
        memset(s, 0, (size_t)width * sizeof *s);
        return 1.0f;
    }
    float mx = *m;
    #pragma omp simd reduction(max:mx)
    for (int j = 0; j < n; j++)
        mx = s[j] > mx ? s[j] : mx;
    #pragma omp simd
    for (int j = 0; j < n; j++)
        s[j] = vexp_nonpos(s[j] - mx);
    float sum = red_sum(s, n);
    for (int j = n; j < width; j++)
        s[j] = 0.0f;
    float rescale = vexp_nonpos(*m - mx);   /* 0 on the first block, where m = -inf */
    *m = mx;
    *l = *l * rescale + sum;
    return rescale;
}

static void forward_block(const Heads *a, long off, const Block *blk, float *s, float *m,
                          float *l, float *o, int ldo)
{
    int rows = blk->i1 - blk->i0, width = blk->j1 - blk->j0, D = a->D;
    block_scores(a, off, blk, s);
    for (int r = 0; r < rows; r++) {
        float rescale = online_row(s + r * BC, valid(blk, blk->i0 + r), width, &m[r], &l[r]);
        if (rescale != 1.0f) {
            float *orow = o + (long)(blk->i0 + r) * ldo;
            #pragma omp simd
            for (int d = 0; d < D; d++)
                orow[d] *= rescale;
        }
    }
    par_sgemm_serial(false, false, rows, D, width, 1.0f, s, BC, a->v + off + (long)blk->j0 * a->ld,
                     a->ld, 1.0f, o + (long)blk->i0 * ldo, ldo);
}

/* One (b, h) pair. o is the head's output [T, D] (row stride ldo), lse its [T] logsumexps
 * (NULL when nothing is saved); scratch holds BR x BC scores and BR each of m and l. */
static void head_forward(const Heads *a, int b, int h, float *o, float *lse, float *scratch)
{
    int T = a->T, D = a->D, ldo = a->H * D;
    long off = head_in(a, b, h);
    float *s = scratch, *m = s + BR * BC, *l = m + BR;
    for (int i0 = 0; i0 < T; i0 += BR) {
        int rows = imin(i0 + BR, T) - i0;
        for (int r = 0; r < rows; r++) {
            m[r] = -INFINITY;
            l[r] = 0.0f;
            memset(o + (long)(i0 + r) * ldo, 0, (size_t)D * sizeof *o);
        }
        for (int j0 = 0; j0 < i0 + rows; j0 += BC) {
            Block blk = block_of(i0, j0, T);
            forward_block(a, off, &blk, s, m, l, o, ldo);
        }
        for (int r = 0; r < rows; r++) {
            float *orow = o + (long)(i0 + r) * ldo, inv = 1.0f / l[r];
            for (int d = 0; d < D; d++)
                orow[d] *= inv;
            if (lse)
                lse[i0 + r] = m[r] + logf(l[r]);
        }
    }
}

/* ---- backward ---------------------------------------------------------------------------------
 * With L saved, each tile of P is recomputed exactly, without a pass for the maximum:
 *     D_t = rowsum(dO_t * O_t)        ( = sum_s P_ts dP_ts, since O_t = sum_s P_ts V_s )
 * and for every block pair (i, j) that the mask does not wipe out:
 *     S   = Q_i K_j^T / sqrt(D),   P = exp(S - L_i)   (0 where masked)
 *     dV_j += P^T dO_i
 *     dP   = dO_i V_j^T
 *     dS   = P * (dP - D_i)
 *     dQ_i += dS K_j / sqrt(D),    dK_j += dS^T Q_i / sqrt(D)
 * The 1/sqrt(D) is folded into dS once. Every gradient update is += into the inputs' gradients,
 * so q, k and v may be one tensor (their gradient pointers then coincide). */

/* P from the scores s in place, and dS = P * (dP - D_t) / sqrt(D) in place over dP. */
static void block_probs(const Block *blk, float *s, const float *lse)
{
    int width = blk->j1 - blk->j0;
    for (int t = blk->i0; t < blk->i1; t++) {
        float *row = s + (t - blk->i0) * BC, L = lse[t];
        int n = valid(blk, t);
        #pragma omp simd
        for (int j = 0; j < n; j++)
            row[j] = vexp_nonpos(row[j] - L);
        for (int j = n < 0 ? 0 : n; j < width; j++)
            row[j] = 0.0f;
    }
}

static void block_ds(const Block *blk, const float *p, float *dp, const float *delta, float scale)
{
    int width = blk->j1 - blk->j0;
    for (int t = blk->i0; t < blk->i1; t++) {
        const float *prow = p + (t - blk->i0) * BC;
        float *row = dp + (t - blk->i0) * BC, dt = delta[t];
        #pragma omp simd
        for (int j = 0; j < width; j++)
            row[j] = scale * prow[j] * (row[j] - dt);
    }
}

static void backward_block(const Heads *a, long off, const Block *blk, const float *dout,
                           int ldo, const float *lse, const float *delta, float *p, float *ds)
{
    int rows = blk->i1 - blk->i0, width = blk->j1 - blk->j0, D = a->D, ld = a->ld;
    long qi = off + (long)blk->i0 * ld, kj = off + (long)blk->j0 * ld;
    const float *dout_i = dout + (long)blk->i0 * ldo;
    block_scores(a, off, blk, p);
    block_probs(blk, p, lse);
    if (a->dv)
        par_sgemm_serial(true, false, width, D, rows, 1.0f, p, BC, dout_i, ldo, 1.0f,
                         a->dv + kj, ld);
    if (!a->dq && !a->dk)
        return;
    par_sgemm_serial(false, true, rows, width, D, 1.0f, dout_i, ldo, a->v + kj, ld, 0.0f, ds, BC);
    block_ds(blk, p, ds, delta, a->scale);
    if (a->dq)
        par_sgemm_serial(false, false, rows, D, width, 1.0f, ds, BC, a->k + kj, ld, 1.0f,
                         a->dq + qi, ld);
    if (a->dk)
        par_sgemm_serial(true, false, width, D, rows, 1.0f, ds, BC, a->q + qi, ld, 1.0f,
                         a->dk + kj, ld);
}

/* One (b, h) pair: o and dout are the head's output and its gradient (row stride ldo); scratch
 * holds two BR x BC tiles (P and dS) and T values of D_t. */
static void head_backward(const Heads *a, int b, int h, const float *o, const float *dout,
                          const float *lse, float *scratch)
{
    int T = a->T, D = a->D, ldo = a->H * D;
    long off = head_in(a, b, h);
    float *p = scratch, *ds = p + BR * BC, *delta = ds + BR * BC;
    for (int t = 0; t < T; t++) {
        const float *orow = o + (long)t * ldo, *drow = dout + (long)t * ldo;
        delta[t] = red_dot(orow, drow, D);
    }
    for (int i0 = 0; i0 < T; i0 += BR)
        for (int j0 = 0; j0 < imin(i0 + BR, T); j0 += BC) {
            Block blk = block_of(i0, j0, T);
            backward_block(a, off, &blk, dout, ldo, lse, delta, p, ds);
        }
}

/* ---- FLOPs ----------------------------------------------------------------------------------
 * Counted as ops_attention.c counts them, so both kernels give the model the same matmul count:
 * each product as the dense T x T product, 2 T^2 D. The backward's S = Q K^T is a forward
 * product run again: recompute. Elementwise (other), per (b, h) pair, with E = T (T + 1) / 2
 * unmasked scores, R the (query row, key block) pairs the kernel visits and W the entries of
 * the tiles it computes:
 *     forward    5E (scale, max, subtract, exp, sum) + R (D + 4) (rescale m, l, o)
 *                + T (D + 3) (1/l, O = o / l, L = m + log l)
 *     backward   2TD (the D_t) + 3W (dS, when dQ or dK is wanted)
 *     recompute  3E (P = exp(scale S - L))
 * Run, as the kernel walks the blocks, for R and W. */
static void visited(int T, int64_t *R, int64_t *W)
{
    *R = *W = 0;
    for (int i0 = 0; i0 < T; i0 += BR) {
        int rows = imin(i0 + BR, T) - i0;
        for (int j0 = 0; j0 < i0 + rows; j0 += BC) {
            Block blk = block_of(i0, j0, T);
            *R += rows;
            *W += (int64_t)rows * (blk.j1 - blk.j0);
        }
    }
}

static void count_forward(Tape *tape, const Heads *a)
{
    int64_t pairs = (int64_t)a->B * a->H, T = a->T, D = a->D, E = T * (T + 1) / 2, R, W;
    visited(a->T, &R, &W);
    tape_count(tape, pairs * 2 * 2 * T * T * D,
               pairs * (5 * E + R * (D + 4) + T * (D + 3)));
}

static void count_backward(Node *n, const Heads *a)
{
    int64_t pairs = (int64_t)a->B * a->H, T = a->T, D = a->D, E = T * (T + 1) / 2, R, W;
    visited(a->T, &R, &W);
    bool ds = a->dq || a->dk;
    int products = ds + (a->dq != NULL) + (a->dk != NULL) + (a->dv != NULL);
    node_count(n, pairs * products * 2 * T * T * D, pairs * (2 * T * D + 3 * W * ds));
    node_count_recompute(n, pairs * 2 * T * T * D, pairs * 3 * E);
}

/* ---- the heads in parallel --------------------------------------------------------------------
 * One (b, h) pair per iteration, static schedule; a pair's arithmetic does not depend on the
 * thread that runs it, so results are bit-identical for any thread count. Scratch is one slice
 * per thread, in the temp category, allocated before and freed after the parallel loop (the
 * allocator is not thread-safe). */
static float *thread_scratch(long per_thread)
{
    return mem_alloc(MEM_TEMP, (size_t)omp_get_max_threads() * per_thread * sizeof(float));
}

/* Whether the heads are worth the other threads, by their products' multiply-adds
 * (parallel.h); backward also recomputes the scores. */
static bool heads_worth_threads(const Heads *a, int products)
{
    return par_worth_madds((double)a->B * a->H * products * a->T * a->T * a->D);
}

static void tiled_forward(const Heads *a, float *out, float *lse)
{
    long per_thread = (long)BR * BC + 2 * BR;
    float *scratch = thread_scratch(per_thread);
    #pragma omp parallel for schedule(static) if (heads_worth_threads(a, 2))
    for (int bh = 0; bh < a->B * a->H; bh++) {
        int b = bh / a->H, h = bh % a->H;
        head_forward(a, b, h, out + head_out(a, b, h), lse ? lse + (long)bh * a->T : NULL,
                     scratch + omp_get_thread_num() * per_thread);
    }
    mem_free(scratch);
}

static void tiled_backward(const Heads *a, const float *out, const float *dout, const float *lse)
{
    long per_thread = 2L * BR * BC + a->T;
    float *scratch = thread_scratch(per_thread);
    #pragma omp parallel for schedule(static) if (heads_worth_threads(a, 5))
    for (int bh = 0; bh < a->B * a->H; bh++) {
        int b = bh / a->H, h = bh % a->H;
        long o = head_out(a, b, h);
        head_backward(a, b, h, out + o, dout + o, lse + (long)bh * a->T,
                      scratch + omp_get_thread_num() * per_thread);
    }
    mem_free(scratch);
}

/* ---- the two public forms ---------------------------------------------------------------------
 * x is [B, T, width * C]: width 1 for q, k, v alone, 3 for the fused projection; C = H * D. */
static Heads heads_for(const char *op, const Tensor *x, int n_head, int width)
{
    bool fits = x->ndim == 3 && n_head >= 1 && x->shape[2] % (width * n_head) == 0;
    if (!fits) {
        char xs[64];
        tensor_fatal("%s: %s does not split into %d heads%s", op,
                     tensor_shape_str(x, xs, sizeof xs), n_head,
                     width == 3 ? " of a [q | k | v] projection" : "");
    }
    int D = x->shape[2] / (width * n_head);
    return (Heads){ .B = x->shape[0], .T = x->shape[1], .H = n_head, .D = D, .ld = x->shape[2],
                    .scale = 1.0f / sqrtf((float)D) };
}

/* The forward and the node. The node keeps L (a tape buffer in the act category, freed with
 * the tape); O is the node's output, which the tape keeps anyway. */
typedef struct {
    int heads;
    const float *lse;   /* L: [B, H, T] */
} TiledState;

static Tensor *tiled_run(Tape *tape, const char *op, NodeBackward backward, const Heads *a,
                         int n_in, Tensor *const *in)
{
    Tensor *out = tape_tensor(tape, 3, (int[]){ a->B, a->T, a->H * a->D });
    float *lse = NULL;
    if (tape_wants_grad(tape, n_in, in))
        lse = tape_buffer(tape, MEM_ACT, (size_t)a->B * a->H * a->T * sizeof(float));
    tiled_forward(a, out->data, lse);
    count_forward(tape, a);
    Node *n = tape_record(tape, op, backward, out, n_in, in);
    if (n) {
        TiledState *s = node_state(n, sizeof *s);
        s->heads = a->H;
        s->lse = lse;
        n->backward_reads_out = true;
    }
    return out;
}

static float *grad_if_wanted(Tensor *t) { return t->requires_grad ? tensor_grad(t) : NULL; }

static void op_attention_tiled_backward(Node *n)
{
    const TiledState *s = node_state(n, sizeof *s);
    Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    Heads a = heads_for("op_attention_tiled", q, s->heads, 1);
    a.q = q->data, a.k = k->data, a.v = v->data;
    a.dq = grad_if_wanted(q), a.dk = grad_if_wanted(k), a.dv = grad_if_wanted(v);
    count_backward(n, &a);
    tiled_backward(&a, n->out->data, n->out->grad, s->lse);
}

Tensor *op_attention_tiled(Tape *tape, Tensor *q, Tensor *k, Tensor *v, int n_head)
{
    tape_use(tape, 3, (Tensor *[]){ q, k, v });
    Heads a = heads_for("op_attention_tiled", q, n_head, 1);
    if (!tensor_same_shape(q, k) || !tensor_same_shape(q, v)) {
        char qs[64], ks[64], vs[64];
        tensor_fatal("op_attention_tiled: q %s, k %s and v %s differ",
                     tensor_shape_str(q, qs, sizeof qs), tensor_shape_str(k, ks, sizeof ks),
                     tensor_shape_str(v, vs, sizeof vs));
    }
    a.q = q->data, a.k = k->data, a.v = v->data;
    return tiled_run(tape, "attention_tiled", op_attention_tiled_backward, &a, 3,
                     (Tensor *[]){ q, k, v });
}

/* In the fused layout q, k and v of a row start C floats apart, as do their gradients. */
static void fused_pointers(Heads *a, const float *x, float *grad)
{
    long C = (long)a->H * a->D;
    a->q = x, a->k = x + C, a->v = x + 2 * C;
    if (grad)
        a->dq = grad, a->dk = grad + C, a->dv = grad + 2 * C;
}

static void op_attention_qkv_tiled_backward(Node *n)
{
    const TiledState *s = node_state(n, sizeof *s);
    Tensor *qkv = n->in[0];
    Heads a = heads_for("op_attention_qkv_tiled", qkv, s->heads, 3);
    fused_pointers(&a, qkv->data, tensor_grad(qkv));
    count_backward(n, &a);
    tiled_backward(&a, n->out->data, n->out->grad, s->lse);
}

Tensor *op_attention_qkv_tiled(Tape *tape, Tensor *qkv, int n_head)
{
    tape_use(tape, 1, (Tensor *[]){ qkv });
    Heads a = heads_for("op_attention_qkv_tiled", qkv, n_head, 3);
    fused_pointers(&a, qkv->data, NULL);
    return tiled_run(tape, "attention_qkv_tiled", op_attention_qkv_tiled_backward, &a, 1,
                     (Tensor *[]){ qkv });
}

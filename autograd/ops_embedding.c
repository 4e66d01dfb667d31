/* The two ends of a language model: the token embedding lookup and the cross-entropy loss.
 * Both take integer token ids, which are not tensors: the op copies them into a buffer the tape
 * owns (category act), so the caller's array may change before backward runs. */
#include <math.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/reduce.h"
#include "autograd/vexp.h"

/* The embedding backward adds many positions into the same table row. Columns are split into
 * blocks of COL_BLOCK, each owned by one thread that walks the positions in order, so every
 * element's sum runs in position order whatever the thread count: bit-identical results, no
 * atomics. 16 floats are one cache line, so two threads never write the same line either. */
enum { COL_BLOCK = 16 };

static void check_embedding(const Tensor *table, const int *ids, int B, int T)
{
    if (table->ndim != 2) {
        char ts[64];
        tensor_fatal("op_embedding: the table must be [V, C], got %s",
                     tensor_shape_str(table, ts, sizeof ts));
    }
    if (B < 1 || T < 1 || !ids)
        tensor_fatal("op_embedding: %d x %d ids%s (need B, T >= 1 and an id array)", B, T,
                     ids ? "" : " at NULL");
    int V = table->shape[0];
    for (size_t p = 0; p < (size_t)B * T; p++)
        if (ids[p] < 0 || ids[p] >= V)
            tensor_fatal("op_embedding: id %d at position %zu (b %zu, t %zu) is outside [0, %d)",
                         ids[p], p, p / (size_t)T, p % (size_t)T, V);
}

/* out[p, :] = table[ids[p], :] for every position p = b T + t.
 * Backward: dtable[v, :] += sum over positions p with ids[p] = v of dy[p, :].
 * A token that appears twice gets both rows of dy; a token that never appears gets nothing.
 * FLOPs (other): forward 0 (a copy), backward B T C (the sums, one add per term). */
typedef struct {
    const int *ids;     /* [B T], the tape's copy */
} EmbeddingState;

static void op_embedding_backward(Node *n)
{
    const EmbeddingState *s = node_state(n, sizeof *s);
    const int *ids = s->ids;
    const float *dy = n->out->grad;
    float *dtable = tensor_grad(n->in[0]);
    size_t positions = (size_t)n->out->shape[0] * n->out->shape[1];
    int C = n->in[0]->shape[1], blocks = (C + COL_BLOCK - 1) / COL_BLOCK;
    node_count(n, 0, (int64_t)positions * C);
    #pragma omp parallel for schedule(static) if (blocks > 1 && par_worth((double)positions * C))
    for (int b = 0; b < blocks; b++) {
        int j0 = b * COL_BLOCK, w = C - j0 < COL_BLOCK ? C - j0 : COL_BLOCK;
        for (size_t p = 0; p < positions; p++) {
            float *dst = dtable + (size_t)ids[p] * C + j0;
            const float *src = dy + p * C + j0;
            #pragma omp simd
            for (int j = 0; j < w; j++)
                dst[j] += src[j];
        }
    }
}

Tensor *op_embedding(Tape *tape, Tensor *table, const int *ids, int B, int T)
{
    tape_use(tape, 1, (Tensor *[]){ table });
    check_embedding(table, ids, B, T);
    int C = table->shape[1];
    size_t positions = (size_t)B * T;
    Tensor *out = tape_tensor(tape, 3, (int[]){ B, T, C });
    #pragma omp parallel for schedule(static) if (par_worth((double)positions * C))
    for (size_t p = 0; p < positions; p++)
        memcpy(out->data + p * C, table->data + (size_t)ids[p] * C, (size_t)C * sizeof(float));
    Node *n = tape_record(tape, "embedding", op_embedding_backward, out, 1, (Tensor *[]){ table });
    if (n) {
        int *saved = tape_buffer(tape, MEM_ACT, positions * sizeof(int));
        memcpy(saved, ids, positions * sizeof(int));
        EmbeddingState *s = node_state(n, sizeof *s);
        s->ids = saved;
        n->backward_ignores_inputs = true;      /* it scatters dy; the table is not read */
    }
    return out;
}

/* What cross-entropy keeps for backward (category act): rows * (4 + 4) bytes, rather than the
 * rows * V probabilities, which for a real vocabulary are the largest activation of the model.
 * The record itself is a tape buffer too (act, the 24 bytes plan/memcalc.c counts);
 * the node's state points to it. */
typedef struct {
    size_t count;       /* rows whose target is >= 0 */
    float *lse;         /* [rows] log sum_j exp(x_j) per counted row */
    int   *targets;     /* [rows] copy of the caller's targets */
} CrossEntropySaved;

typedef struct {
    const CrossEntropySaved *saved;
} CrossEntropyState;

/* log sum_j exp(x_j) of one row, computed as m + log sum_j exp(x_j - m) with m = max_j x_j so
 * that no exponent is positive: logits of 1000 and 0 give 1000, not log(inf). */
static float row_logsumexp(const float *x, int V)
{
    float m = x[0];
    #pragma omp simd reduction(max:m)
    for (int j = 1; j < V; j++)
        m = x[j] > m ? x[j] : m;
    return m + logf(red_sum_exp(x, m, V));
}

static void check_targets(const Tensor *logits, const int *targets)
{
    if (!targets)
        tensor_fatal("op_cross_entropy: targets is NULL");
    size_t rows = tensor_rows(logits);
    int V = tensor_last_dim(logits);
    for (size_t r = 0; r < rows; r++)
        if (targets[r] >= V) {
            char ls[64];
            tensor_fatal("op_cross_entropy: target %d at row %zu is outside [0, %d) for logits %s "
                         "(negative targets mean: ignore this row)",
                         targets[r], r, V, tensor_shape_str(logits, ls, sizeof ls));
        }
}

/* Row r with target t (t >= 0):  loss_r = lse_r - x_{r,t},   lse_r = log sum_j exp(x_{r,j}),
 * i.e. -log softmax(x_r)_t.  L = (1/N) sum over counted rows of loss_r, N = their number;
 * rows with a negative target are skipped entirely, and L = 0 when N = 0.
 * Backward:  dx_{r,j} += dL (softmax(x_r)_j - [j = t]) / N  for counted rows, nothing otherwise.
 * softmax(x_r)_j = exp(x_{r,j} - lse_r) is recomputed from the saved lse: one more exp per
 * logit, in exchange for not keeping a [rows, V] tensor.
 * FLOPs (other) per counted row: forward 4V + 4 (max, subtract, exp, sum; log, + m, - x_t, the
 * sum of the losses), backward 3V + 1; and one division by N each way. */
static void op_cross_entropy_backward(Node *n)
{
    const CrossEntropyState *state = node_state(n, sizeof *state);
    const CrossEntropySaved *s = state->saved;
    const Tensor *x = n->in[0];
    float *dx = tensor_grad(n->in[0]);
    if (s->count == 0)
        return;
    float scale = n->out->grad[0] / (float)s->count;
    size_t rows = tensor_rows(x);
    int V = tensor_last_dim(x);
    node_count(n, 0, (int64_t)s->count * (3 * V + 1) + 1);
    /* BEGIN SOLUTION cross_entropy_backward */
    #pragma omp parallel for schedule(static) if (par_worth((double)rows * (3 * V + 1)))
    for (size_t r = 0; r < rows; r++) {
        int t = s->targets[r];
        if (t < 0)
            continue;
        const float *xr = x->data + r * V;
        float *dxr = dx + r * V, lse = s->lse[r];
        #pragma omp simd
        for (int j = 0; j < V; j++)
            dxr[j] += scale * vexp_nonpos(xr[j] - lse);
        dxr[t] -= scale;
    }
    /* STUDENT
    (void)x, (void)dx, (void)scale, (void)rows;
    */
    /* END SOLUTION cross_entropy_backward */
}

Tensor *op_cross_entropy(Tape *tape, Tensor *logits, const int *targets)
{
    tape_use(tape, 1, (Tensor *[]){ logits });
    check_targets(logits, targets);
    size_t rows = tensor_rows(logits);
    int V = tensor_last_dim(logits);
    bool save = tape_wants_grad(tape, 1, &logits);
    /* The per-row lse is needed for the value either way; it outlives the op only if saved. */
    float *lse = save ? tape_buffer(tape, MEM_ACT, rows * sizeof(float))
                      : mem_alloc(MEM_TEMP, rows * sizeof(float));
    #pragma omp parallel for schedule(static) if (par_worth((double)rows * (4 * V + 4)))
    for (size_t r = 0; r < rows; r++)
        lse[r] = targets[r] < 0 ? 0.0f : row_logsumexp(logits->data + r * V, V);

    /* The mean, summed in row order in double: the same bits for any thread count, and no
     * fp32 drift however many rows there are. */
    double total = 0.0;
    size_t count = 0;
    for (size_t r = 0; r < rows; r++) {
        if (targets[r] < 0)
            continue;
        total += (double)lse[r] - logits->data[r * V + targets[r]];
        count++;
    }
    Tensor *loss = tape_tensor(tape, 1, (int[]){ 1 });
    loss->data[0] = count ? (float)(total / (double)count) : 0.0f;
    tape_count(tape, 0, (int64_t)count * (4 * V + 4) + (count > 0));

    Node *n = tape_record(tape, "cross_entropy", op_cross_entropy_backward, loss, 1, &logits);
    if (n) {
        CrossEntropySaved *s = tape_buffer(tape, MEM_ACT, sizeof *s);
        s->count = count;
        s->lse = lse;
        s->targets = tape_buffer(tape, MEM_ACT, rows * sizeof(int));
        memcpy(s->targets, targets, rows * sizeof(int));
        CrossEntropyState *state = node_state(n, sizeof *state);
        state->saved = s;
    }
    if (!save)
        mem_free(lse);
    return loss;
}

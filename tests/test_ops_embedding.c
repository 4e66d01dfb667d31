/* Embedding lookup and cross-entropy: exact rows and scatter sums, references computed here in
 * double, ignored rows, huge logits, finite-difference gradients with repeated ids and a tied
 * table, and ids or targets out of range. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"

typedef struct {
    const int *ids;
    int        B, T;
} Ids;

static Tensor *f_embedding(Tape *t, Tensor *const *in, void *c)
{
    const Ids *ids = c;
    return op_embedding(t, in[0], ids->ids, ids->B, ids->T);
}

static Tensor *f_cross_entropy(Tape *t, Tensor *const *in, void *c)
{
    return op_cross_entropy(t, in[0], c);
}

/* A tiny tied language model: the table embeds the ids and, transposed, maps the embeddings
 * back to logits, so the table gets gradient from both ends. Targets are the next ids. */
typedef struct {
    Ids        in;
    const int *targets;
} TiedLm;

static Tensor *f_tied_lm(Tape *t, Tensor *const *in, void *c)
{
    const TiedLm *lm = c;
    Tensor *h = op_embedding(t, in[0], lm->in.ids, lm->in.B, lm->in.T);
    return op_cross_entropy(t, op_matmul(t, h, in[0], true), lm->targets);
}

/* Embedding is a copy, so its backward is a sum of dy rows: exact up to fp32 additions. The
 * measured error is ~2e-7; atol 1e-4 flags any missing, doubled or misplaced contribution. */
static GradcheckOptions embedding_tolerance(void)
{
    GradcheckOptions o = gradcheck_defaults();
    o.atol = 1e-4;
    o.rtol = 1e-3;
    return o;
}

/* Cross-entropy gradients are (softmax - onehot) / N: with N = 5 counted rows they are ~0.01
 * to 0.2, so the default atol of 1e-3 would check the small ones to 10% only. Measured worst
 * errors with scale-1 logits: 5e-6 at h = 1e-1, 2e-6 at 1e-2, 2e-5 at 1e-3 (fp32 rounding of
 * the loss). h = 1e-2 with atol 2e-5 keeps a 10x margin. */
static GradcheckOptions cross_entropy_tolerance(void)
{
    GradcheckOptions o = gradcheck_defaults();
    o.atol = 2e-5;
    o.rtol = 1e-3;
    return o;
}

static void test_embedding_values(void **state)
{
    (void)state;
    Rng rng = rng_new(21, 1);
    Tensor *table = test_leaf(&rng, 1.0f, 2, (int[]){ 7, 5 });
    const int ids[] = { 3, 0, 3, 6, 1, 3 };
    Tape *tape = tape_new();
    Tensor *y = op_embedding(tape, table, ids, 2, 3);
    assert_int_equal(y->ndim, 3);
    assert_int_equal(y->shape[0], 2);
    assert_int_equal(y->shape[1], 3);
    assert_int_equal(y->shape[2], 5);
    for (int p = 0; p < 6; p++)
        assert_memory_equal(y->data + p * 5, table->data + ids[p] * 5, 5 * sizeof(float));
    tape_free(tape);
    tensor_free(table);
}

/* Backward with a known seed: row 3 appears three times and must receive the three dy rows,
 * summed in position order (so exactly equal in fp32); rows never used stay zero. The ids are
 * overwritten between forward and backward: the op must have kept its own copy. */
static void test_embedding_scatter_sums(void **state)
{
    (void)state;
    Rng rng = rng_new(22, 1);
    Tensor *table = test_leaf(&rng, 1.0f, 2, (int[]){ 7, 5 });
    int ids[] = { 3, 0, 3, 6, 1, 3 };
    Tape *tape = tape_new();
    Tensor *y = op_embedding(tape, table, ids, 2, 3);
    float seed[30];
    for (int i = 0; i < 30; i++)
        seed[i] = rng_normal(&rng);
    for (int p = 0; p < 6; p++)
        ids[p] = 2;
    tape_backward_seeded(tape, y, seed);
    const float *g = table->grad;
    for (int j = 0; j < 5; j++) {
        assert_true(g[3 * 5 + j] == (seed[0 * 5 + j] + seed[2 * 5 + j]) + seed[5 * 5 + j]);
        assert_true(g[0 * 5 + j] == seed[1 * 5 + j]);
        assert_true(g[6 * 5 + j] == seed[3 * 5 + j]);
        assert_true(g[1 * 5 + j] == seed[4 * 5 + j]);
        assert_true(g[2 * 5 + j] == 0.0f && g[4 * 5 + j] == 0.0f && g[5 * 5 + j] == 0.0f);
    }
    tape_free(tape);
    tensor_free(table);
}

static void test_embedding_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(23, 1);
    Tensor *table = test_leaf(&rng, 1.0f, 2, (int[]){ 7, 5 });
    Ids ids = { (const int[]){ 3, 0, 3, 6, 1, 3 }, 2, 3 };
    test_gradcheck("embedding repeated ids", f_embedding, (Tensor *[]){ table }, 1, &ids,
                   embedding_tolerance());
    /* 37 columns: more than one block of the scatter loop, the last one partial. */
    Tensor *wide = test_leaf(&rng, 1.0f, 2, (int[]){ 4, 37 });
    Ids few = { (const int[]){ 1, 1, 0, 3, 1, 0 }, 3, 2 };
    test_gradcheck("embedding [4,37]", f_embedding, (Tensor *[]){ wide }, 1, &few,
                   embedding_tolerance());
    tensor_free(table);
    tensor_free(wide);
}

static void embedding_grad_with_threads(int threads, float *out)
{
    par_set_threads(threads);
    Rng rng = rng_new(24, 1);
    Tensor *table = test_leaf(&rng, 1.0f, 2, (int[]){ 50, 70 });
    int ids[400];
    for (int p = 0; p < 400; p++)
        ids[p] = (int)rng_below(&rng, 50);
    Tape *tape = tape_new();
    Tensor *y = op_embedding(tape, table, ids, 8, 50);
    float *seed = malloc(y->size * sizeof *seed);
    for (size_t i = 0; i < y->size; i++)
        seed[i] = rng_normal(&rng);
    tape_backward_seeded(tape, y, seed);
    memcpy(out, table->grad, table->size * sizeof *out);
    free(seed);
    tape_free(tape);
    tensor_free(table);
}

/* 400 positions over 50 ids: every row sums ~8 contributions, in the same order whatever the
 * thread count. */
static void test_embedding_same_bits_any_threads(void **state)
{
    (void)state;
    float *one = malloc(50 * 70 * sizeof *one), *three = malloc(50 * 70 * sizeof *three);
    embedding_grad_with_threads(1, one);
    embedding_grad_with_threads(3, three);
    par_set_threads(2);
    assert_memory_equal(one, three, 50 * 70 * sizeof *one);
    free(one);
    free(three);
}

/* The abort cases run in a forked child (test_aborts) without the parent's OpenMP threads: a
 * parallel loop there would hang instead of failing, so the child uses one thread. */
static Tape *child_tape(void)
{
    par_set_threads(1);
    return tape_new();
}

static void embedding_with_id(void *arg)
{
    int ids[] = { 0, 1, *(const int *)arg, 2 };
    Tensor *table = tensor_new2(MEM_TEMP, 4, 3);
    tensor_fill(table, 0.0f);
    op_embedding(child_tape(), table, ids, 2, 2);
}

static void embedding_table_3d(void *arg)
{
    (void)arg;
    op_embedding(child_tape(), tensor_new3(MEM_TEMP, 2, 4, 3), (const int[]){ 0, 1 }, 1, 2);
}

static void test_embedding_bad_input_aborts(void **state)
{
    (void)state;
    int id;
    id = 3;
    assert_false(test_aborts(embedding_with_id, &id));  /* the last valid id: no abort */
    id = 4;
    assert_true(test_aborts(embedding_with_id, &id));
    id = -1;
    assert_true(test_aborts(embedding_with_id, &id));
    assert_true(test_aborts(embedding_table_3d, NULL));
}

/* Mean of -log softmax(x_r)[t_r] over rows with t_r >= 0, in double. */
static double cross_entropy_reference(const Tensor *x, const int *targets)
{
    size_t rows = tensor_rows(x);
    int V = tensor_last_dim(x);
    double total = 0.0;
    int count = 0;
    for (size_t r = 0; r < rows; r++) {
        if (targets[r] < 0)
            continue;
        double z = 0.0;
        for (int j = 0; j < V; j++)
            z += exp((double)x->data[r * V + j]);
        total += -log(exp((double)x->data[r * V + targets[r]]) / z);
        count++;
    }
    return total / count;
}

static void test_cross_entropy_values(void **state)
{
    (void)state;
    Rng rng = rng_new(25, 1);
    Tensor *x = test_leaf(&rng, 2.0f, 3, (int[]){ 2, 3, 5 });
    const int targets[] = { 1, -1, 4, 0, 2, 2 };
    double want = cross_entropy_reference(x, targets);
    /* The ignored row may hold anything, even NaN: it must not reach the value or gradient. */
    for (int j = 0; j < 5; j++)
        x->data[1 * 5 + j] = NAN;
    Tape *tape = tape_new();
    Tensor *loss = op_cross_entropy(tape, x, targets);
    printf("cross-entropy %.9g, reference %.9g\n", loss->data[0], want);
    assert_int_equal(loss->size, 1);
    assert_true(fabs(loss->data[0] - want) < 1e-6 * want);
    tape_backward(tape, loss);
    for (int r = 0; r < 6; r++) {
        double row_sum = 0.0;
        for (int j = 0; j < 5; j++)
            row_sum += x->grad[r * 5 + j];
        if (r == 1)
            for (int j = 0; j < 5; j++)
                assert_true(x->grad[r * 5 + j] == 0.0f);
        assert_true(fabs(row_sum) < 1e-7);     /* softmax sums to 1, the one-hot to 1 */
    }
    tape_free(tape);
    tensor_free(x);
}

/* 1000 against 0 would overflow exp(1000) without the max subtraction. Row 0 predicts its
 * target with certainty (loss 0), row 1 misses by 1000 (loss 1000): the mean is 500, and the
 * gradient (softmax - onehot) / 2 is exactly representable. */
static void test_cross_entropy_large_logits(void **state)
{
    (void)state;
    Tensor *x = tensor_new2(MEM_TEMP, 2, 2);
    memcpy(x->data, (const float[]){ 1000.0f, 0.0f, 0.0f, 1000.0f }, 4 * sizeof(float));
    x->requires_grad = true;
    Tape *tape = tape_new();
    Tensor *loss = op_cross_entropy(tape, x, (const int[]){ 0, 0 });
    assert_true(loss->data[0] == 500.0f);
    tape_backward(tape, loss);
    const float want[] = { 0.0f, 0.0f, -0.5f, 0.5f };
    for (int i = 0; i < 4; i++)
        assert_true(x->grad[i] == want[i]);
    tape_free(tape);
    tensor_free(x);
}

static void test_cross_entropy_no_counted_rows(void **state)
{
    (void)state;
    Rng rng = rng_new(26, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 2, (int[]){ 3, 4 });
    Tape *tape = tape_new();
    Tensor *loss = op_cross_entropy(tape, x, (const int[]){ -1, -1, -100 });
    assert_true(loss->data[0] == 0.0f);
    tape_backward(tape, loss);
    for (size_t i = 0; i < x->size; i++)
        assert_true(x->grad == NULL || x->grad[i] == 0.0f);
    tape_free(tape);
    tensor_free(x);
}

static void test_cross_entropy_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(27, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 3, 5 });
    const int targets[] = { 1, -1, 4, 0, 2, 2 };
    test_gradcheck("cross_entropy [2,3,5]", f_cross_entropy, (Tensor *[]){ x }, 1,
                   (void *)targets, cross_entropy_tolerance());
    /* A 1-D logit vector is one row. */
    Tensor *v = test_leaf(&rng, 1.0f, 1, (int[]){ 6 });
    test_gradcheck("cross_entropy [6]", f_cross_entropy, (Tensor *[]){ v }, 1,
                   (void *)(const int[]){ 5 }, cross_entropy_tolerance());
    tensor_free(x);
    tensor_free(v);
}

/* The table is used twice (lookup and output projection), the ids repeat, one target is
 * ignored: every path must add its share. */
static void test_tied_embedding_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(28, 1);
    Tensor *table = test_leaf(&rng, 0.5f, 2, (int[]){ 7, 5 });
    TiedLm lm = { { (const int[]){ 3, 0, 3, 6, 1, 3 }, 2, 3 }, (const int[]){ 0, 3, 6, 1, 3, -1 } };
    test_gradcheck("tied embedding + CE", f_tied_lm, (Tensor *[]){ table }, 1, &lm,
                   cross_entropy_tolerance());
    tensor_free(table);
}

/* Backward recomputes the softmax from one saved log-sum-exp per row: the activations it keeps
 * grow with the rows, not with rows x vocabulary. */
static void test_cross_entropy_saves_per_row(void **state)
{
    (void)state;
    Rng rng = rng_new(29, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 2, (int[]){ 64, 1000 });
    int targets[64];
    for (int r = 0; r < 64; r++)
        targets[r] = r * 7;
    size_t before = mem_current(MEM_ACT);
    Tape *tape = tape_new();
    op_cross_entropy(tape, x, targets);
    size_t kept = mem_current(MEM_ACT) - before;
    printf("cross-entropy keeps %zu bytes for 64 rows of 1000 logits\n", kept);
    assert_true(kept <= 64 * 16 + 256);
    tape_free(tape);
    assert_int_equal(mem_current(MEM_ACT), before);
    tensor_free(x);
}

static void cross_entropy_with_target(void *arg)
{
    Tensor *x = tensor_new2(MEM_TEMP, 2, 4);
    tensor_fill(x, 0.0f);
    op_cross_entropy(child_tape(), x, (const int[]){ 1, *(const int *)arg });
}

static void test_cross_entropy_bad_target_aborts(void **state)
{
    (void)state;
    int t = 3;
    assert_false(test_aborts(cross_entropy_with_target, &t));
    t = 4;
    assert_true(test_aborts(cross_entropy_with_target, &t));
}

int main(void)
{
    par_set_split_always(true);    /* the small cases still take the threaded paths */
    par_set_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding_values),
        cmocka_unit_test(test_embedding_scatter_sums),
        cmocka_unit_test(test_embedding_grad),
        cmocka_unit_test(test_embedding_same_bits_any_threads),
        cmocka_unit_test(test_embedding_bad_input_aborts),
        cmocka_unit_test(test_cross_entropy_values),
        cmocka_unit_test(test_cross_entropy_large_logits),
        cmocka_unit_test(test_cross_entropy_no_counted_rows),
        cmocka_unit_test(test_cross_entropy_grad),
        cmocka_unit_test(test_tied_embedding_grad),
        cmocka_unit_test(test_cross_entropy_saves_per_row),
        cmocka_unit_test(test_cross_entropy_bad_target_aborts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Causal self-attention: the fused ops against finite differences, against the same attention
 * built from its parts, against each other (bit for bit), and the causal mask as an exact
 * property. Shapes are non-square and T crosses the kernel's 32-row blocks unevenly. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"

/* Gradcheck tolerances. h = 1e-2 on O(1) inputs: the central difference's truncation error is
 * h^2/6 |f'''| ~ 2e-5 |f'''|, and fp32 rounding of the forward, summed into L and divided by
 * 2h, adds ~1e-5; the worst errors measured are below 1e-4 (printed by each check). atol 5e-4
 * and rtol 1e-3 leave a 5x margin yet fail on any real mistake, which is O(|gradient|) ~ 0.1-1:
 * a missing mask, a dropped 1/sqrt(D), one lost contribution to a reused input. */
static GradcheckOptions tolerances(void)
{
    GradcheckOptions opt = gradcheck_defaults();
    opt.atol = 5e-4;
    opt.rtol = 1e-3;
    return opt;
}

typedef struct {
    int B, T, C, H;
} Shape;

static const Shape SMALL[] = { { 2, 5, 6, 2 }, { 1, 3, 4, 1 } };

static Tensor *f_attention(Tape *t, Tensor *const *in, void *c)
{
    return op_attention(t, in[0], in[1], in[2], *(int *)c);
}

static Tensor *f_self_attention(Tape *t, Tensor *const *in, void *c)
{
    return op_attention(t, in[0], in[0], in[0], *(int *)c);
}

static Tensor *f_attention_qkv(Tape *t, Tensor *const *in, void *c)
{
    return op_attention_qkv(t, in[0], *(int *)c);
}

static Tensor *f_causal_softmax(Tape *t, Tensor *const *in, void *c)
{
    return op_causal_softmax(t, in[0], *(float *)c);
}

static Tensor *f_split(Tape *t, Tensor *const *in, void *c)
{
    return op_split_heads(t, in[0], *(int *)c);
}

static Tensor *f_merge(Tape *t, Tensor *const *in, void *c) { (void)c; return op_merge_heads(t, in[0]); }

/* Attention from the parts: split, Q K^T, causal softmax with 1/sqrt(D), times V, merge. */
static Tensor *f_parts(Tape *t, Tensor *const *in, void *c)
{
    int H = *(int *)c, D = tensor_last_dim(in[0]) / H;
    Tensor *q = op_split_heads(t, in[0], H), *k = op_split_heads(t, in[1], H);
    Tensor *v = op_split_heads(t, in[2], H);
    Tensor *p = op_causal_softmax(t, op_bmm(t, q, k, true), 1.0f / sqrtf((float)D));
    return op_merge_heads(t, op_bmm(t, p, v, false));
}

static Tensor *btc(Rng *rng, Shape s, int width)
{
    return test_leaf(rng, 1.0f, 3, (int[]){ s.B, s.T, width * s.C });
}

static void free_all(Tensor **t, int n)
{
    for (int i = 0; i < n; i++)
        tensor_free(t[i]);
}

/* Runs fn on a fresh tape, backward seeded with N(0, 1) weights from `seed`; returns a copy of
 * the output (caller frees) and leaves the inputs' gradients in place. */
static float *run(GradcheckFn fn, Tensor *const *in, int n, void *ctx, uint64_t seed,
                  size_t *size)
{
    for (int i = 0; i < n; i++)
        tensor_zero_grad(in[i]);
    Tape *tape = tape_new();
    Tensor *y = fn(tape, in, ctx);
    float *out = malloc(y->size * sizeof *out), *r = malloc(y->size * sizeof *r);
    memcpy(out, y->data, y->size * sizeof *out);
    Rng rng = rng_new(seed, 3);
    for (size_t i = 0; i < y->size; i++)
        r[i] = rng_normal(&rng);
    tape_backward_seeded(tape, y, r);
    *size = y->size;
    free(r);
    tape_free(tape);
    return out;
}

/* ---- gradchecks ------------------------------------------------------------------------------ */

static void test_attention_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(11, 1);
    for (size_t i = 0; i < sizeof SMALL / sizeof SMALL[0]; i++) {
        Shape s = SMALL[i];
        Tensor *in[3] = { btc(&rng, s, 1), btc(&rng, s, 1), btc(&rng, s, 1) };
        test_gradcheck("attention q,k,v", f_attention, in, 3, &s.H, tolerances());
        free_all(in, 3);
    }
}

/* q, k and v the same tensor: its gradient must hold all three contributions. */
static void test_self_attention_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(12, 1);
    for (size_t i = 0; i < sizeof SMALL / sizeof SMALL[0]; i++) {
        Shape s = SMALL[i];
        Tensor *x = btc(&rng, s, 1);
        test_gradcheck("attention x,x,x", f_self_attention, (Tensor *[]){ x }, 1, &s.H,
                       tolerances());
        /* The same, exactly: the sum of the gradients of three distinct copies of x. */
        Tensor *c[3] = { btc(&rng, s, 1), btc(&rng, s, 1), btc(&rng, s, 1) };
        for (int j = 0; j < 3; j++)
            tensor_copy_data(c[j], x);
        size_t n;
        free(run(f_self_attention, (Tensor *[]){ x }, 1, &s.H, 5, &n));
        free(run(f_attention, c, 3, &s.H, 5, &n));
        float worst = 0.0f;
        for (size_t j = 0; j < x->size; j++)
            worst = fmaxf(worst, fabsf(x->grad[j] - (c[0]->grad[j] + c[1]->grad[j] +
                                                     c[2]->grad[j])));
        printf("x,x,x gradient vs dq + dk + dv of copies: max |diff| %.3g\n", worst);
        assert_true(worst < 1e-6f);
        free_all(c, 3);
        tensor_free(x);
    }
}

static void test_attention_qkv_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(13, 1);
    for (size_t i = 0; i < sizeof SMALL / sizeof SMALL[0]; i++) {
        Shape s = SMALL[i];
        Tensor *qkv = btc(&rng, s, 3);
        test_gradcheck("attention_qkv", f_attention_qkv, (Tensor *[]){ qkv }, 1, &s.H,
                       tolerances());
        tensor_free(qkv);
    }
}

static void test_causal_softmax_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(14, 1);
    float scale = 0.7f;
    Tensor *x3 = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 5, 5 });
    Tensor *x4 = test_leaf(&rng, 1.0f, 4, (int[]){ 2, 3, 4, 4 });
    test_gradcheck("causal_softmax [2,5,5]", f_causal_softmax, (Tensor *[]){ x3 }, 1, &scale,
                   tolerances());
    test_gradcheck("causal_softmax [2,3,4,4]", f_causal_softmax, (Tensor *[]){ x4 }, 1, &scale,
                   tolerances());
    tensor_free(x3);
    tensor_free(x4);
}

static void test_split_merge_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(15, 1);
    int H = 2;
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 5, 6 });
    Tensor *y = test_leaf(&rng, 1.0f, 4, (int[]){ 2, 3, 5, 2 });
    test_gradcheck("split_heads", f_split, (Tensor *[]){ x }, 1, &H, tolerances());
    test_gradcheck("merge_heads", f_merge, (Tensor *[]){ y }, 1, NULL, tolerances());
    tensor_free(x);
    tensor_free(y);
}

/* ---- values ---------------------------------------------------------------------------------- */

/* Against a softmax computed in double: masked entries exactly 0, rows summing to 1. */
static void test_causal_softmax_values(void **state)
{
    (void)state;
    Rng rng = rng_new(16, 1);
    const int T = 37;
    const float scale = 0.3f;
    Tensor *x = test_leaf(&rng, 4.0f, 3, (int[]){ 3, T, T });
    Tape *tape = tape_new();
    Tensor *y = op_causal_softmax(tape, x, scale);
    double worst = 0.0;
    for (int r = 0; r < 3 * T; r++) {
        int i = r % T;
        const float *xr = x->data + (long)r * T, *yr = y->data + (long)r * T;
        double m = -INFINITY, sum = 0.0, ysum = 0.0;
        for (int j = 0; j <= i; j++)
            m = fmax(m, (double)scale * xr[j]);
        for (int j = 0; j <= i; j++)
            sum += exp((double)scale * xr[j] - m);
        for (int j = 0; j <= i; j++) {
            double want = exp((double)scale * xr[j] - m) / sum;
            worst = fmax(worst, fabs(yr[j] - want) / want);
            ysum += yr[j];
        }
        for (int j = i + 1; j < T; j++)
            assert_true(yr[j] == 0.0f);
        assert_true(fabs(ysum - 1.0) < 1e-5);
    }
    printf("causal_softmax vs double: max relative error %.3g\n", worst);
    assert_true(worst < 1e-5);
    tape_free(tape);
    tensor_free(x);
}

static void test_split_merge_values(void **state)
{
    (void)state;
    Rng rng = rng_new(17, 1);
    const int B = 2, T = 5, H = 3, D = 4;
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ B, T, H * D });
    Tape *tape = tape_new();
    Tensor *y = op_split_heads(tape, x, H);
    assert_int_equal(y->ndim, 4);
    assert_int_equal(y->shape[1], H);
    assert_int_equal(y->shape[2], T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++)
                    assert_true(y->data[((b * H + h) * T + t) * D + d] ==
                                x->data[(b * T + t) * H * D + h * D + d]);
    Tensor *z = op_merge_heads(tape, y);
    assert_true(tensor_same_shape(z, x));
    assert_memory_equal(z->data, x->data, x->size * sizeof(float));
    tape_free(tape);
    tensor_free(x);
}

/* The fused op equals the composition of the parts, in values and in all three gradients. T = 70
 * spans three of the kernel's row blocks, the last one partial. */
static void test_attention_equals_parts(void **state)
{
    (void)state;
    const Shape shapes[] = { { 2, 5, 6, 2 }, { 1, 3, 4, 1 }, { 2, 70, 32, 4 } };
    Rng rng = rng_new(18, 1);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        Shape s = shapes[i];
        Tensor *in[3] = { btc(&rng, s, 1), btc(&rng, s, 1), btc(&rng, s, 1) };
        float *ref_grad[3];
        size_t n;
        float *ref = run(f_parts, in, 3, &s.H, 9, &n);
        for (int j = 0; j < 3; j++) {
            ref_grad[j] = malloc(in[j]->size * sizeof(float));
            memcpy(ref_grad[j], in[j]->grad, in[j]->size * sizeof(float));
        }
        float *got = run(f_attention, in, 3, &s.H, 9, &n);
        float worst_value = test_max_abs_diff(got, ref, n), worst_grad = 0.0f;
        for (int j = 0; j < 3; j++)
            worst_grad = fmaxf(worst_grad, test_max_abs_diff(in[j]->grad, ref_grad[j], in[j]->size));
        printf("attention vs parts B=%d T=%d C=%d H=%d: max |diff| value %.3g, gradient %.3g\n",
               s.B, s.T, s.C, s.H, worst_value, worst_grad);
        assert_true(worst_value < 1e-5f);
        assert_true(worst_grad < 1e-5f);
        for (int j = 0; j < 3; j++)
            free(ref_grad[j]);
        free(ref);
        free(got);
        free_all(in, 3);
    }
}

/* op_attention_qkv runs the same kernel with another row stride: bit-identical to op_attention
 * on copies of the three slices, output and gradients. */
static void test_qkv_matches_separate_exactly(void **state)
{
    (void)state;
    const Shape shapes[] = { { 2, 5, 6, 2 }, { 2, 70, 32, 4 } };
    Rng rng = rng_new(19, 1);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        Shape s = shapes[i];
        Tensor *qkv = btc(&rng, s, 3);
        Tensor *part[3] = { btc(&rng, s, 1), btc(&rng, s, 1), btc(&rng, s, 1) };
        for (int r = 0; r < s.B * s.T; r++)
            for (int j = 0; j < 3; j++)
                memcpy(part[j]->data + (long)r * s.C, qkv->data + (long)r * 3 * s.C + j * s.C,
                       (size_t)s.C * sizeof(float));
        size_t n;
        float *fused = run(f_attention_qkv, (Tensor *[]){ qkv }, 1, &s.H, 4, &n);
        float *separate = run(f_attention, part, 3, &s.H, 4, &n);
        assert_memory_equal(fused, separate, n * sizeof(float));
        for (int r = 0; r < s.B * s.T; r++)
            for (int j = 0; j < 3; j++)
                assert_memory_equal(qkv->grad + (long)r * 3 * s.C + j * s.C,
                                    part[j]->grad + (long)r * s.C, (size_t)s.C * sizeof(float));
        free(fused);
        free(separate);
        free_all(part, 3);
        tensor_free(qkv);
    }
}

/* Changing the input at position t leaves every output before t bit-identical, and changes the
 * output at t. Positions straddle the 32-row blocks. */
static void test_causality_exact(void **state)
{
    (void)state;
    const Shape s = { 2, 70, 12, 3 };
    const int positions[] = { 1, 31, 32, 33, 69 };
    Rng rng = rng_new(20, 1);
    Tensor *qkv = btc(&rng, s, 3);
    Tape *tape = tape_new();
    Tensor *base = op_attention_qkv(tape, qkv, s.H);
    for (size_t i = 0; i < sizeof positions / sizeof positions[0]; i++) {
        int t = positions[i];
        Tensor *changed = btc(&rng, s, 3);
        tensor_copy_data(changed, qkv);
        for (int c = 0; c < 3 * s.C; c++)
            changed->data[((long)1 * s.T + t) * 3 * s.C + c] += 0.5f + rng_uniform(&rng);
        Tensor *y = op_attention_qkv(tape, changed, s.H);
        long row = (long)s.T * s.C;   /* batch 1 starts here in the output */
        assert_memory_equal(y->data, base->data, (size_t)(row + (long)t * s.C) * sizeof(float));
        int moved = 0;
        for (int c = 0; c < s.C; c++)
            moved += y->data[row + (long)t * s.C + c] != base->data[row + (long)t * s.C + c];
        assert_true(moved > 0);
        tensor_free(changed);
    }
    tape_free(tape);
    tensor_free(qkv);
}

/* ---- memory, paths, threads ------------------------------------------------------------------ */

/* With a gradient wanted, P [B, H, T, T] is kept in the act category; without, only the output
 * is, and the values are bit-identical (the scratch path). Backward leaves no temp behind. */
static void test_saved_probabilities(void **state)
{
    (void)state;
    const Shape s = { 2, 40, 8, 2 };
    Rng rng = rng_new(21, 1);
    Tensor *qkv = btc(&rng, s, 3);
    size_t out_bytes = (size_t)s.B * s.T * s.C * sizeof(float);
    size_t p_bytes = (size_t)s.B * s.H * s.T * s.T * sizeof(float);

    Tape *tape = tape_new();
    size_t act0 = mem_current(MEM_ACT), temp0 = mem_current(MEM_TEMP);
    Tensor *y = op_attention_qkv(tape, qkv, s.H);
    assert_int_equal(mem_current(MEM_ACT) - act0, out_bytes + p_bytes);
    float *recorded = malloc(out_bytes);
    memcpy(recorded, y->data, out_bytes);
    tape_backward_seeded(tape, y, recorded);
    /* The only temp left is qkv's own gradient. */
    assert_int_equal(mem_current(MEM_TEMP) - temp0, qkv->size * sizeof(float));
    tape_reset(tape);

    qkv->requires_grad = false;
    y = op_attention_qkv(tape, qkv, s.H);
    assert_int_equal(mem_current(MEM_ACT) - act0, out_bytes);
    assert_memory_equal(y->data, recorded, out_bytes);
    free(recorded);
    tape_free(tape);
    tensor_free(qkv);
}

/* Each (b, h) pair is computed by one thread with the same arithmetic, so 1 and 2 threads give
 * the same bits, values and gradients. */
static void test_thread_count_invariance(void **state)
{
    (void)state;
    Shape s = { 3, 45, 16, 2 };
    Rng rng = rng_new(22, 1);
    Tensor *qkv = btc(&rng, s, 3);
    size_t n;
    par_set_threads(1);
    float *one = run(f_attention_qkv, (Tensor *[]){ qkv }, 1, &s.H, 6, &n);
    float *grad_one = malloc(qkv->size * sizeof(float));
    memcpy(grad_one, qkv->grad, qkv->size * sizeof(float));
    par_set_threads(2);
    float *two = run(f_attention_qkv, (Tensor *[]){ qkv }, 1, &s.H, 6, &n);
    assert_memory_equal(one, two, n * sizeof(float));
    assert_memory_equal(grad_one, qkv->grad, qkv->size * sizeof(float));
    free(one);
    free(two);
    free(grad_one);
    tensor_free(qkv);
}

/* ---- shapes that do not fit ------------------------------------------------------------------ */

static void run_misfit(void *arg)
{
    int which = *(int *)arg;
    Tape *tape = tape_new();
    Tensor *x = tensor_new3(MEM_TEMP, 2, 3, 6), *other = tensor_new3(MEM_TEMP, 2, 4, 6);
    Tensor *qkv_bad = tensor_new3(MEM_TEMP, 2, 3, 8), *flat = tensor_new2(MEM_TEMP, 3, 6);
    switch (which) {
    case 0: op_attention(tape, x, x, x, 4); break;           /* 6 channels into 4 heads */
    case 1: op_attention(tape, x, x, x, 0); break;
    case 2: op_attention(tape, x, other, x, 2); break;       /* q and k differ */
    case 3: op_attention(tape, flat, flat, flat, 1); break;  /* not [B, T, C] */
    case 4: op_attention_qkv(tape, qkv_bad, 1); break;       /* 8 is not 3C */
    case 5: op_attention_qkv(tape, tensor_new3(MEM_TEMP, 2, 3, 12), 3); break;   /* C 4, H 3 */
    case 6: op_split_heads(tape, x, 4); break;
    case 7: op_merge_heads(tape, x); break;
    case 8: op_causal_softmax(tape, x, 1.0f); break;         /* [.., 3, 6] is not square */
    default:   /* fits; one thread, as OpenMP's pool does not survive fork() */
        par_set_threads(1);
        tensor_fill(x, 0.5f);
        op_attention(tape, x, x, x, 3);
        break;
    }
}

static void test_shape_misfits_abort(void **state)
{
    (void)state;
    for (int which = 0; which <= 8; which++) {
        printf("misfit case %d\n", which);
        assert_true(test_aborts(run_misfit, &which));
    }
    /* The check cannot pass vacuously: a fitting call returns normally. */
    assert_false(test_aborts(run_misfit, &(int){ -1 }));
}

int main(void)
{
    par_set_split_always(true);    /* the small cases still take the threaded paths */
    par_set_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_grad),
        cmocka_unit_test(test_self_attention_grad),
        cmocka_unit_test(test_attention_qkv_grad),
        cmocka_unit_test(test_causal_softmax_grad),
        cmocka_unit_test(test_split_merge_grad),
        cmocka_unit_test(test_causal_softmax_values),
        cmocka_unit_test(test_split_merge_values),
        cmocka_unit_test(test_attention_equals_parts),
        cmocka_unit_test(test_qkv_matches_separate_exactly),
        cmocka_unit_test(test_causality_exact),
        cmocka_unit_test(test_saved_probabilities),
        cmocka_unit_test(test_thread_count_invariance),
        cmocka_unit_test(test_shape_misfits_abort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Layer norm and softmax: values against references computed here in double, gradients against
 * finite differences (with inputs reused), bit-identical parameter gradients whatever the thread
 * count, misfit shapes, and a deliberately wrong backward that gradcheck must catch. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"

static const float LN_EPS = 1e-5f;

/* Layer norm: the gradient depends on x through rstd, so the central difference has a
 * truncation error O(h^2 rstd^3) as well as fp32 rounding of the forward, O(1e-7 |L| / h).
 * Measured on these inputs (scale 1, rows of 5 and 37), worst |analytic - numeric|:
 *   h = 1e-1: 8e-4 (truncation)   h = 1e-2: 3e-5 to 1e-4   h = 1e-3: 8e-4 (rounding)
 * so h stays at 1e-2, and atol is 3e-4 (3x the worst measured) rather than the default 1e-3,
 * so that the many small gradient elements are checked too. */
static GradcheckOptions layernorm_tolerance(void)
{
    GradcheckOptions o = gradcheck_defaults();
    o.atol = 3e-4;
    o.rtol = 3e-3;
    return o;
}

/* Softmax: measured worst error ~1e-5 with the default h = 1e-2. Many gradient elements are
 * ~1e-2, which the default atol 1e-3 would check only to 10%; atol 1e-4 checks them to 1%. */
static GradcheckOptions softmax_tolerance(void)
{
    GradcheckOptions o = gradcheck_defaults();
    o.atol = 1e-4;
    o.rtol = 1e-3;
    return o;
}

static Tensor *f_layernorm(Tape *t, Tensor *const *in, void *c)
{
    (void)c;
    return op_layernorm(t, in[0], in[1], in[2], LN_EPS);
}

/* x reaches the output twice: through the normalisation and as a factor. */
static Tensor *f_layernorm_times_x(Tape *t, Tensor *const *in, void *c)
{
    (void)c;
    return op_mul(t, op_layernorm(t, in[0], in[1], in[2], LN_EPS), in[0]);
}

/* One vector as both gamma and beta: both of its gradient terms must land in one buffer. */
static Tensor *f_layernorm_gamma_as_beta(Tape *t, Tensor *const *in, void *c)
{
    (void)c;
    return op_layernorm(t, in[0], in[1], in[1], LN_EPS);
}

static Tensor *f_softmax(Tape *t, Tensor *const *in, void *c)
{
    (void)c;
    return op_softmax(t, in[0]);
}

static Tensor *f_softmax_times_x(Tape *t, Tensor *const *in, void *c)
{
    (void)c;
    return op_mul(t, op_softmax(t, in[0]), in[0]);
}

/* gamma xhat + beta per row, everything in double. */
static void layernorm_reference(const Tensor *x, const float *g, const float *b, double eps,
                                double *out)
{
    size_t rows = tensor_rows(x);
    int C = tensor_last_dim(x);
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x->data + r * C;
        double mean = 0.0, var = 0.0;
        for (int j = 0; j < C; j++)
            mean += xr[j];
        mean /= C;
        for (int j = 0; j < C; j++)
            var += (xr[j] - mean) * (xr[j] - mean);
        var /= C;
        for (int j = 0; j < C; j++)
            out[r * C + j] = g[j] * (xr[j] - mean) / sqrt(var + eps) + b[j];
    }
}

static void test_layernorm_values(void **state)
{
    (void)state;
    Rng rng = rng_new(11, 1);
    Tensor *x = test_leaf(&rng, 2.0f, 3, (int[]){ 2, 3, 7 });
    for (size_t i = 0; i < x->size; i++)
        x->data[i] += 5.0f;     /* a mean far from 0, where a one-pass variance would cancel */
    Tensor *g = test_leaf(&rng, 1.0f, 1, (int[]){ 7 }), *b = test_leaf(&rng, 1.0f, 1, (int[]){ 7 });
    double *want = malloc(x->size * sizeof *want);
    layernorm_reference(x, g->data, b->data, LN_EPS, want);
    Tape *tape = tape_new();
    Tensor *y = op_layernorm(tape, x, g, b, LN_EPS);
    double worst = 0.0;
    for (size_t i = 0; i < y->size; i++)
        worst = fmax(worst, fabs(y->data[i] - want[i]));
    printf("layernorm: max |y - reference| = %.3g\n", worst);
    assert_true(worst < 2e-6);

    /* Before the affine part (gamma 1, beta 0): each row has mean 0 and variance
     * var / (var + eps), i.e. 1 up to eps. */
    tensor_fill(g, 1.0f);
    tensor_fill(b, 0.0f);
    y = op_layernorm(tape, x, g, b, LN_EPS);
    for (size_t r = 0; r < tensor_rows(y); r++) {
        double mean = 0.0, var = 0.0;
        for (int j = 0; j < 7; j++)
            mean += y->data[r * 7 + j];
        mean /= 7;
        for (int j = 0; j < 7; j++)
            var += (y->data[r * 7 + j] - mean) * (y->data[r * 7 + j] - mean);
        var /= 7;
        assert_true(fabs(mean) < 1e-6);
        assert_true(fabs(var - 1.0) < 1e-5);
    }
    tape_free(tape);
    free(want);
    tensor_free(x);
    tensor_free(g);
    tensor_free(b);
}

/* A constant row has zero variance: eps keeps rstd finite, xhat is exactly 0, y is beta, and
 * the gradient is finite. */
static void test_layernorm_constant_row(void **state)
{
    (void)state;
    Rng rng = rng_new(12, 1);
    Tensor *x = tensor_new2(MEM_TEMP, 2, 4);
    tensor_fill(x, 2.5f);
    x->requires_grad = true;
    Tensor *g = test_leaf(&rng, 1.0f, 1, (int[]){ 4 }), *b = test_leaf(&rng, 1.0f, 1, (int[]){ 4 });
    Tape *tape = tape_new();
    Tensor *y = op_layernorm(tape, x, g, b, LN_EPS);
    for (size_t i = 0; i < y->size; i++)
        assert_true(y->data[i] == b->data[i % 4]);
    tape_backward(tape, op_sum(tape, op_mul(tape, y, y)));
    for (size_t i = 0; i < x->size; i++)
        assert_true(isfinite(x->grad[i]));
    tape_free(tape);
    tensor_free(x);
    tensor_free(g);
    tensor_free(b);
}

static void test_layernorm_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(13, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 3, 5 });
    Tensor *g = test_leaf(&rng, 1.0f, 1, (int[]){ 5 }), *b = test_leaf(&rng, 1.0f, 1, (int[]){ 5 });
    Tensor *in[] = { x, g, b };
    test_gradcheck("layernorm [2,3,5]", f_layernorm, in, 3, NULL, layernorm_tolerance());
    test_gradcheck("layernorm(x) * x", f_layernorm_times_x, in, 3, NULL, layernorm_tolerance());
    test_gradcheck("layernorm gamma=beta", f_layernorm_gamma_as_beta, in, 2, NULL,
                   layernorm_tolerance());
    /* Only x needs a gradient: the parameter branch must be skipped, not crash. */
    g->requires_grad = b->requires_grad = false;
    test_gradcheck("layernorm x only", f_layernorm, in, 3, NULL, layernorm_tolerance());
    for (int j = 0; j < 5; j++)     /* zeroed by gradcheck, then never written */
        assert_true(g->grad[j] == 0.0f && b->grad[j] == 0.0f);
    tensor_free(x);
    tensor_free(g);
    tensor_free(b);

    /* More columns than one block of the parameter-gradient loop (16), the last block partial. */
    x = test_leaf(&rng, 1.0f, 2, (int[]){ 3, 37 });
    g = test_leaf(&rng, 1.0f, 1, (int[]){ 37 });
    b = test_leaf(&rng, 1.0f, 1, (int[]){ 37 });
    Tensor *wide[] = { x, g, b };
    test_gradcheck("layernorm [3,37]", f_layernorm, wide, 3, NULL, layernorm_tolerance());
    tensor_free(x);
    tensor_free(g);
    tensor_free(b);
}

/* One backward of layernorm on fixed data and a fixed seed, with `threads` threads; the
 * gradients of x, gamma and beta are written to out (x->size + 2C floats). */
static void layernorm_grads_with_threads(int threads, float *out)
{
    par_set_threads(threads);
    Rng rng = rng_new(14, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 5, 41, 70 });
    Tensor *g = test_leaf(&rng, 1.0f, 1, (int[]){ 70 });
    Tensor *b = test_leaf(&rng, 1.0f, 1, (int[]){ 70 });
    Tape *tape = tape_new();
    Tensor *y = op_layernorm(tape, x, g, b, LN_EPS);
    float *seed = malloc(y->size * sizeof *seed);
    for (size_t i = 0; i < y->size; i++)
        seed[i] = rng_normal(&rng);
    tape_backward_seeded(tape, y, seed);
    memcpy(out, x->grad, x->size * sizeof *out);
    memcpy(out + x->size, g->grad, 70 * sizeof *out);
    memcpy(out + x->size + 70, b->grad, 70 * sizeof *out);
    free(seed);
    tape_free(tape);
    tensor_free(x);
    tensor_free(g);
    tensor_free(b);
}

/* dgamma and dbeta sum over 205 rows; the sums must not depend on how rows meet threads. */
static void test_layernorm_same_bits_any_threads(void **state)
{
    (void)state;
    size_t n = 5 * 41 * 70 + 2 * 70;
    float *one = malloc(n * sizeof *one), *three = malloc(n * sizeof *three);
    layernorm_grads_with_threads(1, one);
    layernorm_grads_with_threads(3, three);
    par_set_threads(2);
    assert_memory_equal(one, three, n * sizeof *one);
    free(one);
    free(three);
}

/* The abort cases run in a forked child (test_aborts), where the parent's OpenMP threads do not
 * exist: a parallel loop there would hang instead of failing, so the child uses one thread. */
static Tape *child_tape(void)
{
    par_set_threads(1);
    return tape_new();
}

static void layernorm_gamma_misfit(void *arg)
{
    (void)arg;
    Tensor *x = tensor_new3(MEM_TEMP, 2, 3, 5), *g = tensor_new1(MEM_TEMP, 4);
    op_layernorm(child_tape(), x, g, tensor_new1(MEM_TEMP, 5), LN_EPS);
}

static void layernorm_beta_misfit(void *arg)
{
    (void)arg;
    Tensor *x = tensor_new2(MEM_TEMP, 3, 5);
    op_layernorm(child_tape(), x, tensor_new1(MEM_TEMP, 5), tensor_new2(MEM_TEMP, 5, 1), LN_EPS);
}

static void layernorm_negative_eps(void *arg)
{
    (void)arg;
    Tensor *x = tensor_new2(MEM_TEMP, 3, 5);
    op_layernorm(child_tape(), x, tensor_new1(MEM_TEMP, 5), tensor_new1(MEM_TEMP, 5), -1e-5f);
}

static void layernorm_ok(void *arg)
{
    (void)arg;
    Tensor *x = tensor_new2(MEM_TEMP, 3, 5);
    tensor_fill(x, 1.0f);
    op_layernorm(child_tape(), x, tensor_new1(MEM_TEMP, 5), tensor_new1(MEM_TEMP, 5), LN_EPS);
}

static void test_layernorm_misfit_aborts(void **state)
{
    (void)state;
    assert_true(test_aborts(layernorm_gamma_misfit, NULL));
    assert_true(test_aborts(layernorm_beta_misfit, NULL));
    assert_true(test_aborts(layernorm_negative_eps, NULL));
    assert_false(test_aborts(layernorm_ok, NULL));      /* the harness itself can say no */
}

static void test_softmax_values(void **state)
{
    (void)state;
    Rng rng = rng_new(15, 1);
    Tensor *x = test_leaf(&rng, 3.0f, 3, (int[]){ 2, 3, 5 });
    Tape *tape = tape_new();
    Tensor *y = op_softmax(tape, x);
    double worst = 0.0, worst_sum = 0.0;
    for (size_t r = 0; r < 6; r++) {
        const float *xr = x->data + r * 5;
        double z = 0.0, sum = 0.0;
        for (int j = 0; j < 5; j++)
            z += exp((double)xr[j]);
        for (int j = 0; j < 5; j++) {
            worst = fmax(worst, fabs(y->data[r * 5 + j] - exp((double)xr[j]) / z));
            sum += y->data[r * 5 + j];
        }
        worst_sum = fmax(worst_sum, fabs(sum - 1.0));
    }
    printf("softmax: max |y - reference| = %.3g, max |row sum - 1| = %.3g\n", worst, worst_sum);
    assert_true(worst < 1e-6);
    assert_true(worst_sum < 1e-6);

    /* Logits of 1000 and 0 would overflow exp without the max subtraction. */
    Tensor *big = tensor_new2(MEM_TEMP, 2, 3);
    const float vals[] = { 1000.0f, 0.0f, -1000.0f, 0.0f, 1000.0f, 1000.0f };
    memcpy(big->data, vals, sizeof vals);
    Tensor *p = op_softmax(tape, big);
    const float want[] = { 1.0f, 0.0f, 0.0f, 0.0f, 0.5f, 0.5f };
    for (int i = 0; i < 6; i++)
        assert_true(p->data[i] == want[i]);
    tape_free(tape);
    tensor_free(x);
    tensor_free(big);
}

static void test_softmax_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(16, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 3, 5 });
    test_gradcheck("softmax [2,3,5]", f_softmax, (Tensor *[]){ x }, 1, NULL, softmax_tolerance());
    test_gradcheck("softmax(x) * x", f_softmax_times_x, (Tensor *[]){ x }, 1, NULL,
                   softmax_tolerance());
    tensor_free(x);
}

/* A softmax whose backward forgets the sum term: dx = y dy instead of y (dy - sum(dy y)).
 * Its forward is right, so only a gradient check can tell. */
static void wrong_softmax_backward(Node *n)
{
    const float *y = n->out->data, *dy = n->out->grad;
    float *dx = tensor_grad(n->in[0]);
    for (size_t i = 0; i < n->out->size; i++)
        dx[i] += y[i] * dy[i];
}

static Tensor *f_wrong_softmax(Tape *t, Tensor *const *in, void *c)
{
    (void)c;
    Tape *scratch = tape_new();
    scratch->recording = false;
    Tensor *ref = op_softmax(scratch, in[0]);
    Tensor *y = tape_tensor(t, in[0]->ndim, in[0]->shape);
    tensor_copy_data(y, ref);
    tape_free(scratch);
    tape_record(t, "wrong_softmax", wrong_softmax_backward, y, 1, in);
    return y;
}

static void test_gradcheck_catches_wrong_backward(void **state)
{
    (void)state;
    Rng rng = rng_new(17, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 3, 5 });
    GradcheckResult right = gradcheck(f_softmax, (Tensor *[]){ x }, 1, NULL, gradcheck_defaults());
    GradcheckResult wrong = gradcheck(f_wrong_softmax, (Tensor *[]){ x }, 1, NULL,
                                      gradcheck_defaults());
    gradcheck_print("softmax (right)", &right);
    gradcheck_print("softmax, no sum term", &wrong);
    assert_true(right.ok);
    assert_false(wrong.ok);
    /* Not one stray element: the missing term is wrong almost everywhere. */
    assert_true(wrong.failed > wrong.checked / 2);
    tensor_free(x);
}

int main(void)
{
    par_set_split_always(true);    /* the small cases still take the threaded paths */
    par_set_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm_values),
        cmocka_unit_test(test_layernorm_constant_row),
        cmocka_unit_test(test_layernorm_grad),
        cmocka_unit_test(test_layernorm_same_bits_any_threads),
        cmocka_unit_test(test_layernorm_misfit_aborts),
        cmocka_unit_test(test_softmax_values),
        cmocka_unit_test(test_softmax_grad),
        cmocka_unit_test(test_gradcheck_catches_wrong_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

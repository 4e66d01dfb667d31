/* The code paths written for speed, each against the plain definition it replaces:
 *   op_linear       = op_bias_add(op_matmul(x, w), b): values, gradients (finite differences and
 *                     the two-op version), one [M, N] activation fewer, NULL bias = op_matmul
 *   par_sum_rows    = column sums accumulated in double, bit-identical for 1 and 2 threads
 *   op_gelu         (vtanh inside) = 0.5 x (1 + tanh(...)) with libm's tanh in double, and its
 *                     backward = the derivative formula in double
 *   AdamW's vector loop = its scalar rule, bit for bit (a tensor of n elements against n
 *                     one-element tensors, which only the scalar rule serves) */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "optim/adamw.h"

static Tensor *f_linear(Tape *t, Tensor *const *in, void *c)
{
    (void)c;
    return op_linear(t, in[0], in[1], in[2]);
}

static void test_linear_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(11, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 3, 5 });
    Tensor *w = test_leaf(&rng, 1.0f, 2, (int[]){ 5, 4 });
    Tensor *b = test_leaf(&rng, 1.0f, 1, (int[]){ 4 });
    test_gradcheck("linear", f_linear, (Tensor *[]){ x, w, b }, 3, NULL, gradcheck_defaults());
    tensor_free(x);
    tensor_free(w);
    tensor_free(b);
}

/* Forward and backward of op_linear and of matmul + bias_add on the same inputs, seeded with the
 * same output gradient. Large enough that par_sgemm and par_sum_rows split over two threads. */
static void test_linear_matches_two_ops(void **state)
{
    (void)state;
    const int M = 96, K = 70, N = 300;
    Rng rng = rng_new(12, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 2, (int[]){ M, K });
    Tensor *w = test_leaf(&rng, 0.1f, 2, (int[]){ K, N });
    Tensor *b = test_leaf(&rng, 1.0f, 1, (int[]){ N });
    Tensor *seed = test_leaf(&rng, 1.0f, 2, (int[]){ M, N });
    float *grads[2][3];
    Tensor *y[2];
    Tape *tape = tape_new();
    for (int v = 0; v < 2; v++) {
        y[v] = v == 0 ? op_linear(tape, x, w, b)
                      : op_bias_add(tape, op_matmul(tape, x, w, false), b);
        tape_backward_seeded(tape, y[v], seed->data);
        Tensor *in[3] = { x, w, b };
        for (int i = 0; i < 3; i++) {
            grads[v][i] = malloc(in[i]->size * sizeof(float));
            memcpy(grads[v][i], in[i]->grad, in[i]->size * sizeof(float));
            tensor_zero_grad(in[i]);
        }
    }
    double dy = test_max_abs_diff(y[0]->data, y[1]->data, y[0]->size);
    printf("linear vs matmul + bias_add: max |y diff| %.3g\n", dy);
    assert_true(dy <= 1e-5);   /* |y| ~ 1: a few roundings of one addition order */
    /* The gradients come from the same products and the same row sums: exactly equal. */
    const size_t sizes[3] = { x->size, w->size, b->size };
    for (int i = 0; i < 3; i++)
        assert_memory_equal(grads[0][i], grads[1][i], sizes[i] * sizeof(float));
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < 3; i++)
            free(grads[v][i]);
    tape_free(tape);
    Tensor *all[] = { x, w, b, seed };
    for (int i = 0; i < 4; i++)
        tensor_free(all[i]);
}

/* The point of the fused op: the tape keeps its output only, not the unbiased product too. */
static void test_linear_keeps_one_activation_fewer(void **state)
{
    (void)state;
    const int M = 8, K = 6, N = 5;
    Rng rng = rng_new(13, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 2, (int[]){ M, K });
    Tensor *w = test_leaf(&rng, 1.0f, 2, (int[]){ K, N });
    Tensor *b = test_leaf(&rng, 1.0f, 1, (int[]){ N });
    Tape *tape = tape_new();
    size_t act0 = mem_current(MEM_ACT);
    op_linear(tape, x, w, b);
    size_t fused = mem_current(MEM_ACT) - act0;
    tape_reset(tape);
    op_bias_add(tape, op_matmul(tape, x, w, false), b);
    size_t two_ops = mem_current(MEM_ACT) - act0;
    printf("act bytes: linear %zu, matmul + bias_add %zu\n", fused, two_ops);
    assert_int_equal(fused, (size_t)M * N * sizeof(float));
    assert_int_equal(two_ops, 2 * fused);
    tape_free(tape);
    tensor_free(x);
    tensor_free(w);
    tensor_free(b);
}

static void test_linear_without_bias_is_matmul(void **state)
{
    (void)state;
    Rng rng = rng_new(14, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 7, 9 });
    Tensor *w = test_leaf(&rng, 1.0f, 2, (int[]){ 9, 4 });
    Tape *tape = tape_new();
    Tensor *a = op_linear(tape, x, w, NULL), *m = op_matmul(tape, x, w, false);
    assert_int_equal(a->ndim, 3);
    assert_int_equal(a->shape[2], 4);
    assert_memory_equal(a->data, m->data, a->size * sizeof(float));
    tape_free(tape);
    tensor_free(x);
    tensor_free(w);
}

static void linear_bad_bias(void *arg)
{
    (void)arg;
    Tape *tape = tape_new();
    op_linear(tape, tensor_new2(MEM_TEMP, 2, 3), tensor_new2(MEM_TEMP, 3, 4),
              tensor_new1(MEM_TEMP, 3));
}

static void linear_bad_weight(void *arg)
{
    (void)arg;
    Tape *tape = tape_new();
    op_linear(tape, tensor_new2(MEM_TEMP, 2, 3), tensor_new2(MEM_TEMP, 5, 4),
              tensor_new1(MEM_TEMP, 4));
}

static void test_linear_misfit_aborts(void **state)
{
    (void)state;
    assert_true(test_aborts(linear_bad_bias, NULL));
    assert_true(test_aborts(linear_bad_weight, NULL));
}

/* Column sums of a [rows, n] matrix with n spanning several column blocks and a ragged last one,
 * added onto existing values: against double sums, and the same bits with 1 and 2 threads and
 * as one column summed alone in row order (the blocks are cut by the thread count: 384 and 1152
 * columns, a GPT's bias widths C and 3C, fall into other blocks on 2 threads than on 1). */
static void check_sum_rows(int rows, int n)
{
    Rng rng = rng_new(15, (uint64_t)n);
    float *x = malloc(sizeof(float) * rows * n), *one = malloc(sizeof(float) * n);
    float *two = malloc(sizeof(float) * n);
    for (int i = 0; i < rows * n; i++)
        x[i] = rng_normal(&rng);
    double worst = 0.0;
    for (int threads = 1; threads <= 2; threads++) {
        float *sum = threads == 1 ? one : two;
        for (int j = 0; j < n; j++)
            sum[j] = (float)j;
        par_set_threads(threads);
        par_sum_rows(x, rows, n, sum);
    }
    for (int j = 0; j < n; j++) {
        double exact = j;
        float alone = 0.0f;
        for (int r = 0; r < rows; r++) {
            exact += x[(size_t)r * n + j];
            alone += x[(size_t)r * n + j];
        }
        assert_true(one[j] == (float)j + alone);
        double err = fabs((double)one[j] - exact);
        worst = err > worst ? err : worst;
    }
    printf("par_sum_rows, %d columns: max |float - double| %.3g over %d rows\n", n, worst, rows);
    /* 1000 terms of size 1: fp32 rounding of the running sum stays far below 1e-3. */
    assert_true(worst < 1e-3);
    assert_memory_equal(one, two, sizeof(float) * n);
    free(x);
    free(one);
    free(two);
}

static void test_sum_rows(void **state)
{
    (void)state;
    check_sum_rows(1000, 600);
    check_sum_rows(1000, 384);
    check_sum_rows(1000, 1152);
    check_sum_rows(1000, 16);
}

/* GELU with vtanh against the formula in double with libm's tanh, densely over [-12, 12]. The
 * error is absolute, scaled by max(1, |x|): in the negative tail 1 + tanh u cancels, so a relative
 * bound cannot hold for any fp32 tanh (libm's tanhf included). Measured: values 1.3e-7 (tanhf:
 * 1.4e-7), derivative 1.0e-6 (tanhf: 5.6e-7; the derivative is at most 1.13). */
static void test_gelu_against_double(void **state)
{
    (void)state;
    const int n = 200001;
    const double c = sqrt(2.0 / 3.14159265358979323846), a = 0.044715;
    Tensor *x = tensor_new1(MEM_TEMP, n);
    x->requires_grad = true;
    for (int i = 0; i < n; i++)
        x->data[i] = -12.0f + 24.0f * (float)i / (float)(n - 1);
    Tape *tape = tape_new();
    Tensor *y = op_gelu(tape, x);
    float *ones = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++)
        ones[i] = 1.0f;
    tape_backward_seeded(tape, y, ones);
    double worst_y = 0.0, worst_d = 0.0;
    for (int i = 0; i < n; i++) {
        double xi = x->data[i], u = c * (xi + a * xi * xi * xi), t = tanh(u);
        double want = 0.5 * xi * (1.0 + t);
        double dwant = 0.5 * (1.0 + t) + 0.5 * xi * (1.0 - t * t) * c * (1.0 + 3.0 * a * xi * xi);
        worst_y = fmax(worst_y, fabs(y->data[i] - want) / fmax(1.0, fabs(xi)));
        worst_d = fmax(worst_d, fabs(x->grad[i] - dwant));
    }
    printf("gelu: worst value error %.3g x max(1, |x|), worst derivative error %.3g\n", worst_y,
           worst_d);
    assert_true(worst_y <= 2e-7);
    assert_true(worst_d <= 1.5e-6);
    free(ones);
    tape_free(tape);
    tensor_free(x);
}

/* The same values and gradients as one tensor of N elements (vector loop, blocks over threads,
 * scalar tail) and as N tensors of one element each (scalar rule only): after a few steps,
 * weights and both moments must be the same bits. */
static void test_adamw_vector_equals_scalar(void **state)
{
    (void)state;
    enum { N = OPTIM_PARALLEL_MIN + 7, STEPS = 3 };   /* over the threads; not a multiple of 16 */
    Tensor *big = tensor_param("big", 1, (int[]){ N });
    Tensor **small = malloc(sizeof(Tensor *) * N);
    Rng rng = rng_new(16, 1);
    tensor_grad(big);
    for (int j = 0; j < N; j++) {
        char name[32];
        snprintf(name, sizeof name, "e%d", j);
        small[j] = tensor_param(name, 1, (int[]){ 1 });
        small[j]->data[0] = big->data[j] = rng_normal(&rng);
        tensor_grad(small[j]);
    }
    AdamWConfig c = adamw_defaults();
    c.decay_rule = OPTIM_DECAY_ALL;
    c.weight_decay = 0.1;
    AdamW *one = adamw_new(&big, 1, c), *many = adamw_new(small, N, c);
    for (int k = 0; k < STEPS; k++) {
        for (int j = 0; j < N; j++)
            small[j]->grad[0] = big->grad[j] = (k + 1) * 0.1f * rng_normal(&rng);
        optim_step(&one->base, 1e-2);
        optim_step(&many->base, 1e-2);
    }
    for (int j = 0; j < N; j++) {
        assert_true(big->data[j] == small[j]->data[0]);
        assert_true(one->base.state[0]->data[j] == many->base.state[2 * j]->data[0]);
        assert_true(one->base.state[1]->data[j] == many->base.state[2 * j + 1]->data[0]);
    }
    optim_free(&one->base);
    optim_free(&many->base);
    for (int j = 0; j < N; j++)
        tensor_free(small[j]);
    free(small);
    tensor_free(big);
}

/* A tensor large enough to be split over the threads (OPTIM_PARALLEL_MIN) takes the same steps,
 * to the bit, on 2 threads as on 1: each block is updated alone, whoever runs it. */
static void test_adamw_threads_agree(void **state)
{
    (void)state;
    enum { N = OPTIM_PARALLEL_MIN + 7, STEPS = 3 };
    Tensor *p[2] = { tensor_param("two", 1, (int[]){ N }), tensor_param("one", 1, (int[]){ N }) };
    Rng rng = rng_new(17, 1);
    for (int j = 0; j < N; j++)
        p[0]->data[j] = p[1]->data[j] = rng_normal(&rng);
    AdamWConfig c = adamw_defaults();
    c.decay_rule = OPTIM_DECAY_ALL;
    c.weight_decay = 0.1;
    AdamW *a[2] = { adamw_new(&p[0], 1, c), adamw_new(&p[1], 1, c) };
    for (int k = 0; k < STEPS; k++) {
        for (int j = 0; j < N; j++)
            tensor_grad(p[0])[j] = tensor_grad(p[1])[j] = (k + 1) * 0.1f * rng_normal(&rng);
        for (int i = 0; i < 2; i++) {
            par_set_threads(2 - i);
            optim_step(&a[i]->base, 1e-2);
        }
    }
    par_set_threads(2);
    assert_memory_equal(p[0]->data, p[1]->data, N * sizeof(float));
    assert_memory_equal(a[0]->base.state[0]->data, a[1]->base.state[0]->data, N * sizeof(float));
    assert_memory_equal(a[0]->base.state[1]->data, a[1]->base.state[1]->data, N * sizeof(float));
    for (int i = 0; i < 2; i++) {
        optim_free(&a[i]->base);
        tensor_free(p[i]);
    }
}

int main(void)
{
    par_set_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_grad),
        cmocka_unit_test(test_linear_matches_two_ops),
        cmocka_unit_test(test_linear_keeps_one_activation_fewer),
        cmocka_unit_test(test_linear_without_bias_is_matmul),
        cmocka_unit_test(test_linear_misfit_aborts),
        cmocka_unit_test(test_sum_rows),
        cmocka_unit_test(test_gelu_against_double),
        cmocka_unit_test(test_adamw_vector_equals_scalar),
        cmocka_unit_test(test_adamw_threads_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

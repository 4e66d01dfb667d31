/* Elementwise ops and matmul: values against direct formulas, gradients against finite
 * differences, including a tensor used twice. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <stdlib.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"

static Tensor *f_add(Tape *t, Tensor *const *in, void *c) { (void)c; return op_add(t, in[0], in[1]); }
static Tensor *f_mul(Tape *t, Tensor *const *in, void *c) { (void)c; return op_mul(t, in[0], in[1]); }
static Tensor *f_square(Tape *t, Tensor *const *in, void *c) { (void)c; return op_mul(t, in[0], in[0]); }
static Tensor *f_bias(Tape *t, Tensor *const *in, void *c) { (void)c; return op_bias_add(t, in[0], in[1]); }
static Tensor *f_scale(Tape *t, Tensor *const *in, void *c) { (void)c; return op_scale(t, in[0], -1.7f); }
static Tensor *f_relu(Tape *t, Tensor *const *in, void *c) { (void)c; return op_relu(t, in[0]); }
static Tensor *f_gelu(Tape *t, Tensor *const *in, void *c) { (void)c; return op_gelu(t, in[0]); }
static Tensor *f_sum(Tape *t, Tensor *const *in, void *c) { (void)c; return op_sum(t, in[0]); }

static void check_unary(const char *label, GradcheckFn fn)
{
    Rng rng = rng_new(1, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 3, 5 });
    test_away_from_zero(x, 0.05f);
    test_gradcheck(label, fn, (Tensor *[]){ x }, 1, NULL, gradcheck_defaults());
    tensor_free(x);
}

static void test_add_mul_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(2, 1);
    Tensor *a = test_leaf(&rng, 1.0f, 2, (int[]){ 3, 7 });
    Tensor *b = test_leaf(&rng, 1.0f, 2, (int[]){ 3, 7 });
    test_gradcheck("add", f_add, (Tensor *[]){ a, b }, 2, NULL, gradcheck_defaults());
    test_gradcheck("mul", f_mul, (Tensor *[]){ a, b }, 2, NULL, gradcheck_defaults());
    /* x * x: both uses must reach x's gradient, giving 2x. */
    test_gradcheck("mul x*x", f_square, (Tensor *[]){ a }, 1, NULL, gradcheck_defaults());
    tensor_free(a);
    tensor_free(b);
}

static void test_square_gradient_is_2x(void **state)
{
    (void)state;
    Rng rng = rng_new(3, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 1, (int[]){ 10 });
    Tape *tape = tape_new();
    Tensor *loss = op_sum(tape, op_mul(tape, x, x));
    tape_backward(tape, loss);
    for (size_t i = 0; i < x->size; i++)
        assert_float_equal(x->grad[i], 2.0f * x->data[i], 1e-6f);
    tape_free(tape);
    tensor_free(x);
}

static void test_bias_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(4, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 3, 4 });
    Tensor *b = test_leaf(&rng, 1.0f, 1, (int[]){ 4 });
    test_gradcheck("bias_add", f_bias, (Tensor *[]){ x, b }, 2, NULL, gradcheck_defaults());
    tensor_free(x);
    tensor_free(b);
}

static void test_unary_grads(void **state)
{
    (void)state;
    check_unary("scale", f_scale);
    check_unary("relu", f_relu);
    check_unary("gelu", f_gelu);
    check_unary("sum", f_sum);
}

static void test_gelu_values(void **state)
{
    (void)state;
    /* Reference values of 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) computed in double. */
    const float xs[] = { -3.0f, -1.0f, 0.0f, 0.5f, 2.0f };
    const double want[] = { -0.0036373920817729943, -0.15880800939172324, 0.0,
                            0.34571400982514394, 1.9545976940871754 };
    Tape *tape = tape_new();
    Tensor *x = tensor_new1(MEM_TEMP, 5);
    for (int i = 0; i < 5; i++)
        x->data[i] = xs[i];
    Tensor *y = op_gelu(tape, x);
    for (int i = 0; i < 5; i++)
        assert_float_equal(y->data[i], want[i], 1e-6);
    tape_free(tape);
    tensor_free(x);
}

static Tensor *f_matmul(Tape *t, Tensor *const *in, void *c) { return op_matmul(t, in[0], in[1], c != NULL); }
static Tensor *f_bmm(Tape *t, Tensor *const *in, void *c) { return op_bmm(t, in[0], in[1], c != NULL); }

static void test_matmul_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(5, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 3, 5 });
    Tensor *w = test_leaf(&rng, 1.0f, 2, (int[]){ 5, 4 });
    Tensor *wt = test_leaf(&rng, 1.0f, 2, (int[]){ 4, 5 });
    test_gradcheck("matmul", f_matmul, (Tensor *[]){ x, w }, 2, NULL, gradcheck_defaults());
    test_gradcheck("matmul w^T", f_matmul, (Tensor *[]){ x, wt }, 2, (void *)1, gradcheck_defaults());
    /* x x^T uses x twice: once as the left factor and once, transposed, as the right. */
    Tensor *sq = test_leaf(&rng, 1.0f, 2, (int[]){ 4, 4 });
    test_gradcheck("matmul x x", f_matmul, (Tensor *[]){ sq, sq }, 1, NULL, gradcheck_defaults());
    tensor_free(x);
    tensor_free(w);
    tensor_free(wt);
    tensor_free(sq);
}

static void test_bmm_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(6, 1);
    Tensor *a = test_leaf(&rng, 1.0f, 4, (int[]){ 2, 2, 3, 5 });
    Tensor *b = test_leaf(&rng, 1.0f, 4, (int[]){ 2, 2, 5, 4 });
    Tensor *bt = test_leaf(&rng, 1.0f, 4, (int[]){ 2, 2, 4, 5 });
    test_gradcheck("bmm", f_bmm, (Tensor *[]){ a, b }, 2, NULL, gradcheck_defaults());
    test_gradcheck("bmm b^T", f_bmm, (Tensor *[]){ a, bt }, 2, (void *)1, gradcheck_defaults());
    tensor_free(a);
    tensor_free(b);
    tensor_free(bt);
}

/* par_sgemm (OpenBLAS, rows split over threads) against the plain triple loop, in all four
 * transpose combinations and on shapes that do not divide evenly between threads. */
static void test_sgemm_matches_naive(void **state)
{
    (void)state;
    Rng rng = rng_new(7, 1);
    const int M = 67, N = 45, K = 131;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *C = malloc(sizeof(float) * M * N), *R = malloc(sizeof(float) * M * N);
    for (int i = 0; i < M * K; i++)
        A[i] = rng_normal(&rng);
    for (int i = 0; i < K * N; i++)
        B[i] = rng_normal(&rng);
    for (int ta = 0; ta < 2; ta++) {
        for (int tb = 0; tb < 2; tb++) {
            int lda = ta ? M : K, ldb = tb ? K : N;
            for (int i = 0; i < M * N; i++)
                C[i] = R[i] = rng_normal(&rng);
            par_sgemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 2.0f, C, N);
            par_sgemm_naive(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 2.0f, R, N);
            float worst = 0.0f;
            for (int i = 0; i < M * N; i++)
                worst = fmaxf(worst, fabsf(C[i] - R[i]));
            printf("sgemm trans_a=%d trans_b=%d: max |blas - naive| = %.3g\n", ta, tb, worst);
            assert_true(worst < 1e-4f);
        }
    }
    free(A); free(B); free(C); free(R);
}

static void matmul_misfit(void *arg)
{
    (void)arg;
    Tape *tape = tape_new();
    Tensor *x = tensor_new2(MEM_TEMP, 2, 3), *w = tensor_new2(MEM_TEMP, 4, 5);
    op_matmul(tape, x, w, false);
}

static void add_misfit(void *arg)
{
    (void)arg;
    Tape *tape = tape_new();
    op_add(tape, tensor_new2(MEM_TEMP, 2, 3), tensor_new2(MEM_TEMP, 3, 2));
}

static void test_shape_mismatch_aborts(void **state)
{
    (void)state;
    assert_true(test_aborts(matmul_misfit, NULL));
    assert_true(test_aborts(add_misfit, NULL));
}

int main(void)
{
    par_set_split_always(true);    /* the small cases still take the threaded paths */
    par_set_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_mul_grad),
        cmocka_unit_test(test_square_gradient_is_2x),
        cmocka_unit_test(test_bias_grad),
        cmocka_unit_test(test_unary_grads),
        cmocka_unit_test(test_gelu_values),
        cmocka_unit_test(test_matmul_grad),
        cmocka_unit_test(test_bmm_grad),
        cmocka_unit_test(test_sgemm_matches_naive),
        cmocka_unit_test(test_shape_mismatch_aborts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Reshape and transpose: reshape is a view that costs no bytes, transpose moves every element
 * where the index arithmetic says; gradients by finite differences and exact reuse checks. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"

/* Both ops only move values, so analytic and numeric gradients agree to fp32 rounding of the
 * weighted sum (measured < 1e-6): atol 1e-4 catches a value that went to the wrong place. */
static GradcheckOptions move_tolerance(void)
{
    GradcheckOptions o = gradcheck_defaults();
    o.atol = 1e-4;
    o.rtol = 1e-3;
    return o;
}

static Tensor *f_reshape(Tape *t, Tensor *const *in, void *c)
{
    (void)c;
    return op_reshape(t, in[0], 2, (int[]){ 5, 6 });
}

/* x + reshape(reshape(x)): x reaches the sum by two paths, one through two views. */
static Tensor *f_reshape_reuse(Tape *t, Tensor *const *in, void *c)
{
    (void)c;
    Tensor *flat = op_reshape(t, in[0], 1, (int[]){ (int)in[0]->size });
    return op_add(t, in[0], op_reshape(t, flat, in[0]->ndim, in[0]->shape));
}

static Tensor *f_transpose(Tape *t, Tensor *const *in, void *c)
{
    const int *d = c;
    return op_transpose(t, in[0], d[0], d[1]);
}

/* x * transpose(transpose(x)): the double swap must land every gradient back in place. */
static Tensor *f_transpose_reuse(Tape *t, Tensor *const *in, void *c)
{
    const int *d = c;
    Tensor *back = op_transpose(t, op_transpose(t, in[0], d[0], d[1]), d[0], d[1]);
    return op_mul(t, in[0], back);
}

static void test_reshape_is_a_view(void **state)
{
    (void)state;
    Rng rng = rng_new(31, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 3, 5 });
    Tape *tape = tape_new();
    size_t act = mem_current(MEM_ACT);
    Tensor *y = op_reshape(tape, x, 2, (int[]){ 6, 5 });
    assert_int_equal(mem_current(MEM_ACT), act);
    assert_ptr_equal(y->data, x->data);
    assert_false(y->owns_data);
    assert_int_equal(y->ndim, 2);
    assert_int_equal(y->shape[0], 6);
    assert_int_equal(y->shape[1], 5);
    assert_true(y->requires_grad);
    tape_free(tape);
    tensor_free(x);
}

static void test_reshape_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(32, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 3, 5 });
    test_gradcheck("reshape [2,3,5]->[5,6]", f_reshape, (Tensor *[]){ x }, 1, NULL,
                   move_tolerance());
    test_gradcheck("x + reshape(reshape(x))", f_reshape_reuse, (Tensor *[]){ x }, 1, NULL,
                   move_tolerance());
    /* Exactly: d/dx sum(seed * (x + x)) = 2 seed. */
    Tape *tape = tape_new();
    Tensor *y = f_reshape_reuse(tape, (Tensor *[]){ x }, NULL);
    float seed[30];
    for (int i = 0; i < 30; i++)
        seed[i] = rng_normal(&rng);
    tensor_zero_grad(x);
    tape_backward_seeded(tape, y, seed);
    for (int i = 0; i < 30; i++)
        assert_true(x->grad[i] == 2.0f * seed[i]);
    tape_free(tape);
    tensor_free(x);
}

/* A parameter seen through a view: its gradient accumulates in the grad category, and the
 * view's own gradient (a b node in temp) is released by backward. */
static void test_reshape_of_param(void **state)
{
    (void)state;
    Tensor *w = tensor_param("w", 2, (int[]){ 4, 6 });
    tensor_fill(w, 0.5f);
    size_t temp = mem_current(MEM_TEMP);
    Tape *tape = tape_new();
    Tensor *loss = op_sum(tape, op_reshape(tape, w, 3, (int[]){ 2, 3, 4 }));
    tape_backward(tape, loss);
    for (size_t i = 0; i < w->size; i++)
        assert_true(w->grad[i] == 1.0f);
    assert_int_equal(mem_current(MEM_TEMP), temp);
    assert_int_equal(mem_category(w->grad), MEM_GRAD);
    tape_free(tape);
    tensor_free(w);
}

/* Row-major offset of idx in shape. */
static size_t offset(int ndim, const int *shape, const int *idx)
{
    size_t off = 0;
    for (int d = 0; d < ndim; d++)
        off = off * shape[d] + idx[d];
    return off;
}

/* Every element of y = transpose(x, d0, d1) against x at the index with d0 and d1 swapped, for
 * every pair of dims (both orders, and a dim with itself). */
static void check_transpose_values(int ndim, const int *shape)
{
    Tensor *x = tensor_new(MEM_TEMP, ndim, shape);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = (float)i;
    Tape *tape = tape_new();
    for (int d0 = 0; d0 < ndim; d0++) {
        for (int d1 = 0; d1 < ndim; d1++) {
            Tensor *y = op_transpose(tape, x, d0, d1);
            assert_int_equal(y->shape[d0], shape[d1]);
            assert_int_equal(y->shape[d1], shape[d0]);
            int idx[TENSOR_MAX_DIMS];
            for (size_t i = 0; i < y->size; i++) {
                size_t rest = i;
                for (int d = ndim - 1; d >= 0; d--) {
                    idx[d] = (int)(rest % y->shape[d]);
                    rest /= y->shape[d];
                }
                int t = idx[d0];
                idx[d0] = idx[d1];
                idx[d1] = t;
                assert_true(y->data[i] == x->data[offset(ndim, shape, idx)]);
            }
        }
    }
    tape_free(tape);
    tensor_free(x);
}

static void test_transpose_values(void **state)
{
    (void)state;
    check_transpose_values(4, (int[]){ 2, 3, 4, 5 });
    /* Dims above the 16 x 16 tile of the kernel and not multiples of it: partial tiles. */
    check_transpose_values(3, (int[]){ 3, 37, 20 });
    check_transpose_values(2, (int[]){ 33, 16 });
}

static void test_transpose_grad(void **state)
{
    (void)state;
    Rng rng = rng_new(33, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 4, (int[]){ 2, 3, 4, 5 });
    const int pairs[][2] = { { 0, 1 }, { 0, 3 }, { 1, 2 }, { 3, 1 }, { 2, 3 }, { 2, 2 } };
    char label[64];
    for (int k = 0; k < 6; k++) {
        snprintf(label, sizeof label, "transpose %d,%d", pairs[k][0], pairs[k][1]);
        test_gradcheck(label, f_transpose, (Tensor *[]){ x }, 1, (void *)pairs[k],
                       move_tolerance());
    }
    Tensor *m = test_leaf(&rng, 1.0f, 2, (int[]){ 3, 7 });
    test_gradcheck("x * T(T(x)) [3,7]", f_transpose_reuse, (Tensor *[]){ m }, 1,
                   (void *)(const int[]){ 0, 1 }, move_tolerance());
    test_gradcheck("x * T(T(x)) [2,3,4,5]", f_transpose_reuse, (Tensor *[]){ x }, 1,
                   (void *)(const int[]){ 1, 3 }, move_tolerance());
    /* Partial tiles in both directions, swapping the last dim and an inner one. */
    Tensor *big = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 17, 19 });
    test_gradcheck("transpose [2,17,19] 1,2", f_transpose, (Tensor *[]){ big }, 1,
                   (void *)(const int[]){ 1, 2 }, move_tolerance());
    test_gradcheck("x * T(T(x)) [2,17,19] 0,1", f_transpose_reuse, (Tensor *[]){ big }, 1,
                   (void *)(const int[]){ 0, 1 }, move_tolerance());
    tensor_free(x);
    tensor_free(m);
    tensor_free(big);
}

/* x + transpose(transpose(x)) = 2x: the gradient is exactly 2 seed. */
static void test_transpose_twice_exact(void **state)
{
    (void)state;
    Rng rng = rng_new(34, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 3, 5 });
    Tape *tape = tape_new();
    Tensor *y = op_add(tape, x, op_transpose(tape, op_transpose(tape, x, 0, 2), 2, 0));
    float seed[30];
    for (int i = 0; i < 30; i++)
        seed[i] = rng_normal(&rng);
    tape_backward_seeded(tape, y, seed);
    for (int i = 0; i < 30; i++) {
        assert_true(y->data[i] == 2.0f * x->data[i]);
        assert_true(x->grad[i] == 2.0f * seed[i]);
    }
    tape_free(tape);
    tensor_free(x);
}

/* The abort cases run in a forked child (test_aborts) without the parent's OpenMP threads: a
 * parallel loop there would hang instead of failing, so the child uses one thread. */
static Tape *child_tape(void)
{
    par_set_threads(1);
    return tape_new();
}

static void reshape_to(void *arg)
{
    const int *shape = arg;
    op_reshape(child_tape(), tensor_new3(MEM_TEMP, 2, 3, 5), 2, shape);
}

static void transpose_dims(void *arg)
{
    const int *d = arg;
    op_transpose(child_tape(), tensor_new3(MEM_TEMP, 2, 3, 5), d[0], d[1]);
}

static void test_shape_misfit_aborts(void **state)
{
    (void)state;
    assert_false(test_aborts(reshape_to, (int[]){ 10, 3 }));
    assert_true(test_aborts(reshape_to, (int[]){ 4, 4 }));
    assert_true(test_aborts(reshape_to, (int[]){ 30, 0 }));
    assert_false(test_aborts(transpose_dims, (int[]){ 2, 0 }));
    assert_true(test_aborts(transpose_dims, (int[]){ 0, 3 }));
    assert_true(test_aborts(transpose_dims, (int[]){ -1, 1 }));
}

int main(void)
{
    par_set_split_always(true);    /* the small cases still take the threaded paths */
    par_set_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshape_is_a_view),
        cmocka_unit_test(test_reshape_grad),
        cmocka_unit_test(test_reshape_of_param),
        cmocka_unit_test(test_transpose_values),
        cmocka_unit_test(test_transpose_grad),
        cmocka_unit_test(test_transpose_twice_exact),
        cmocka_unit_test(test_shape_misfit_aborts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The tape: recording, reverse traversal, gradient accumulation, memory release. */
#include "tests/test_helpers.h"

#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"

static void test_reset_returns_act_to_zero(void **state)
{
    (void)state;
    Rng rng = rng_new(1, 1);
    size_t temp_before = mem_current(MEM_TEMP);
    Tensor *w = tensor_param("w", 2, (int[]){ 8, 8 });
    for (size_t i = 0; i < w->size; i++)
        w->data[i] = 0.1f * rng_normal(&rng);
    Tensor *x = test_leaf(&rng, 1.0f, 2, (int[]){ 4, 8 });
    size_t act0 = mem_current(MEM_ACT), temp0 = mem_current(MEM_TEMP);

    Tape *tape = tape_new();
    Tensor *h = x;
    for (int layer = 0; layer < 5; layer++)
        h = op_gelu(tape, op_matmul(tape, h, w, false));
    Tensor *loss = op_sum(tape, h);
    /* 10 outputs of 4x8 floats and the scalar loss are held as activations. */
    assert_int_equal(mem_current(MEM_ACT) - act0, 10 * 32 * 4 + 4);
    tape_backward(tape, loss);
    /* Activation gradients (b nodes) are freed as they are consumed; only the leaf x keeps its
     * gradient in temp (it is not a parameter). */
    assert_int_equal(mem_current(MEM_TEMP) - temp0, x->size * sizeof(float));
    assert_non_null(w->grad);
    tape_reset(tape);
    assert_int_equal(mem_current(MEM_ACT), act0);
    tape_free(tape);
    tensor_free(x);
    tensor_free(w);
    assert_int_equal(mem_current(MEM_TEMP), temp_before);
}

/* A chain of 20000 ops: backward is a loop, not a recursion, so depth cannot overflow the
 * stack. The scales alternate 2 and 0.5, so the exact derivative is a power of two and the
 * comparison can be exact. */
static void test_deep_chain_is_iterative(void **state)
{
    (void)state;
    Tensor *x = tensor_new1(MEM_TEMP, 1);
    x->data[0] = 1.0f;
    x->requires_grad = true;
    Tape *tape = tape_new();
    Tensor *h = x;
    double expect = 1.0;
    for (int i = 0; i < 20000; i++) {
        h = op_scale(tape, h, i % 2 ? 0.5f : 2.0f);
        expect *= i % 2 ? 0.5 : 2.0;
    }
    assert_int_equal(tape->n_nodes, 20000);
    tape_backward(tape, h);
    assert_float_equal(x->grad[0], expect, 0.0);
    tape_free(tape);
    tensor_free(x);
}

static void test_gradients_accumulate_until_zeroed(void **state)
{
    (void)state;
    Tensor *p = tensor_param("p", 1, (int[]){ 3 });
    p->data[0] = 1.0f; p->data[1] = -2.0f; p->data[2] = 3.0f;
    Tape *tape = tape_new();
    for (int pass = 1; pass <= 3; pass++) {
        tape_backward(tape, op_sum(tape, op_mul(tape, p, p)));   /* d/dp = 2p per pass */
        tape_reset(tape);
        for (int i = 0; i < 3; i++)
            assert_float_equal(p->grad[i], pass * 2.0f * p->data[i], 0.0f);
    }
    tensor_zero_grad(p);
    for (int i = 0; i < 3; i++)
        assert_float_equal(p->grad[i], 0.0f, 0.0f);
    tape_free(tape);
    tensor_free(p);
}

/* y = a*b + a: a is used by two nodes, and its gradient is the sum of both, b + 1. */
static void test_tensor_used_twice(void **state)
{
    (void)state;
    Rng rng = rng_new(2, 1);
    Tensor *a = test_leaf(&rng, 1.0f, 1, (int[]){ 5 });
    Tensor *b = test_leaf(&rng, 1.0f, 1, (int[]){ 5 });
    Tape *tape = tape_new();
    tape_backward(tape, op_sum(tape, op_add(tape, op_mul(tape, a, b), a)));
    for (int i = 0; i < 5; i++) {
        assert_float_equal(a->grad[i], b->data[i] + 1.0f, 1e-6f);
        assert_float_equal(b->grad[i], a->data[i], 1e-6f);
    }
    tape_free(tape);
    tensor_free(a);
    tensor_free(b);
}

static void test_not_recording_keeps_no_nodes(void **state)
{
    (void)state;
    Rng rng = rng_new(3, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 1, (int[]){ 4 });
    Tape *tape = tape_new();
    tape->recording = false;
    Tensor *y = op_gelu(tape, op_scale(tape, x, 3.0f));
    assert_int_equal(tape->n_nodes, 0);
    assert_false(y->requires_grad);
    /* Outputs are still owned and freed by the tape. */
    assert_int_equal(tape->n_owned, 2);
    tape_free(tape);
    tensor_free(x);
}

/* Nodes for inputs that need no gradient are not recorded at all. */
static void test_constants_are_not_recorded(void **state)
{
    (void)state;
    Tensor *c = tensor_new1(MEM_TEMP, 4);
    tensor_fill(c, 1.0f);
    Tape *tape = tape_new();
    Tensor *y = op_mul(tape, c, c);
    assert_int_equal(tape->n_nodes, 0);
    assert_false(y->requires_grad);
    tape_free(tape);
    tensor_free(c);
}

static void test_reverse_order_visits_consumers_first(void **state)
{
    (void)state;
    /* h1 = 2x, h2 = h1 * h1, y = h2 + h1: dy/dx = (2 h1 + 1) * 2 = 8x + 2. */
    Tensor *x = tensor_new1(MEM_TEMP, 1);
    x->data[0] = 1.5f;
    x->requires_grad = true;
    Tape *tape = tape_new();
    Tensor *h1 = op_scale(tape, x, 2.0f);
    Tensor *h2 = op_mul(tape, h1, h1);
    Tensor *y = op_add(tape, h2, h1);
    assert_string_equal(tape->nodes[0].op, "scale");
    assert_string_equal(tape->nodes[2].op, "add");
    tape_backward(tape, y);
    assert_float_equal(x->grad[0], 8.0f * 1.5f + 2.0f, 0.0f);
    tape_free(tape);
    tensor_free(x);
}

static void test_same_seed_same_threads_bit_identical(void **state)
{
    (void)state;
    float first[64 * 48];
    for (int run = 0; run < 2; run++) {
        Rng rng = rng_new(42, 1);
        Tensor *x = test_leaf(&rng, 1.0f, 2, (int[]){ 96, 64 });
        Tensor *w = test_leaf(&rng, 0.2f, 2, (int[]){ 64, 48 });
        Tape *tape = tape_new();
        tape_backward(tape, op_sum(tape, op_gelu(tape, op_matmul(tape, x, w, false))));
        if (run == 0)
            memcpy(first, w->grad, sizeof first);
        else
            assert_memory_equal(first, w->grad, sizeof first);
        tape_free(tape);
        tensor_free(x);
        tensor_free(w);
    }
}

int main(void)
{
    par_set_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reset_returns_act_to_zero),
        cmocka_unit_test(test_deep_chain_is_iterative),
        cmocka_unit_test(test_gradients_accumulate_until_zeroed),
        cmocka_unit_test(test_tensor_used_twice),
        cmocka_unit_test(test_not_recording_keeps_no_nodes),
        cmocka_unit_test(test_constants_are_not_recorded),
        cmocka_unit_test(test_reverse_order_visits_consumers_first),
        cmocka_unit_test(test_same_seed_same_threads_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

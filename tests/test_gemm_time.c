/* The product clock (autograd/parallel.h, par_product_clock), behind bench_gpt's "share of the
 * step outside the products":
 *   - N products counted as N calls, with a time > 0 and no more than the wall time around them,
 *     and the same bits as the library call without the clock;
 *   - a product split over 2 threads counts once, not once per block;
 *   - products run by every thread of a region count on thread 0 only, also from a region
 *     nested in it (where every thread is thread 0 of its inner team);
 *   - reset clears it. */
#include "tests/test_helpers.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autograd/gemm.h"
#include "autograd/parallel.h"

enum { M = 96, N = 80, K = 64, REPEATS = 7 };

typedef struct {
    float *A, *B, *C;
} Operands;

static Operands operands(uint64_t seed)
{
    Rng rng = rng_new(seed, 1);
    Operands o = { test_normal_floats(&rng, (long)M * K), test_normal_floats(&rng, (long)K * N),
                   calloc((size_t)M * N, sizeof(float)) };
    assert_non_null(o.C);
    return o;
}

static void free_operands(Operands *o) { free(o->A), free(o->B), free(o->C); }

static long long wall_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void product(const Operands *o)
{
    par_sgemm(false, false, M, N, K, 1.0f, o->A, K, o->B, N, 0.0f, o->C, N);
}

/* REPEATS products on a fresh clock: it must count each once, within the wall time around them. */
static void counts_repeats(const Operands *o)
{
    par_product_clock_reset();
    long long t0 = wall_ns();
    for (int i = 0; i < REPEATS; i++)
        product(o);
    long long wall = wall_ns() - t0;
    ParProductClock c = par_product_clock();
    assert_int_equal(c.calls, REPEATS);
    assert_true(c.ns > 0);
    assert_true(c.ns <= wall);
}

static void test_counts_each_product(void **state)
{
    (void)state;
    par_set_threads(1);
    Operands o = operands(3);
    float *ref = calloc((size_t)M * N, sizeof(float));
    assert_non_null(ref);
    gemm_sgemm(false, false, M, N, K, 1.0f, o.A, K, o.B, N, 0.0f, ref, N);
    counts_repeats(&o);
    /* The clock is off the numbers: the same bits as the bare library call. */
    assert_memory_equal(o.C, ref, sizeof(float) * M * N);
    free(ref);
    free_operands(&o);
}

/* Split over 2 threads, each product is one call: counting the blocks would give 2 per product,
 * counting inside the region's gemm_sgemm calls on every thread likewise. */
static void test_split_product_counts_once(void **state)
{
    (void)state;
    par_set_threads(2);
    par_set_split_always(true);
    Operands o = operands(4);
    counts_repeats(&o);
    par_set_split_always(false);
    free_operands(&o);
}

static void serial_product(const Operands *o)
{
    par_sgemm_serial(false, false, M, N, K, 1.0f, o->A, K, o->B, N, 0.0f, o->C, N);
}

/* Each thread of a 2-thread region runs REPEATS products (as attention's heads do with
 * par_sgemm_serial): thread 0's REPEATS are counted, thread 1's are not. Nested, each thread
 * runs them in an inner region of its own, where it is thread 0 of that team, and still only
 * the step's thread counts. */
static void region_of_products(bool nested, int *threads_seen, ParProductClock *c, long long *wall)
{
    Operands o[2] = { operands(5), operands(6) };
    par_set_split_always(true);
    par_product_clock_reset();
    long long t0 = wall_ns();
    #pragma omp parallel num_threads(2)
    {
        int t = omp_get_thread_num();
        if (t == 0)
            *threads_seen = omp_get_num_threads();
        for (int i = 0; i < REPEATS; i++) {
            if (nested) {
                /* An inner region of one thread: there omp_get_thread_num() is 0 on both. */
                #pragma omp parallel num_threads(1)
                serial_product(&o[t]);
            } else {
                serial_product(&o[t]);
            }
        }
    }
    *wall = wall_ns() - t0;
    *c = par_product_clock();
    par_set_split_always(false);
    free_operands(&o[0]);
    free_operands(&o[1]);
}

static void test_region_counts_thread_zero(void **state)
{
    (void)state;
    par_set_threads(2);
    for (int nested = 0; nested <= 1; nested++) {
        int threads = 0;
        ParProductClock c;
        long long wall;
        region_of_products(nested, &threads, &c, &wall);
        assert_int_equal(threads, 2);      /* else the test would prove nothing */
        if (c.calls != REPEATS)
            fail_msg("%s: %lld products counted, expected thread 0's %d",
                     nested ? "in nested regions" : "in a region", c.calls,
                     REPEATS);
        assert_true(c.ns > 0);
        assert_true(c.ns <= wall);
    }
}

static void test_reset_clears(void **state)
{
    (void)state;
    par_set_threads(1);
    Operands o = operands(7);
    product(&o);
    assert_true(par_product_clock().calls >= 1);
    par_product_clock_reset();
    ParProductClock c = par_product_clock();
    assert_int_equal(c.calls, 0);
    assert_int_equal(c.ns, 0);
    product(&o);
    assert_int_equal(par_product_clock().calls, 1);
    free_operands(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_each_product),
        cmocka_unit_test(test_split_product_counts_once),
        cmocka_unit_test(test_region_counts_thread_zero),
        cmocka_unit_test(test_reset_clears),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

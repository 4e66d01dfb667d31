/* The GEMM libraries (autograd/gemm.h) under par_sgemm:
 *   - every layout's product equals the plain triple loop in double (par_sgemm_naive) within
 *     float rounding, on 1 thread and on 2, on whichever library gemm_library picked;
 *   - with oneDNN held to AVX2 (set before its first call, as bench/gpt_avx2.sh does), a
 *     GEMM=auto build leaves the products to OpenBLAS. */
#include "tests/test_helpers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "autograd/gemm.h"
#include "autograd/parallel.h"

typedef struct {
    bool ta, tb;
    int M, N, K;
} Shape;

/* Each layout; main() has par_sgemm split every one over 2 threads (par_set_split_always). */
static const Shape SHAPES[] = {
    { false, false, 256, 384, 128 }, { false, true, 256, 128, 384 },
    { true, false, 200, 512, 256 },  { true, true, 96, 80, 64 },
};

static void test_products_match_naive(void **state)
{
    (void)state;
    Rng rng = rng_new(5, 1);
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        const Shape *s = &SHAPES[i];
        int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
        long n = (long)s->M * s->N;
        float *A = test_normal_floats(&rng, (long)s->M * s->K);
        float *B = test_normal_floats(&rng, (long)s->K * s->N);
        float *C = calloc((size_t)n, sizeof(float)), *ref = calloc((size_t)n, sizeof(float));
        assert_non_null(C);
        assert_non_null(ref);
        par_sgemm_naive(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, ref, s->N);
        /* Each entry sums K products of N(0, 1) numbers: float's rounding leaves a few ulps of
         * sqrt(K), far below 1e-4 sqrt(K); a wrong layout or row block misses by about 1. */
        double tol = 1e-4 * sqrt((double)s->K);
        for (int threads = 1; threads <= 2; threads++) {
            par_set_threads(threads);
            par_sgemm(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
            for (long j = 0; j < n; j++)
                if (fabs((double)C[j] - ref[j]) > tol)
                    fail_msg("shape %zu, %d threads, entry %ld: %.7g against %.7g", i, threads,
                             j, C[j], ref[j]);
        }
        par_set_threads(2);
        free(A), free(B), free(C), free(ref);
    }
}

/* Each region decides from its work (parallel.h): below PAR_MIN_MADDS multiply-adds a product
 * runs on the calling thread, from it up on all; a loop likewise by its FLOPs. A transformer's
 * product at width 64 and 256 tokens stays on one thread, at width 128 and 4096 tokens splits.
 * par_set_split_always (TAPEGRAD_SPLIT=always) splits everything; false restores the rule. */
static void test_split_decision(void **state)
{
    (void)state;
    par_set_split_always(false);
    assert_false(par_worth_madds(PAR_MIN_MADDS - 1.0));
    assert_true(par_worth_madds(PAR_MIN_MADDS));
    assert_false(par_worth_madds(256.0 * 256 * 64));
    assert_true(par_worth_madds(4096.0 * 512 * 128));
    assert_false(par_worth(PAR_MIN_FLOPS - 1.0));
    assert_true(par_worth(PAR_MIN_FLOPS));
    assert_int_equal(PAR_MIN_ELEMENTS * 4, PAR_MIN_FLOPS);
    par_set_split_always(true);
    assert_true(par_worth_madds(1.0));
    assert_true(par_worth(1.0));
}

static void test_avx2_hold_leaves_openblas(void **state)
{
    (void)state;
    /* main() holds oneDNN to AVX2 when this CPU has it and the environment chose nothing else. */
    const char *isa = getenv("DNNL_MAX_CPU_ISA");
    if (strcmp(gemm_backend(), "auto") != 0 || !isa || strcasecmp(isa, "AVX2") != 0)
        skip();
    assert_int_equal(gemm_library(), GEMM_OPENBLAS);
    char buf[256];
    assert_non_null(strstr(gemm_describe(buf, sizeof buf), "OpenBLAS"));
}

int main(void)
{
    par_set_split_always(true);    /* the small cases still take the threaded paths */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        setenv("DNNL_MAX_CPU_ISA", "AVX2", 0);
    par_set_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_products_match_naive),
        cmocka_unit_test(test_split_decision),
        cmocka_unit_test(test_avx2_hold_leaves_openblas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The portable kernel mode (autograd/kernels.h):
 *   - gemm_portable_sgemm gives, bit for bit, the definition written as three loops (one fmaf
 *     chain per element, k ascending, from beta C), for every layout, alpha and beta, sizes
 *     that leave partial tiles and several blocks of k;
 *   - the AVX2 kernel and the plain C kernel agree bit for bit;
 *   - par_sgemm in portable mode gives the same bits on 1, 2 and 3 threads;
 *   - the fixed-order row sums of autograd/reduce.h are the order they promise;
 *   - TAPEGRAD_KERNELS and kernels_parse read only "portable" and "fast". */
#include "tests/test_helpers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/gemm.h"
#include "autograd/gemm_portable.h"
#include "autograd/kernels.h"
#include "autograd/parallel.h"
#include "autograd/reduce.h"

typedef struct {
    bool ta, tb;
    int M, N, K;
    float alpha, beta;
} Case;

/* Partial tiles (M % 6, N % 16), several blocks of k (K > 256), a block of C wider than one
 * copy of B (N > 512), every layout, alpha and beta not 0 or 1. */
static const Case CASES[] = {
    { false, false, 13, 37, 300, 1.0f, 0.0f },  { false, true, 7, 530, 65, 1.0f, 1.0f },
    { true, false, 125, 17, 513, 0.5f, 0.0f },  { true, true, 6, 16, 1, 1.0f, 0.0f },
    { false, false, 1, 1, 700, -1.5f, 0.25f },  { true, false, 31, 45, 257, 0.3f, 1.0f },
};

/* The definition of gemm_portable.h, element by element. */
static void definition(const Case *c, const float *A, int lda, const float *B, int ldb,
                       float *C)
{
    for (int i = 0; i < c->M; i++)
        for (int j = 0; j < c->N; j++) {
            float *cij = &C[(long)i * c->N + j];
            float acc = c->beta == 0.0f ? 0.0f : c->beta == 1.0f ? *cij : c->beta * *cij;
            for (int k = 0; k < c->K; k++) {
                float a = c->ta ? A[(long)k * lda + i] : A[(long)i * lda + k];
                float b = c->tb ? B[(long)j * ldb + k] : B[(long)k * ldb + j];
                acc = fmaf(c->alpha == 1.0f ? a : c->alpha * a, b, acc);
            }
            *cij = acc;
        }
}

static void assert_same_bits(const float *got, const float *want, long n, const char *what,
                             size_t which)
{
    for (long j = 0; j < n; j++)
        if (memcmp(&got[j], &want[j], sizeof got[j]) != 0)
            fail_msg("%s, case %zu, entry %ld: %.9g where the definition gives %.9g", what,
                     which, j, got[j], want[j]);
}

static void run_cases(const char *what, void (*product)(const Case *, const float *, int,
                                                        const float *, int, float *))
{
    Rng rng = rng_new(11, 1);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const Case *c = &CASES[i];
        int lda = c->ta ? c->M : c->K, ldb = c->tb ? c->K : c->N;
        long n = (long)c->M * c->N;
        float *A = test_normal_floats(&rng, (long)c->M * c->K);
        float *B = test_normal_floats(&rng, (long)c->K * c->N);
        float *C = test_normal_floats(&rng, n), *want = malloc((size_t)n * sizeof(float));
        assert_non_null(want);
        memcpy(want, C, (size_t)n * sizeof(float));
        definition(c, A, lda, B, ldb, want);
        product(c, A, lda, B, ldb, C);
        assert_same_bits(C, want, n, what, i);
        free(A), free(B), free(C), free(want);
    }
}

static void portable(const Case *c, const float *A, int lda, const float *B, int ldb, float *C)
{
    gemm_portable_sgemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, A, lda, B, ldb, c->beta, C,
                        c->N);
}

static void test_portable_is_the_definition(void **state)
{
    (void)state;
    run_cases("AVX2 kernel (or plain where the CPU has no AVX2)", portable);
    gemm_portable_force_plain(true);
    run_cases("plain kernel", portable);
    gemm_portable_force_plain(false);
}

static int threads_now = 1;

static void through_par_sgemm(const Case *c, const float *A, int lda, const float *B, int ldb,
                              float *C)
{
    par_set_threads(threads_now);
    par_sgemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, A, lda, B, ldb, c->beta, C, c->N);
}

/* par_sgemm splits rows over the threads: each row is the same chain of fmas wherever it runs.
 * main() has every case split (par_set_split_always), however small. */
static void test_portable_threads_agree(void **state)
{
    (void)state;
    kernels_set(KERNELS_PORTABLE);
    assert_int_equal(kernels_mode(), KERNELS_PORTABLE);
    for (threads_now = 1; threads_now <= 3; threads_now++)
        run_cases("par_sgemm, portable", through_par_sgemm);
    kernels_set(KERNELS_FAST);
    par_set_threads(1);
}

/* red_sum's order, written out the slow way: lane l takes x[l], x[l + 16], ... in order, then
 * the lanes are folded 8 + 4 + 2 + 1. Values of very different sizes make any other order
 * round differently. */
static float lanes_by_hand(const float *x, int n)
{
    float lane[RED_LANES] = { 0 };
    for (int i = 0; i < n; i++)
        lane[i % RED_LANES] += x[i];
    for (int w = RED_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++)
            lane[l] += lane[l + w];
    return lane[0];
}

static void test_reduce_order(void **state)
{
    (void)state;
    Rng rng = rng_new(3, 1);
    float x[203], ones[203];
    for (int i = 0; i < 203; i++) {
        x[i] = 1.0f + rng_uniform(&rng);
        ones[i] = 1.0f;
    }
    /* One large value first: sequentially, every later addend is rounded to its ulp (2); in
     * lanes, fifteen of the sixteen lanes sum the small values exactly before meeting it. */
    x[0] = 16777216.0f;
    int sizes[] = { 1, 15, 16, 17, 100, 203 };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        float want = lanes_by_hand(x, n);
        assert_memory_equal(&(float){ red_sum(x, n) }, &want, sizeof want);
        assert_memory_equal(&(float){ red_dot(x, ones, n) }, &want, sizeof want);
        /* The sequential sum differs: the test can tell the orders apart. */
        float seq = 0.0f;
        for (int i = 0; i < n; i++)
            seq += x[i];
        if (n == 203)
            assert_true(seq != want);
    }
}

static void test_kernels_parse(void **state)
{
    (void)state;
    KernelsMode m = KERNELS_FAST;
    assert_true(kernels_parse("portable", &m));
    assert_int_equal(m, KERNELS_PORTABLE);
    assert_true(kernels_parse("fast", &m));
    assert_int_equal(m, KERNELS_FAST);
    assert_false(kernels_parse("Portable", &m));
    assert_false(kernels_parse("", &m));
    assert_int_equal(m, KERNELS_FAST);
    assert_string_equal(kernels_name(KERNELS_PORTABLE), "portable");
}

int main(void)
{
    par_set_split_always(true);    /* the small cases still take the threaded paths */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_portable_is_the_definition),
        cmocka_unit_test(test_portable_threads_agree),
        cmocka_unit_test(test_reduce_order),
        cmocka_unit_test(test_kernels_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Stochastic rounding of the dynamic 8-bit code (precision/quant_dynamic.h): every code is one
 * of the two levels around its value, the decoded mean equals the input within the statistical
 * tolerance of a Bernoulli draw, the unsigned floor still holds, and the bytes depend only on
 * the values, the seed and the element indices. (The code tables, nearest rounding and 8-bit
 * Adam are tested in test_adam8bit.c.) */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "precision/quant_dynamic.h"

/* The two levels around v found by a linear scan, independent of the library's search: lo is
 * the largest level <= v and hi the next one (hi = lo at the ends or on a level). */
static void neighbours_by_scan(const QdynCode *c, double v, int *lo, int *hi)
{
    *lo = 0;
    for (int k = 0; k < QDYN_LEVELS; k++)
        if (c->level[k] <= v)
            *lo = k;
    *hi = *lo;
    if (v > c->level[*lo] && *lo + 1 < QDYN_LEVELS)
        *hi = *lo + 1;
}

/* A block of N values: N - 1 copies of v * A and one A, the absmax, last. */
enum { N = 1 << 16 };
static float x[N];
static uint8_t codes[N];

static void fill_block(float v, float absmax)
{
    for (int i = 0; i < N - 1; i++)
        x[i] = v * absmax;
    x[N - 1] = absmax;
}

/* Rounding up with probability p = (v - lo) / (hi - lo) makes each decoded value a Bernoulli
 * draw between lo and hi: mean exactly v, standard deviation (hi - lo) sqrt(p (1 - p)). Over
 * N - 1 draws the mean is within 5 standard errors of v, plus what float arithmetic can bias:
 * v = x / absmax and p rounded to floats (2^-22 relative to v and to the gap) and p compared with
 * a 24-bit uniform (2^-24 of the gap). The share of ups is within 5 standard errors of p. */
static void check_unbiased(const QdynCode *c, float v, float absmax, uint64_t seed)
{
    fill_block(v, absmax);
    float a = qdyn_quantize_block_stochastic(c, x, N, seed, 0, codes);
    assert_true(a == absmax);
    double vd = (double)x[0] / absmax;
    int lo, hi;
    neighbours_by_scan(c, vd, &lo, &hi);
    assert_true(hi == lo + 1);
    double gap = ((double)c->level[hi] - c->level[lo]) * absmax;
    double p = (vd - c->level[lo]) / ((double)c->level[hi] - c->level[lo]);
    double sum = 0.0;
    long ups = 0;
    for (int i = 0; i < N - 1; i++) {
        assert_true(codes[i] == lo || codes[i] == hi);
        ups += codes[i] == hi;
        sum += (double)c->level[codes[i]] * absmax;
    }
    double draws = N - 1, mean = sum / draws;
    double se = gap * sqrt(p * (1.0 - p) / draws);
    double float_bias = 0x1p-22 * (fabs((double)x[0]) + gap) + 0x1p-24 * gap;
    printf("%s v = %-9.3g levels %.6g %.6g: p(up) %.4f, observed %.4f; mean - x = %+.3g (%.2f "
           "standard errors)\n", c->is_signed ? "signed  " : "unsigned", (double)v,
           (double)c->level[lo], (double)c->level[hi], p, ups / draws, mean - x[0],
           (mean - x[0]) / se);
    assert_true(fabs(mean - x[0]) <= 5.0 * se + float_bias);
    assert_true(fabs(ups / draws - p) <= 5.0 * sqrt(p * (1.0 - p) / draws) + 0x1p-22);
}

static void test_stochastic_unbiased(void **state)
{
    (void)state;
    QdynCode s, u;
    qdyn_code_init(&s, true);
    qdyn_code_init(&u, false);
    /* One value in most decades, away from any level; negative ones for the signed code. */
    const float vs[] = { 0.37f, -0.5171f, 0.0123f, -0.00421f, 3.3e-4f, 2.9e-5f, -2.1e-6f, 3e-7f };
    const float vu[] = { 0.37f, 0.0123f, 0.00421f, 3.3e-4f, 2.9e-5f, 2.1e-6f, 5e-7f };
    for (size_t k = 0; k < sizeof vs / sizeof vs[0]; k++)
        check_unbiased(&s, vs[k], 3.0f, 100 + k);
    for (size_t k = 0; k < sizeof vu / sizeof vu[0]; k++)
        check_unbiased(&u, vu[k], 0.002f, 200 + k);
}

/* Values spread over seven decades of both signs (and exact levels): each code is one of the
 * two levels around its value, a value on a level keeps it, and an unsigned positive value
 * below the smallest positive level gets that level (the floor of quant_dynamic.h), never 0. */
static void test_stochastic_neighbours(void **state)
{
    (void)state;
    for (int sign = 0; sign < 2; sign++) {
        QdynCode c;
        qdyn_code_init(&c, sign);
        const float absmax = 4.0f;   /* a power of two: v = x / absmax is exact */
        Rng rng = rng_new(13, 0);
        for (int i = 0; i < N - 1; i++) {
            float mag = rng_uniform(&rng) * powf(10.0f, -8.0f * rng_uniform(&rng));
            x[i] = (sign && (i & 1) ? -mag : mag) * absmax;
        }
        for (int k = 0; k < QDYN_LEVELS; k++)
            x[k * 7] = c.level[k] * absmax;
        x[N - 1] = absmax;
        assert_true(qdyn_quantize_block_stochastic(&c, x, N, 5, 0, codes) == absmax);
        int moved = 0;
        for (int i = 0; i < N; i++) {
            int lo, hi;
            double v = x[i] / absmax;
            neighbours_by_scan(&c, v, &lo, &hi);
            if (!sign && lo == 0 && v > 0.0)
                assert_int_equal(codes[i], 1);
            else
                assert_true(codes[i] == lo || codes[i] == hi);
            if (v == c.level[lo])
                assert_int_equal(codes[i], lo);
            moved += codes[i] == hi && hi != lo;
        }
        /* Not all down, which would be truncation: a good share rounds up. */
        printf("%s: %d of %d values rounded up\n", sign ? "signed" : "unsigned", moved, N);
        assert_true(moved > N / 10);
    }
}

/* Far below the smallest positive level every draw keeps the floor level; exact zeros stay 0;
 * a block of zeros is all zero codes with absmax 0. */
static void test_stochastic_floor_and_zeros(void **state)
{
    (void)state;
    QdynCode s, u;
    qdyn_code_init(&s, true);
    qdyn_code_init(&u, false);
    fill_block(1e-10f, 1.0f);
    x[5] = 0.0f;
    qdyn_quantize_block_stochastic(&u, x, N, 9, 0, codes);
    for (int i = 0; i < N - 1; i++)
        assert_int_equal(codes[i], i == 5 ? 0 : 1);
    assert_int_equal(codes[N - 1], 255);
    for (int i = 0; i < N; i++)
        x[i] = 0.0f;
    assert_true(qdyn_quantize_block_stochastic(&s, x, N, 9, 0, codes) == 0.0f);
    for (int i = 0; i < N; i++)
        assert_int_equal(codes[i], 127);
}

/* The same values and seed give the same bytes; another seed others. Element i's bits depend on
 * index0 + i alone: the tail of a block, encoded on its own from index0 = its offset (with the
 * same absmax, which is last), gives the tail's bytes. Stream seeds are deterministic and differ
 * between neighbouring counters. */
static void test_stochastic_reproducible(void **state)
{
    (void)state;
    enum { M = 4096, TAIL = 1000 };
    static float y[M];
    static uint8_t a[M], b[M], tail[M - TAIL];
    QdynCode c;
    qdyn_code_init(&c, true);
    Rng rng = rng_new(21, 0);
    for (int i = 0; i < M; i++)
        y[i] = 0.1f * rng_normal(&rng);
    y[M - 1] = 10.0f;
    uint64_t seed = qdyn_stream_seed(7, 3, 1);
    qdyn_quantize_block_stochastic(&c, y, M, seed, 0, a);
    qdyn_quantize_block_stochastic(&c, y, M, seed, 0, b);
    assert_memory_equal(a, b, M);
    qdyn_quantize_block_stochastic(&c, y + TAIL, M - TAIL, seed, TAIL, tail);
    assert_memory_equal(a + TAIL, tail, M - TAIL);
    qdyn_quantize_block_stochastic(&c, y, M, seed + 1, 0, b);
    assert_true(memcmp(a, b, M) != 0);
    assert_true(qdyn_stream_seed(7, 3, 1) == seed);
    assert_true(qdyn_stream_seed(7, 3, 2) != seed && qdyn_stream_seed(7, 4, 1) != seed &&
                qdyn_stream_seed(8, 3, 1) != seed && qdyn_stream_seed(7, 1, 3) != seed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stochastic_unbiased),
        cmocka_unit_test(test_stochastic_neighbours),
        cmocka_unit_test(test_stochastic_floor_and_zeros),
        cmocka_unit_test(test_stochastic_reproducible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

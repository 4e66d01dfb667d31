/* The defining property of each rounding mode, stochastic rounding's statistics and
 * reproducibility, the overflow and special-value rules of format.h on named values, the
 * format table, and the packed layouts. */
#include "precision/format.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static const Rounding RNE = {.mode = FMT_ROUND_NEAREST_EVEN};
static const Rounding SAT = {.mode = FMT_ROUND_NEAREST_EVEN, .saturate = true};

static Rounding mode(RoundMode m) { return (Rounding){.mode = m}; }

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Random finite floats: random bit patterns mixed with values in [-1000, 1000]. */
static float sample(uint64_t i)
{
    uint32_t u = fmt_random_bits(7, i);
    float x;
    memcpy(&x, &u, sizeof x);
    if (i % 2 || !isfinite(x))
        x = ((float)(u >> 8) * 0x1p-24f - 0.5f) * 2000.0f;
    return x;
}

static void test_table_and_names(void **state)
{
    (void)state;
    for (int f = 0; f < FMT_COUNT; f++) {
        const FormatInfo *fi = fmt_info(f);
        assert_int_equal(fmt_from_name(fmt_name(f)), f);
        assert_int_equal(fi->bits, fi->sign_bits + fi->exponent_bits + fi->mantissa_bits);
        assert_true(fi->min_normal == ldexpf(1.0f, 1 - fi->bias));
        assert_true(fi->min_subnormal == ldexpf(1.0f, 1 - fi->bias - fi->mantissa_bits));
        assert_true(fi->epsilon == ldexpf(1.0f, -fi->mantissa_bits));
        /* max rounds to itself and the next fp32 value above it does not stay finite or below */
        assert_true(fmt_round(f, fi->max_finite, RNE, 0) == fi->max_finite);
        assert_true(fmt_round(f, fi->min_subnormal, RNE, 0) == fi->min_subnormal);
        assert_true(fmt_round(f, fi->min_subnormal / 2, RNE, 0) == 0.0f);
        assert_true(fmt_round(f, 1.0f + fi->epsilon, RNE, 0) == 1.0f + fi->epsilon);
    }
    assert_int_equal(fmt_from_name("fp64"), -1);
    assert_int_equal(fmt_from_name("E4M3"), -1);
    for (int m = 0; m < FMT_ROUND_COUNT; m++)
        assert_int_equal(fmt_round_from_name(fmt_round_name(m)), m);
    assert_string_equal(fmt_round_name(FMT_ROUND_DOWN), "rdown");
    assert_int_equal(fmt_round_from_name("nearest"), -1);
    assert_true(fmt_info(FMT_E4M3)->max_finite == 448.0f);
    assert_true(fmt_info(FMT_E5M2)->max_finite == 57344.0f);
    assert_true(fmt_info(FMT_E2M1)->max_finite == 6.0f);
    assert_true(fmt_info(FMT_FP16)->max_finite == 65504.0f);
}

/* Named values at the edges: overflow on the rounded magnitude, NaN and inf rules, signs. */
static void test_overflow_rules(void **state)
{
    (void)state;
    assert_true(fmt_round(FMT_E4M3, 464.0f, RNE, 0) == 448.0f);        /* tie to even: 448 */
    assert_true(isnan(fmt_round(FMT_E4M3, 465.0f, RNE, 0)));
    assert_int_equal(fmt_encode(FMT_E4M3, -465.0f, RNE, 0), 0xff);      /* NaN keeps the sign */
    assert_int_equal(fmt_encode(FMT_E4M3, 1e6f, mode(FMT_ROUND_TOWARD_ZERO), 0), 0x7e);
    assert_int_equal(fmt_encode(FMT_E4M3, INFINITY, RNE, 0), 0x7f);
    assert_int_equal(fmt_encode(FMT_E4M3, -INFINITY, SAT, 0), 0xfe);
    assert_true(fmt_round(FMT_E5M2, 61439.0f, RNE, 0) == 57344.0f);
    assert_true(isinf(fmt_round(FMT_E5M2, 61440.0f, RNE, 0)));         /* tie goes to 2^16 */
    assert_true(fmt_round(FMT_E5M2, 61440.0f, SAT, 0) == 57344.0f);
    assert_true(fmt_round(FMT_FP16, 65519.0f, RNE, 0) == 65504.0f);
    assert_true(isinf(fmt_round(FMT_FP16, 65520.0f, RNE, 0)));
    assert_true(fmt_round(FMT_FP16, 1e9f, mode(FMT_ROUND_TOWARD_ZERO), 0) == 65504.0f);
    assert_true(fmt_round(FMT_FP16, 1e9f, mode(FMT_ROUND_UP), 0) == INFINITY);
    assert_true(fmt_round(FMT_FP16, 1e9f, mode(FMT_ROUND_DOWN), 0) == 65504.0f);
    assert_true(fmt_round(FMT_FP16, -1e9f, mode(FMT_ROUND_UP), 0) == -65504.0f);
    assert_true(fmt_round(FMT_FP16, -1e9f, mode(FMT_ROUND_DOWN), 0) == -INFINITY);
    assert_true(fmt_round(FMT_FP16, INFINITY, mode(FMT_ROUND_TOWARD_ZERO), 0) == INFINITY);
    assert_true(fmt_round(FMT_BF16, FLT_MAX, RNE, 0) == INFINITY);
    assert_true(fmt_round(FMT_BF16, FLT_MAX, SAT, 0) == 0x1.fep127f);
    assert_true(fmt_round(FMT_E2M1, 100.0f, RNE, 0) == 6.0f);
    assert_true(fmt_round(FMT_E2M1, -INFINITY, RNE, 0) == -6.0f);
    assert_true(fmt_round(FMT_E2M1, 5.0f, RNE, 0) == 4.0f);
    assert_true(fmt_round(FMT_E2M1, 5.0f, mode(FMT_ROUND_NEAREST_AWAY), 0) == 6.0f);
    assert_int_equal(fmt_encode(FMT_E2M1, -NAN, RNE, 0), 0xf);          /* no NaN: -max */
    assert_true(fmt_round(FMT_FP32, INFINITY, SAT, 0) == FLT_MAX);
    assert_int_equal(fmt_encode(FMT_FP16, -NAN, RNE, 0), 0xfe00);
    assert_int_equal(fmt_encode(FMT_BF16, NAN, SAT, 0), 0x7fc0);         /* NaN is not saturated */
    assert_int_equal(fmt_encode(FMT_TF32, 1.0f + 0x1p-11f + 0x1p-20f, RNE, 0), 0x3f802000);
}

static void test_signed_zero_and_underflow(void **state)
{
    (void)state;
    for (int f = FMT_TF32; f < FMT_COUNT; f++) {
        const FormatInfo *fi = fmt_info(f);
        float tiny = fi->min_subnormal * 0.25f;
        assert_int_equal(bits_of(fmt_round(f, -tiny, RNE, 0)), 0x80000000u);
        assert_int_equal(bits_of(fmt_round(f, -0.0f, RNE, 0)), 0x80000000u);
        assert_true(fmt_round(f, tiny, mode(FMT_ROUND_UP), 0) == fi->min_subnormal);
        assert_true(fmt_round(f, -tiny, mode(FMT_ROUND_DOWN), 0) == -fi->min_subnormal);
        /* the largest subnormal rounds up into the smallest normal */
        float below_min_normal = fi->min_normal - fi->min_subnormal / 4;
        assert_true(fmt_round(f, below_min_normal, RNE, 0) == fi->min_normal);
    }
    /* an fp32 subnormal keeps its value in bf16 and tf32 when it has few enough bits */
    assert_true(fmt_round(FMT_BF16, 0x1.8p-130f, RNE, 0) == 0x1.8p-130f);
    assert_true(fmt_round(FMT_TF32, 0x1.4p-145f, RNE, 0) == 0.0f);       /* below half of 2^-136 */
    assert_true(fmt_round(FMT_TF32, 0x1.4p-137f, RNE, 0) == 0x1p-136f);
}

/* Toward zero never increases the magnitude, up never decreases the value, down never
 * increases it (within the finite range: e2m1 saturates, so beyond 6 "up" gives 6); every result
 * is representable (rounds to itself) and every mode is monotonic. */
static void test_mode_properties(void **state)
{
    (void)state;
    enum { N = 200000 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    for (int i = 0; i < N; i++)
        x[i] = sample((uint64_t)i);
    size_t violations = 0;
    for (int f = 0; f < FMT_COUNT; f++) {
        for (int m = 0; m < FMT_ROUND_STOCHASTIC; m++) {
            fmt_round_array(f, x, y, N, mode(m), 0);
            for (int i = 0; i < N; i++) {
                float r = y[i];
                if (isnan(r))
                    continue;       /* e4m3 overflow: checked by name above */
                violations += fmt_round(f, r, mode(m), 0) != r;
                if (fabsf(x[i]) > fmt_info(f)->max_finite)
                    continue;
                violations += m == FMT_ROUND_TOWARD_ZERO && fabsf(r) > fabsf(x[i]);
                violations += m == FMT_ROUND_UP && r < x[i];
                violations += m == FMT_ROUND_DOWN && r > x[i];
            }
        }
    }
    assert_int_equal(violations, 0);
    /* monotonic: along a sorted sweep the rounded values never go down */
    for (int i = 0; i < N; i++)
        x[i] = -70000.0f + 140000.0f * (float)i / N;
    for (int f = 0; f < FMT_COUNT; f++) {
        for (int m = 0; m < FMT_ROUND_STOCHASTIC; m++) {
            fmt_round_array(f, x, y, N, (Rounding){.mode = m, .saturate = true}, 0);
            for (int i = 1; i < N; i++)
                violations += y[i] < y[i - 1];
        }
    }
    assert_int_equal(violations, 0);
    free(x);
    free(y);
}

/* Stochastic rounding gives one of the two neighbours, with mean equal to the input: the
 * sample mean must lie within 5 standard errors (a false alarm about once in 3 million runs;
 * the seeds are fixed, so the test is deterministic anyway). */
static void check_unbiased(Format f, float x)
{
    enum { N = 400000 };
    float lo = fmt_round(f, x, mode(FMT_ROUND_DOWN), 0);
    float hi = fmt_round(f, x, mode(FMT_ROUND_UP), 0);
    float *xs = malloc(N * sizeof *xs), *ys = malloc(N * sizeof *ys);
    for (int i = 0; i < N; i++)
        xs[i] = x;
    fmt_round_array(f, xs, ys, N, (Rounding){.mode = FMT_ROUND_STOCHASTIC, .seed = 42}, 0);
    double sum = 0;
    int ups = 0;
    for (int i = 0; i < N; i++) {
        assert_true(ys[i] == lo || ys[i] == hi);
        ups += ys[i] == hi && hi != lo;
        sum += ys[i];
    }
    double mean = sum / N, p = (hi == lo) ? 0 : ((double)x - lo) / ((double)hi - lo);
    double se = ((double)hi - lo) * sqrt(p * (1 - p) / N);
    print_message("%s x=%.9g: neighbours %.9g %.9g, p(up)=%.4f, observed %.4f, mean-x=%.3g "
                  "(%.2f standard errors)\n", fmt_name(f), x, lo, hi, p, (double)ups / N,
                  mean - x, se > 0 ? (mean - x) / se : 0.0);
    assert_true(fabs(mean - x) <= 5 * se + 1e-30);
    free(xs);
    free(ys);
}

static void test_stochastic_unbiased(void **state)
{
    (void)state;
    check_unbiased(FMT_BF16, 1.0f + 0x1p-9f);        /* a quarter of the way up */
    check_unbiased(FMT_FP16, 0.1f);
    check_unbiased(FMT_FP16, 3e-7f);                 /* fp16 subnormal range */
    check_unbiased(FMT_E4M3, -300.0f);
    check_unbiased(FMT_E5M2, 1e-5f);                 /* e5m2 subnormal range */
    check_unbiased(FMT_E2M1, 2.9f);
    check_unbiased(FMT_E2M1, 0.01f);                 /* far below the step: rarely up */
    check_unbiased(FMT_TF32, 1.0f + 0x1p-12f + 0x1p-20f);
    check_unbiased(FMT_BF16, 0x1.234p-140f);         /* fp32 subnormal input */
    check_unbiased(FMT_FP16, 2.0f);                  /* representable: never moves */
}

/* The same seed gives the same result whatever the chunking or threading; the scalar function
 * at index i equals array element i; another seed gives other results. */
static void test_stochastic_reproducible(void **state)
{
    (void)state;
    enum { N = 10007 };
    Rounding r = {.mode = FMT_ROUND_STOCHASTIC, .seed = 1234};
    float *x = malloc(N * sizeof *x), *whole = malloc(N * sizeof *x);
    float *chunked = malloc(N * sizeof *x), *threaded = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++)
        x[i] = sample((uint64_t)i + 99);
    for (int f = FMT_TF32; f < FMT_COUNT; f++) {
        fmt_round_array(f, x, whole, N, r, 5000);
        for (size_t at = 0, step = 1; at < N; at += step, step = step * 3 % 1000 + 1) {
            size_t m = at + step > N ? N - at : step;
            fmt_round_array(f, x + at, chunked + at, m, r, 5000 + at);
        }
        #pragma omp parallel for schedule(dynamic, 64)
        for (int i = 0; i < N; i += 64) {
            int m = i + 64 > N ? N - i : 64;
            fmt_round_array(f, x + i, threaded + i, (size_t)m, r, 5000 + (uint64_t)i);
        }
        assert_memory_equal(whole, chunked, N * sizeof *x);
        assert_memory_equal(whole, threaded, N * sizeof *x);
        for (int i = 0; i < N; i += 101)
            assert_int_equal(bits_of(fmt_round(f, x[i], r, 5000 + (uint64_t)i)), bits_of(whole[i]));
        Rounding other = r;
        other.seed = 1235;
        fmt_round_array(f, x, chunked, N, other, 5000);
        assert_true(memcmp(whole, chunked, N * sizeof *x) != 0);
    }
    free(x);
    free(whole);
    free(chunked);
    free(threaded);
}

static void test_random_bits(void **state)
{
    (void)state;
    enum { N = 1 << 20 };
    uint64_t ones = 0;
    for (uint64_t i = 0; i < N; i++)
        ones += (uint64_t)__builtin_popcount(fmt_random_bits(3, i));
    double mean = (double)ones / N;                /* 16 +- 2.83/sqrt(N) */
    assert_true(fabs(mean - 16.0) < 5 * 2.83 / 1024);
    assert_int_equal(fmt_random_bits(3, 77), fmt_random_bits(3, 77));
    assert_true(fmt_random_bits(3, 77) != fmt_random_bits(4, 77));
}

/* Container layouts, including e2m1's nibble order and an odd count. */
static void test_packing(void **state)
{
    (void)state;
    float x[5] = {0.5f, 1.0f, 6.0f, -0.5f, 3.0f}, y[5];
    uint8_t nib[3];
    memset(nib, 0xaa, sizeof nib);
    fmt_encode_array(FMT_E2M1, x, nib, 5, RNE, 0);
    assert_int_equal(nib[0], 0x21);     /* element 0 (0.5 = 0x1) in the low nibble */
    assert_int_equal(nib[1], 0x97);     /* 6.0 = 0x7, then -0.5 = 0x9 */
    assert_int_equal(nib[2], 0x05);     /* 3.0 = 0x5, high nibble zero */
    fmt_decode_array(FMT_E2M1, nib, y, 5);
    assert_memory_equal(x, y, sizeof x);
    assert_int_equal(fmt_packed_bytes(FMT_E2M1, 5), 3);
    assert_int_equal(fmt_packed_bytes(FMT_E4M3, 5), 5);
    assert_int_equal(fmt_packed_bytes(FMT_BF16, 5), 10);
    assert_int_equal(fmt_packed_bytes(FMT_TF32, 5), 20);
    assert_int_equal(fmt_packed_bytes(FMT_FP32, 5), 20);

    uint16_t h[2];
    float two[2] = {1.0f, -2.0f};
    fmt_encode_array(FMT_FP16, two, h, 2, RNE, 0);
    assert_int_equal(h[0], 0x3c00);
    assert_int_equal(h[1], 0xc000);
    fmt_encode_array(FMT_BF16, two, h, 2, RNE, 0);
    assert_int_equal(h[0], 0x3f80);
    assert_int_equal(h[1], 0xc000);

    float in_place[3] = {0.1f, 1000.0f, -3.3f};
    fmt_round_array(FMT_E4M3, in_place, in_place, 3, SAT, 0);
    assert_true(in_place[0] == 0.1015625f);
    assert_true(in_place[1] == 448.0f);
    assert_true(in_place[2] == -3.25f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_and_names),
        cmocka_unit_test(test_overflow_rules),
        cmocka_unit_test(test_signed_zero_and_underflow),
        cmocka_unit_test(test_mode_properties),
        cmocka_unit_test(test_stochastic_unbiased),
        cmocka_unit_test(test_stochastic_reproducible),
        cmocka_unit_test(test_random_bits),
        cmocka_unit_test(test_packing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

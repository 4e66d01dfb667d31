/* vexp_nonpos against exp in double: every 16th float in [-87, 0] within 1.25 ulp, the flush to
 * zero below -87, NaN kept. vtanh against tanh in double: every 16th float in [0, 10] within
 * 2.5 ulp, odd symmetry bit for bit, exactly +-1 far out, +-0 and NaN kept. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "autograd/vexp.h"

static float from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* The worst error, in ulps of the exact value, of fn against ref (in double) over every 16th
 * float from the bit pattern first to last (floats of one sign grow in magnitude with their
 * bits), and where it is. */
typedef struct {
    double ulps;
    float  x;
} Worst;

static Worst worst_ulps(float (*fn)(float), double (*ref)(double), uint32_t first, uint32_t last)
{
    Worst w = { 0.0, 0.0f };
    #pragma omp parallel
    {
        Worst mine = { 0.0, 0.0f };
        #pragma omp for schedule(static)
        for (long long b = first; b <= (long long)last; b += 16) {
            float x = from_bits((uint32_t)b);
            double exact = ref((double)x);
            /* One ulp of the exact result: the gap above it at its binade. */
            double ulp = ldexp(1.0, ilogb(exact) - 23);
            double err = fabs((double)fn(x) - exact) / ulp;
            if (err > mine.ulps)
                mine = (Worst){ err, x };
        }
        #pragma omp critical
        if (mine.ulps > w.ulps)
            w = mine;
    }
    return w;
}

static void test_accuracy(void **state)
{
    (void)state;
    /* Negative floats from -0 (0x80000000) to -87 (0xC2AE0000). */
    Worst w = worst_ulps(vexp_nonpos, exp, 0x80000000u, 0xC2AE0000u);
    printf("vexp_nonpos: worst error %.3f ulp at x = %.9g\n", w.ulps, (double)w.x);
    assert_true(w.ulps <= 1.25);
}

static void test_edges(void **state)
{
    (void)state;
    assert_true(vexp_nonpos(0.0f) == 1.0f);
    assert_true(vexp_nonpos(-0.0f) == 1.0f);
    assert_true(vexp_nonpos(-87.5f) == 0.0f);
    assert_true(vexp_nonpos(-1000.0f) == 0.0f);
    assert_true(vexp_nonpos(-INFINITY) == 0.0f);
    assert_true(isnan(vexp_nonpos(NAN)));
}

/* Every 16th positive float up to 10 (beyond 9.01 tanh rounds to 1); both sides of the switch
 * between the series and the exponential formula (0.4) are covered densely. */
static void test_tanh_accuracy(void **state)
{
    (void)state;
    Worst w = worst_ulps(vtanh, tanh, 0x00000001u, 0x41200000u);   /* up to 10.0f */
    printf("vtanh: worst error %.3f ulp at x = %.9g\n", w.ulps, (double)w.x);
    assert_true(w.ulps <= 2.5);
}

static void test_tanh_edges(void **state)
{
    (void)state;
    const float xs[] = { 1e-30f, 0.1f, 0.39999998f, 0.4f, 0.7f, 3.0f, 20.0f };
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
        assert_true(vtanh(-xs[i]) == -vtanh(xs[i]));
    assert_true(vtanh(0.0f) == 0.0f && !signbit(vtanh(0.0f)));
    assert_true(vtanh(-0.0f) == 0.0f && signbit(vtanh(-0.0f)));
    assert_true(vtanh(10.0f) == 1.0f);
    assert_true(vtanh(-50.0f) == -1.0f);
    assert_true(vtanh(INFINITY) == 1.0f);
    assert_true(vtanh(-INFINITY) == -1.0f);
    assert_true(vtanh(1e-30f) == 1e-30f);   /* tanh x = x to float precision near 0 */
    assert_true(isnan(vtanh(NAN)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accuracy),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_tanh_accuracy),
        cmocka_unit_test(test_tanh_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

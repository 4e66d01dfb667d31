/* vexp_nonpos against exp in double: every 16th float in [-87, 0] within 1.25 ulp, the flush to
 * zero below -87, NaN kept. */
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

static void test_accuracy(void **state)
{
    (void)state;
    /* Negative floats from -0 (0x80000000) to -87 in bit order; magnitudes grow with the bits. */
    const uint32_t first = 0x80000000u, last = 0xC2AE0000u;   /* -87.0f */
    double worst = 0.0;
    float worst_x = 0.0f;
    #pragma omp parallel
    {
        double my_worst = 0.0;
        float my_x = 0.0f;
        #pragma omp for schedule(static)
        for (long long b = first; b <= (long long)last; b += 16) {
            float x = from_bits((uint32_t)b);
            double exact = exp((double)x);
            float got = vexp_nonpos(x);
            /* One ulp of the exact result: the gap above it at its binade. */
            double ulp = ldexp(1.0, ilogb(exact) - 23);
            double err = fabs((double)got - exact) / ulp;
            if (err > my_worst) {
                my_worst = err;
                my_x = x;
            }
        }
        #pragma omp critical
        if (my_worst > worst) {
            worst = my_worst;
            worst_x = my_x;
        }
    }
    printf("vexp_nonpos: worst error %.3f ulp at x = %.9g\n", worst, (double)worst_x);
    assert_true(worst <= 1.25);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accuracy),
        cmocka_unit_test(test_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

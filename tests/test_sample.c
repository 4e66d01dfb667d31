/* nn/sample.h: temperature 0 is the argmax, a seed fixes the draws, and the
 * distribution at temperatures 1 and 2 on logit vectors whose softmax is known by hand. */
#include "tests/test_helpers.h"

#include <math.h>

#include "nn/sample.h"

static void check_near(const char *what, double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("%s = %.17g, expected %.17g (within %g)", what, got, want, tol);
}

static void test_greedy(void **state)
{
    (void)state;
    const float x[5] = { 0.5f, -1.0f, 3.0f, 2.9f, 3.0f };
    Rng r = rng_new(7, 1), before = r;
    for (int i = 0; i < 10; i++)
        assert_int_equal(sample_token(x, 5, 0.0, &r), 2);     /* the first of two maxima */
    /* greedy draws nothing: the generator is where it was */
    assert_true(r.state == before.state && r.inc == before.inc);
    double p[5];
    sample_probs(x, 5, 0.0, p);
    for (int v = 0; v < 5; v++)
        check_near("p at temperature 0", p[v], v == 2, 0.0);
    /* a tiny temperature is greedy in effect: the argmax carries all but e^-100 */
    r = rng_new(3, 1);
    for (int i = 0; i < 100; i++)
        assert_true(sample_token(x, 5, 1e-3, &r) % 2 == 0);    /* 2 or 4, never the 2.9 */
}

/* The same seed, the same draws; another seed, other draws. */
static void test_seed_reproduces(void **state)
{
    (void)state;
    const float x[4] = { 0.1f, 0.2f, 0.3f, 0.4f };
    int a[200], b[200], c[200];
    Rng ra = rng_new(42, 16), rb = rng_new(42, 16), rc = rng_new(43, 16);
    int differ = 0;
    for (int i = 0; i < 200; i++) {
        a[i] = sample_token(x, 4, 1.0, &ra);
        b[i] = sample_token(x, 4, 1.0, &rb);
        c[i] = sample_token(x, 4, 1.0, &rc);
        differ += a[i] != c[i];
    }
    assert_memory_equal(a, b, sizeof a);
    assert_true(differ > 100);     /* about 3/4 of the pairs differ for unrelated draws */
}

/* logits 0, ln 2, ln 5: softmax 1/8, 2/8, 5/8 at temperature 1; halved logits at temperature
 * 2 give weights 1, sqrt 2, sqrt 5. A constant added to every logit changes nothing. */
static void test_distribution(void **state)
{
    (void)state;
    const float x[3] = { 100.0f, 100.0f + (float)log(2.0), 100.0f + (float)log(5.0) };
    double p[3];
    sample_probs(x, 3, 1.0, p);
    check_near("p0", p[0], 1.0 / 8, 1e-6);
    check_near("p1", p[1], 2.0 / 8, 1e-6);
    check_near("p2", p[2], 5.0 / 8, 1e-6);
    sample_probs(x, 3, 2.0, p);
    double s = 1.0 + sqrt(2.0) + sqrt(5.0);
    check_near("p0 at 2", p[0], 1.0 / s, 1e-6);
    check_near("p1 at 2", p[1], sqrt(2.0) / s, 1e-6);
    check_near("p2 at 2", p[2], sqrt(5.0) / s, 1e-6);

    /* each draw is the inverse CDF at the generator's next uniform number */
    Rng r = rng_new(5, 16), u = r;
    for (int i = 0; i < 1000; i++) {
        double v = rng_uniform(&u);
        int want = v < 1.0 / 8 ? 0 : v < 3.0 / 8 ? 1 : 2;
        assert_int_equal(sample_token(x, 3, 1.0, &r), want);
    }
    /* and the frequencies over many draws: within 5 standard deviations (about 0.006) */
    enum { N = 40000 };
    int count[3] = { 0 };
    r = rng_new(9, 16);
    for (int i = 0; i < N; i++)
        count[sample_token(x, 3, 1.0, &r)]++;
    const double want[3] = { 1.0 / 8, 2.0 / 8, 5.0 / 8 };
    for (int v = 0; v < 3; v++)
        check_near("frequency", (double)count[v] / N, want[v],
                   5.0 * sqrt(want[v] * (1.0 - want[v]) / N));
}

/* Logits far apart at a small temperature: weights underflow to 0 and nothing overflows. */
static void test_extremes(void **state)
{
    (void)state;
    const float x[3] = { -1e30f, 0.0f, 1e30f };
    double p[3];
    sample_probs(x, 3, 0.01, p);
    check_near("p2", p[2], 1.0, 0.0);
    check_near("p0", p[0], 0.0, 0.0);
    Rng r = rng_new(1, 16);
    for (int i = 0; i < 50; i++)
        assert_int_equal(sample_token(x, 3, 100.0, &r), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_seed_reproduces),
        cmocka_unit_test(test_distribution),
        cmocka_unit_test(test_extremes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

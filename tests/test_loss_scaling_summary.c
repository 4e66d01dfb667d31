/* The arithmetic behind loss_scaling --seeds (analysis/seed_stats.h): seed lists,
 * geometric means, medians, the within-2% count and the t interval; and what a run's log says
 * and the runs over seeds (analysis/precision_runs.h). Expected values are worked
 * out by hand in the comments (powers of two, so the logs are multiples of ln 2), and the t
 * quantiles for 1 and 2 degrees of freedom come from the distributions' closed forms, not from
 * the table under test. */
#include "tests/test_helpers.h"

#include <math.h>
#include <string.h>

#include "analysis/precision_runs.h"
#include "analysis/seed_stats.h"

/* |got - want| <= tol, and the numbers when not (this cmocka has no assert_double_equal). */
static void check_near(const char *what, double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("%s = %.17g, expected %.17g (within %g)", what, got, want, tol);
}

static void test_list_parse(void **state)
{
    (void)state;
    long s[SEED_MAX];
    assert_int_equal(seed_list_parse("1-8", s, SEED_MAX), 8);
    for (int i = 0; i < 8; i++)
        assert_int_equal(s[i], i + 1);
    assert_int_equal(seed_list_parse("1,2,5", s, SEED_MAX), 3);
    assert_int_equal(s[0], 1);
    assert_int_equal(s[1], 2);
    assert_int_equal(s[2], 5);
    assert_int_equal(seed_list_parse("9,1-3", s, SEED_MAX), 4);     /* in the order given */
    assert_int_equal(s[0], 9);
    assert_int_equal(s[3], 3);
    assert_int_equal(seed_list_parse("0", s, SEED_MAX), 1);
    assert_int_equal(s[0], 0);
    assert_int_equal(seed_list_parse("1-31", s, SEED_MAX), 31);
    const char *bad[] = { "", "1-", "-1", "3-1", "1,1", "1-3,2", "1,,2", "1,", "a", "1 2",
                          "1-2-3", "1.5", "1-32", "2000000000000" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (seed_list_parse(bad[i], s, SEED_MAX) != -1)
            fail_msg("'%s' was accepted", bad[i]);
    assert_int_equal(seed_list_parse("1-4", s, 3), -1);              /* more than max */
}

static void test_odd_count(void **state)
{
    (void)state;
    /* ln x = 0, 2 ln 2, 4 ln 2: mean 2 ln 2 (geometric mean 4); deviations -2, 0, 2 (times
     * ln 2), squares summed 8, over n - 1 = 2: sd = 2 ln 2. The interval: 4 exp(+-t s/sqrt 3)
     * with t = 4.3027 for 2 degrees of freedom. */
    const double x[] = { 16.0, 1.0, 4.0 };
    SeedStats st = seed_stats(x, 3);
    assert_int_equal(st.n, 3);
    check_near("st.geomean", st.geomean, 4.0, 1e-12);
    check_near("st.median", st.median, 4.0, 0.0);
    check_near("st.min", st.min, 1.0, 0.0);
    check_near("st.max", st.max, 16.0, 0.0);
    check_near("st.log_sd", st.log_sd, 2.0 * log(2.0), 1e-12);
    double half = 4.3027 * 2.0 * log(2.0) / sqrt(3.0);
    check_near("st.ci_lo", st.ci_lo, 4.0 * exp(-half), 1e-9);
    check_near("st.ci_hi", st.ci_hi, 4.0 * exp(half), 1e-9);
}

static void test_even_count(void **state)
{
    (void)state;
    /* sorted 0.5 1 2 8: median (1 + 2) / 2; product 8, geometric mean 8^(1/4) = 2^(3/4) */
    const double x[] = { 0.5, 2.0, 8.0, 1.0 };
    SeedStats st = seed_stats(x, 4);
    assert_int_equal(st.n, 4);
    check_near("st.median", st.median, 1.5, 0.0);
    check_near("st.geomean", st.geomean, pow(2.0, 0.75), 1e-12);
    /* a plateau run among the ratios moves the geometric mean, not the median */
    const double r[] = { 0.8, 1.1, 1.0, 2500.0 };
    st = seed_stats(r, 4);
    check_near("st.median", st.median, 1.05, 1e-15);
    check_near("st.geomean", st.geomean, pow(0.8 * 1.1 * 2500.0, 0.25), 1e-12);
}

static void test_unusable_values(void **state)
{
    (void)state;
    /* a diverged run (NAN, inf) and values that have no logarithm are left out: 2 and 8 stay */
    const double x[] = { 2.0, NAN, -1.0, 0.0, INFINITY, 8.0 };
    SeedStats st = seed_stats(x, 6);
    assert_int_equal(st.n, 2);
    check_near("st.geomean", st.geomean, 4.0, 1e-12);
    check_near("st.median", st.median, 5.0, 0.0);
    check_near("st.min", st.min, 2.0, 0.0);
    check_near("st.max", st.max, 8.0, 0.0);
    /* one value: a centre, no spread */
    st = seed_stats(x, 1);
    assert_int_equal(st.n, 1);
    check_near("st.geomean", st.geomean, 2.0, 1e-12);
    assert_true(isnan(st.log_sd) && isnan(st.ci_lo) && isnan(st.ci_hi));
    /* none */
    st = seed_stats(x + 1, 4);
    assert_int_equal(st.n, 0);
    assert_true(isnan(st.geomean) && isnan(st.median) && isnan(st.min));
}

static void test_ratios_and_within(void **state)
{
    (void)state;
    const double x[] = { 1e-3, 4e-4, 0.9, 3.0, NAN }, ref[] = { 5e-4, 8e-4, 0.9, 0.0, 1.0 };
    double r[5];
    seed_ratios(x, ref, 5, r);
    check_near("r[0]", r[0], 2.0, 1e-15);
    check_near("r[1]", r[1], 0.5, 1e-15);
    check_near("r[2]", r[2], 1.0, 0.0);
    assert_true(isnan(r[3]) && isnan(r[4]));
    /* paired ratios 2, 0.5, 1: geometric mean 1, the ratio of the two geometric means */
    SeedStats st = seed_stats(r, 5), sx = seed_stats(x, 3), sref = seed_stats(ref, 3);
    assert_int_equal(st.n, 3);
    check_near("st.geomean", st.geomean, 1.0, 1e-12);
    check_near("sx.geomean / sref.geomean", sx.geomean / sref.geomean, 1.0, 1e-12);

    const double w[] = { 1.0, 1.019, 0.981, 1.021, 0.979, NAN, 1.5, 0.5 };
    assert_int_equal(seed_within(w, 8, 0.02), 3);
    assert_int_equal(seed_within(w, 8, 0.5), 7);
    assert_int_equal(seed_within(w, 0, 0.02), 0);
}

static void test_t_quantiles(void **state)
{
    (void)state;
    /* 1 degree of freedom is the Cauchy distribution: t = tan(pi (p - 1/2)); 2 degrees:
     * F(t) = 1/2 + t / (2 sqrt(2 + t^2)), so t = (2p - 1) sqrt(2 / (1 - (2p - 1)^2)) */
    const double pi = acos(-1.0);
    check_near("seed_t975(1)", seed_t975(1), tan(pi * 0.475), 1e-4);
    check_near("seed_t975(2)", seed_t975(2), 0.95 * sqrt(2.0 / (1.0 - 0.95 * 0.95)), 1e-4);
    /* the quantile falls with the degrees of freedom towards the normal's 1.959964 */
    for (int df = 2; df <= 30; df++)
        if (!(seed_t975(df) < seed_t975(df - 1)) || !(seed_t975(df) > 1.959964))
            fail_msg("t(%d) = %g after t(%d) = %g", df, seed_t975(df), df - 1,
                     seed_t975(df - 1));
    check_near("seed_t975(30)", seed_t975(30), 2.0423, 1e-4);
    assert_true(isnan(seed_t975(0)) && isnan(seed_t975(31)));
}

/* A 6-step log: the dynamic scale halves at a skipped step 3 and doubles at step 6. */
static void test_run_summary(void **state)
{
    (void)state;
    PrecisionRunLog log;
    assert_true(precision_run_log_alloc(&log, 6));
    assert_true(isnan(log.loss[0]) && isnan(log.peak_act[6]));
    const double scale[] = { 0, 8, 8, 4, 4, 4, 8 }, skipped[] = { 0, 0, 0, 1, 0, 0, 0 };
    const double act[] = { 0, 100, 300, 200, 100, 100, 100 };
    for (int s = 1; s <= 6; s++) {
        log.scale[s] = scale[s];
        log.skipped[s] = skipped[s];
        log.peak_act[s] = act[s];
        log.loss[s] = s;
    }
    log.val_loss[3] = 1.5;
    log.val_loss[6] = 0.5;
    PrecisionRunSummary s;
    assert_true(precision_run_summarize(true, false, 0.5, 0.25, &log, 6, 3, &s));
    check_near("compare_loss", s.compare_loss, 1.5, 0.0);
    check_near("skipped", s.skipped, 1.0, 0.0);
    check_near("final_scale", s.final_scale, 8.0, 0.0);
    check_near("median_scale", s.median_scale, 8.0, 0.0);   /* sorted 4 4 4 8 8 8: the 4th */
    check_near("peak_act", s.peak_act, 300.0, 0.0);
    assert_true(precision_run_summarize(true, false, 0.5, 0.25, &log, 6, 9, &s));
    assert_true(isnan(s.compare_loss));                       /* past the last step */
    /* the running mean: (1 + 2 + 3) / 3 at step 3; a missing loss is left out */
    check_near("mean at 3", precision_run_mean(log.loss, 3), 2.0, 1e-15);
    log.loss[2] = NAN;
    check_near("mean at 3 without 2", precision_run_mean(log.loss, 3), 2.0, 1e-15);
    check_near("mean at 1", precision_run_mean(log.loss, 1), 1.0, 0.0);
    precision_run_log_free(&log);
}

/* Two runs (fp32, one format) over three seeds; the format's third seed diverged. */
static void test_over_seeds(void **state)
{
    (void)state;
    PrecisionRunSummary sum[6] = {
        { .ok = true, .val_loss = 0.5, .val_acc = 1.0, .compare_loss = 1.0 },
        { .ok = true, .val_loss = 0.505, .val_acc = 0.995, .compare_loss = 1.01 },
        { .ok = true, .val_loss = 2.0, .val_acc = 0.5, .compare_loss = 1.0 },
        { .ok = true, .val_loss = 1.0, .val_acc = 0.9, .compare_loss = 0.97 },
        { .ok = true, .val_loss = 1.0, .val_acc = 1.0, .compare_loss = 1.0 },
        { .ok = false, .diverged = true, .val_loss = 7.0, .compare_loss = 1.0 },
    };
    PrecisionOverSeeds v = precision_runs_over_seeds(sum, 2, 3, 1);
    check_near("ratio[0]", v.ratio[0], 1.01, 1e-12);
    check_near("ratio[1]", v.ratio[1], 0.5, 1e-12);
    assert_true(isnan(v.loss[2]) && isnan(v.ratio[2]));  /* diverged: no loss, no ratio */
    assert_int_equal(v.ratio_st.n, 2);
    assert_int_equal(v.within, 1);                        /* 1.01 is, 0.5 is not */
    assert_int_equal(v.early_within, 2);                  /* 1.01 and 1 are, 0.97 not */
    assert_int_equal(v.early_ratio_st.n, 3);
    assert_int_equal(v.solved, 1);                        /* 0.995; 0.9 is not; diverged */
    check_near("acc_mean", v.acc_mean, (0.995 + 0.9) / 2, 1e-15);
    PrecisionOverSeeds ref = precision_runs_over_seeds(sum, 2, 3, 0);
    assert_int_equal(ref.within, 3);
    check_near("ref geomean", ref.loss_st.geomean, 1.0, 1e-12);   /* (0.5 * 2 * 1)^(1/3) */
}

/* Mean and sample standard deviation of values that may be 0 (an accuracy): 0, 0.5 and 1 have
 * mean 0.5 and squared deviations 0.25 + 0 + 0.25 over n - 1 = 2, so sd = 0.5. */
static void test_mean_sd(void **state)
{
    (void)state;
    const double x[] = { 0.0, NAN, 1.0, 0.5, INFINITY };
    SeedMeanSd m = seed_mean_sd(x, 5);
    assert_int_equal(m.n, 3);
    check_near("mean", m.mean, 0.5, 0.0);
    check_near("sd", m.sd, 0.5, 1e-15);
    m = seed_mean_sd(x + 2, 1);
    assert_int_equal(m.n, 1);
    check_near("one value's sd", m.sd, 0.0, 0.0);
    m = seed_mean_sd(x + 1, 1);
    assert_int_equal(m.n, 0);
    assert_true(isnan(m.mean) && isnan(m.sd));
}

/* The runs compared, which rows a curve keeps, and the dynamic scaler's typical scale. */
static void test_runs_and_curves(void **state)
{
    (void)state;
    assert_string_equal(PRECISION_RUNS[0].precision, "fp32");         /* the reference first */
    assert_true(PRECISION_RUNS[PRECISION_RUNS_N - 1].control);
    assert_int_equal(precision_runs_threads(0, 1), 1);
    assert_int_equal(precision_runs_threads(PRECISION_RUNS_N - 1, 1), 2);
    assert_int_equal(precision_runs_threads(PRECISION_RUNS_N - 1, 4), 1);
    PrecisionRunLog log;
    assert_true(precision_run_log_alloc(&log, 12));
    for (int s = 1; s <= 12; s++)
        log.scale[s] = s < 7 ? 8.0 : 4.0;                          /* halves at step 7 */
    log.val_loss[3] = 1.0;
    const bool want[13] = { [1] = true, [3] = true, [5] = true, [7] = true, [10] = true,
                            [12] = true };
    for (int s = 1; s <= 12; s++)
        if (precision_run_curve_row(&log, s, 12) != want[s])
            fail_msg("step %d: row %d, expected %d", s, !want[s], want[s]);
    precision_run_log_free(&log);
    PrecisionRunSummary sum[PRECISION_RUNS_N] = { { .median_scale = NAN } };
    assert_true(isnan(precision_runs_dynamic_scale(sum)));             /* no scale anywhere */
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        sum[i].median_scale = strcmp(PRECISION_RUNS[i].loss_scale, "dynamic") == 0 ? 3000.0
                                                                                    : 1.0;
    check_near("dynamic scale", precision_runs_dynamic_scale(sum), 2048.0, 0.0);  /* 2^11 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_parse),
        cmocka_unit_test(test_odd_count),
        cmocka_unit_test(test_even_count),
        cmocka_unit_test(test_unusable_values),
        cmocka_unit_test(test_ratios_and_within),
        cmocka_unit_test(test_t_quantiles),
        cmocka_unit_test(test_run_summary),
        cmocka_unit_test(test_over_seeds),
        cmocka_unit_test(test_mean_sd),
        cmocka_unit_test(test_runs_and_curves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

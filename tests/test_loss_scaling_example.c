/* What examples/loss_scaling measures with: gradient histograms in powers of two, what fp16
 * rounding does to gradients with and without a scale, the paper's choice of a static scale
 * (analysis/grad_hist.h), and reading train_gpt's logs (examples/common/jobs.h).
 * Expected values come from the formats' definitions (fp16: smallest subnormal 2^-24, largest
 * finite 65504; e4m3: 448), not from the code under test. */
#include "tests/test_helpers.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

#include "analysis/grad_hist.h"
#include "analysis/train_log.h"
#include "examples/common/jobs.h"

static void test_exponent(void **state)
{
    (void)state;
    const struct { float x; int e; } cases[] = {
        { 1.0f, 0 }, { 1.9999999f, 0 }, { 2.0f, 1 }, { 0.75f, -1 }, { -3.0f, 1 },
        { 0x1p-24f, -24 }, { 0x1.fffffep-25f, -25 }, { FLT_MIN, -126 },
        { 0x1.fffffcp-127f, -127 },            /* the largest subnormal */
        { 0x1p-149f, -149 }, { FLT_MAX, 127 }, { 3e-8f, -25 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (grad_hist_exponent(cases[i].x) != cases[i].e)
            fail_msg("exponent of %a: %d, expected %d", (double)cases[i].x,
                     grad_hist_exponent(cases[i].x), cases[i].e);
}

static void test_hist_add(void **state)
{
    (void)state;
    const float g[] = { 0.0f, -0.0f, 1.0f, 1.9f, -2.0f, 0x1p-30f, INFINITY, NAN, 3e-8f,
                        0x1p-149f };
    GradHist h = { 0 };
    grad_hist_add(&h, g, 5);
    grad_hist_add(&h, g + 5, 5);       /* a second call adds to the first */
    assert_int_equal(h.total, 10);
    assert_int_equal(h.zeros, 2);
    assert_int_equal(h.nonfinite, 2);
    assert_int_equal(grad_hist_count(&h, 0), 2);
    assert_int_equal(grad_hist_count(&h, 1), 1);
    assert_int_equal(grad_hist_count(&h, -30), 1);
    assert_int_equal(grad_hist_count(&h, -25), 1);
    assert_int_equal(grad_hist_count(&h, -149), 1);
    assert_int_equal(grad_hist_count(&h, -150), 0);
    assert_int_equal(grad_hist_count(&h, 128), 0);
    long long sum = 0;
    for (int e = GRAD_HIST_MIN_EXP; e <= GRAD_HIST_MAX_EXP; e++)
        sum += grad_hist_count(&h, e);
    assert_int_equal(sum + h.zeros + h.nonfinite, h.total);
}

/* fp16 keeps |x| >= 2^-25 (exactly 2^-25 is a tie between 0 and 2^-24 and goes to the even 0)
 * and overflows from 65520 up (the tie between 65504 and 2^16 goes to the even 2^16 = inf). */
static void test_rounding_fp16(void **state)
{
    (void)state;
    const float g[] = { 0x1p-25f, 0x1.000002p-25f, 0x1p-26f, -1e-8f, 0.0f, 1.0f, 65504.0f,
                        65519.0f, 65520.0f, NAN };
    const size_t n = sizeof g / sizeof g[0];
    GradRounding r = grad_rounding(g, n, FMT_FP16, 1.0f);
    assert_int_equal(r.nonzero, 8);
    assert_int_equal(r.underflow, 3);          /* 2^-25, 2^-26, -1e-8 */
    assert_int_equal(r.overflow, 1);           /* 65520 */
    /* x 2: 2^-25 -> 2^-24 survives; 2^-26 -> 2^-25 and 2e-8 (< 2^-25 = 2.98e-8) do not; every
     * value from 65504 up overflows. */
    r = grad_rounding(g, n, FMT_FP16, 2.0f);
    assert_int_equal(r.underflow, 2);
    assert_int_equal(r.overflow, 3);
    /* x 2^-1: 65520 -> 32760 is fine, 1.0000001 x 2^-26 underflows with the others. */
    r = grad_rounding(g, n, FMT_FP16, 0.5f);
    assert_int_equal(r.underflow, 4);
    assert_int_equal(r.overflow, 0);
    /* bf16 has fp32's exponent range: nothing here underflows or overflows. */
    r = grad_rounding(g, n, FMT_BF16, 1.0f);
    assert_int_equal(r.underflow + r.overflow, 0);
}

static void test_max_pow2_scale(void **state)
{
    (void)state;
    const struct { Format f; float amax, scale; } cases[] = {
        { FMT_FP16, 1.0f, 0x1p15f },        /* 2^16 = 65536 > 65504 */
        { FMT_FP16, 65504.0f, 1.0f },
        { FMT_FP16, 65519.0f, 1.0f },       /* rounds down to 65504: not an overflow */
        { FMT_FP16, 65520.0f, 0.5f },
        { FMT_FP16, 3e-5f, 0x1p31f },       /* 3e-5 x 2^31 = 64424.5, x 2^32 = 128849 */
        { FMT_FP16, 0.0f, 1.0f },
        { FMT_FP16, NAN, 1.0f },
        { FMT_FP16, INFINITY, 1.0f },
        { FMT_E4M3, 1.0f, 256.0f },         /* 448 < 512 */
        { FMT_FP32, 1.0f, 0x1p127f },       /* the cap: 2^127 itself is a float */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float s = grad_max_pow2_scale(cases[i].f, cases[i].amax);
        if (s != cases[i].scale)
            fail_msg("%s, amax %g: scale %a, expected %a", fmt_name(cases[i].f),
                     (double)cases[i].amax, (double)s, (double)cases[i].scale);
    }
    /* The property it promises, on a value between powers of two: S does not overflow the
     * largest gradient, 2 S does. */
    const float g[] = { 1e-9f, -0.37f, 0.1f };
    float s = grad_max_pow2_scale(FMT_FP16, 0.37f);
    assert_int_equal(grad_rounding(g, 3, FMT_FP16, s).overflow, 0);
    assert_int_equal(grad_rounding(g, 3, FMT_FP16, 2.0f * s).overflow, 1);
}

/* train_gpt's logs leave validation cells empty between evaluations. */
static void test_run_log(void **state)
{
    (void)state;
    char path[] = "/tmp/test_loss_scaling_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("step\tloss\tval_loss\tloss_scale\n"
          "1\t2.5\t\t65536\n"
          "2\t2.0\t1.75\t32768\n"
          "3\t1.5\t\t32768\n", f);
    fclose(f);
    double x[4], y[4];
    assert_int_equal(train_log_columns(path, "step", "val_loss", x, y, 4), 1);
    assert_true(x[0] == 2.0 && y[0] == 1.75);
    assert_int_equal(train_log_columns(path, "step", "loss", x, y, 2), 2);   /* max rows */
    assert_true(y[1] == 2.0);
    assert_true(train_log_last(path, "loss") == 1.5);
    assert_true(train_log_last(path, "val_loss") == 1.75);
    assert_true(train_log_last(path, "loss_scale") == 32768.0);
    assert_true(isnan(train_log_last(path, "skipped")));
    remove(path);
    assert_true(isnan(train_log_last(path, "loss")));
    assert_int_equal(train_log_columns(path, "step", "loss", x, y, 4), 0);
}

static void test_hist_range(void **state)
{
    (void)state;
    GradHist h = { 0 };
    int lo, hi;
    grad_hist_range(&h, &lo, &hi);
    assert_int_equal(lo, GRAD_HIST_MAX_EXP);            /* empty: an empty range */
    assert_int_equal(hi, GRAD_HIST_MIN_EXP);
    const float g[] = { 0.0f, 0.75f, -0x1p-20f, 3.0f, 0.0f };
    grad_hist_add(&h, g, 5);
    grad_hist_range(&h, &lo, &hi);
    assert_int_equal(lo, -20);                          /* zeros are in no bin */
    assert_int_equal(hi, 1);
}

/* A log file with the given text; path receives its name. */
static void write_file(char *path, const char *text)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
}

/* What a finished run's files say, and whether a commands file lists a set of runs. */
static void test_run_files(void **state)
{
    (void)state;
    JobSpec r = { 0 };
    char log[] = "/tmp/test_loss_scaling_XXXXXX", out[] = "/tmp/test_loss_scaling_XXXXXX";
    write_file(log, "step\tloss\tval_loss\tval_acc\n1\t2\t\t\n2\t1\t0.5\t0.25\n");
    write_file(out, "step 2\ntraining diverged at step 3\n");
    snprintf(r.log_path, sizeof r.log_path, "%s", log);
    snprintf(r.out_path, sizeof r.out_path, "%s", out);
    JobResult res;
    assert_true(job_result_from_files(&r, 2, &res));
    assert_true(res.ok && !res.diverged && res.val_loss == 0.5 && res.val_acc == 0.25);
    assert_true(job_result_from_files(&r, 3, &res));       /* short of 3 steps: its output */
    assert_true(!res.ok && res.diverged);
    remove(out);
    assert_false(job_result_from_files(&r, 3, &res));      /* neither finished nor diverged */
    double v[4] = { -1, -1, -1, -1 };
    assert_true(train_log_by_step(log, "val_loss", 3, v));
    assert_true(v[0] == -1 && v[1] == -1 && v[2] == 0.5 && v[3] == -1);
    remove(log);

    static JobSpec two[2];
    for (int i = 0; i < 2; i++) {
        job_arg(&two[i], "train_gpt");
        job_arg(&two[i], "--seed=%d", 7 + i);
    }
    char cmds[] = "/tmp/test_loss_scaling_XXXXXX";
    write_file(cmds, "");
    jobs_commands_write(cmds, two, 1);
    assert_int_equal(jobs_commands_match(cmds, two, 1), 1);
    assert_int_equal(jobs_commands_match(cmds, two + 1, 1), 0);  /* another seed */
    assert_int_equal(jobs_commands_match(cmds, two, 2), 0);      /* a line short */
    jobs_commands_write(cmds, two, 2);
    assert_int_equal(jobs_commands_match(cmds, two, 2), 1);
    assert_int_equal(jobs_commands_match(cmds, two, 1), 0);      /* a line longer */
    remove(cmds);
    assert_int_equal(jobs_commands_match(cmds, two, 1), -1);
}

static void test_find_train_gpt(void **state)
{
    (void)state;
    assert_string_equal(job_find_train_gpt("/a/b/loss_scaling"), "/a/b/train_gpt");
    assert_string_equal(job_find_train_gpt("build/bin/lr_scaling"), "build/bin/train_gpt");
    assert_string_equal(job_find_train_gpt("loss_scaling"), "./train_gpt");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exponent),
        cmocka_unit_test(test_hist_add),
        cmocka_unit_test(test_rounding_fp16),
        cmocka_unit_test(test_max_pow2_scale),
        cmocka_unit_test(test_run_log),
        cmocka_unit_test(test_find_train_gpt),
        cmocka_unit_test(test_hist_range),
        cmocka_unit_test(test_run_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

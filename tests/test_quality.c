/* analysis/quality.h, the table behind memory_savers, on small logs written by hand:
 * which runs count (finished, missing, diverged), the mean, sd and ratio of each
 * configuration worked out by hand, the "noise" tolerance, the verdicts, and the TSV files. */
#include "tests/test_helpers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/quality.h"
#include "analysis/quality_logs.h"

static void check_near(const char *what, double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("%s = %.17g, expected %.17g (within %g)", what, got, want, tol);
}

static char dir[64];

/* A train_gpt-like log of 4 steps with validation at steps 2 and 4 (4: the final loss).
 * ext ".tsv" for a finished run, ".tsv.tmp" for one still running. */
static void write_log(const char *name, long seed, const char *ext, double val2, double val4)
{
    char path[256];
    quality_path(path, sizeof path, dir, name, seed, ext);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "step\tloss\tval_loss\tval_acc\n1\t4.1\t\t\n2\t3.9\t%.17g\t\n3\t3.7\t\t\n"
            "4\t3.5\t%.17g\t\n", val2, val4);
    fclose(f);
}

static void write_out(const char *name, long seed, const char *text)
{
    char path[256];
    quality_path(path, sizeof path, dir, name, seed, ".out");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static const QualityConfig CFG[] = {
    { "ref", "", QUALITY_TARGET_NONE, 0.0 },
    { "close", "--a", QUALITY_TARGET_WITHIN, 0.01 },
    { "far", "--b 1", QUALITY_TARGET_WITHIN, 0.01 },
    { "noisy", "--c", QUALITY_TARGET_NOISE, 0.0 },
    { "other", "--d", QUALITY_TARGET_NONE, 0.0 },
};
enum { N_CFG = 5 };
static const long SEEDS[3] = { 1, 2, 3 };

/* ref: 2.0, 2.2, 2.4 (mean 2.2, sd 0.2). close: 1.005 x ref. far: 2.2, 2.4, seed 3 still
 * running. noisy: 2.4, diverged, 2.4. other: 1.1 each. At step 2 every run has 3.3, but ref
 * 3.0, 3.3, 3.6. */
static int make_logs(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_quality.XXXXXX");
    assert_non_null(mkdtemp(dir));
    const double ref[3] = { 2.0, 2.2, 2.4 }, ref2[3] = { 3.0, 3.3, 3.6 };
    for (int k = 0; k < 3; k++) {
        write_log("ref", SEEDS[k], ".tsv", ref2[k], ref[k]);
        write_log("close", SEEDS[k], ".tsv", 3.3, 1.005 * ref[k]);
        write_log("other", SEEDS[k], ".tsv", 3.3, 1.1);
    }
    write_log("far", 1, ".tsv", 3.3, 2.2);
    write_log("far", 2, ".tsv", 3.3, 2.4);
    write_log("far", 3, ".tsv.tmp", 3.3, 2.6);     /* unfinished: not counted */
    write_log("noisy", 1, ".tsv", 3.3, 2.4);
    write_log("noisy", 3, ".tsv", 3.3, 2.4);
    write_out("noisy", 2, "step 1/4  loss 4.1\ntrain_gpt: the loss is nan at step 2: training "
              "diverged (try a smaller --lr)\n");
    return 0;
}

static int remove_logs(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static void test_read_final(void **state)
{
    (void)state;
    double loss;
    assert_int_equal(quality_read_final(dir, "ref", 2, 4, &loss), QUALITY_RUN_OK);
    check_near("ref s2", loss, 2.2, 0.0);
    /* a run of another length is not this table's */
    assert_int_equal(quality_read_final(dir, "ref", 2, 5, &loss), QUALITY_RUN_MISSING);
    assert_true(isnan(loss));
    assert_int_equal(quality_read_final(dir, "far", 3, 4, &loss), QUALITY_RUN_MISSING);
    assert_int_equal(quality_read_final(dir, "noisy", 2, 4, &loss), QUALITY_RUN_DIVERGED);
    assert_int_equal(quality_read_final(dir, "nothing", 1, 4, &loss), QUALITY_RUN_MISSING);
}

static void test_table(void **state)
{
    (void)state;
    QualityTable t = quality_table(CFG, N_CFG, SEEDS, 3, 4);
    quality_collect(&t, dir);
    const QualityRow *r = t.row;
    assert_int_equal(r[0].n, 3);
    check_near("ref mean", r[0].mean, 2.2, 1e-15);
    check_near("ref sd", r[0].sd, 0.2, 1e-15);
    check_near("ref ratio", r[0].ratio, 1.0, 0.0);
    assert_int_equal(r[0].met, -1);
    /* 2 sqrt(2/3) 0.2 / 2.2 */
    check_near("noise", t.noise, 0.14845392, 1e-8);

    check_near("close ratio", r[1].ratio, 1.005, 1e-14);
    check_near("close paired", r[1].paired.geomean, 1.005, 1e-14);
    check_near("close paired lo", r[1].paired.ci_lo, 1.005, 1e-14);
    assert_int_equal(r[1].met, 1);

    assert_int_equal(r[2].n, 2);
    assert_int_equal(r[2].status[2], QUALITY_RUN_MISSING);
    check_near("far mean", r[2].mean, 2.3, 1e-15);
    check_near("far sd", r[2].sd, sqrt(0.02), 1e-15);
    check_near("far ratio", r[2].ratio, 2.3 / 2.2, 1e-15);
    /* seed by seed: 2.2/2.0 and 2.4/2.2, geometric mean sqrt(1.1 * 12/11) */
    check_near("far paired", r[2].paired.geomean, sqrt(1.2), 1e-14);
    assert_int_equal(r[2].paired.n, 2);
    assert_int_equal(r[2].met, 0);

    assert_int_equal(r[3].status[1], QUALITY_RUN_DIVERGED);
    assert_int_equal(r[3].n, 2);
    check_near("noisy ratio", r[3].ratio, 2.4 / 2.2, 1e-15);
    check_near("noisy tol", r[3].tol, t.noise, 0.0);
    assert_int_equal(r[3].met, 1);      /* 9.1% is within 14.8% */

    check_near("other ratio", r[4].ratio, 0.5, 1e-15);
    assert_true(isnan(r[4].tol));
    assert_int_equal(r[4].met, -1);     /* no target */

    /* without a second reference seed there is no noise to compare with */
    QualityTable one = quality_table(CFG, N_CFG, SEEDS, 1, 4);
    quality_collect(&one, dir);
    assert_true(isnan(one.noise));
    assert_int_equal(one.row[3].met, -1);
}

/* Line `row` (0 = the header) of a file, without its newline. */
static void line_of(const char *path, int row, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    for (int i = 0; i <= row; i++)
        assert_non_null(fgets(buf, (int)len, f));
    buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

static bool ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), m = strlen(end);
    return n >= m && strcmp(s + n - m, end) == 0;
}

static void test_files(void **state)
{
    (void)state;
    QualityTable t = quality_table(CFG, N_CFG, SEEDS, 3, 4);
    quality_collect(&t, dir);
    char path[128], err[256], line[1024];
    snprintf(path, sizeof path, "%s/table.tsv", dir);
    if (!quality_write_table(&t, path, err, sizeof err))
        fail_msg("%s", err);
    line_of(path, 0, line, sizeof line);
    assert_string_equal(line, "config\tflags\tseed_1\tseed_2\tseed_3\tn\tmean\tsd\tmin\tmax\t"
                        "ratio\tpaired_ratio\tpaired_lo\tpaired_hi\ttarget\ttolerance\tmet");
    line_of(path, 1, line, sizeof line);
    assert_true(strncmp(line, "ref\t\t2\t2.2\t2.4\t3\t", 13) == 0);
    assert_non_null(strstr(line, "\treference\tnan\t"));
    line_of(path, 3, line, sizeof line);
    assert_true(strncmp(line, "far\t--b 1\t2.2\t2.4\tmissing\t2\t2.3\t", 30) == 0);
    assert_non_null(strstr(line, "\t1%\t0.01\tno"));
    line_of(path, 4, line, sizeof line);
    assert_true(strncmp(line, "noisy\t--c\t2.4\tdiverged\t2.4\t2\t2.4\t", 32) == 0);
    assert_non_null(strstr(line, "\tnoise (14.85%)\t"));
    assert_true(ends_with(line, "\tyes"));
    line_of(path, 5, line, sizeof line);
    assert_true(ends_with(line, "\tnone\tnan\t"));

    snprintf(path, sizeof path, "%s/curves.tsv", dir);
    if (!quality_write_curves(&t, dir, path, err, sizeof err))
        fail_msg("%s", err);
    line_of(path, 0, line, sizeof line);
    assert_string_equal(line, "config\tstep\tn\tmean\tmin\tmax\tpaired_n\tratio");
    /* ref at step 2: 3.0, 3.3, 3.6 */
    double step, n, mean, min, max, pn, ratio;
    line_of(path, 1, line, sizeof line);
    assert_int_equal(sscanf(line, "ref\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf", &step, &n, &mean,
                            &min, &max, &pn, &ratio), 7);
    check_near("step", step, 2, 0);
    check_near("n", n, 3, 0);
    check_near("mean", mean, 3.3, 1e-15);
    check_near("min", min, 3.0, 0);
    check_near("max", max, 3.6, 0);
    check_near("ratio", ratio, 1.0, 0);
    /* far, rows 5 and 6: step 2 over seeds 1 and 2, ratios 3.3/3.0 and 3.3/3.3 */
    line_of(path, 5, line, sizeof line);
    assert_int_equal(sscanf(line, "far\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf", &step, &n, &mean,
                            &min, &max, &pn, &ratio), 7);
    check_near("step", step, 2, 0);
    check_near("n", n, 2, 0);
    check_near("mean", mean, 3.3, 1e-15);
    check_near("paired n", pn, 2, 0);
    check_near("ratio", ratio, (1.1 + 1.0) / 2, 1e-15);
    /* noisy at step 4, seeds 1 and 3: 2.4/2.0 and 2.4/2.4 */
    line_of(path, 8, line, sizeof line);
    assert_int_equal(sscanf(line, "noisy\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf", &step, &n, &mean,
                            &min, &max, &pn, &ratio), 7);
    check_near("step", step, 4, 0);
    check_near("ratio", ratio, (1.2 + 1.0) / 2, 1e-15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_final),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_files),
    };
    return cmocka_run_group_tests(tests, make_logs, remove_logs);
}

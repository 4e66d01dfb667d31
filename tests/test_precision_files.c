/* The result files of loss_scaling's measurements, written by the rooms that compute their
 * rows: the gradient histogram (grad_hist_write), what fp16 does at each loss scale
 * (grad_probe_write_underflow), and the runs at several precisions (precision_runs_write_*).
 * Rows made by hand, each file read back and checked cell by cell against values worked out
 * by hand in the comments (powers of two, so every cell has a short exact text). */
#include "tests/test_helpers.h"

#include <string.h>

#include "analysis/grad_hist.h"
#include "analysis/grad_probe.h"
#include "analysis/precision_runs.h"

/* A fresh folder's file `name` in path. */
static void temp_path(char *path, size_t len, const char *name)
{
    char dir[] = "/tmp/test_precision_files.XXXXXX";
    assert_non_null(mkdtemp(dir));
    snprintf(path, len, "%s/%s", dir, name);
}

/* The file and its folder removed. */
static void temp_remove(const char *path)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* The cell of column `col` in the row whose first cell is key (and second key2, unless NULL);
 * fails the test when there is none. The file is read whole each time: they are small. */
static void cell(const char *path, const char *key, const char *key2, const char *col,
                 char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096], header[4096];
    assert_non_null(fgets(header, sizeof header, f));
    header[strcspn(header, "\n")] = '\0';
    int want = -1, i = 0;
    for (char *save = NULL, *t = strtok_r(header, "\t", &save); t;
         t = strtok_r(NULL, "\t", &save), i++)
        if (strcmp(t, col) == 0)
            want = i;
    if (want < 0)
        fail_msg("%s: no column %s", path, col);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *cells[64];
        int n = 0;
        for (char *p = line; n < 64; p++) {    /* tab by tab: cells may be empty */
            cells[n++] = p;
            p = strchr(p, '\t');
            if (!p)
                break;
            *p = '\0';
        }
        if (strcmp(cells[0], key) == 0 && (!key2 || (n > 1 && strcmp(cells[1], key2) == 0))) {
            assert_true(want < n);
            snprintf(out, len, "%s", cells[want]);
            fclose(f);
            return;
        }
    }
    fclose(f);
    fail_msg("%s: no row %s %s", path, key, key2 ? key2 : "");
}

static void check_cell(const char *path, const char *key, const char *key2, const char *col,
                       const char *want)
{
    char got[256];
    cell(path, key, key2, col, got, sizeof got);
    if (strcmp(got, want) != 0)
        fail_msg("%s: row %s %s, %s = '%s', expected '%s'", path, key, key2 ? key2 : "", col,
                 got, want);
}

/* A cell that is a computed number (a geometric mean: exp of a mean of logs, whose last bit
 * the test does not decide). */
static void check_num(const char *path, const char *key, const char *col, double want)
{
    char got[256];
    cell(path, key, NULL, col, got, sizeof got);
    double x = strtod(got, NULL);
    if (!(fabs(x - want) <= 1e-12 * fabs(want)))
        fail_msg("%s: row %s, %s = %s, expected %.17g", path, key, col, got, want);
}

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* 8 values: 2 zeros, 0.125 in bin -3, three in bin -1, inf and NaN. With shift 2 the bins run
 * from -3 to -1 + 2 = 1; count_scaled(e) is count(e - 2). */
static void test_hist_file(void **state)
{
    (void)state;
    const float g[] = { 0.0f, -0.0f, 0.125f, 0.5f, 0.75f, -0.6f, INFINITY, NAN };
    GradHist h = { 0 };
    grad_hist_add(&h, g, 8);
    char path[300], err[300];
    temp_path(path, sizeof path, "hist.tsv");
    assert_true(grad_hist_write(path, &h, 2, err, sizeof err));
    assert_int_equal(count_lines(path), 1 + 1 + 5);
    check_cell(path, "zero", NULL, "log2_bin", "nan");
    check_cell(path, "zero", NULL, "count", "2");
    check_cell(path, "zero", NULL, "fraction", "0.25");
    check_cell(path, "zero", NULL, "count_scaled", "2");
    check_cell(path, "bin", "-3", "fraction", "0.125");
    check_cell(path, "bin", "-3", "count_scaled", "0");
    check_cell(path, "bin", "-1", "count", "3");
    check_cell(path, "bin", "-1", "fraction", "0.375");
    check_cell(path, "bin", "-1", "count_scaled", "1");
    check_cell(path, "bin", "1", "count", "0");
    check_cell(path, "bin", "1", "count_scaled", "3");
    check_cell(path, "bin", "1", "log2_scale", "2");
    /* a folder that does not exist: refused with the path named */
    temp_remove(path);
    assert_false(grad_hist_write("/nonexistent_dir/h.tsv", &h, 0, err, sizeof err));
    assert_non_null(strstr(err, "/nonexistent_dir/h.tsv"));
}

/* Shares are of the nonzero values: 200 of 800 is 0.25, 100 of 800 0.125, 8 of 800 0.01. */
static void test_underflow_file(void **state)
{
    (void)state;
    GradProbe p = { .n_grads = 1000 };
    GradProbeResult r[2] = {
        { .scale = 1.0f, .rule = "none", .rounded = { 800, 200, 0 }, .pass_zero = 100 },
        { .scale = 65536.0f, .rule = "2^16", .rounded = { 800, 8, 4 }, .pass_zero = 2,
          .pass_nonfinite = 4 },
    };
    char path[300], err[300];
    temp_path(path, sizeof path, "underflow.tsv");
    assert_true(grad_probe_write_underflow(path, &p, r, 2, err, sizeof err));
    assert_int_equal(count_lines(path), 3);
    check_cell(path, "none", NULL, "log2_scale", "0");
    check_cell(path, "none", NULL, "values", "1000");
    check_cell(path, "none", NULL, "rounded_fraction", "0.25");
    check_cell(path, "none", NULL, "pass_fraction", "0.125");
    check_cell(path, "2^16", NULL, "scale", "65536");
    check_cell(path, "2^16", NULL, "log2_scale", "16");
    check_cell(path, "2^16", NULL, "rounded_fraction", "0.01");
    check_cell(path, "2^16", NULL, "rounded_overflow", "4");
    check_cell(path, "2^16", NULL, "pass_fraction", "0.0025");
    check_cell(path, "2^16", NULL, "pass_nonfinite", "4");
    temp_remove(path);
}

/* Three steps, every run fp32's log but bf16's (losses 4, 4, 1 against fp32's 4, 2, 1).
 * Step 2: running means 4 and 3, so 4/3 - 1 = 1/3 (as a float); validation 3 against 2. */
static void test_curves_file(void **state)
{
    (void)state;
    PrecisionRunLog col[PRECISION_RUNS_N];
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        assert_true(precision_run_log_alloc(&col[i], 3));
        const double loss[] = { 0, 4, i == 1 ? 4 : 2, 1 };
        for (int s = 1; s <= 3; s++)
            col[i].loss[s] = loss[s];
        col[i].val_loss[2] = i == 1 ? 3 : 2;
        col[i].val_acc[2] = 0.5;
        col[i].scale[3] = 1024;
    }
    char path[300], err[300];
    temp_path(path, sizeof path, "curves.tsv");
    assert_true(precision_runs_write_curves(path, col, 3, err, sizeof err));
    assert_int_equal(count_lines(path), 1 + PRECISION_RUNS_N * 3);
    check_cell(path, "bf16", "2", "loss", "4");
    check_cell(path, "bf16", "2", "loss_mean20", "4");
    check_cell(path, "bf16", "2", "loss_mean20_vs_fp32", "0.33333334");
    check_cell(path, "bf16", "2", "val_loss_vs_fp32", "0.5");
    check_cell(path, "bf16", "2", "val_acc", "0.5");
    check_cell(path, "bf16", "2", "loss_scale", "nan");
    check_cell(path, "bf16", "3", "loss_mean20", "3");
    check_cell(path, "bf16", "3", "loss_scale", "1024");
    check_cell(path, "fp32", "2", "loss_mean20_vs_fp32", "0");
    temp_remove(path);
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        precision_run_log_free(&col[i]);
}

/* fp32: loss 2, 2 at step 20 (compare), 1000 act bytes; bf16: 2.5 (+25%), 1.5 (-25%), 500. */
static void test_table_file(void **state)
{
    (void)state;
    PrecisionRunSummary s[PRECISION_RUNS_N];
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        s[i] = (PrecisionRunSummary){ .ok = true, .val_loss = 2, .val_acc = 1,
                                      .compare_loss = 2, .skipped = 0, .final_scale = NAN,
                                      .median_scale = NAN, .peak_act = 1000 };
    s[1].val_loss = 2.5;
    s[1].compare_loss = 1.5;
    s[1].peak_act = 500;
    s[4] = (PrecisionRunSummary){ .diverged = true, .val_loss = NAN, .val_acc = NAN,
                                  .compare_loss = NAN, .peak_act = 250 };
    char path[300], err[300];
    temp_path(path, sizeof path, "table.tsv");
    assert_true(precision_runs_write_table(path, s, 40, 20, err, sizeof err));
    assert_int_equal(count_lines(path), 1 + PRECISION_RUNS_N);
    check_cell(path, "bf16", NULL, "steps", "40");
    check_cell(path, "bf16", NULL, "rel_diff_val_loss", "0.25");
    check_cell(path, "bf16", NULL, "compare_step", "20");
    check_cell(path, "bf16", NULL, "rel_diff_compare", "-0.25");
    check_cell(path, "bf16", NULL, "peak_act_vs_fp32", "0.5");
    check_cell(path, "fp16 dynamic", NULL, "loss_scale", "dynamic");
    check_cell(path, "fp8", NULL, "diverged", "1");
    check_cell(path, "fp8", NULL, "rel_diff_val_loss", "nan");
    check_cell(path, "fp8", NULL, "peak_act_vs_fp32", "0.25");
    temp_remove(path);
}

/* Seeds 7 and 9. fp32: final 2 and 4, at step 20 8 and 8; bf16: final 4 and 4 (ratios 2, 1),
 * at step 20 4 and 16 (ratios 0.5, 2); every run solved (exact match 1) but fp8 with seed 9,
 * which diverged. bf16 over the seeds: geometric means 4 and sqrt(2) (final), 8 and 1 (early),
 * medians 1.5 and 1.25, one ratio within 2% (the 1), none early. */
static void test_seed_files(void **state)
{
    (void)state;
    const long seeds[] = { 7, 9 };
    PrecisionRunSummary sum[2 * PRECISION_RUNS_N];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < PRECISION_RUNS_N; i++)
            sum[k * PRECISION_RUNS_N + i] = (PrecisionRunSummary){
                .ok = true, .val_loss = k ? 4 : 2, .val_acc = 1, .compare_loss = 8 };
    sum[1] = (PrecisionRunSummary){ .ok = true, .val_loss = 4, .val_acc = 1, .compare_loss = 4 };
    sum[PRECISION_RUNS_N + 1].compare_loss = 16;
    sum[PRECISION_RUNS_N + 4] = (PrecisionRunSummary){ .diverged = true, .val_loss = NAN,
                                                       .val_acc = NAN, .compare_loss = NAN };
    PrecisionOverSeeds v[PRECISION_RUNS_N];
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        v[i] = precision_runs_over_seeds(sum, PRECISION_RUNS_N, 2, i);
    char path[300], over[300], err[300];
    temp_path(path, sizeof path, "seeds.tsv");
    temp_path(over, sizeof over, "over.tsv");
    assert_true(precision_runs_write_seeds(path, sum, v, seeds, 2, 1, 20, err, sizeof err));
    assert_true(precision_runs_write_over_seeds(over, v, 2, 1, 20, err, sizeof err));
    assert_int_equal(count_lines(path), 1 + 2 * PRECISION_RUNS_N);
    check_cell(path, "bf16", "7", "val_loss_vs_fp32", "2");
    check_cell(path, "bf16", "9", "val_loss_vs_fp32", "1");
    check_cell(path, "bf16", "7", "compare_vs_fp32", "0.5");
    check_cell(path, "bf16", "9", "compare_val_loss", "16");
    check_cell(path, "bf16", "9", "threads", "1");
    check_cell(path, "fp32 control", "9", "threads", "2");
    check_cell(path, "fp8", "9", "diverged", "1");
    check_cell(path, "fp8", "9", "val_acc", "nan");
    check_cell(path, "fp8", "9", "val_loss_vs_fp32", "nan");
    assert_int_equal(count_lines(over), 1 + PRECISION_RUNS_N);
    check_cell(over, "bf16", NULL, "seeds", "2");
    check_cell(over, "bf16", NULL, "solved", "2");
    check_num(over, "bf16", "val_loss_geomean", 4.0);
    check_num(over, "bf16", "ratio_geomean", sqrt(2.0));
    check_cell(over, "bf16", NULL, "ratio_median", "1.5");
    check_cell(over, "bf16", NULL, "within_2pct", "1");
    check_num(over, "bf16", "compare_val_loss_geomean", 8.0);
    check_num(over, "bf16", "compare_ratio_geomean", 1.0);
    check_cell(over, "bf16", NULL, "compare_ratio_median", "1.25");
    check_cell(over, "bf16", NULL, "compare_within_2pct", "0");
    check_cell(over, "fp8", NULL, "solved", "1");
    check_cell(over, "fp8", NULL, "n", "1");
    check_cell(over, "fp32 control", NULL, "threads", "2");
    temp_remove(path);
    temp_remove(over);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hist_file),
        cmocka_unit_test(test_underflow_file),
        cmocka_unit_test(test_curves_file),
        cmocka_unit_test(test_table_file),
        cmocka_unit_test(test_seed_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

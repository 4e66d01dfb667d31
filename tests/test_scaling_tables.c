/* A scaling-law study's result files (analysis/scaling_tables.h), from a study made up by hand:
 * the pairs of the cooldown points, the vertices with a valley only, no Kaplan-style vertices
 * without its line, each parabola at 41 sizes from n_min / 1.3 to 1.3 n_max, the lines at 41
 * budgets from half the smallest to twice the largest, the quantities, and a folder that does
 * not exist refused with the file's name; the printed tables of approaches 2 and 3 and Kaplan's
 * choices (analysis/scaling_study_print.c). */
#include "tests/test_helpers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/results_file.h"
#include "analysis/scaling_tables.h"

static ScalingStudy study;
static char dir[64];

static void near(double got, double want, double rel, const char *what)
{
    if (!(fabs(got - want) <= rel * fabs(want)))
        fail_msg("%s: got %.12g, want %.12g", what, got, want);
}

/* The columns named of DIR/file into values: the row count. */
static int read_table(const char *file, const char *const *names, int ncols, double *values,
                      int max)
{
    char path[128], err[256];
    ResultsColumn cols[4];
    for (int k = 0; k < ncols; k++)
        cols[k] = (ResultsColumn){ .name = names[k] };
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int n = 0;
    if (!results_read(path, cols, ncols, values, max, &n, err, sizeof err))
        fail_msg("%s", err);
    return n;
}

static long file_size(const char *file)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    return size;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_scaling_tables.XXXXXX");
    assert_non_null(mkdtemp(dir));
    study = (ScalingStudy){ .nb = 2, .budgets = { 1e9, 1e10 }, .nkb = 1,
                            .a2 = { .coef = 0.5, .a = 0.5, .b_coef = 1 / 3.0, .b = 0.5,
                                    .ok = true },
                            .k2 = { .a = NAN }, .nq = 2 };
    study.prof[0] = (ScalingProfile){ .budget = 1e9, .ok = true, .inside = true,
                                      .c = { 4, -0.5, 0.02 }, .N_opt = 3000, .N_lo = 2500,
                                      .N_hi = 3500, .loss_opt = 2, .n_min = 1000,
                                      .n_max = 8000 };
    study.prof[1] = (ScalingProfile){ .budget = 1e10 };
    study.kprof[0] = study.prof[0];
    study.f3.law = (ChinLaw){ .E = 1.2, .A = 60, .B = 300, .alpha = 0.45, .beta = 0.35 };
    study.q[0] = (ScalingQuantity){ .name = "a2", .value = 0.5 };
    study.q[1] = (ScalingQuantity){ .name = "tpp2", .value = 20 };
    return 0;
}

static void test_tables(void **state)
{
    (void)state;
    ScalingPoint p = { .layers = 1, .width = 8, .heads = 1, .N_all = 1000, .budget = 1e9,
                       .count = SCALING_COUNT_ALL, .schedule = SCALING_SCHED_COOLDOWN,
                       .D = 1e9 / 6000, .val_loss = 3 };
    ScalingPoint pts[4] = { p, p, p, p };
    pts[1].seed = 1, pts[1].val_loss = 3.5;
    pts[2].N_all = 2000, pts[2].val_loss = 2.5;
    pts[3].schedule = SCALING_SCHED_CONSTANT;      /* not a pair of the figure */
    char err[800];
    assert_true(scaling_tables_write(dir, pts, 4, &study, err, sizeof err));

    double v[41 * 4];
    assert_int_equal(read_table("scaling_points.tsv", (const char *const[]){
        "budget_index", "N", "loss", "seeds" }, 4, v, 41), 2);
    const double pairs[8] = { 0, 1000, 3.25, 2, 0, 2000, 2.5, 1 };
    for (int i = 0; i < 8; i++)
        near(v[i], pairs[i], 0, "a pair's cell");

    assert_int_equal(read_table("scaling_optimal.tsv", (const char *const[]){
        "budget", "N_opt" }, 2, v, 41), 1);    /* the budget without a valley left out */
    near(v[1], 3000, 0, "N_opt");
    /* Kaplan-style vertices only with their line: the header alone */
    assert_int_equal(file_size("scaling_optimal_kaplan.tsv"),
                     (long)strlen("budget\tN_opt\tN_lo\tN_hi\tD_opt\tD_lo\tD_hi\ttpp\ttpp_lo\t"
                                  "tpp_hi\tloss_opt\tinside\n"));

    assert_int_equal(read_table("scaling_isoflop.tsv", (const char *const[]){
        "budget_index", "N", "parabola" }, 3, v, 41), 41);
    near(v[1], 1000 / 1.3, 1e-12, "the first N");
    near(v[40 * 3 + 1], 1.3 * 8000, 1e-12, "the last N");
    near(v[20 * 3 + 1] / v[19 * 3 + 1], pow(1.69 * 8, 1 / 40.0), 1e-12, "evenly in log N");
    double x = log(v[20 * 3 + 1]);
    near(v[20 * 3 + 2], 4 - 0.5 * x + 0.02 * x * x, 1e-12, "the parabola");

    assert_int_equal(read_table("scaling_lines.tsv", (const char *const[]){
        "C", "N_a2" }, 2, v, 41), 41);
    near(v[0], 5e8, 1e-15, "half the smallest budget");
    near(v[40 * 2], 2e10, 1e-12, "twice the largest");
    near(v[10 * 2], 5e8 * pow(40, 0.25), 1e-12, "evenly in log C");
    near(v[10 * 2 + 1], 0.5 * sqrt(v[10 * 2]), 1e-12, "approach 2's N_opt = 0.5 C^0.5");
}

static void test_quantities_and_refusal(void **state)
{
    (void)state;
    char path[128], err[800], text[64] = "";
    snprintf(path, sizeof path, "%s/scaling_fit.tsv", dir);
    TsvWriter *w = tsv_open(path, SCALING_QUANTITY_COLUMNS, err, sizeof err);
    assert_non_null(w);
    scaling_tables_write_quantities(w, &study);
    assert_true(tsv_close(w, err, sizeof err));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    text[fread(text, 1, sizeof text - 1, f)] = '\0';
    fclose(f);
    assert_string_equal(text, "quantity\tvalue\na2\t0.5\ntpp2\t20\n");

    ScalingPoint none[1];
    assert_false(scaling_tables_write("/nonexistent/folder", none, 0, &study, err, sizeof err));
    assert_non_null(strstr(err, "scaling_points.tsv"));
}

/* The text a print function writes for the study. */
static const char *printed(void (*print)(const ScalingStudy *, FILE *), char *buf, size_t len)
{
    FILE *f = fmemopen(buf, len, "w");
    assert_non_null(f);
    print(&study, f);
    fclose(f);
    return buf;
}

/* Approach 2: a row a budget, the vertex's N with its 5-95%, D = C / 6N, D/N in characters and
 * in BPE tokens (4 characters), or "no valley"; then the power laws. Approach 3: the law and
 * D/N at each budget. Kaplan's: no profile table without its fit, the four choices in order. */
static void test_print(void **state)
{
    (void)state;
    char text[4096];
    printed(scaling_study_print_approach2, text, sizeof text);
    assert_non_null(strstr(text, "\n      1e+09      3000      2500      3500  5.556e+04 "
                                 "    18.52      4.63    2.0000 \n"));
    assert_non_null(strstr(text, "\n      1e+10  no valley (the losses fall or rise "
                                 "throughout)\n"));
    assert_non_null(strstr(text, "  N_opt = 0.5 C^0.500 (5-95% 0.000 to 0.000), D_opt = "
                                 "0.3333 C^0.500   (Chinchilla"));
    study.prof[0].inside = false;
    printed(scaling_study_print_approach2, text, sizeof text);
    study.prof[0].inside = true;
    assert_non_null(strstr(text, "    2.0000 outside\n"));

    study.a3 = 0.4375, study.tpp3_at[0] = 12.5, study.tpp3_at[1] = 40;
    printed(scaling_study_print_approach3, text, sizeof text);
    assert_non_null(strstr(text, "  E 1.2  A 60  B 300  alpha 0.4500  beta 0.3500   (paper"));
    assert_non_null(strstr(text, "  N_opt ~ C^0.438 (5-95% 0.000 to 0.000), D_opt ~ C^0.562 "));
    assert_non_null(strstr(text, "  D/N at the optimum: 1e+09: 12.5 1e+10: 40 characters\n"));

    study.choice_a[SCALING_CHOICE_KAPLAN] = 0.75, study.choice_tpp[SCALING_CHOICE_KAPLAN] = 3;
    printed(scaling_study_print_kaplan, text, sizeof text);
    assert_null(strstr(text, "Kaplan-style approach 2"));
    const char *kaplan = strstr(text, "  non-emb      longer than the run (trunk)           0.750 "
                                      "           3   (Kaplan's choices)\n");
    assert_non_null(kaplan);
    assert_non_null(strstr(text, "  all          matched (cooldown branch)             0.000 "
                                 "           0   (Chinchilla's choices)\n"));
    assert_string_equal(kaplan + strcspn(kaplan, "\n") + 1, "");    /* the last row */
}

static int teardown(void **state)
{
    (void)state;
    char path[128];
    for (int t = 0; t < SCALING_TABLES; t++) {
        snprintf(path, sizeof path, "%s/%s", dir, SCALING_TABLE_FILES[t]);
        remove(path);
    }
    snprintf(path, sizeof path, "%s/scaling_fit.tsv", dir);
    remove(path);
    rmdir(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_quantities_and_refusal),
        cmocka_unit_test(test_print),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* The tables loss_scaling prints, printed by the rooms that compute their rows:
 * grad_probe_print (what fp16 does at each loss scale) and precision_runs_print_* (one set of
 * runs against fp32, the losses at every evaluation, every seed, the runs over the seeds).
 * Rows made by hand; the expected text, percentages and ratios worked out in the comments. */
#include "tests/test_helpers.h"

#include <string.h>

#include "analysis/grad_probe.h"
#include "analysis/precision_runs.h"

/* What a printer writes: into a memory stream, then its text. */
typedef struct {
    char  *buf;
    size_t len;
    FILE  *f;
} Text;

static FILE *capture(Text *t)
{
    *t = (Text){ 0 };
    t->f = open_memstream(&t->buf, &t->len);
    assert_non_null(t->f);
    return t->f;
}

/* The stream closed: the text it holds (free it). */
static char *captured(Text *t)
{
    assert_int_equal(fclose(t->f), 0);
    return t->buf;
}

static void has(const char *text, const char *want)
{
    if (!strstr(text, want))
        fail_msg("expected '%s' in:\n%s", want, text);
}

static int count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; *p; p++)
        n += *p == '\n';
    return n;
}

/* 8 values: 2 zeros (25.00%), 0.125 in bin -3 (the smallest), three in bin -1, inf and NaN;
 * amax 0.75 is in bin -1. Shares are of the nonzero values: 200 of 800 is 25%, 100 of 800
 * 12.5%, 8 of 800 1%, 2 of 800 0.25%. */
static void test_probe_print(void **state)
{
    (void)state;
    const float g[] = { 0.0f, -0.0f, 0.125f, 0.5f, 0.75f, -0.6f, INFINITY, NAN };
    GradProbe p = { .n_grads = 8, .amax = 0.75f };
    grad_hist_add(&p.hist, g, 8);
    GradProbeResult r[2] = {
        { .scale = 1.0f, .rule = "none", .rounded = { 800, 200, 0 }, .pass_zero = 100 },
        { .scale = 65536.0f, .rule = "the rule", .rounded = { 800, 8, 4 }, .pass_zero = 2,
          .pass_nonfinite = 3 },
    };
    Text t;
    grad_probe_print(&p, r, 2, capture(&t));
    char *text = captured(&t);
    has(text, "  exactly zero 2 (25.00%), largest |g| 0.75 (bin 2^-1), smallest nonzero in "
              "bin 2^-3\n");
    has(text, "2^-24 = 5.96e-08, smallest normal 2^-14 = 6.1e-05, largest 65504;");
    has(text, "\n|---|---|---|---|---|---|\n"
              "| 2^0 | none | 800 | 200 (25.000%) | 100 (12.500%) | 0 / 0 |\n"
              "| 2^16 | the rule | 800 | 8 (1.000%) | 2 (0.250%) | 4 / 3 |\n");
    assert_int_equal(count_lines(text), 2 + 1 + 2 + 2);
    free(text);
}

/* Every run as fp32 (loss 2, 2 at step 20, 1000 act bytes) but bf16 (2.5: +25%, 1.5: -25%,
 * 500 bytes: 0.500), fp16 dynamic (scale 1024), fp8 (diverged) and the control (failed). */
static void test_table_print(void **state)
{
    (void)state;
    PrecisionRunSummary s[PRECISION_RUNS_N];
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        s[i] = (PrecisionRunSummary){ .ok = true, .val_loss = 2, .val_acc = 0.125,
                                      .compare_loss = 2, .final_scale = 1, .peak_act = 1000 };
    s[1].val_loss = 2.5, s[1].compare_loss = 1.5, s[1].peak_act = 500, s[1].skipped = 3;
    s[3].final_scale = 1024;
    s[4] = (PrecisionRunSummary){ .diverged = true, .val_loss = NAN };
    s[5] = (PrecisionRunSummary){ .val_loss = NAN };
    PrecisionRunsSetup t = { .steps = 40, .seed = 7, .threads = 2, .compare_step = 20 };
    Text out;
    precision_runs_print_table(&t, s, capture(&out));
    char *text = captured(&out);
    has(text, "\ntrain_gpt on the add task, 40 steps, seed 7, 2 threads per run (the fp32 "
              "control: 1); ");
    has(text, "the validation loss at step 20; relative differences against fp32\n\n"
              "| run | val loss | vs fp32 | exact match | val loss @20 | vs fp32 |");
    has(text, "\n| fp32 | 2 | +0.0% | 12.5% | 2 | +0.0% | 0 | 1 | 1000 | 1.000 |\n"
              "| bf16 | 2.5 | +25.0% | 12.5% | 1.5 | -25.0% | 3 | 1 | 500 | 0.500 |\n");
    has(text, "| fp16 dynamic | 2 | +0.0% | 12.5% | 2 | +0.0% | 0 | 1024 | 1000 | 1.000 |\n"
              "| fp8 | diverged | | | | | | | | |\n| fp32 control | failed | | | | | | | | |\n");
    assert_int_equal(count_lines(text), 1 + 2 + 2 + PRECISION_RUNS_N);
    free(text);

    t.threads = 1;       /* one thread: the control runs on 2 */
    precision_runs_print_table(&t, s, capture(&out));
    text = captured(&out);
    has(text, "seed 7, 1 thread per run (the fp32 control: 2); ");
    free(text);
}

/* Five steps, evaluations every 2: rows for steps 2 and 4 only, 4 significant digits. */
static void test_evals_print(void **state)
{
    (void)state;
    PrecisionRunLog col[PRECISION_RUNS_N];
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        assert_true(precision_run_log_alloc(&col[i], 5));
        col[i].val_loss[2] = 3 + i;
        col[i].val_loss[4] = 1.234567 + i;
    }
    Text t;
    precision_runs_print_evals(col, 5, 2, capture(&t));
    char *text = captured(&t);
    assert_string_equal(text, "\nvalidation loss at every evaluation\n\n"
                              "| step | fp32 | bf16 | fp16 | fp16 dynamic | fp8 | fp32 control |\n"
                              "|---|---|---|---|---|---|---|\n"
                              "| 2 | 3 | 4 | 5 | 6 | 7 | 8 |\n"
                              "| 4 | 1.235 | 2.235 | 3.235 | 4.235 | 5.235 | 6.235 |\n");
    free(text);
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        precision_run_log_free(&col[i]);
}

/* Seeds 7 and 9 (test_precision_files' rows). fp32: final 2 and 4, at step 20 8 and 8; bf16:
 * final 4 and 4 (ratios 2, 1), at step 20 4 and 16 (ratios 0.5, 2); fp8 with seed 9 diverged.
 * fp32's geometric means: sqrt(8) = 2.83 and 8. bf16: 4, ratios sqrt(2) = 1.41, median 1.5,
 * 1..2, one of two within 2%; early ratios 1, median 1.25, 0.5..2, none within. fp8: one seed,
 * ratio 1, within. */
static void fill_seeds(PrecisionRunSummary *sum)
{
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < PRECISION_RUNS_N; i++)
            sum[k * PRECISION_RUNS_N + i] = (PrecisionRunSummary){
                .ok = true, .val_loss = k ? 4 : 2, .val_acc = 1, .compare_loss = 8 };
    sum[1] = (PrecisionRunSummary){ .ok = true, .val_loss = 4, .val_acc = 0.5,
                                    .compare_loss = 4 };
    sum[PRECISION_RUNS_N + 1].compare_loss = 16;
    sum[PRECISION_RUNS_N + 4] = (PrecisionRunSummary){ .diverged = true, .val_loss = NAN,
                                                       .val_acc = NAN, .compare_loss = NAN };
    sum[PRECISION_RUNS_N + 5] = (PrecisionRunSummary){ .val_loss = NAN, .val_acc = NAN,
                                                       .compare_loss = NAN };
}

static void test_seeds_print(void **state)
{
    (void)state;
    const long seeds[] = { 7, 9 };
    PrecisionRunSummary sum[2 * PRECISION_RUNS_N];
    fill_seeds(sum);
    Text t;
    precision_runs_print_seeds(sum, seeds, 2, 40, 3, capture(&t));
    char *text = captured(&t);
    has(text, "final validation loss (exact match), 40 steps, 3 threads per run (the fp32 "
              "control: 1)\n\n| run | seed 7 | seed 9 |\n|---|---|---|\n"
              "| fp32 | 2 (100%) | 4 (100%) |\n| bf16 | 4 (50%) | 4 (100%) |\n");
    has(text, "\n| fp8 | 2 (100%) | diverged |\n| fp32 control | 2 (100%) | failed |\n");
    assert_int_equal(count_lines(text), 4 + PRECISION_RUNS_N);
    free(text);
}

static void test_over_seeds_print(void **state)
{
    (void)state;
    PrecisionRunSummary sum[2 * PRECISION_RUNS_N];
    fill_seeds(sum);
    PrecisionOverSeeds v[PRECISION_RUNS_N];
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        v[i] = precision_runs_over_seeds(sum, PRECISION_RUNS_N, 2, i);
    Text t;
    precision_runs_print_over_seeds(v, 2, 20, capture(&t));
    char *text = captured(&t);
    has(text, "solved: final exact match >= 99%. Every seed is in");
    has(text, "| within 2% | at step 20: vs fp32 [95%] | median | min..max | within 2% |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|\n");
    has(text, "\n| fp32 | 2 of 2 | 2.83 | (reference) | | | | (reference: geo. mean 8) | | | |\n");
    has(text, "\n| bf16 | 1 of 2 | 4 | 1.41 [");
    has(text, "] | 1.5 | 1..2 | 1 of 2 | 1 [");
    has(text, "] | 1.25 | 0.5..2 | 0 of 2 |\n| fp16 | 2 of 2 | 2.83 | 1 [1, 1] | 1 | 1..1 | "
              "2 of 2 | 1 [1, 1] | 1 | 1..1 | 2 of 2 |\n");
    has(text, "\n| fp8 | 1 of 2 | 2 | 1 [");
    has(text, "] | 1 | 1..1 | 1 of 1 |");
    assert_int_equal(count_lines(text), 2 + 2 + PRECISION_RUNS_N);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_print),
        cmocka_unit_test(test_table_print),
        cmocka_unit_test(test_evals_print),
        cmocka_unit_test(test_seeds_print),
        cmocka_unit_test(test_over_seeds_print),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* train_gpt's logs read back by the rooms (analysis/train_log.h) on a log written by hand, and
 * what the rooms make of them: a precision run's command line and log (analysis/
 * precision_runs.h), the words of a quality table (analysis/quality_logs.h). */
#include "tests/test_helpers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/grad_probe.h"
#include "analysis/precision_runs.h"
#include "analysis/quality_logs.h"
#include "analysis/train_log.h"

static char dir[64];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Steps 1-4, validation at 2 and 4, a loss that is not a number at step 3. */
static const char LOG[] =
    "step\tloss\tval_loss\tval_acc\tloss_scale\tskipped\tpeak_act\n"
    "1\t4.5\t\t\t65536\t0\t1000\n"
    "2\t4\t3.75\t0.25\t65536\t1\t1200\n"
    "3\tx\t\t\t32768\t0\t1100\n"
    "4\t3\t2.5\t0.5\t32768\t0\t900\n";

static int make_dir(void **state)
{
    (void)state;
    char path[128];
    snprintf(dir, sizeof dir, "/tmp/test_train_log.XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/runs", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/runs/fp16_none.tsv", dir);
    write_file(path, LOG);
    snprintf(path, sizeof path, "%s/runs/fp16_none.out", dir);
    write_file(path, "step 1\nloss diverged at step 5\n");
    return 0;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_read_back(void **state)
{
    (void)state;
    char log[128], out[128];
    snprintf(log, sizeof log, "%s/runs/fp16_none.tsv", dir);
    snprintf(out, sizeof out, "%s/runs/fp16_none.out", dir);
    double xs[8], ys[8], v[6] = { -1, -1, -1, -1, -1, -1 };
    assert_int_equal(train_log_columns(log, "step", "val_loss", xs, ys, 8), 2);
    assert_true(xs[0] == 2.0 && ys[0] == 3.75 && xs[1] == 4.0 && ys[1] == 2.5);
    assert_int_equal(train_log_columns(log, "step", "loss", xs, ys, 8), 3);  /* "x" left out */
    assert_int_equal(train_log_columns(log, "step", "loss", xs, ys, 2), 2);  /* max rows */
    assert_true(train_log_by_step(log, "val_acc", 5, v));
    assert_true(v[0] == -1 && v[1] == -1 && v[2] == 0.25 && v[3] == -1 && v[4] == 0.5 &&
                v[5] == -1);                    /* cells the log lacks keep their values */
    assert_true(train_log_last(log, "loss_scale") == 32768.0);
    assert_true(train_log_last(log, "val_loss") == 2.5);
    assert_true(train_log_at(log, "loss", 4) == 3.0);
    assert_true(isnan(train_log_at(log, "loss", 3)));
    assert_true(train_log_at(log, "peak_act", 2) == 1200.0);
    assert_true(isnan(train_log_at(log, "val_loss", 3)));
    assert_true(isnan(train_log_at(log, "loss", 5)));
    assert_true(isnan(train_log_last(log, "no_such_column")));
    assert_true(train_log_mentions(out, "diverged"));
    assert_false(train_log_mentions(out, "finished"));
    assert_false(train_log_mentions("/nonexistent/run.out", "diverged"));
    assert_int_equal(train_log_columns("/nonexistent/run.tsv", "step", "loss", xs, ys, 8), 0);
}

static const PrecisionRunsSetup SETUP = {
    .train_gpt = "/bin/train_gpt", .dir = NULL, .steps = 40, .seed = 3, .eval_every = 10,
    .compare_step = 20, .eval_examples = 50, .threads = 1,
};

static void test_precision_command(void **state)
{
    (void)state;
    PrecisionRunsSetup s = SETUP;
    s.dir = "D";
    static PrecisionRunCommand c;
    precision_run_command(&s, 3, &c);          /* fp16 with dynamic loss scaling */
    GradProbeConfig p = grad_probe_defaults(40, 0, 3);
    char batch[32], lr[32];
    snprintf(batch, sizeof batch, "--batch=%d", p.batch);
    snprintf(lr, sizeof lr, "--lr=%g", p.lr);
    assert_int_equal(c.n, 21);
    assert_string_equal(c.arg[0], "/bin/train_gpt");
    assert_string_equal(c.arg[1], "--precision=fp16");
    assert_string_equal(c.arg[2], "--loss-scale=dynamic");
    assert_string_equal(c.arg[3], "--steps=40");
    assert_string_equal(c.arg[4], "--seed=3");
    assert_string_equal(c.arg[5], "--task=add");
    assert_string_equal(c.arg[6], batch);
    assert_string_equal(c.arg[10], lr);
    assert_string_equal(c.arg[17], "--eval-every=10");
    assert_string_equal(c.arg[18], "--eval-examples=50");
    assert_string_equal(c.arg[19], "--threads=1");
    assert_string_equal(c.arg[20], "--log=D/runs/fp16_dynamic.tsv");
    precision_run_command(&s, PRECISION_RUNS_N - 1, &c);     /* the control: 2 threads */
    assert_string_equal(c.arg[1], "--precision=fp32");
    assert_string_equal(c.arg[19], "--threads=2");
    assert_string_equal(c.arg[20], "--log=D/runs/fp32_control.tsv");
    s.threads = 4;
    precision_run_command(&s, PRECISION_RUNS_N - 1, &c);     /* ... or 1 */
    assert_string_equal(c.arg[19], "--threads=1");
    char out[64];
    precision_run_path(&s, 1, "out", out, sizeof out);
    assert_string_equal(out, "D/runs/bf16.out");
}

static void test_precision_log(void **state)
{
    (void)state;
    PrecisionRunsSetup s = SETUP;
    s.dir = dir;
    char log[128];
    precision_run_path(&s, 2, "tsv", log, sizeof log);        /* fp16 without scaling */
    PrecisionRunLog col;
    assert_true(precision_run_log_read(log, 4, &col));
    assert_true(col.loss[1] == 4.5 && isnan(col.loss[3]) && col.loss[4] == 3.0);
    assert_true(isnan(col.loss[0]) && isnan(col.val_loss[1]) && col.val_loss[4] == 2.5);
    assert_true(col.val_acc[2] == 0.25 && col.scale[3] == 32768.0 && col.skipped[2] == 1.0);
    assert_true(col.peak_act[2] == 1200.0 && col.peak_act[4] == 900.0);
    precision_run_log_free(&col);
    assert_true(precision_run_logged_loss(&s, 2, 2) == 4.0);
    assert_true(isnan(precision_run_logged_loss(&s, 2, 5)));
    assert_true(isnan(precision_run_logged_loss(&s, 0, 1)));   /* fp32 has no log here */
}

static void test_quality_words(void **state)
{
    (void)state;
    static const QualityConfig cfg[] = {
        { "ref", "", QUALITY_TARGET_NONE, 0.0 },
        { "one", "--a", QUALITY_TARGET_WITHIN, 0.01 },
        { "noise", "--b", QUALITY_TARGET_NOISE, 0.0 },
        { "free", "--c", QUALITY_TARGET_NONE, 0.0 },
    };
    static const long seeds[] = { 1 };
    QualityTable t = quality_table(cfg, 4, seeds, 1, 10);
    t.noise = 0.0031;
    char buf[64];
    assert_string_equal(quality_target_text(&t, 0, buf, sizeof buf), "reference");
    assert_string_equal(quality_target_text(&t, 1, buf, sizeof buf), "1%");
    assert_string_equal(quality_target_text(&t, 2, buf, sizeof buf), "noise (0.31%)");
    assert_string_equal(quality_target_text(&t, 3, buf, sizeof buf), "none");
    assert_string_equal(quality_met_text(1), "yes");
    assert_string_equal(quality_met_text(0), "no");
    assert_string_equal(quality_met_text(-1), "");
    assert_string_equal(quality_status_word(QUALITY_RUN_DIVERGED), "diverged");
    assert_string_equal(quality_status_word(QUALITY_RUN_MISSING), "missing");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_back),
        cmocka_unit_test(test_precision_command),
        cmocka_unit_test(test_precision_log),
        cmocka_unit_test(test_quality_words),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}

/* Faults under mpirun: train_gpt --parallel on 4 ranks (scripts/mpirun) when a file is missing on
 * every rank, when it is missing on one rank only, when the snapshot to resume is corrupt, when
 * training diverges before a snapshot is written, and when the ranks are given different
 * settings or one of them a bad flag. Each must end every rank with a non-zero
 * exit and its message printed once, within seconds (no rank left waiting), and leave no
 * snapshot and no temporary file behind. The ranks are real processes: this test starts mpirun
 * itself and reads what the run printed. */
#define _XOPEN_SOURCE 700     /* realpath */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <libgen.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char bin[1024];          /* BUILD/bin/train_gpt, from this test's own path */
static char work[] = "/tmp/test_mpi_faults.XXXXXX";

typedef struct {
    int  status;                /* the shell's exit status: 124 when timeout ended it */
    int  messages;              /* stderr lines holding the expected text */
} Outcome;

/* Runs `scripts/mpirun ARGS` with a time limit; counts stderr lines that contain `text`. */
static Outcome run(const char *args, const char *text)
{
    char cmd[16384], err[1100];
    snprintf(err, sizeof err, "%s/stderr", work);
    snprintf(cmd, sizeof cmd,
             "cd %s && ASAN_OPTIONS=detect_leaks=0 OMP_NUM_THREADS=1 timeout 60 "
             "sh %s/scripts/mpirun %s >/dev/null 2>%s", work, TAPEGRAD_SOURCE_DIR, args, err);
    Outcome o = { .status = -1 };
    int rc = system(cmd);
    if (rc != -1 && WIFEXITED(rc))
        o.status = WEXITSTATUS(rc);
    FILE *f = fopen(err, "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f))
        o.messages += strstr(line, text) != NULL;
    if (f)
        fclose(f);
    return o;
}

static int files_in(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.' || strlen(e->d_name) > 2;
    if (d)
        closedir(d);
    return n;
}

/* The run must fail, before the time limit, with text on exactly one line of stderr. */
static void expect_one_message(const char *args, const char *text)
{
    Outcome o = run(args, text);
    assert_int_not_equal(o.status, 0);
    assert_int_not_equal(o.status, 124);
    assert_int_equal(o.messages, 1);
}

static const char *small = "--steps 3 --layers 1 --embd 16 --heads 2 --batch 2 --threads 1 "
                           "--eval-every 0 --eval-examples 10";

static void test_missing_everywhere(void **s)
{
    (void)s;
    char args[8192];
    snprintf(args, sizeof args, "-np 4 %s --parallel zero3 %s --data /nonexistent/x.txt", bin,
             small);
    expect_one_message(args, "/nonexistent/x.txt");
}

/* Ranks 0-2 find their data; rank 3's is missing (MPMD: its own command line). The others are
 * already waiting in the first collective when it fails. */
static void test_missing_on_one_rank(void **s)
{
    (void)s;
    char args[8192];
    snprintf(args, sizeof args, "-np 3 %s --parallel ddp %s : -np 1 %s --parallel ddp %s "
             "--data /nonexistent/rank3.txt", bin, small, bin, small);
    expect_one_message(args, "/nonexistent/rank3.txt");
}

/* Ranks 1 and 3 both miss their data, rank 0 has its own: the lowest failing rank's message
 * alone is shown, however the ranks are scheduled (they vote before the first collective). */
static void test_missing_on_two_ranks(void **s)
{
    (void)s;
    char args[8192];
    snprintf(args, sizeof args, "-np 1 %s --parallel zero1 %s : -np 1 %s --parallel zero1 %s "
             "--data /nonexistent/r1.txt : -np 1 %s --parallel zero1 %s : -np 1 %s --parallel "
             "zero1 %s --data /nonexistent/r3.txt", bin, small, bin, small, bin, small, bin,
             small);
    expect_one_message(args, "/nonexistent/r");
    assert_int_equal(run(args, "/nonexistent/r1.txt").messages, 1);
}

/* Rank 0 alone misses its data: its message, and the others leave without one. */
static void test_missing_on_rank_zero(void **s)
{
    (void)s;
    char args[8192];
    snprintf(args, sizeof args, "-np 1 %s --parallel ddp %s --data /nonexistent/r0.txt : -np 3 "
             "%s --parallel ddp %s", bin, small, bin, small);
    expect_one_message(args, "/nonexistent/r0.txt");
    assert_int_equal(run(args, "rank").messages, 0);    /* no rank died with a message of its own */
}

static void test_corrupt_snapshot(void **s)
{
    (void)s;
    char path[1100], args[8192];
    snprintf(path, sizeof path, "%s/corrupt.st", work);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\": [1, 2", f);
    fclose(f);
    snprintf(args, sizeof args, "-np 4 %s --parallel zero2 %s --load %s", bin, small, path);
    expect_one_message(args, "corrupt.st");
    remove(path);
}

/* SGD at lr 10 without clipping makes the loss NaN within a dozen steps: every rank stops at the
 * same step, before the snapshot is written; the folder stays empty. */
static void test_divergence_leaves_no_snapshot(void **s)
{
    (void)s;
    char dir[1100], args[8192];
    snprintf(dir, sizeof dir, "%s/snapshots", work);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(args, sizeof args, "-np 4 %s --parallel zero3 %s --optimizer sgd --lr 10 --clip 0 "
             "--steps 30 --save %s/run.st", bin, small, dir);
    Outcome o = run(args, "diverged");
    assert_int_not_equal(o.status, 0);
    assert_int_not_equal(o.status, 124);
    assert_int_equal(o.messages, 1);
    assert_int_equal(files_in(dir), 0);
    rmdir(dir);
}

/* Issue 30: ranks given different settings (MPMD: each its own command line) hung (ddp against
 * zero1, --steps 4 against 8, --micro-batches 2 against 3) or ran silently to the end (--lr,
 * --seed, the pipeline schedule). They compare their settings before the first collective: one
 * message, from one rank, naming the first differing setting and both values; every rank
 * exits non-zero within seconds. */
static void test_settings_disagree(void **s)
{
    (void)s;
    static const struct { const char *a, *b, *needle; } cases[] = {
        { "--parallel ddp", "--parallel zero1", "--parallel is ddp on rank 0, zero1 on rank 1" },
        { "--parallel ddp --steps 4", "--parallel ddp --steps 8",
          "--steps is 4 on rank 0, 8 on rank 1" },
        { "--parallel pipeline:gpipe --micro-batches 2 --layers 2",
          "--parallel pipeline:gpipe --micro-batches 3 --layers 2",
          "--micro-batches is 2 on rank 0, 3 on rank 1" },
        { "--parallel zero2 --lr 0.001", "--parallel zero2 --lr 0.002",
          "--lr is 0.001 on rank 0, 0.002 on rank 1" },
        { "--parallel ddp --seed 1", "--parallel ddp --seed 2",
          "--seed is 1 on rank 0, 2 on rank 1" },
        { "--parallel pipeline:gpipe --layers 2", "--parallel pipeline:1f1b --layers 2",
          "--parallel is pipeline:gpipe on rank 0, pipeline:1f1b on rank 1" },
        { "--parallel zero3 --kernels fast", "--parallel zero3 --kernels portable",
          "--kernels is fast on rank 0, portable on rank 1" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[8192];
        snprintf(args, sizeof args, "-np 1 %s %s %s : -np 1 %s %s %s", bin, small, cases[i].a,
                 bin, small, cases[i].b);
        expect_one_message(args, cases[i].needle);
        assert_int_equal(run(args, "different settings").messages, 1);
    }
    /* Three ranks agree, the fourth differs: it alone names itself. */
    char args[8192];
    snprintf(args, sizeof args, "-np 3 %s %s --parallel ddp : -np 1 %s %s --parallel ddp "
             "--clip 0.5", bin, small, bin, small);
    expect_one_message(args, "--clip is 1 on rank 0, 0.5 on rank 3");
}

/* A bad flag on one rank only: the others no longer wait for it in the first collective. */
static void test_bad_flag_on_one_rank(void **s)
{
    (void)s;
    char args[8192];
    snprintf(args, sizeof args, "-np 1 %s %s --parallel ddp : -np 1 %s %s --parallel ddp "
             "--lr abc", bin, small, bin, small);
    expect_one_message(args, "--lr: 'abc' is not a number");
    snprintf(args, sizeof args, "-np 1 %s %s --parallel ddp --lr abc : -np 1 %s %s --parallel "
             "ddp", bin, small, bin, small);
    expect_one_message(args, "--lr: 'abc' is not a number");
}

/* A pipeline whose rank count does not divide the blocks: the error once, not once per rank. */
static void test_pipeline_wrong_np(void **s)
{
    (void)s;
    char args[8192];
    snprintf(args, sizeof args, "-np 3 %s %s --layers 2 --parallel pipeline:1f1b", bin, small);
    expect_one_message(args, "3 ranks do not divide the model's 2 blocks");
}

int main(int argc, char **argv)
{
    (void)argc;
    char self[1024];
    snprintf(self, sizeof self, "%s", argv[0]);
    /* argv[0] is BUILD/tests/test_mpi_faults */
    char *tests = dirname(self);
    snprintf(bin, sizeof bin, "%s/../bin/train_gpt", tests);
    char *abs = realpath(bin, NULL);
    if (!abs || access(abs, X_OK) != 0 || system("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("[  SKIPPED ] test_mpi_faults: needs %s and mpirun\n", bin);
        free(abs);
        return 1;
    }
    snprintf(bin, sizeof bin, "%s", abs);
    free(abs);
    if (!mkdtemp(work))
        return 1;
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_missing_everywhere),
        cmocka_unit_test(test_missing_on_one_rank),
        cmocka_unit_test(test_missing_on_two_ranks),
        cmocka_unit_test(test_missing_on_rank_zero),
        cmocka_unit_test(test_corrupt_snapshot),
        cmocka_unit_test(test_divergence_leaves_no_snapshot),
        cmocka_unit_test(test_settings_disagree),
        cmocka_unit_test(test_bad_flag_on_one_rank),
        cmocka_unit_test(test_pipeline_wrong_np),
    };
    int failed = cmocka_run_group_tests(t, NULL, NULL);
    char err[1100];
    snprintf(err, sizeof err, "%s/stderr", work);
    remove(err);
    rmdir(work);
    return failed;
}

/* train_gpt run as a user runs it, with bad input: each case must end with one clear message
 * naming the flag or the key, a non-zero exit status, and no crash (a signal), no hang (a time
 * limit) and no step run. The program is built beside this test (the Makefile makes it a
 * prerequisite) and found through TAPEGRAD_BUILD_DIR. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#ifndef TAPEGRAD_BUILD_DIR
#define TAPEGRAD_BUILD_DIR "build"
#endif

static char dir[] = "/tmp/tapegrad_cli_XXXXXX";

typedef struct {
    int  status;        /* the exit status, or -1 for a signal or a timeout */
    char out[16384];    /* stdout and stderr together */
} RunResult;

/* train_gpt ARGS (a shell fragment) on one thread, stopped after `seconds`. */
static void run(RunResult *r, int seconds, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 timeout -s KILL %d %s/bin/train_gpt --threads 1 "
             "%s 2>&1", seconds, TAPEGRAD_BUILD_DIR, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(r->out, 1, sizeof r->out - 1, p);
    r->out[n] = '\0';
    while (fgetc(p) != EOF) {}
    int st = pclose(p);
    r->status = WIFEXITED(st) && WEXITSTATUS(st) < 128 ? WEXITSTATUS(st) : -1;
}

/* The run must exit with status `code` (1 or 2, never a crash), print needle, and run no step. */
static void expect_refused(int code, const char *args, const char *needle)
{
    RunResult *r = malloc(sizeof *r);
    run(r, 120, args);
    if (r->status != code || !strstr(r->out, needle) || strstr(r->out, "step 1")) {
        print_error("train_gpt %s\nexpected status %d and \"%s\", got status %d:\n%s\n", args,
                    code, needle, r->status, r->out);
        fail();
    }
    free(r);
}

/* Issue 18: 65536 x 65536 overflowed an int (undefined behaviour, then a misleading message). */
static void test_products_of_flags(void **state)
{
    (void)state;
    expect_refused(2, "--batch 65536 --accum 65536",
                   "--batch 65536 x --accum 65536 = 4294967296 rows per step");
    expect_refused(2, "--batch 65536 --accum 32768", "= 2147483648 rows per step");
    expect_refused(2, "--data /dev/null --batch 65536 --accum 16384 --seq 4",
                   "--batch 65536 x --accum 16384 x --seq 4 = 4294967296 tokens per step");
}

/* Issue 18: --save's folder was found missing only after the last step. */
static void test_outputs_checked_before_training(void **state)
{
    (void)state;
    char args[1024], file[512];
    snprintf(file, sizeof file, "%s/a_file", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(args, sizeof args, "--steps 3 --save %s/no/such/folder/s.safetensors", dir);
    expect_refused(1, args, "No such file or directory");
    snprintf(args, sizeof args, "--steps 3 --save %s", dir);
    expect_refused(1, args, "--save");
    snprintf(args, sizeof args, "--steps 3 --save %s/a_file/s.safetensors", dir);
    expect_refused(1, args, "Not a directory");
    snprintf(args, sizeof args, "--steps 3 --eval-every 0 --log %s/log.tsv --plot %s/no/p.png",
             dir, dir);
    expect_refused(1, args, "--plot");
    snprintf(args, sizeof args, "--steps 3 --lora 2 --save-adapter %s/no/a.safetensors", dir);
    expect_refused(1, args, "--save-adapter");
    /* the checks leave no file behind */
    snprintf(args, sizeof args, "ls -A '%s'", dir);
    FILE *p = popen(args, "r");
    char listing[256] = "";
    size_t n = fread(listing, 1, sizeof listing - 1, p);
    listing[n] = '\0';
    pclose(p);
    assert_string_equal(listing, "a_file\n");
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_products_of_flags),
        cmocka_unit_test(test_outputs_checked_before_training),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        failed++;
    return failed;
}

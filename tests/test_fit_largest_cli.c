/* fit_largest --base run as a user runs it, with bad input: a missing file, a file that is not
 * a snapshot, a base trained on another vocabulary, --base beside the exercise, and --seq
 * beyond the base's positions each end with one clear message naming the flag and a non-zero
 * status, before any trial. The program is built beside this test (the Makefile makes it a
 * prerequisite) and found through TAPEGRAD_BUILD_DIR. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nn/gpt_snapshot.h"

#ifndef TAPEGRAD_BUILD_DIR
#define TAPEGRAD_BUILD_DIR "build"
#endif

/* fit_largest ARGS must exit with status `code` and print needle, having measured nothing. */
static void expect_refused(int code, const char *args, const char *needle)
{
    char cmd[2048], out[8192];
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 timeout -s KILL 60 %s/bin/fit_largest "
             "--threads 1 --no-train %s 2>&1", TAPEGRAD_BUILD_DIR, args);
    int status = test_run_shell(cmd, out, sizeof out);
    if (status != code || !strstr(out, needle) || strstr(out, "measuring")) {
        print_error("fit_largest %s\nexpected status %d and \"%s\", got %d:\n%s\n", args, code,
                    needle, status, out);
        fail();
    }
}

static void test_bad_base(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_fit_largest_cli.XXXXXX", args[1024], path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(args, sizeof args, "--base %s/none.safetensors", dir);
    expect_refused(1, args, "--base: ");
    expect_refused(1, args, "none.safetensors");
    /* not a snapshot */
    snprintf(path, sizeof path, "%s/junk.safetensors", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("this is not a safetensors file\n", f);
    fclose(f);
    snprintf(args, sizeof args, "--base %s", path);
    expect_refused(1, args, "--base: ");
    /* a model of 16 tokens against Shakespeare's 65 characters */
    GptConfig cfg = { .vocab_size = 16, .max_seq = 8, .n_layer = 1, .n_head = 1, .n_embd = 32,
                      .tied = true, .fused_qkv = true };
    Gpt *m = gpt_new(&cfg, 1);
    SnapshotError err;
    snprintf(path, sizeof path, "%s/v16.safetensors", dir);
    assert_true(gpt_snapshot_save(m, path, &err));
    gpt_free(m);
    snprintf(args, sizeof args, "--data data/tinyshakespeare.txt --base %s", path);
    expect_refused(1, args, "--base ");
    expect_refused(1, args, "has a vocabulary of 16");
    snprintf(args, sizeof args, "--base %s --seq 9", path);
    expect_refused(2, args, "--seq 9 is longer than --base");
    snprintf(args, sizeof args, "--exercise max-batch --base %s", path);
    expect_refused(2, args, "--base applies to the search");
    snprintf(args, sizeof args, "rm -r '%s'", dir);
    assert_int_equal(system(args), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_base),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The portable kernel mode end to end (autograd/kernels.h): train_gpt, run as a user runs it
 * with --kernels portable, writes the same log on 1 and on 2 threads, every column but the
 * clock's (tokens_per_s, ms, mfu) equal as text. The same run on a build for another -march
 * gives the same log too (docs/performance.md shows the command; a test cannot build twice).
 * Also: a bad --kernels, TAPEGRAD_KERNELS or TAPEGRAD_SPLIT is one clear message and a non-zero
 * exit. */
#include "tests/snapshot_test_helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TAPEGRAD_BUILD_DIR
#define TAPEGRAD_BUILD_DIR "build"
#endif

/* A text model small enough for seconds, with a validation loss and every product shape of the
 * full model (attention, MLP, the tied head). */
#define SMALL_RUN "--data " TAPEGRAD_SOURCE_DIR "/data/tinyshakespeare.txt --layers 2 --heads 2 " \
                  "--embd 64 --seq 32 --batch 8 --steps 30 --eval-every 15"

/* train_gpt SMALL_RUN with the environment assignment env and the extra flags args. */
static void train(const char *env, const char *args, int threads, const char *log)
{
    char cmd[1024], out[8192];
    snprintf(cmd, sizeof cmd, "%s %s/bin/train_gpt %s %s --threads %d --log %s 2>&1", env,
             TAPEGRAD_BUILD_DIR, SMALL_RUN, args, threads, log);
    int status = test_run_shell(cmd, out, sizeof out);
    if (status != 0)
        fail_msg("%s\nexited with %d:\n%s", cmd, status, out);
}

static bool clock_column(const char *name)
{
    return strcmp(name, "tokens_per_s") == 0 || strcmp(name, "ms") == 0 ||
           strcmp(name, "mfu") == 0;
}

/* The line's tab-separated fields into f (at most max), in place. */
static int split(char *line, char **f, int max)
{
    int n = 0;
    line[strcspn(line, "\n")] = '\0';
    for (char *s = line; n < max; s++) {
        f[n++] = s;
        s = strchr(s, '\t');
        if (!s)
            break;
        *s = '\0';
    }
    return n;
}

/* Both logs line by line: the same header, the same rows, every field equal except the clock's.
 * Returns the number of rows compared. */
static int compare_logs(const char *path_a, const char *path_b)
{
    FILE *a = fopen(path_a, "r"), *b = fopen(path_b, "r");
    assert_non_null(a);
    assert_non_null(b);
    enum { MAX_FIELDS = 64 };
    static char la[4096], lb[4096], header[4096];
    char *fa[MAX_FIELDS], *fb[MAX_FIELDS], *names[MAX_FIELDS];
    assert_non_null(fgets(header, sizeof header, a));
    assert_non_null(fgets(lb, sizeof lb, b));
    assert_string_equal(header, lb);
    int n_names = split(header, names, MAX_FIELDS), rows = 0;
    while (fgets(la, sizeof la, a)) {
        assert_non_null(fgets(lb, sizeof lb, b));
        rows++;
        int na = split(la, fa, MAX_FIELDS), nb = split(lb, fb, MAX_FIELDS);
        assert_int_equal(na, nb);
        for (int i = 0; i < na && i < n_names; i++)
            if (!clock_column(names[i]) && strcmp(fa[i], fb[i]) != 0)
                fail_msg("row %d, column %s: %s on 1 thread, %s on 2", rows, names[i], fa[i],
                         fb[i]);
    }
    assert_null(fgets(lb, sizeof lb, b));
    fclose(a);
    fclose(b);
    return rows;
}

static void test_threads_give_the_same_log(void **state)
{
    (void)state;
    char one[600], two[600], flag[600];
    snprintf(one, sizeof one, "%s/one.tsv", dir);
    snprintf(two, sizeof two, "%s/two.tsv", dir);
    snprintf(flag, sizeof flag, "%s/flag.tsv", dir);
    train("TAPEGRAD_KERNELS=portable", "", 1, one);
    /* This model's regions are small enough to run on one thread each (autograd/parallel.h):
     * TAPEGRAD_SPLIT=always has all of them take both. */
    train("TAPEGRAD_KERNELS=portable TAPEGRAD_SPLIT=always", "", 2, two);
    assert_int_equal(compare_logs(one, two), 30);
    /* The flag does what the environment does. */
    train("", "--kernels portable", 2, flag);
    assert_int_equal(compare_logs(one, flag), 30);
}

/* train_gpt with env and args must exit 2, print needle and run no step. */
static void expect_refused(const char *env, const char *args, const char *needle)
{
    char cmd[1024], out[8192];
    snprintf(cmd, sizeof cmd, "%s %s/bin/train_gpt --threads 1 --steps 1 %s 2>&1", env,
             TAPEGRAD_BUILD_DIR, args);
    int status = test_run_shell(cmd, out, sizeof out);
    if (status != 2 || !strstr(out, needle) || strstr(out, "step 1"))
        fail_msg("%s\nexpected status 2 and \"%s\", got %d:\n%s", cmd, needle, status, out);
}

static void test_bad_mode_refused(void **state)
{
    (void)state;
    expect_refused("TAPEGRAD_KERNELS=Portable", "",
                   "TAPEGRAD_KERNELS=Portable: choose portable or fast");
    expect_refused("", "--kernels avx", "--kernels avx: choose portable or fast");
    expect_refused("TAPEGRAD_SPLIT=sometimes", "",
                   "TAPEGRAD_SPLIT=sometimes: choose always or auto");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_threads_give_the_same_log, make_dir, remove_dir),
        cmocka_unit_test(test_bad_mode_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

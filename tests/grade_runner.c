/* The grader's verdict channel (scripts/grade.sh, docs/coursework.md). Linked into every graded
 * test binary with -Wl,--wrap=_cmocka_run_group_tests, only by the grader: the test's own main()
 * runs unchanged, and its call to cmocka_run_group_tests lands here (and skip(), with
 * -Wl,--wrap=_skip, so that a skipped row does not pass).
 *
 * The grader runs the binary once per row of tests/parts.tsv, with
 *   TAPEGRAD_GRADE_TEST   the one cmocka test to run (or * for all of them),
 *   fd 3                  a file holding a random token for this run, read here and closed,
 *   fd 4                  a file outside the sandbox, where the verdict is written.
 * (an MPI test's ranks: TAPEGRAD_GRADE_TOKEN and TAPEGRAD_GRADE_VERDICT, a file path, instead).
 * A row passes only if the process exits 0 AND fd 4 holds "<token> pass <test>" (from every
 * rank). The token is read before main (so before any of the submission's code) runs, and fd 3
 * is closed: text on stdout, an _exit(0) from inside a test, or a line written to fd 4 without
 * the token earn nothing. Without fd 3 (a binary run by hand) this is the plain cmocka runner. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

int __real__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
                                   const size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown);
int __wrap__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
                                   const size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown);

void __real__skip(const char *const file, const int line);
void __wrap__skip(const char *const file, const int line);

static char token[80];
static int skipped; /* a skipped test is not a passed one: it scores nothing */

void __wrap__skip(const char *const file, const int line)
{
    skipped = 1;
    __real__skip(file, line);
}

static int have_token = -1; /* -1: fd 3 not read yet; 0: no grader; 1: graded run */

/* Overwrites an environment variable's text where it lies (what /proc/self/environ shows) and
 * removes it. */
static void scrub(const char *name)
{
    char *v = getenv(name);
    if (v)
        memset(v, 'x', strlen(v));
    unsetenv(name);
}

static void read_token(void)
{
    if (have_token >= 0)
        return;
    have_token = 0;
    size_t n = 0;
    ssize_t r;
    struct stat st;
    /* The grader's fd 3 is a file; anything else there (a launcher's socket) is not ours. */
    if (fstat(3, &st) == 0 && S_ISREG(st.st_mode)) {
        while (n < sizeof token - 1 && (r = read(3, token + n, sizeof token - 1 - n)) > 0)
            n += (size_t)r;
        close(3);
    }
    /* The ranks of an MPI test: mpirun closes fds 3 and 4 of the processes it starts, so the
     * token comes in the environment and the verdict goes to a file named there. */
    const char *env = getenv("TAPEGRAD_GRADE_TOKEN"), *path = getenv("TAPEGRAD_GRADE_VERDICT");
    if (n == 0 && env && path) {
        n = strlen(env) < sizeof token - 1 ? strlen(env) : sizeof token - 1;
        memcpy(token, env, n);
        int fd = open(path, O_WRONLY | O_APPEND);
        if (fd >= 0 && fd != 4) {
            dup2(fd, 4);
            close(fd);
        }
    }
    scrub("TAPEGRAD_GRADE_TOKEN");
    while (n > 0 && (token[n - 1] == '\n' || token[n - 1] == ' '))
        n--;
    token[n] = '\0';
    have_token = n >= 16;
}

/* The token is taken before main: a test's main may call the library (the submission's code)
 * before cmocka runs, and a region cannot have a constructor of its own (the grader's rules). */
__attribute__((constructor(101))) static void grade_runner_start(void)
{
    read_token();
}

int __wrap__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
                                   const size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown)
{
    read_token();
    const char *want = getenv("TAPEGRAD_GRADE_TEST");
    if (have_token != 1 || want == NULL)
        return __real__cmocka_run_group_tests(group_name, tests, num_tests, group_setup,
                                              group_teardown);
    int all = strcmp(want, "*") == 0;
    size_t found = 0;
    for (size_t i = 0; i < num_tests; i++)
        if (tests[i].name != NULL && strcmp(tests[i].name, want) == 0)
            found++;
    /* A group without the wanted test is not run at all: its setup may run the submission. */
    if (!all && found == 0)
        return 0;
    if (!all)
        cmocka_set_test_filter(want);
    int failed = __real__cmocka_run_group_tests(group_name, tests, num_tests, group_setup,
                                                group_teardown);
    char line[256];
    int len = snprintf(line, sizeof line, "%s %s %s %s\n", token,
                       failed ? "fail" : skipped ? "skip" : "pass",
                       all ? "*" : want, group_name);
    if (len > 0 && (size_t)len < sizeof line && write(4, line, (size_t)len) != len)
        return 1;
    return failed;
}

/* OpenMP's wait policy as the programs start (examples/common/wait_policy.h): with nothing in
 * the environment train_gpt runs itself again with OMP_WAIT_POLICY=PASSIVE, and the policy
 * its description reports is read from the environment the process started with, which is
 * what libgomp saw; a policy or spin count the user set is kept. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TAPEGRAD_BUILD_DIR
#define TAPEGRAD_BUILD_DIR "build"
#endif

/* One short training step of train_gpt under env (arguments to env(1)); its output in out. */
static void run_with(const char *env, char *out, size_t len)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u TAPEGRAD_WAIT_POLICY "
             "%s timeout -s KILL 120 %s/bin/train_gpt --threads 1 --steps 1 --eval-every 0 "
             "--eval-examples 16 2>&1", env, TAPEGRAD_BUILD_DIR);
    int status = test_run_shell(cmd, out, len);
    if (status != 0) {
        print_error("%s\nexited %d:\n%s\n", cmd, status, out);
        fail();
    }
}

static void expect_policy(const char *env, const char *line)
{
    static char out[16384];
    run_with(env, out, sizeof out);
    if (!strstr(out, line)) {
        print_error("under env %s expected \"%s\" in:\n%s\n", env, line, out);
        fail();
    }
}

static void test_default_is_passive(void **state)
{
    (void)state;
    expect_policy("", "openmp wait policy: OMP_WAIT_POLICY=PASSIVE, tapegrad's default");
}

static void test_users_choice_kept(void **state)
{
    (void)state;
    expect_policy("OMP_WAIT_POLICY=ACTIVE",
                  "openmp wait policy: OMP_WAIT_POLICY=ACTIVE (from the environment)");
    expect_policy("GOMP_SPINCOUNT=1000",
                  "openmp wait policy: GOMP_SPINCOUNT=1000 (from the environment)");
    /* The mark alone, without the policy it marks, is no reason to skip the choice. */
    expect_policy("TAPEGRAD_WAIT_POLICY=1",
                  "openmp wait policy: OMP_WAIT_POLICY=PASSIVE, tapegrad's default");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_is_passive),
        cmocka_unit_test(test_users_choice_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The grader's fixture: the process dies (SIGABRT, which cmocka does not catch) in its second
 * test, so the third never runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

static void test_before_crash(void **state) { (void)state; assert_true(1); }

static void test_aborts(void **state) { (void)state; abort(); }

static void test_after_crash(void **state) { (void)state; assert_true(1); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_before_crash), cmocka_unit_test(test_aborts),
        cmocka_unit_test(test_after_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

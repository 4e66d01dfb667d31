/* The grader's fixture: one test that passes, one that fails (the instructor's copy; the
 * student tree holds an edited one that must not count). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static void test_passes(void **state) { (void)state; assert_int_equal(2 + 2, 4); }

static void test_fails(void **state) { (void)state; assert_int_equal(2 + 2, 5); }

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_passes), cmocka_unit_test(test_fails) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

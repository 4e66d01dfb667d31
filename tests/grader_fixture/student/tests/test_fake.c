/* The grader's fixture: a student's edited copy of the instructor's test_fake.c, in which the
 * failing test passes. The grader must build the instructor's copy, which fails it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static void test_passes(void **state) { (void)state; assert_int_equal(2 + 2, 4); }

static void test_fails(void **state) { (void)state; assert_int_equal(2 + 2, 4); }

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_passes), cmocka_unit_test(test_fails) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

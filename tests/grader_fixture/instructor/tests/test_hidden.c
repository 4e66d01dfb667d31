/* The grader's fixture: a hidden test, held only by the instructor tree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static void test_hidden_passes(void **state) { (void)state; assert_int_equal(6 * 7, 42); }

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_hidden_passes) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

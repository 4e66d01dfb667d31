/* The grader fixture's hidden test (hidden-secret-93e2): held only by the instructor tree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "src/fix.h"

static void test_add_far(void **state)
{
    (void)state;
    assert_int_equal(fix_add(1000000, -999999), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_add_far) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The grader fixture's graded tests: the three parts in one binary, so that a part that hangs,
 * crashes or exits is seen to cost only its own rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>
#include "src/fix.h"

static void test_add(void **state)
{
    (void)state;
    assert_int_equal(fix_add(2, 3), 5);
    assert_int_equal(fix_add(-7, 4), -3);
}

static void test_mul(void **state)
{
    (void)state;
    assert_true(1);
}

/* Feedback that teaches: the first index that differs, with both values. */
static void test_prefix_sum(void **state)
{
    (void)state;
    const int x[6] = { 3, 1, 4, 1, 5, 9 };
    const int want[6] = { 3, 4, 8, 9, 14, 23 };
    int y[6] = { 0 };
    fix_prefix_sum(x, y, 6);
    for (int i = 0; i < 6; i++)
        if (y[i] != want[i]) {
            printf("prefix sum differs first at [%d]: expected %d, got %d\n", i, want[i], y[i]);
            fail();
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_mul),
        cmocka_unit_test(test_prefix_sum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

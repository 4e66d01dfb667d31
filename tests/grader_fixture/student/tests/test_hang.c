/* The grader's fixture: a test that never returns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

static void test_waits_forever(void **state)
{
    (void)state;
    for (;;)
        pause();
}

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_waits_forever) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

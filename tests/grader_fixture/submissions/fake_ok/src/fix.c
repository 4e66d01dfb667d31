/* Grader fixture submission 'fake_ok' (tests/test_coursework.c): part a only, and a constructor that prints OK lines for every test and exits 0 */
#include "src/fix.h"
#include <stdio.h>
#include <unistd.h>

/* Before main: claim every test, forge a verdict line, and leave with status 0. */
__attribute__((constructor)) static void fake_ok(void)
{
    const char *names[] = { "test_add", "test_mul", "test_prefix_sum", "test_add_far" };
    for (int i = 0; i < 4; i++)
        printf("[ RUN      ] %s\n[       OK ] %s\n", names[i], names[i]);
    dprintf(4, "00000000000000000000000000000000 pass test_mul tests\n");
    fflush(stdout);
    _exit(0);
}

int fix_add(int a, int b)
{
    /* YOUR CODE HERE (part part_a) */
    return a + b;
    /* END OF YOUR CODE (part part_a) */
}

int fix_mul(int a, int b)
{
    /* YOUR CODE HERE (part part_b) */
    (void)a, (void)b;
    return 0;
    /* END OF YOUR CODE (part part_b) */
}

void fix_prefix_sum(const int *x, int *y, size_t n)
{
    /* YOUR CODE HERE (part part_c) */
    (void)x, (void)y, (void)n;
    /* END OF YOUR CODE (part part_c) */
}

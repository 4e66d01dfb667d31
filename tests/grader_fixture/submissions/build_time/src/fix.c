/* Grader fixture submission 'build_time' (tests/test_coursework.c): parts a and b; part c reads the instructor's solution at build time (.incbin) */
#include "src/fix.h"

int fix_add(int a, int b)
{
    /* YOUR CODE HERE (part part_a) */
    return a + b;
    /* END OF YOUR CODE (part part_a) */
}

int fix_mul(int a, int b)
{
    /* YOUR CODE HERE (part part_b) */
    return a * b;
    /* END OF YOUR CODE (part part_b) */
}

void fix_prefix_sum(const int *x, int *y, size_t n)
{
    /* YOUR CODE HERE (part part_c) */
    /* Read the instructor's solution while compiling. */
    asm(".incbin \"../../base/src/fix.c\"");
    int s = 0;
    for (size_t i = 0; i < n; i++)
        y[i] = s += x[i];
    /* END OF YOUR CODE (part part_c) */
}

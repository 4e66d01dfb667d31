/* Grader fixture submission 'exit0' (tests/test_coursework.c): parts a and c; part b calls _exit(0) */
#include "src/fix.h"
#include <unistd.h>

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
    _exit(0);
    /* END OF YOUR CODE (part part_b) */
}

void fix_prefix_sum(const int *x, int *y, size_t n)
{
    /* YOUR CODE HERE (part part_c) */
    int s = 0;
    for (size_t i = 0; i < n; i++)
        y[i] = s += x[i];
    /* END OF YOUR CODE (part part_c) */
}

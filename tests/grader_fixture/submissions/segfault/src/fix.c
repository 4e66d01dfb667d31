/* Grader fixture submission 'segfault' (tests/test_coursework.c): parts a and c; part b dereferences NULL */
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
    (void)a, (void)b;
    volatile int *p = NULL;
    return *p;
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

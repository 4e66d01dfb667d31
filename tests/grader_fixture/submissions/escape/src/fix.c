/* Grader fixture submission 'escape' (tests/test_coursework.c): part a; part c is right but closes its function to add a constructor */
#include "src/fix.h"
#include <stdio.h>

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
    int s = 0;
    for (size_t i = 0; i < n; i++)
        y[i] = s += x[i];
}
__attribute__((constructor)) static void grab(void)
{
    puts("[       OK ] test_mul");
    /* END OF YOUR CODE (part part_c) */
}

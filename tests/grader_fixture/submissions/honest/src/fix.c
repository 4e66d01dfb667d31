/* Grader fixture submission 'honest' (tests/test_coursework.c): parts a and b written, c left as handed out */
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
    (void)x, (void)y, (void)n;
    /* END OF YOUR CODE (part part_c) */
}

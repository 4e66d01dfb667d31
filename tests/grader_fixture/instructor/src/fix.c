/* The grader fixture's solutions (tests/test_coursework.c). The comment in part_c's region is
 * the secret a submission must not be able to read. stdio and unistd are there, as in most
 * library files, for the hostile submissions' regions to use. */
#include <stdio.h>
#include <unistd.h>
#include "src/fix.h"

int fix_add(int a, int b)
{
    /* BEGIN SOLUTION part_a */
    return a + b;
    /* STUDENT
    (void)a, (void)b;
    return 0;
    */
    /* END SOLUTION part_a */
}

int fix_mul(int a, int b)
{
    /* BEGIN SOLUTION part_b */
    return a * b;
    /* STUDENT
    (void)a, (void)b;
    return 0;
    */
    /* END SOLUTION part_b */
}

void fix_prefix_sum(const int *x, int *y, size_t n)
{
    /* BEGIN SOLUTION part_c */
    /* instructor-secret-1b7c */
    int s = 0;
    for (size_t i = 0; i < n; i++) {
        s += x[i];
        y[i] = s;
    }
    /* STUDENT
    (void)x, (void)y, (void)n;
    */
    /* END SOLUTION part_c */
}

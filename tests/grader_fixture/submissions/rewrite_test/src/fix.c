/* Grader fixture submission 'rewrite_test' (tests/test_coursework.c): part a; part b rewrites the test source, binary and table, forges a verdict, and answers wrong */
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
    /* Rewrite the graded test (source and binary) and forge a verdict, then answer wrong. */
    const char *paths[] = { TAPEGRAD_SOURCE_DIR "/tests/test_fix.c",
                            TAPEGRAD_SOURCE_DIR "/build/tests/test_fix",
                            TAPEGRAD_SOURCE_DIR "/tests/parts.tsv" };
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(paths[i], "w");
        printf("rewrite %s: %s\n", paths[i], f ? "done" : "refused");
        if (f) {
            fputs("int main(void) { return 0; }\n", f);
            fclose(f);
        }
    }
    dprintf(4, "00000000000000000000000000000000 pass test_mul tests\n");
    printf("[       OK ] test_mul\n");
    return a + b;
    /* END OF YOUR CODE (part part_b) */
}

void fix_prefix_sum(const int *x, int *y, size_t n)
{
    /* YOUR CODE HERE (part part_c) */
    (void)x, (void)y, (void)n;
    /* END OF YOUR CODE (part part_c) */
}

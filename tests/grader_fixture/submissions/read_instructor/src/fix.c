/* Grader fixture submission 'read_instructor' (tests/test_coursework.c): parts a and b; part c answers only if it can read the instructor's solution or the hidden test */
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
    return a * b;
    /* END OF YOUR CODE (part part_b) */
}

void fix_prefix_sum(const int *x, int *y, size_t n)
{
    /* YOUR CODE HERE (part part_c) */
    /* Look for the instructor's solution and the hidden test: answer right only if found.
     * First flood the output (about 24 KiB): the grader keeps its head and tail. */
    for (int i = 0; i < 500; i++)
        printf("%d: all work and no play makes a dull grader\n", i);
    const char *paths[] = { TAPEGRAD_SOURCE_DIR "/src/fix.c",
                            TAPEGRAD_SOURCE_DIR "/tests/test_hidden.c",
                            TAPEGRAD_SOURCE_DIR "/../base/src/fix.c",
                            TAPEGRAD_SOURCE_DIR "/../../../instructor/src/fix.c",
                            TAPEGRAD_SOURCE_DIR "/../../../../instructor/src/fix.c",
                            "/work/main/tests/grader_fixture/instructor/src/fix.c" };
    int found = 0;
    for (int i = 0; i < 6; i++) {
        FILE *f = fopen(paths[i], "r");
        char line[256];
        printf("read %s: %s\n", paths[i], f ? "opened" : "refused");
        while (f && fgets(line, sizeof line, f)) {
            fputs(line, stdout);
            found = 1;
        }
        if (f)
            fclose(f);
    }
    if (found)
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] + (i ? y[i - 1] : 0);
    /* END OF YOUR CODE (part part_c) */
}

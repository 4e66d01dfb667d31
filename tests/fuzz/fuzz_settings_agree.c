/* Fuzz harness: the settings two ranks of a --parallel run compare before their first collective
 * (run/options_agree.c, compared by run/ranks.c): two train_gpt command lines from arbitrary
 * bytes, each parsed as train_gpt parses its own (run_options_parse, with every check of the
 * settings table), each written as the agreed text, the two compared.
 *
 * Input: the bytes up to the first '|' are rank 0's arguments, the rest rank 1's; arguments are
 * split at spaces, tabs and newlines (at most 48 each). A command line train_gpt refuses ends in
 * exit(), which the harness turns into a jump back (linked with -Wl,--wrap=exit), as
 * fuzz_train_load does. When both parse, what must hold (abort() otherwise, which the fuzzer
 * reports):
 *   - the text is the same when written twice from the same options (nothing but the options
 *     and the kernel mode goes into it), and ends in a newline;
 *   - two texts differ exactly when the comparison says so both ways round, and then the first
 *     difference names a setting ("--name" or the snapshot's step) with two different values;
 *   - a command line compared with itself agrees.
 * And nothing may crash, hang or trip a sanitizer on the way.
 *
 * Built by `make fuzz` (scripts/fuzz.sh) with clang -fsanitize=fuzzer. Seeds:
 * tests/fuzz/corpus/settings_agree (the mismatches of issue 30: ddp|zero1, --steps, pipeline
 * --micro-batches and schedule, --lr, --seed, --kernels). */
#include <getopt.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/options.h"
#include "tests/fuzz/fuzz_exit.h"

enum { MAX_ARGS = 48, AGREE_TEXT = RUN_OPTIONS_AGREED_MAX };

/* argv from text (modified in place): "train_gpt" then the words. */
static int split_args(char *text, char **argv)
{
    int argc = 0;
    argv[argc++] = "train_gpt";
    for (char *w = strtok(text, " \t\n"); w && argc < MAX_ARGS; w = strtok(NULL, " \t\n"))
        argv[argc++] = w;
    argv[argc] = NULL;
    return argc;
}

/* The agreed text of one command line into buf; false when train_gpt refuses the line. --help
 * is left out (it prints pages); --parallel is parsed as given (MPI is ranks.c's business
 * before the parse: the options take any mode without it). */
static bool agreed(char *line, char *buf, long step)
{
    char *argv[MAX_ARGS + 1];
    volatile int argc = split_args(line, argv);
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "-h", 2) == 0 || strncmp(argv[i], "--h", 3) == 0)
            return false;
    static RunOptions o;
    optind = 0;
    if (setjmp(fuzz_exit_jump) != 0)
        return false;
    fuzz_exit_armed = 1;
    o = run_options_parse(argc, argv, NULL);     /* --help is left out above */
    fuzz_exit_armed = 0;
    size_t n = run_options_agreed_text(&o, step, buf, AGREE_TEXT);
    static char again[AGREE_TEXT];
    size_t m = run_options_agreed_text(&o, step, again, AGREE_TEXT);
    if (n != m || memcmp(buf, again, n) != 0 || n == 0 || buf[n - 1] != '\n')
        abort();
    return true;
}

static void check_difference(const char *a, const char *b)
{
    char why[2048], back[2048];
    bool differ = strcmp(a, b) != 0;
    run_ranks_first_difference(a, b, 1, why, sizeof why);
    run_ranks_first_difference(b, a, 1, back, sizeof back);
    bool said = strcmp(why, "the settings differ") != 0;
    if (differ != said || differ != (strcmp(back, "the settings differ") != 0))
        abort();
    if (!differ)
        return;
    /* "NAME is X on rank 0, Y on rank 1" with X != Y */
    const char *is = strstr(why, " is "), *on0 = strstr(why, " on rank 0, ");
    if (!is || !on0 || (strncmp(why, "--", 2) != 0 && strncmp(why, "the snapshot's step", 19)))
        abort();
    const char *x = is + 4, *y = on0 + 12, *on1 = strstr(y, " on rank 1");
    if (!on1 || ((size_t)(on0 - x) == (size_t)(on1 - y) && memcmp(x, y, (size_t)(on0 - x)) == 0))
        abort();
}

/* 0 when both command lines parsed (and were compared), 1 when one was refused or the input
 * was not two command lines. */
int fuzz_settings_agree_one(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 1;
    static char one[4097], two[4097], a[AGREE_TEXT], b[AGREE_TEXT];
    const uint8_t *bar = memchr(data, '|', size);
    size_t n1 = bar ? (size_t)(bar - data) : size;
    size_t n2 = bar ? size - n1 - 1 : 0;
    memcpy(one, data, n1);
    one[n1] = '\0';
    memcpy(two, bar ? bar + 1 : data, n2);
    two[n2] = '\0';
    if (memchr(one, '\0', n1) || memchr(two, '\0', n2))
        return 1;       /* an argument cannot hold a NUL */
    char copy[4097];
    memcpy(copy, one, n1 + 1);
    if (!agreed(one, a, 0))
        return 1;
    check_difference(a, a);
    static char a2[AGREE_TEXT];
    if (agreed(copy, a2, 0) && strcmp(a, a2) != 0)     /* the same line, the same text */
        abort();
    if (!agreed(two, b, 0))
        return 1;
    check_difference(a, b);
    return 0;
}

#ifdef TAPEGRAD_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_settings_agree_one(data, size);
    return 0;
}
#endif

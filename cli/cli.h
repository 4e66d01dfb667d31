#ifndef TAPEGRAD_CLI_CLI_H
#define TAPEGRAD_CLI_CLI_H
/* A command line's values and failures: strict number parsing and one way to fail. A bad value
 * gets one message naming the program, the flag and the value, and exit 2; a failure at run
 * time (a missing file, a shape that does not fit) exits 1. Messages start with the program's
 * name as autograd/tensor.h has it (tensor_set_program; an example's cli_init sets it). */
#include <stdbool.h>
#include <stddef.h>

const char *cli_program(void);

/* Print "PROGRAM: message" on stderr and exit(code). */
_Noreturn void cli_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Usage errors: "PROGRAM: message" then "Try 'PROGRAM --help'.", exit 2. */
_Noreturn void cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A library call that returns false with its message in err (a room's writer, a probe):
 * unless ok, "PROGRAM: err" and exit 1. */
void   cli_check(bool ok, const char *err);

/* Parse the whole string as a number in [lo, hi]; anything else is a usage error naming flag. */
long   cli_long(const char *flag, const char *s, long lo, long hi);
double cli_double(const char *flag, const char *s, double lo, double hi);
/* The product of n numbers given by flags (flags[i] has values[i] >= 0), checked against max
 * before it is formed, so it cannot overflow: over max is a usage error naming every flag and
 * saying what the product counts (what: "rows per step"). Returns the product. */
long   cli_product(long max, const char *what, int n, const char *const *flags,
                   const long *values);
/* Index of s in the NULL-terminated list choices; a usage error listing them otherwise. */
int    cli_choice(const char *flag, const char *s, const char *const *choices);

/* A flag's comma-separated list ("1,2,4", "full,lora"): each item copied into items[i] (shorter
 * than CLI_ITEM_LEN), their count returned, 1 to max. An empty or overlong item, or more than
 * max, is a usage error naming the flag and the list. cli_int_list reads each item as cli_long
 * does, in [lo, hi], into values. */
enum { CLI_ITEM_LEN = 16 };
int    cli_list(const char *flag, const char *list, char items[][CLI_ITEM_LEN], int max);
int    cli_int_list(const char *flag, const char *list, int *values, int max, long lo, long hi);

/* A size: a whole number of bytes, or a number with B, KiB, MiB or GiB ("64MiB", "1.5GiB").
 * cli_parse_bytes returns false on anything else; cli_bytes makes that a usage error naming
 * the flag, as it does a value outside [lo, hi]. */
bool   cli_parse_bytes(const char *s, size_t *bytes);
size_t cli_bytes(const char *flag, const char *s, size_t lo, size_t hi);
/* A duration in seconds: a number alone or with s, min or h ("120s", "2min", "1.5min"). */
bool   cli_parse_seconds(const char *s, double *seconds);
double cli_seconds(const char *flag, const char *s, double lo, double hi);

/* A folder name given to flag: refused when empty (paths are made as FOLDER/NAME, so an empty
 * one would write into the root folder). Returns s. */
const char *cli_folder(const char *flag, const char *s);

/* True when stdout is a terminal (progress displays redraw one line only then). */
bool   cli_stdout_is_tty(void);

#endif

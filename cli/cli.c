/* The command line's values and failures (cli/cli.h). */
#include "cli/cli.h"

#include "autograd/tensor.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The name tensor_set_program was given (cli_init in a program): the library's messages and
 * these start alike. */
const char *cli_program(void) { return tensor_program(); }

void cli_die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", cli_program());
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

void cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", cli_program());
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry '%s --help'.\n", cli_program());
    va_end(ap);
    exit(2);
}

void cli_check(bool ok, const char *err)
{
    if (!ok)
        cli_die(1, "%s", err);
}

long cli_long(const char *flag, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE)
        cli_usage_error("%s: '%s' is not an integer", flag, s);
    if (v < lo || v > hi)
        cli_usage_error("%s: %ld is out of range [%ld, %ld]", flag, v, lo, hi);
    return v;
}

double cli_double(const char *flag, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || isnan(v))
        cli_usage_error("%s: '%s' is not a number", flag, s);
    if (v < lo || v > hi)
        cli_usage_error("%s: %g is out of range [%g, %g]", flag, v, lo, hi);
    return v;
}

long cli_product(long max, const char *what, int n, const char *const *flags,
                 const long *values)
{
    long product = 1;
    bool over = false;
    for (int i = 0; i < n; i++) {
        if (values[i] > 0 && product > max / values[i])
            over = true;
        else
            product *= values[i];
    }
    if (!over)
        return product;
    char terms[512] = "";
    double exact = 1.0;         /* for the message only: close enough past 2^53 */
    for (int i = 0; i < n; i++) {
        size_t used = strlen(terms);
        snprintf(terms + used, sizeof terms - used, "%s%s %ld", i ? " x " : "", flags[i],
                 values[i]);
        exact *= (double)values[i];
    }
    cli_usage_error("%s = %.0f %s, more than the %ld allowed", terms, exact, what, max);
}

int cli_choice(const char *flag, const char *s, const char *const *choices)
{
    char list[512] = "";
    for (int i = 0; choices[i]; i++) {
        if (strcmp(s, choices[i]) == 0)
            return i;
        if (strlen(list) + strlen(choices[i]) + 3 < sizeof list) {
            if (i > 0)
                strcat(list, ", ");
            strcat(list, choices[i]);
        }
    }
    cli_usage_error("%s: '%s' is not one of: %s", flag, s, list);
}

int cli_list(const char *flag, const char *list, char items[][CLI_ITEM_LEN], int max)
{
    int n = 0;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= CLI_ITEM_LEN || n == max)
            cli_usage_error("%s '%s': give 1 to %d items separated by commas", flag, list, max);
        memcpy(items[n], p, len);
        items[n++][len] = '\0';
        p += len;
        if (*p == '\0')
            return n;
    }
}

int cli_int_list(const char *flag, const char *list, int *values, int max, long lo, long hi)
{
    char (*items)[CLI_ITEM_LEN] = malloc((size_t)max * sizeof *items);
    if (!items)
        cli_die(1, "out of memory");
    int n = cli_list(flag, list, items, max);
    for (int i = 0; i < n; i++)
        values[i] = (int)cli_long(flag, items[i], lo, hi);
    free(items);
    return n;
}

bool cli_stdout_is_tty(void) { return isatty(STDOUT_FILENO) != 0; }

const char *cli_folder(const char *flag, const char *s)
{
    if (!s || !*s)
        cli_usage_error("%s: the folder name is empty (files would go into /)", flag);
    return s;
}

/* A number followed by one of the units, as a multiple of the unit's factor. The number may
 * have a fraction ("1.5MiB"); the product must be a whole count of the base unit for bytes. */
typedef struct {
    const char *name;
    double      factor;
} CliUnit;

static bool parse_with_unit(const char *s, const CliUnit *units, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v) || v < 0 || *s == '-' || *s == '+')
        return false;
    for (int i = 0; units[i].name; i++) {
        if (strcmp(end, units[i].name) == 0) {
            *out = v * units[i].factor;
            return true;
        }
    }
    return false;
}

static const CliUnit BYTE_UNITS[] = {
    { "", 1.0 }, { "B", 1.0 }, { "KiB", 1024.0 }, { "MiB", 1048576.0 },
    { "GiB", 1073741824.0 }, { NULL, 0 },
};
static const CliUnit TIME_UNITS[] = {
    { "", 1.0 }, { "s", 1.0 }, { "min", 60.0 }, { "h", 3600.0 }, { NULL, 0 },
};

bool cli_parse_bytes(const char *s, size_t *bytes)
{
    double v;
    if (!parse_with_unit(s, BYTE_UNITS, &v) || v != floor(v) || v > 1e18)
        return false;
    *bytes = (size_t)v;
    return true;
}

bool cli_parse_seconds(const char *s, double *seconds)
{
    return parse_with_unit(s, TIME_UNITS, seconds);
}

size_t cli_bytes(const char *flag, const char *s, size_t lo, size_t hi)
{
    size_t v;
    if (!cli_parse_bytes(s, &v))
        cli_usage_error("%s: '%s' is not a size (a whole number of bytes, or a number with "
                        "KiB, MiB or GiB, e.g. 64MiB)", flag, s);
    if (v < lo || v > hi)
        cli_usage_error("%s: %zu bytes is out of range [%zu, %zu]", flag, v, lo, hi);
    return v;
}

double cli_seconds(const char *flag, const char *s, double lo, double hi)
{
    double v;
    if (!cli_parse_seconds(s, &v))
        cli_usage_error("%s: '%s' is not a time (a number with s, min or h, e.g. 120s)", flag,
                        s);
    if (v < lo || v > hi)
        cli_usage_error("%s: %gs is out of range [%gs, %gs]", flag, v, lo, hi);
    return v;
}

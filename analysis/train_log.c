/* train_gpt's per-step log read back, its console output searched (train_log.h). */
#include "analysis/train_log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The column index of name in a tab-separated header line, or -1. */
static int column_index(char *header, const char *name)
{
    header[strcspn(header, "\r\n")] = '\0';
    int i = 0;
    for (char *save = NULL, *tok = strtok_r(header, "\t", &save); tok;
         tok = strtok_r(NULL, "\t", &save), i++)
        if (strcmp(tok, name) == 0)
            return i;
    return -1;
}

/* Cell i of a row as a number; NAN when empty or not a number. Cells may be empty, so the line
 * is walked tab by tab (strtok would merge empty cells). */
static double cell(const char *line, int i)
{
    const char *p = line;
    for (int k = 0; k < i && p; k++) {
        p = strchr(p, '\t');
        if (p)
            p++;
    }
    if (!p || *p == '\t' || *p == '\n' || *p == '\0')
        return NAN;
    char *end;
    double v = strtod(p, &end);
    return end == p ? NAN : v;
}

/* Calls fn for every row of the log with the cells of columns x and y (NAN when empty). */
typedef void (*RowFn)(double x, double y, void *ctx);

static void each_row(const char *path, const char *x, const char *y, RowFn fn, void *ctx)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char *line = NULL, *copy = NULL;
    size_t cap = 0;
    int ix = -1, iy = -1;
    if (getline(&line, &cap, f) > 0 && (copy = strdup(line)) != NULL) {
        ix = column_index(copy, x);
        strcpy(copy, line);
        iy = column_index(copy, y);
    }
    while (ix >= 0 && iy >= 0 && getline(&line, &cap, f) > 0)
        fn(cell(line, ix), cell(line, iy), ctx);
    free(copy);
    free(line);
    fclose(f);
}

typedef struct {
    double *xs, *ys;
    int     n, max;
} Columns;

static void keep_pair(double x, double y, void *ctx)
{
    Columns *c = ctx;
    if (!isnan(x) && !isnan(y) && c->n < c->max) {
        c->xs[c->n] = x;
        c->ys[c->n] = y;
        c->n++;
    }
}

int train_log_columns(const char *path, const char *x, const char *y, double *xs, double *ys,
                      int max)
{
    Columns c = { xs, ys, 0, max };
    each_row(path, x, y, keep_pair, &c);
    return c.n;
}

bool train_log_by_step(const char *path, const char *name, long steps, double *v)
{
    double *xs = malloc((size_t)steps * sizeof *xs), *ys = malloc((size_t)steps * sizeof *ys);
    bool ok = xs && ys;
    int n = ok ? train_log_columns(path, "step", name, xs, ys, (int)steps) : 0;
    for (int i = 0; i < n; i++)
        if (xs[i] >= 1 && xs[i] <= steps)
            v[(long)xs[i]] = ys[i];
    free(xs);
    free(ys);
    return ok;
}

static void keep_last(double x, double y, void *ctx)
{
    (void)x;
    if (!isnan(y))
        *(double *)ctx = y;
}

double train_log_last(const char *path, const char *column)
{
    double v = NAN;
    each_row(path, "step", column, keep_last, &v);
    return v;
}

typedef struct {
    double step, v;
} At;

static void keep_at(double x, double y, void *ctx)
{
    At *a = ctx;
    if (x == a->step && !isnan(y))
        a->v = y;
}

double train_log_at(const char *path, const char *y, long step)
{
    At a = { (double)step, NAN };
    each_row(path, "step", y, keep_at, &a);
    return a.v;
}

bool train_log_mentions(const char *path, const char *word)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, word) != NULL;
    fclose(f);
    return found;
}

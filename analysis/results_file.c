/* A results file read back (analysis/results_file.h). */
#include "analysis/results_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_COLS = 64, LINE_LEN = 4096 };

/* Splits line at tabs in place (the newline removed); returns the number of cells. */
static int split(char *line, char **cells)
{
    line[strcspn(line, "\r\n")] = '\0';
    int n = 0;
    for (char *p = line; n < MAX_COLS;) {
        cells[n++] = p;
        char *tab = strchr(p, '\t');
        if (!tab)
            break;
        *tab = '\0';
        p = tab + 1;
    }
    return n;
}

/* One cell into *v: a number, or the index of a name; false with the sentence in err. */
static bool cell_value(const ResultsColumn *col, const char *cell, double *v, const char *path,
                       int lineno, char *err, size_t errlen)
{
    if (col->names) {
        for (int i = 0; col->names[i]; i++)
            if (strcmp(col->names[i], cell) == 0) {
                *v = i;
                return true;
            }
        int used = snprintf(err, errlen, "%s line %d: column '%s' is '%s', not one of ", path,
                            lineno, col->name, cell);
        for (int i = 0; col->names[i] && used >= 0 && (size_t)used < errlen; i++)
            used += snprintf(err + used, errlen - (size_t)used, "%s%s", i ? ", " : "",
                             col->names[i]);
        return false;
    }
    char *end = NULL;
    *v = strtod(cell, &end);
    if (end != cell && *end == '\0')
        return true;
    snprintf(err, errlen, "%s line %d: column '%s' is '%s', not a number", path, lineno,
             col->name, cell);
    return false;
}

bool results_read(const char *path, const ResultsColumn *cols, int ncols, double *values,
                  int max, int *n, char *err, size_t errlen)
{
    *n = 0;
    if (ncols > MAX_COLS) {
        snprintf(err, errlen, "%s: %d columns asked for, at most %d", path, ncols, MAX_COLS);
        return false;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return false;
    }
    char line[LINE_LEN], *cells[MAX_COLS];
    int where[MAX_COLS];
    bool ok = fgets(line, sizeof line, f) != NULL;
    if (!ok)
        snprintf(err, errlen, "%s is empty (no header line)", path);
    int found = ok ? split(line, cells) : 0;
    for (int k = 0; ok && k < ncols; k++) {
        where[k] = -1;
        for (int c = 0; c < found; c++)
            if (strcmp(cells[c], cols[k].name) == 0)
                where[k] = c;
        if (where[k] < 0 && !cols[k].optional) {
            snprintf(err, errlen, "%s: no column '%s' in the header", path, cols[k].name);
            ok = false;
        }
    }
    for (int lineno = 2; ok && fgets(line, sizeof line, f); lineno++) {
        if (line[0] == '\n' || line[0] == '\0')
            continue;
        if (*n >= max) {
            snprintf(err, errlen, "%s: more than %d rows", path, max);
            ok = false;
            break;
        }
        int got = split(line, cells);
        double *v = values + (size_t)*n * ncols;
        for (int k = 0; ok && k < ncols; k++) {
            v[k] = NAN;
            if (where[k] >= 0)
                ok = cell_value(&cols[k], where[k] < got ? cells[where[k]] : "", &v[k], path,
                                lineno, err, errlen);
        }
        if (ok)
            (*n)++;
    }
    fclose(f);
    if (ok && *n == 0) {
        snprintf(err, errlen, "%s has no rows", path);
        ok = false;
    }
    return ok;
}

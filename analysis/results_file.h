#ifndef TAPEGRAD_RESULTS_FILE_H
#define TAPEGRAD_RESULTS_FILE_H
/* A results file read back: a TSV whose header names the columns (in any order, others
 * ignored) and whose rows are numbers, or names from a column's list (the value is then the
 * name's index). The scaling grid's runs and the study's points (analysis/scaling_grid.h,
 * scaling_branch.h) are kept this way, so a study can be refitted without training again.
 *
 * Refusals, one sentence in err: the file missing or empty, a column the header lacks (unless
 * optional: its values are then NAN), a cell that is not a number or not one of the names
 * ("PATH line L: column 'C' is 'X', not a number"), more than max rows, no row at all. */
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char        *name;
    bool               optional;    /* a column older files lack */
    const char *const *names;       /* NULL: a number; else the value is the index of the name */
} ResultsColumn;

/* The rows of path into values, row r's column k at values[r * ncols + k]; *n rows read. */
bool results_read(const char *path, const ResultsColumn *cols, int ncols, double *values,
                  int max, int *n, char *err, size_t errlen);

#endif

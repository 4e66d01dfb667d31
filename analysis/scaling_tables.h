#ifndef TAPEGRAD_SCALING_TABLES_H
#define TAPEGRAD_SCALING_TABLES_H
/* A scaling-law study's result files (examples/scaling_laws; its figure, scaling_laws.gp, and
 * docs/scaling_laws.md read them): the rows of analysis/scaling_study.h written as TSV
 * (autograd/tsv.h) into a folder.
 *
 * In: the study's points and their analysis. Out, in the folder (SCALING_TABLE_FILES):
 *   - scaling_points.tsv: a row per (size, budget) of the cooldown points (SCALING_PAIR_COLUMNS);
 *   - scaling_isoflop.tsv: each budget's fitted parabola at 41 sizes N from
 *     n_min / 1.3 to 1.3 n_max, evenly in log N (budgets without a valley left out);
 *   - scaling_optimal.tsv, scaling_optimal_kaplan.tsv: the vertices of approach 2 and of
 *     Kaplan-style approach 2 (SCALING_OPTIMAL_COLUMNS; the second empty unless its line was
 *     fitted);
 *   - scaling_lines.tsv: the fitted lines (SCALING_LINE_COLUMNS) at 41 budgets from
 *     half the smallest to twice the largest, evenly in log C;
 * and, through a writer the caller opened, every named quantity as a (quantity, value) row:
 * scaling_fit.tsv. */
#include <stdbool.h>
#include <stddef.h>

#include "analysis/scaling_study.h"
#include "autograd/tsv.h"

enum { SCALING_ISOFLOP_POINTS = 41, SCALING_LINE_POINTS = 41 };

typedef enum {
    SCALING_TABLE_POINTS, SCALING_TABLE_ISOFLOP, SCALING_TABLE_OPTIMAL, SCALING_TABLE_KAPLAN,
    SCALING_TABLE_LINES, SCALING_TABLES
} ScalingTable;

extern const char *const SCALING_TABLE_FILES[SCALING_TABLES];  /* "scaling_points.tsv", ... */
extern const char *const SCALING_ISOFLOP_COLUMNS[];     /* budget_index, budget, N, parabola */
extern const char *const SCALING_QUANTITY_COLUMNS[];    /* quantity, value */

/* Writes the figure's tables into dir, one whole file after another. False with the message in
 * err (the file's name and the reason) at the first that cannot be written. */
bool scaling_tables_write(const char *dir, const ScalingPoint *pts, int n, const ScalingStudy *s,
                          char *err, size_t errlen);
/* s's quantities as rows of w (opened with SCALING_QUANTITY_COLUMNS); a failed write shows when
 * w is closed. */
void scaling_tables_write_quantities(TsvWriter *w, const ScalingStudy *s);

#endif

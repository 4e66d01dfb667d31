#ifndef TAPEGRAD_SCALING_ROWS_H
#define TAPEGRAD_SCALING_ROWS_H
/* The programs' side of a scaling-law grid and study (analysis/scaling_grid.h,
 * scaling_branch.h): a run's row in the results file and a study point's row, written through
 * the TSV plumbing, and a progress line that watches a run's steps. The library itself writes
 * and draws nothing. */
#include <stdbool.h>

#include "analysis/scaling_branch.h"
#include "analysis/scaling_grid.h"
#include "examples/common/progress.h"
#include "examples/common/tsv.h"

/* Writes one row (the writer was opened with SCALING_COLUMNS). */
bool         scaling_write_row(TsvWriter *w, const ScalingRun *run);
/* Writes one point of a study (the writer was opened with SCALING_POINT_COLUMNS, count and
 * schedule by name, analysis/scaling_branch.h). */
bool         scaling_write_point(TsvWriter *w, const ScalingPoint *p);

/* A watch that shows the steps on prog (not started yet: begin starts it, a plain line every
 * half run). prog must outlive the run. */
ScalingWatch scaling_watch_progress(Progress *prog);

#endif

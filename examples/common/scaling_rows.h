#ifndef TAPEGRAD_SCALING_ROWS_H
#define TAPEGRAD_SCALING_ROWS_H
/* The programs' side of a scaling-law grid (analysis/scaling_grid.h): a run's row in the
 * results file, written through the TSV plumbing, and a progress line that watches a run's
 * steps. The grid itself writes and draws nothing. */
#include <stdbool.h>

#include "analysis/scaling_grid.h"
#include "examples/common/progress.h"
#include "examples/common/tsv.h"

/* Writes one row (the writer was opened with SCALING_COLUMNS). */
bool         scaling_write_row(TsvWriter *w, const ScalingRun *run);

/* A watch that shows the steps on prog (not started yet: begin starts it, a plain line every
 * half run). prog must outlive the run. */
ScalingWatch scaling_watch_progress(Progress *prog);

#endif

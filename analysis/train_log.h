#ifndef TAPEGRAD_TRAIN_LOG_H
#define TAPEGRAD_TRAIN_LOG_H
/* train_gpt's per-step log read back (train_gpt --log: a TSV with a header of column names and
 * a row per step, a cell left empty where the step has no value, such as val_loss between
 * evaluations), and its console output searched. For the rooms that turn a folder of runs into
 * a table (precision_runs.h, quality_logs.h) and the programs that start the runs
 * (examples/common/jobs.h).
 *
 * Lenient on purpose: a log still being written or cut short reads as far as it goes, and a
 * missing file or column reads as no rows (NAN where one value is asked for), so a caller can
 * tell an unfinished run from a finished one by what it finds. */
#include <stdbool.h>

/* Columns x and y of the rows where both cells are numbers, up to max rows, in the log's
 * order; the count. */
int    train_log_columns(const char *path, const char *x, const char *y, double *xs, double *ys,
                         int max);
/* Column `name` by step into v[step] for step 1..steps (cells the log lacks are left as they
 * were). False without memory. */
bool   train_log_by_step(const char *path, const char *name, long steps, double *v);
/* The last number in a column (NAN if none, or no such column or file). */
double train_log_last(const char *path, const char *column);
/* Column y at the row whose step is `step` (the last such row); NAN if there is none. */
double train_log_at(const char *path, const char *y, long step);
/* Whether a line of the text file contains word (false without the file): a run's console
 * output saying it "diverged". */
bool   train_log_mentions(const char *path, const char *word);

#endif

#ifndef TAPEGRAD_AUTOGRAD_TSV_H
#define TAPEGRAD_AUTOGRAD_TSV_H
/* TSV logs: a header line of column names, then one line per row, cells separated by tabs.
 * Programs' logs and the result files a room writes for its rows (plan/, analysis/) both go
 * through it; examples/common/tsv.h adds the programs' open-or-exit pair.
 *
 * Where the bytes go (autograd/outfile.h): rows are written to a temporary file beside PATH,
 * named .NAME.XXXXXX (unique, so two runs never share one), and flushed one by one, so a long
 * run can be watched (tail -f, or a plot) and a crash keeps every finished row there;
 * tsv_close renames it to PATH. A file already at PATH stays intact until then, so a run that
 * fails half way damages nothing it did not finish. A PATH that is not a regular file (a pipe,
 * /dev/stdout) is written through; a symbolic link's target is replaced, the link kept.
 *
 * Numbers are written in the shortest form that reads back to exactly the same value (strtod
 * for doubles, strtof for floats), integers without a decimal point: "0.1", not
 * "0.10000000000000001"; "300", not "3e+02". Non-finite values are "nan", "inf", "-inf". A tab
 * or newline inside a text cell becomes a space, so every row keeps its columns.
 *
 *     const char *cols[] = { "step", "loss", "lr", NULL };
 *     TsvWriter *log = tsv_open("run.tsv", cols, err, sizeof err);
 *     tsv_int(log, step); tsv_float(log, loss); tsv_num(log, lr); tsv_end_row(log);
 *     tsv_close(log, err, sizeof err);
 *
 * A row with the wrong number of cells is a programming error and aborts. */
#include <stdbool.h>
#include <stddef.h>

typedef struct TsvWriter TsvWriter;

/* Creates the temporary file and writes the header (columns: NULL-terminated, at least one). NULL with a
 * message in err if the file cannot be created. */
TsvWriter  *tsv_open(const char *path, const char *const *columns, char *err, size_t errlen);

void        tsv_num(TsvWriter *w, double v);
/* A number, or an empty cell for NAN (a value that does not apply, or not measured at that
 * row): gnuplot and spreadsheets read an empty cell as missing. */
void        tsv_num_or_empty(TsvWriter *w, double v);
void        tsv_float(TsvWriter *w, float v);
void        tsv_int(TsvWriter *w, long long v);
void        tsv_str(TsvWriter *w, const char *s);
/* Ends the row and flushes it. False once any write has failed (disk full, ...). */
bool        tsv_end_row(TsvWriter *w);
/* A whole row of numbers, one per column. */
bool        tsv_row(TsvWriter *w, const double *values);

/* Closes and renames the temporary file to PATH; frees w. False with a message in err if a
 * write, the close or the rename failed; the temporary file is then removed and PATH keeps
 * what it had. */
bool        tsv_close(TsvWriter *w, char *err, size_t errlen);

/* The text tsv_num and tsv_float write, for a caller's buffer (32 bytes are always enough). */
const char *tsv_format_double(double v, char *buf, size_t len);
const char *tsv_format_float(float v, char *buf, size_t len);

#endif

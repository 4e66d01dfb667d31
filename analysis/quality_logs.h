#ifndef TAPEGRAD_QUALITY_LOGS_H
#define TAPEGRAD_QUALITY_LOGS_H
/* A quality table (quality.h) from a folder of train_gpt's logs (train_log.h), and its result
 * files: the table and the validation curves as TSV (autograd/tsv.h), for memory_savers and
 * any program or script that compares configurations over seeds the same way.
 *
 * The logs follow one naming convention, DIR/NAME.sSEED.tsv (train_gpt --log) with the run's
 * console output in DIR/NAME.sSEED.out, so that a folder of runs made by hand or by a script
 * reads the same as one made by a program. A run counts when its log has a validation loss at
 * the last step: train_gpt writes NAME.sSEED.tsv.tmp while it runs and renames it at the end,
 * so an unfinished run has no NAME.sSEED.tsv and is "missing"; one whose output says it
 * diverged is "diverged". */
#include <stdbool.h>
#include <stddef.h>

#include "analysis/quality.h"

/* DIR/NAME.sSEED followed by ext (".tsv", ".out"). */
void   quality_path(char *buf, size_t len, const char *dir, const char *name, long seed,
                    const char *ext);

/* One run's status, and its final validation loss in *loss (NAN unless OK): OK when the log's
 * last row is step `steps` and carries a validation loss. */
QualityRunStatus quality_read_final(const char *dir, const char *name, long seed, long steps,
                                    double *loss);

/* Every run's status and final loss from the logs in dir, then quality_summarize. */
void   quality_collect(QualityTable *t, const char *dir);

/* The table as TSV, one row per configuration: config, flags, then the final loss of each
 * seed (column "seed_S"; "missing" or "diverged" instead of a number), n, mean, sd, min, max,
 * ratio, the paired ratios' geometric mean and interval, target (text: "reference", "1%",
 * "noise (0.31%)", "none"), tolerance, met ("yes", "no", or empty). Written whole or not at
 * all (autograd/tsv.h); false with a message in err. */
bool   quality_write_table(const QualityTable *t, const char *path, char *err, size_t errlen);

/* The validation curves as TSV, one row per configuration and evaluated step: config, step,
 * n (finished seeds with a value there), the mean, min and max of the loss over them, and
 * over the paired_n of them whose seed the reference also finished, the mean of the ratio of
 * the loss to the reference's at the same seed and step (ratio). Only finished runs count. */
bool   quality_write_curves(const QualityTable *t, const char *dir, const char *path,
                            char *err, size_t errlen);

/* The words the table uses, for a program that prints it: a run not OK ("diverged",
 * "missing"), configuration i's target ("reference" for row 0, "1%", "noise (0.31%)", "none";
 * in buf) and a verdict ("yes", "no", "" without a target). */
const char *quality_status_word(QualityRunStatus s);
const char *quality_target_text(const QualityTable *t, int i, char *buf, size_t len);
const char *quality_met_text(int met);

#endif

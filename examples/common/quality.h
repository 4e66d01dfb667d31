#ifndef TAPEGRAD_QUALITY_H
#define TAPEGRAD_QUALITY_H
/* What a training setting costs in quality: the final validation loss of several train_gpt
 * configurations over the same seeds, each set against a reference configuration's (row 0).
 *
 * The logs follow one naming convention, DIR/NAME.sSEED.tsv (train_gpt --log) with the run's
 * console output in DIR/NAME.sSEED.out, so that a folder of runs made by hand or by a script
 * reads the same as one made by a program. A run counts when its log has a validation loss at
 * the last step: train_gpt writes NAME.sSEED.tsv.tmp while it runs and renames it at the end,
 * so an unfinished run has no NAME.sSEED.tsv and is "missing"; one whose output says it
 * diverged is "diverged". Both are left out of every statistic, and the table says so.
 *
 * Per configuration: the arithmetic mean of the final losses over the seeds that finished, the
 * sample standard deviation, the range, and the ratio of the mean to the reference's mean,
 * which is what a target such as "within 1% of fp32" is about. Beside it, the paired view:
 * each seed's loss over the reference's loss with the same seed (seed_stats.h: geometric mean
 * and 95% t interval), which cancels whatever luck a seed gives both runs alike.
 *
 * A target is a tolerance on |ratio - 1|: a fixed one (1%, 3%), or "noise", the size a
 * difference of two means over the same number of seeds has when only the seed differs:
 * 2 sqrt(2 / n) s / mean, with s and mean the reference's seed standard deviation and mean
 * and n its finished seeds (two standard errors of a difference). */
#include <stdbool.h>
#include <stddef.h>

#include "examples/common/seed_stats.h"

enum { QUALITY_MAX_CONFIGS = 16 };

typedef enum { QUALITY_TARGET_NONE, QUALITY_TARGET_WITHIN, QUALITY_TARGET_NOISE } QualityTarget;

typedef struct {
    const char   *name;       /* the file stem: DIR/NAME.sSEED.tsv */
    const char   *flags;      /* what train_gpt gets beyond the flags every run shares */
    QualityTarget target;
    double        within;     /* QUALITY_TARGET_WITHIN: the tolerance, 0.01 for 1% */
} QualityConfig;

typedef enum { QUALITY_RUN_OK, QUALITY_RUN_MISSING, QUALITY_RUN_DIVERGED } QualityRunStatus;

typedef struct {
    QualityRunStatus status[SEED_MAX];
    double     final[SEED_MAX];   /* validation loss at the last step; NAN unless OK */
    int        n;                 /* seeds that finished */
    double     mean, sd, min, max;    /* sd: NAN below 2 seeds */
    double     ratio;             /* mean / the reference's mean */
    SeedStats  paired;            /* final / the reference's final, seed by seed */
    double     tol;               /* the target as a tolerance on |ratio - 1|; NAN: none */
    int        met;               /* 1 yes, 0 no, -1 no target (or no data) */
} QualityRow;

typedef struct {
    const QualityConfig *cfg;     /* cfg[0] is the reference */
    int        n_configs, n_seeds;
    long       seeds[SEED_MAX];
    long       steps;
    double     noise;             /* the "noise" tolerance (see above); NAN below 2 seeds */
    QualityRow row[QUALITY_MAX_CONFIGS];
} QualityTable;

/* DIR/NAME.sSEED followed by ext (".tsv", ".out"). */
void   quality_path(char *buf, size_t len, const char *dir, const char *name, long seed,
                    const char *ext);

/* One run's status, and its final validation loss in *loss (NAN unless OK): OK when the log's
 * last row is step `steps` and carries a validation loss. */
QualityRunStatus quality_read_final(const char *dir, const char *name, long seed, long steps,
                                    double *loss);

/* An empty table for these configurations and seeds (at most QUALITY_MAX_CONFIGS and
 * SEED_MAX; cfg must outlive it). */
QualityTable quality_table(const QualityConfig *cfg, int n_configs, const long *seeds,
                           int n_seeds, long steps);
/* Every run's status and final loss from the logs in dir, then quality_summarize. */
void   quality_collect(QualityTable *t, const char *dir);
/* The statistics, the tolerances and the verdicts from the rows' status and final (so a test
 * can set those by hand). */
void   quality_summarize(QualityTable *t);

/* The table as TSV, one row per configuration: config, flags, then the final loss of each
 * seed (column "seed_S"; "missing" or "diverged" instead of a number), n, mean, sd, min, max,
 * ratio, the paired ratios' geometric mean and interval, target (text: "reference", "1%",
 * "noise (0.31%)", "none"), tolerance, met ("yes", "no", or empty). Written to PATH.tmp, then
 * renamed. False with a message in err. */
bool   quality_write_table(const QualityTable *t, const char *path, char *err, size_t errlen);

/* The validation curves as TSV, one row per configuration and evaluated step: config, step,
 * n (finished seeds with a value there), the mean, min and max of the loss over them, and
 * over the paired_n of them whose seed the reference also finished, the mean of the ratio of
 * the loss to the reference's at the same seed and step (ratio). Only finished runs count. */
bool   quality_write_curves(const QualityTable *t, const char *dir, const char *path,
                            char *err, size_t errlen);

/* The table in markdown on stdout: mean +- sd, the ratio, the target and the verdict, the
 * seeds' losses, and the missing runs. */
void   quality_print(const QualityTable *t);

#endif

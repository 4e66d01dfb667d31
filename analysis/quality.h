#ifndef TAPEGRAD_QUALITY_H
#define TAPEGRAD_QUALITY_H
/* What a training setting costs in quality: the final validation loss of several training
 * configurations over the same seeds, each set against a reference configuration's (row 0).
 * This is the statistics; reading train_gpt's logs into a table and writing it out are
 * quality_logs.h's. A run that did not finish ("missing") or
 * diverged is left out of every statistic.
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

#include "analysis/seed_stats.h"

enum { QUALITY_MAX_CONFIGS = 16 };

typedef enum { QUALITY_TARGET_NONE, QUALITY_TARGET_WITHIN, QUALITY_TARGET_NOISE } QualityTarget;

typedef struct {
    const char   *name;       /* its name (and the logs' file stem, quality_logs.h) */
    const char   *flags;      /* what its runs get beyond the flags every run shares */
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

/* An empty table for these configurations and seeds (at most QUALITY_MAX_CONFIGS and
 * SEED_MAX; cfg must outlive it). */
QualityTable quality_table(const QualityConfig *cfg, int n_configs, const long *seeds,
                           int n_seeds, long steps);
/* The statistics, the tolerances and the verdicts from the rows' status and final (so a test
 * can set those by hand). */
void   quality_summarize(QualityTable *t);

#endif

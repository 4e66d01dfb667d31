#ifndef TAPEGRAD_SCALING_LAWS_H
#define TAPEGRAD_SCALING_LAWS_H
/* What the files of scaling_laws share: the study (scaling_laws.c trains it) and the report of
 * its analysis (analysis/scaling_study.h; analyse.c prints it, writes scaling_fit.tsv and draws
 * the figure). */
#include <stdbool.h>
#include <stdint.h>

#include "analysis/scaling_study.h"

typedef struct {
    const char *out;         /* folder of the TSV files and the figure */
    int         bootstrap;   /* resamples for the intervals */
    uint64_t    seed;        /* of the resampling */
    double      seconds;     /* the study's wall-clock time (0: not known, a refit) */
} AnalyseOptions;

/* Analyses the points, prints it all and the summary line, writes OUT/scaling_fit.tsv and the
 * figure's files (scaling_points.tsv, scaling_isoflop.tsv, scaling_optimal.tsv,
 * scaling_optimal_kaplan.tsv, scaling_lines.tsv, scaling_laws.png). False (with a message on
 * stderr) when there are too few points to fit. */
bool scaling_analyse(const ScalingPoint *pts, int n, const AnalyseOptions *o);

#endif

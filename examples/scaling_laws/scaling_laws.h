#ifndef TAPEGRAD_SCALING_LAWS_H
#define TAPEGRAD_SCALING_LAWS_H
/* What the files of scaling_laws share: the grid runs (scaling_laws.c) and their analysis, the
 * fits, the tables and the figure (analyse.c). */
#include <stdint.h>

#include "analysis/scaling_grid.h"

typedef struct {
    const char *out;         /* folder of the TSV files and the figure */
    int         bootstrap;   /* resamples for the spread of approach 3's constants */
    uint64_t    seed;        /* of the resampling */
} AnalyseOptions;

/* Fits approaches 2 and 3 and Kaplan's L(N) to the runs, prints them, writes
 * OUT/scaling_points.tsv, scaling_isoflop.tsv, scaling_optimal.tsv, scaling_lines.tsv and
 * scaling_fit.tsv and draws OUT/scaling_laws.png. Returns false (with a message on stderr)
 * when there are too few runs to fit. */
bool scaling_analyse(const ScalingRun *runs, int n, const AnalyseOptions *o);

#endif

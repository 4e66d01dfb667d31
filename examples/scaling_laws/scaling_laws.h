#ifndef TAPEGRAD_SCALING_LAWS_H
#define TAPEGRAD_SCALING_LAWS_H
/* What the files of scaling_laws share: the study (scaling_laws.c trains it: trunks, cooldown
 * branches, cosine references) and its analysis (analyse.c: the fits, the tables, the summary
 * line; figure.c: the figure's TSV files and gnuplot). */
#include <stdbool.h>
#include <stdint.h>

#include "analysis/scaling_branch.h"

/* Characters per BPE token, to state D in the papers' unit as well as ours. An assumption, not a
 * measurement here (there is no BPE tokenizer in tapegrad): GPT-2's BPE averages about 4
 * characters of English prose per token. */
#define SCALING_CHARS_PER_BPE 4.0

typedef struct {
    const char *out;         /* folder of the TSV files and the figure */
    int         bootstrap;   /* resamples for the intervals */
    uint64_t    seed;        /* of the resampling */
    double      seconds;     /* the study's wall-clock time (0: not known, a refit) */
} AnalyseOptions;

/* Fits Chinchilla's approaches 2 and 3 (every parameter counted, cooldown losses) and the
 * Kaplan-style fits of the same runs (non-embedding N, the trunk's constant-rate losses),
 * compares the branches with the cosine references, prints it all and the summary line, writes
 * OUT/scaling_fit.tsv and the figure. False (with a message on stderr) when there are too few
 * points to fit. */
bool scaling_analyse(const ScalingPoint *pts, int n, const AnalyseOptions *o);

/* What approach 2 found, for the figure (figure.c). */
typedef struct {
    double budget;
    bool   ok, inside;
    double c[3];             /* loss = c0 + c1 log N + c2 log^2 N */
    double N_opt, N_lo, N_hi;   /* the vertex and its 5-95% interval over the seeds */
    double loss_opt, n_min, n_max;
} ScalingProfile;

typedef struct {
    double coef, a, b_coef, b;  /* N_opt = coef C^a, D_opt = b_coef C^b */
    bool   ok;
} ScalingLine;

/* Writes OUT/scaling_points.tsv (the cooldown losses per pair: mean and range over the seeds),
 * scaling_isoflop.tsv (the parabolas), scaling_optimal.tsv and scaling_optimal_kaplan.tsv (the
 * vertices), scaling_lines.tsv (the fitted and the papers' lines) and draws
 * OUT/scaling_laws.png (examples/scaling_laws/scaling_laws.gp). */
void scaling_figure(const AnalyseOptions *o, const ScalingPoint *pts, int n,
                    const ScalingProfile *chin, const double *budgets, int nb,
                    const ScalingProfile *kap, const double *kbudgets, int nkb,
                    const ScalingLine *a2, const ScalingLine *k2, double a3_alpha,
                    double a3_beta, double a3_G);

#endif

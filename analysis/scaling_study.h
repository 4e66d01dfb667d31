#ifndef TAPEGRAD_SCALING_STUDY_H
#define TAPEGRAD_SCALING_STUDY_H
/* The analysis of a scaling-law study (examples/scaling_laws, docs/scaling_laws.md): what its
 * measured points say, as numbers a program prints, writes or draws.
 *
 * In: the study's points (analysis/scaling_branch.h: per size and seed, cooldown branches and
 * the trunk's constant-rate losses at many D, and a few separate cosine runs), trained or read
 * back from scaling_study.tsv, and the resampling's count and seed. Out: a ScalingStudy --
 *   - Chinchilla's approach 2 (every parameter counted, the branches' losses): a parabola in
 *     log N per budget, its vertex, and the 5-95% of the vertices, of a and of D/N at the
 *     largest budget over the seeds (each pair's loss redrawn from its seeds);
 *   - approach 3 on the same points (analysis/scaling_fit.h), with a 5-95% over resampled
 *     points, and the same fit under each of Kaplan's two choices alone (non-embedding N, the
 *     trunk's loss: a schedule longer than the run) and both;
 *   - Kaplan-style approach 2 (both choices) on the same trunks;
 *   - the branches against the cosine runs, the compute the branches saved, the FLOP the tape
 *     counted against 6N;
 *   - every number as a named quantity, in the order of the study's scaling_fit.tsv;
 *   - the rows of the figure's tables (pairs, optimal points, fitted lines).
 * It writes and draws nothing; its approach-2, approach-3 and Kaplan tables print into a FILE
 * the program gives (analysis/scaling_study_print.c). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "analysis/scaling_branch.h"
#include "analysis/scaling_fit.h"

/* Characters per BPE token, to state D in the papers' unit as well as ours. An assumption, not a
 * measurement here (there is no BPE tokenizer in tapegrad): GPT-2's BPE averages about 4
 * characters of English prose per token. */
#define SCALING_CHARS_PER_BPE 4.0

enum { SCALING_MAX_BUDGETS = 32, SCALING_MAX_ROWS = 64, SCALING_MAX_QUANTITIES = 320 };

/* One budget's IsoFLOP profile fitted by approach 2. */
typedef struct {
    double budget;
    bool   ok, inside;          /* a valley was found; its vertex lies within the sizes run */
    double c[3];                /* loss = c0 + c1 log N + c2 log^2 N */
    double N_opt, N_lo, N_hi;   /* the vertex and its 5-95% interval over the seeds */
    double loss_opt, n_min, n_max;
} ScalingProfile;

/* The power laws through the vertices. */
typedef struct {
    double coef, a, b_coef, b;  /* N_opt = coef C^a, D_opt = b_coef C^b */
    bool   ok;
} ScalingLine;

/* 5-95% of a and of D/N at the largest budget over `good` resamples (NAN below 2). */
typedef struct {
    double a_lo, a_hi, tpp_lo, tpp_hi;
    int    good;
} ScalingInterval;

/* Approach 3 with each of Kaplan's choices: N counted (all or non-embedding) x the loss
 * (the cooldown branch's, matched to the run, or the trunk's, longer than the run). */
typedef enum {
    SCALING_CHOICE_CHINCHILLA,      /* all, cooldown */
    SCALING_CHOICE_NONEMB,          /* non-embedding N, cooldown */
    SCALING_CHOICE_CONSTANT,        /* all, the trunk's constant rate */
    SCALING_CHOICE_KAPLAN,          /* non-embedding N, the trunk's constant rate */
    SCALING_CHOICES
} ScalingChoice;

/* A (size, budget) pair run both as a branch and as a cosine run of its own: the means over
 * the seeds; spread is the larger of the two seed ranges. */
typedef struct {
    int    layers, width, seeds;
    double budget, cosine, branch, constant, diff, spread;
    bool   agree;                   /* |diff| <= spread */
} ScalingCosineRow;

/* Per size: the training FLOP per token the tape counted (its first trunk point). */
typedef struct {
    int    layers, width;
    double N_all, N_nonemb, per_token;
} ScalingFlopRow;

/* Tokens and FLOP (as 6 N D, or counted by the tape) the study trained, against a separate
 * cosine run for every cooldown point. */
typedef struct {
    double trained, trained_6nd, counted;       /* the trunks and branches */
    double separate, separate_6nd;              /* separate runs would have */
    double cosine_6nd, cosine_counted;          /* the cosine references */
    double kaplan_6nd;      /* the trunks' steps past their last cooldown point */
    double saved_percent;
} ScalingCompute;

typedef struct {
    char   name[48];
    double value;
} ScalingQuantity;

typedef enum {
    SCALING_STUDY_OK,
    SCALING_STUDY_TOO_FEW,      /* fewer than 5 cooldown points or 2 budgets: nothing fitted */
    SCALING_STUDY_NO_FIT,       /* approach 3 found no finite fit: approach 2's numbers only */
} ScalingStudyStatus;

typedef struct {
    ScalingStudyStatus status;
    int             n_points;           /* the cooldown points approaches 2 and 3 see */
    int             nb, nkb;            /* budgets of Chinchilla's and Kaplan's profiles */
    double          budgets[SCALING_MAX_BUDGETS], kbudgets[SCALING_MAX_BUDGETS];
    ScalingProfile  prof[SCALING_MAX_BUDGETS], kprof[SCALING_MAX_BUDGETS];
    ScalingLine     a2, k2;             /* k2.a NAN unless kaplan_fitted */
    bool            kaplan_fitted;
    ScalingInterval i2, i3;             /* over the seeds (approach 2), the points (3) */
    double          C_max, tpp2, tpp3;  /* D/N at the largest budget */
    ChinFit         f3;
    double          a3;                 /* beta / (alpha + beta) of f3 */
    double          tpp3_at[SCALING_MAX_BUDGETS];   /* f3's D/N at each budget */
    double          fit_seconds, bootstrap_seconds;     /* approach 3's wall clock */
    double          choice_a[SCALING_CHOICES], choice_tpp[SCALING_CHOICES];
    ScalingCosineRow cosine[SCALING_MAX_ROWS];
    int             n_cosine, n_agree;
    ScalingCompute  compute;
    ScalingFlopRow  flop[SCALING_MAX_ROWS];
    int             n_flop;
    double          tpp_ratio, a_difference;    /* approaches 2 and 3 at the largest budget */
    ScalingQuantity q[SCALING_MAX_QUANTITIES];
    int             nq;
} ScalingStudy;

/* Analyses n points with `bootstrap` resamples drawn from `seed`; seconds (the study's wall
 * clock, 0 when not known) joins the quantities. Fills *s (large: allocate it) and returns its
 * status; on SCALING_STUDY_NO_FIT the approach-2 fields and their quantities are filled. */
ScalingStudyStatus scaling_study_analyse(const ScalingPoint *pts, int n, int bootstrap,
                                         uint64_t seed, double seconds, ScalingStudy *s);

/* D/N of a profile's vertex (NAN without one). */
double scaling_profile_tpp(const ScalingProfile *p);

/* The study's tables as scaling_laws prints them (analysis/scaling_study_print.c), each after
 * a blank line: approach 2's vertex per budget (N with its 5-95%, D, D/N in characters and BPE
 * tokens, the loss; "no valley" or "outside" where so) and its power laws; approach 3's E, A,
 * B, alpha, beta, its exponent with the 5-95% and D/N at each budget; Kaplan-style approach 2
 * (when fitted) and approach 3's exponent and D/N under each of Kaplan's choices. */
void scaling_study_print_approach2(const ScalingStudy *s, FILE *out);
void scaling_study_print_approach3(const ScalingStudy *s, FILE *out);
void scaling_study_print_kaplan(const ScalingStudy *s, FILE *out);

/* The figure's tables: their columns (NULL-terminated) and one row's values. */
extern const char *const SCALING_PAIR_COLUMNS[];       /* 8 */
extern const char *const SCALING_OPTIMAL_COLUMNS[];    /* 12 */
extern const char *const SCALING_LINE_COLUMNS[];       /* 15 */
/* One row per (size, budget) of the cooldown points: its budget's index, budget, N, D, the
 * mean loss, the seeds' range, the seeds; into rows[max][8]; returns the count. */
int  scaling_study_pairs(const ScalingPoint *pts, int n, const ScalingStudy *s, double (*rows)[8],
                         int max);
/* A profile's vertex with N, D and D/N and their 5-95% ends, its loss and whether inside. */
void scaling_study_optimal_row(const ScalingProfile *p, double row[12]);
/* At budget C: N and D of approach 2, 3 and Kaplan-style 2, the papers' slopes (0.73, 0.5)
 * drawn through the first vertex, the D/N of each fit, and Chinchilla's 20 tokens. */
void scaling_study_line_row(const ScalingStudy *s, double C, double row[15]);

#endif

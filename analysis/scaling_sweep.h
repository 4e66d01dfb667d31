#ifndef TAPEGRAD_SCALING_SWEEP_H
#define TAPEGRAD_SCALING_SWEEP_H
/* The runs of a scaling-law study (examples/scaling_laws, docs/scaling_laws.md): which models
 * train for which budgets, and the training, shared over processes.
 *
 * Model sizes (depth and width grown together) at compute budgets C spaced four to a decade. A
 * (size, budget) pair trains D = C / (6 N) tokens, N every parameter (Chinchilla's count), when
 * D / N lies in a window around the optimum (min_tpp, max_tpp) and the run has enough steps and
 * few enough passes over the text. Each size is trained once per seed at a constant rate (the
 * trunk, analysis/scaling_branch.h); at every D it is wanted at, a cooldown is branched from a
 * snapshot of the trunk (the loss a schedule matched to D gives), and the trunk itself is
 * evaluated (the loss a schedule longer than the run gives), also at the D that Kaplan's
 * non-embedding count would give. A few pairs of the middle budget are also trained as separate
 * runs with Chinchilla's cosine, to check the branches against them.
 *
 * In: the settings, the corpus (its vocabulary and training text). Out: the plan (each size's
 * targets, the references, the work items) and the measured points (analysis/scaling_branch.h)
 * in the order of a study's scaling_study.tsv (analysis/scaling_study.h analyses them). The
 * work items are independent (their own trainer and seed), so `jobs` forked processes share
 * them, the costliest first, each to the least loaded process; the numbers do not depend on
 * how. Prints nothing: a run's steps reach the program through a ScalingWatch, each item's end
 * through a callback. Files: one snapshot per process in the given folder, removed at the end. */
#include <stdbool.h>
#include <stddef.h>

#include "analysis/scaling_branch.h"
#include "data/dataset.h"

enum { SCALING_MAX_SIZES = 11, SCALING_MAX_TARGETS = 64, SCALING_MAX_ITEMS = 512,
       SCALING_MAX_REFS = 16, SCALING_MAX_JOBS = 64 };

typedef struct {
    bool   quick;           /* 8 sizes (768 to 42k parameters) x 4 budgets (1e10 to 5.6e10); else
                             * 11 sizes (to 119k) x 7 budgets (to 3.2e11) */
    int    seeds;           /* per (size, budget): train.seed, train.seed + 1, ... */
    int    compare;         /* sizes of the middle budget also trained as cosine runs */
    int    jobs;            /* processes that share the runs */
    int    min_steps;       /* a pair is skipped with fewer steps, */
    double max_epochs;      /* more passes over the training text, */
    double min_tpp, max_tpp;    /* or characters per parameter outside these */
    double cooldown;        /* a branch cools down over this last fraction of its run */
    ScalingTrainConfig train;
} ScalingSweepConfig;

typedef struct {
    int layers, width, heads;
} ScalingSize;

typedef struct {
    int    seed;        /* 0 .. seeds - 1, added to train.seed */
    int    size;
    int    ref;         /* -1: the trunk and branches; else the target a cosine run repeats */
    double cost;        /* for the sharing out: steps x N, roughly */
} ScalingItem;

typedef struct {
    ScalingSweepConfig cfg;
    int            ns, nb;                      /* sizes and budgets */
    const ScalingSize *sizes;
    const double  *budgets;
    double         N_all[SCALING_MAX_SIZES], N_nonemb[SCALING_MAX_SIZES];
    ScalingTarget  targets[SCALING_MAX_SIZES][SCALING_MAX_TARGETS];
    int            n_targets[SCALING_MAX_SIZES];
    long           trunk_steps[SCALING_MAX_SIZES];  /* the longest target */
    int            mid;                         /* the budget of the cosine references */
    int            ref_size[SCALING_MAX_REFS], n_ref;
    ScalingItem    items[SCALING_MAX_ITEMS];
    int            n_items;
} ScalingSweep;

/* The plan for a corpus of vocab characters with train_len training characters. */
void scaling_sweep_plan(const ScalingSweepConfig *cfg, int vocab, double train_len,
                        ScalingSweep *sw);

typedef struct {
    const ScalingWatch *watch;      /* every run's steps (may be NULL) */
    /* After an item (in the process that ran it): its label ("seed 1 L2 C16", with
     * " cosine C=..." for a reference) and its points. May be NULL. */
    void (*done)(void *ctx, const ScalingItem *it, const char *label, const ScalingPoint *pts,
                 int n);
    void *ctx;
} ScalingSweepWatch;

/* Trains every item of sw on ds in sw->cfg.jobs processes (one: this one), watched by w (may
 * be NULL), snapshots in dir; the points into pts (room for max), sorted as scaling_study.tsv
 * is: by seed, the trunks' points before the cosine runs, by size, by steps. Returns their count, or -1 with a message
 * in err (a snapshot that cannot be written, more points than max, a process that failed). */
int scaling_sweep_run(const Dataset *ds, const ScalingSweep *sw, const char *dir,
                      const ScalingSweepWatch *w, ScalingPoint *pts, int max, char *err,
                      size_t errlen);

#endif

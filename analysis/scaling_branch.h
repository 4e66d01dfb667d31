#ifndef TAPEGRAD_SCALING_BRANCH_H
#define TAPEGRAD_SCALING_BRANCH_H
/* Cooldown branches (Hägele et al. 2024, "Scaling Laws and Compute-Optimal Training Beyond Fixed
 * Training Durations"): the losses of one model size at many token counts from one run.
 *
 * A fixed-length schedule (Chinchilla's cosine, as long as the run) needs a run from scratch for
 * every token count D. A warmup-stable-decay schedule does not: its stable phase is a constant
 * rate whatever the run's length, so one run at that rate (the trunk) serves every D. For each
 * target of S steps the trunk's state at step S - F (F = round(f S), f = 0.2 by default) is
 * saved as a snapshot (optim/train_snapshot.h), a second trainer is loaded from it and cooled
 * down over the last F steps (rate peak (1 - sqrt(u)), u the part of the cooldown done), and its
 * validation loss is the loss "trained for S steps". The branch draws the batches the trunk
 * would have drawn (the data RNG is in the snapshot), so it is the WSD run of length S, exactly.
 *
 * The trunk's own loss at step S, without a cooldown, is also recorded: the loss of a model
 * whose schedule is longer than its run (still at the peak rate), which is how Kaplan et al.'s
 * single long schedule saw most of their runs. Both numbers come from the same weights' past.
 *
 * Cost: a size with targets S_1 < ... < S_k trains S_k trunk steps plus F_1 + ... + F_k branch
 * steps, where separate runs train S_1 + ... + S_k (each point's `trained` says which steps it
 * alone caused, so the sums are the two costs). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/scaling_grid.h"
#include "data/dataset.h"

/* How a point's parameters are counted, i.e. which N set its D = budget / (6 N). */
typedef enum {
    SCALING_COUNT_ALL,      /* Chinchilla: every parameter, embeddings included */
    SCALING_COUNT_NONEMB,   /* Kaplan: without the token and position embeddings */
} ScalingCount;

/* Which schedule the point's loss was measured under. */
typedef enum {
    SCALING_SCHED_COOLDOWN, /* a branch: constant rate, then a 1-sqrt cooldown over the last f */
    SCALING_SCHED_CONSTANT, /* the trunk at that step: constant rate, no cooldown */
    SCALING_SCHED_COSINE,   /* a run of its own with a cosine as long as the run (Chinchilla's) */
} ScalingSchedule;

/* "all", "nonemb"; "cooldown", "constant", "cosine" (indexed by the enums). */
extern const char *const SCALING_COUNT_NAMES[];
extern const char *const SCALING_SCHED_NAMES[];

/* One measured loss. */
typedef struct {
    int             layers, width, heads;
    uint64_t        seed;
    double          N_nonemb, N_all;    /* the two counts of the same model */
    ScalingCount    count;              /* which one budget / (6 N) used */
    ScalingSchedule schedule;
    double          budget;             /* the compute budget C the point belongs to */
    long            steps;              /* S: the run's length */
    double          D;                  /* S * batch * seq tokens (characters) */
    double          lr;                 /* the peak rate */
    double          val_loss;           /* nats per character on the validation windows */
    double          trained;            /* tokens trained for this point alone (above) */
    double          flop;               /* the training FLOP the tape counted for them */
    double          seconds;            /* wall clock for them and the evaluation */
} ScalingPoint;

/* One token count a size is wanted at: the trunk is evaluated at step `steps`, and when
 * `branch` a cooldown branch ending there is trained and evaluated too. */
typedef struct {
    double       budget;
    ScalingCount count;
    long         steps;
    bool         branch;
} ScalingTarget;

/* Trains one size's trunk and branches for the targets (any order; at least one) with
 * cfg (its seed, rate rule, batch, threads, validation windows). The warmup is cfg's fraction
 * of the shortest target (at most cfg->warmup_max steps), shared by every branch since they
 * share the trunk. Snapshots go to snapshot_path (overwritten by each branch). Writes one point
 * per trunk evaluation and one per branch to out (room for 2 n) and returns how many; 0 with
 * a message in err when a snapshot cannot be written or read back. */
int scaling_train_branches(const Dataset *ds, const ScalingTrainConfig *cfg, int layers,
                           int width, int heads, const ScalingTarget *targets, int n,
                           double cooldown_frac, const char *snapshot_path,
                           const ScalingWatch *watch, const char *label, ScalingPoint *out,
                           char *err, size_t errlen);

/* One fixed-length run of `steps` steps with Chinchilla's cosine (to cfg->final_frac of the
 * peak), the warmup as `warmup` steps: the reference the branches are compared with. */
ScalingPoint scaling_train_cosine(const Dataset *ds, const ScalingTrainConfig *cfg, int layers,
                                  int width, int heads, double budget, long steps, long warmup,
                                  const ScalingWatch *watch, const char *label);

/* The warmup the branches of a size use when its shortest target is `shortest` steps. */
long scaling_branch_warmup(const ScalingTrainConfig *cfg, long shortest);

/* The points file: its columns (NULL-terminated), one point's row written into a writer opened
 * with them (count and schedule by name; false when the write failed), and reading it back
 * (columns by name; false with the file, line and column in err when it is malformed). */
extern const char *const SCALING_POINT_COLUMNS[];
bool scaling_write_point(TsvWriter *w, const ScalingPoint *p);
bool scaling_points_read(const char *path, ScalingPoint *pts, int max, int *n, char *err,
                         size_t errlen);

#endif

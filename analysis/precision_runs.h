#ifndef TAPEGRAD_PRECISION_RUNS_H
#define TAPEGRAD_PRECISION_RUNS_H
/* Training runs at several precisions set beside an fp32 reference (examples/loss_scaling,
 * part 2; docs/mixed_precision.md): what a run's per-step log says in the end (its losses,
 * the steps whose update was skipped, the loss scale it settled on, its peak activation bytes),
 * and the same comparison over several seeds, where each run's final validation loss over
 * fp32's of the same seed says whether a format is within 2% of fp32.
 *
 * On the add task one run cannot say that: the loss ends around 1e-3, after a sudden drop whose
 * timing any perturbation moves (or on the plateau near 0.5 to 1, if the drop has not come by
 * the last step), so even a control that only sums in another order ends far from fp32. What
 * can be said is whether a format moves the loss more than that: each run's loss divided by
 * fp32's of the same seed, over seeds, for the formats and the control side by side; the same
 * ratios at a step on the plateau show the differences the formats make while the runs have not
 * yet parted. Every seed counts: a run that stays on the plateau is a result, not a failure, and
 * its ratio (about 1e3, or 1e-3 when it is fp32 that stays) is in every statistic; the median
 * and the range are the ones it cannot drag. A run that diverged has no loss and is left out.
 *
 * Arithmetic on arrays; the runs as train_gpt command lines and their logs read back
 * (train_log.h); the result files of its rows (autograd/tsv.h: the curves, the table, every
 * seed's runs and the runs over the seeds) and their printed tables (precision_runs_print.c).
 * Starting the runs is the caller's. */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "analysis/seed_stats.h"

#define PRECISION_RUNS_WITHIN 0.02   /* the target: within 2% of fp32's loss */
#define PRECISION_RUNS_SOLVED 0.99   /* exact match that counts as having learned the task */
enum { PRECISION_RUNS_SMOOTH = 20 }; /* steps in the running mean of the training loss */

/* The runs compared, as train_gpt's flags name them. PRECISION_RUNS[0] is the reference, fp32;
 * the last is a control: fp32 again, on another number of threads, so that only the order of
 * the floating-point sums differs (1 ulp here and there). How far it drifts from the reference
 * is how far any small perturbation moves a run of this task, the yardstick for the
 * differences the formats make. */
typedef struct {
    const char *name;          /* "fp16 dynamic" */
    const char *file;          /* "fp16_dynamic": a file name for its log */
    const char *precision;     /* train_gpt --precision */
    const char *loss_scale;    /* train_gpt --loss-scale */
    bool        control;       /* on another thread count */
} PrecisionRunConfig;

enum { PRECISION_RUNS_N = 6 };
extern const PrecisionRunConfig PRECISION_RUNS[PRECISION_RUNS_N];

/* The thread count of run i when the others run on `threads`: the control's is another one
 * (2, or 1 when threads is not 1). */
int    precision_runs_threads(int i, int threads);

/* What the runs are: every one is train_gpt on the add task with the gradient probe's model
 * and schedule (grad_probe_defaults) written out as flags, so that the runs and the probe stay
 * one model even if train_gpt's defaults move. */
typedef struct {
    const char *train_gpt;            /* the program */
    const char *dir;                  /* run i's files: DIR/runs/FILE.tsv (log) and .out */
    long        steps, seed;          /* of every run */
    long        eval_every;           /* train_gpt --eval-every */
    long        compare_step;         /* the early comparison's step (an evaluation's) */
    int         eval_examples;        /* train_gpt --eval-examples */
    int         threads;              /* per run (the control's: precision_runs_threads) */
} PrecisionRunsSetup;

/* A train_gpt command line: arg[0] the program, then its flags. */
enum { PRECISION_RUN_MAX_ARGS = 24, PRECISION_RUN_ARG_LEN = 600 };
typedef struct {
    char arg[PRECISION_RUN_MAX_ARGS][PRECISION_RUN_ARG_LEN];
    int  n;
} PrecisionRunCommand;

/* Run i's file in s->dir: ext "tsv" its log, "out" its console output. */
void   precision_run_path(const PrecisionRunsSetup *s, int i, const char *ext, char *buf,
                          size_t len);
/* Run i's train_gpt command: its precision and loss scale, the probe's model and schedule,
 * s's steps, seed, evaluation and threads, and --log=its log. */
void   precision_run_command(const PrecisionRunsSetup *s, int i, PrecisionRunCommand *c);
/* Run i's training loss at `step`, from its log in s->dir (NAN without one). */
double precision_run_logged_loss(const PrecisionRunsSetup *s, int i, long step);

/* A run's log by step: v[step] for step 1..steps (v[0] unused), NAN where a cell is empty. */
typedef struct {
    double *loss, *val_loss, *val_acc, *scale, *skipped, *peak_act;
} PrecisionRunLog;

/* What a run's log says. skipped counts the steps whose update was skipped (an inf or NaN
 * gradient: the log's skipped column is 1 there), loss_scale is the scale a step used. */
typedef struct {
    bool   ok, diverged;
    double val_loss, val_acc;          /* at the last evaluation */
    double compare_loss;               /* validation loss at compare_step */
    double skipped;
    double final_scale, median_scale;  /* the last step's scale, the median over the steps */
    double peak_act;                   /* the largest step's act bytes */
} PrecisionRunSummary;

/* The columns of a run of `steps` steps, all NAN, in one buffer; NULL without memory. */
bool   precision_run_log_alloc(PrecisionRunLog *log, long steps);
void   precision_run_log_free(PrecisionRunLog *log);
/* The log at path (a train_gpt log: loss, val_loss, val_acc, loss_scale, skipped, peak_act)
 * into log, allocated as precision_run_log_alloc does; false without memory. */
bool   precision_run_log_read(const char *path, long steps, PrecisionRunLog *log);

/* The mean of the last PRECISION_RUNS_SMOOTH training losses up to step s (fewer at the start;
 * NAN where there are none). */
double precision_run_mean(const double *loss, long s);

/* The summary of a run: ok, diverged and the last evaluation's loss and exact match are what
 * the run itself reported; the rest comes from its log. compare_loss is NAN when compare_step
 * is past the last step. False without memory. */
bool   precision_run_summarize(bool ok, bool diverged, double val_loss, double val_acc,
                               const PrecisionRunLog *log, long steps, long compare_step,
                               PrecisionRunSummary *s);

/* Whether step s of a run gets a row of its curve: every PRECISION_RUNS_CURVE_EVERY-th step
 * (the curves are running means, smooth at that spacing), the first and the last, every
 * evaluation and every change of the loss scale; the per-step values are in each run's log. */
enum { PRECISION_RUNS_CURVE_EVERY = 5 };
bool   precision_run_curve_row(const PrecisionRunLog *log, long s, long steps);

/* The dynamic scaler's typical scale: the median over its run (summary[i] is PRECISION_RUNS[i]'s)
 * rounded down to a power of two (it only ever halves and doubles from 2^16, so it is one
 * already); NAN when no dynamic run has a scale. */
float  precision_runs_dynamic_scale(const PrecisionRunSummary *summary);

/* One run (one format) over the seeds, against the reference run of each seed. */
typedef struct {
    double    loss[SEED_MAX], ratio[SEED_MAX];       /* final validation loss, / fp32's */
    double    early[SEED_MAX], early_ratio[SEED_MAX];  /* the same at compare_step */
    SeedStats loss_st, ratio_st, early_st, early_ratio_st;
    int       within, early_within, solved;          /* ratios within 2% of 1; exact >= 99% */
    double    acc_mean;                              /* final exact match, over the seeds */
} PrecisionOverSeeds;

/* sum[k * n_runs + i] is run i with seed k, run 0 the reference; run i over the n_seeds. */
PrecisionOverSeeds precision_runs_over_seeds(const PrecisionRunSummary *sum, int n_runs,
                                             int n_seeds, int i);

/* The result files, each a TSV written whole or not at all at path (autograd/tsv.h); false
 * with a message in err when it cannot be. Run i is PRECISION_RUNS[i], run 0 the reference.
 *
 * The curves: a row per run and step its curve keeps (precision_run_curve_row; col[i] is run
 * i's log): the training loss, its running mean and the validation loss, each mean and loss
 * relative to fp32's at the same step (x / fp32 - 1), exact match and loss scale. Floats: the
 * log's losses are floats, and a figure needs no more digits. */
bool   precision_runs_write_curves(const char *path, const PrecisionRunLog *col, long steps,
                                   char *err, size_t errlen);
/* The table: a row per run of `steps` steps (summary[i] is run i's): its final validation
 * loss and exact match, the loss at compare_step, the relative differences (x - fp32) / fp32,
 * skipped steps, scales and the peak act bytes over fp32's. */
bool   precision_runs_write_table(const char *path, const PrecisionRunSummary *summary,
                                  long steps, long compare_step, char *err, size_t errlen);
/* Every seed's runs: a row per run and seed, runs first (sum[k * PRECISION_RUNS_N + i] is run
 * i with seeds[k], v[i] run i over the seeds, each run on precision_runs_threads(i, threads)):
 * final loss and its ratio to fp32's, exact match (NAN unless the run finished), and the same
 * at compare_step. */
bool   precision_runs_write_seeds(const char *path, const PrecisionRunSummary *sum,
                                  const PrecisionOverSeeds *v, const long *seeds, int n_seeds,
                                  int threads, long compare_step, char *err, size_t errlen);
/* The runs over the seeds: a row per run: seeds solved, mean exact match, then for the final
 * loss and the one at compare_step the geometric mean of the losses and the ratios'
 * statistics (SeedStats) with the count within 2% of 1. */
bool   precision_runs_write_over_seeds(const char *path, const PrecisionOverSeeds *v,
                                       int n_seeds, int threads, long compare_step, char *err,
                                       size_t errlen);

/* The same rows as loss_scaling prints them, as markdown into out (precision_runs_print.c);
 * run i is PRECISION_RUNS[i], run 0 the reference. The headings around them are the program's.
 *
 * The table of one set of runs (t: their steps, seed, threads and compare_step): a caption,
 * then a row per run: final validation loss and its difference from fp32's in percent, exact
 * match, the loss at compare_step and its difference, skipped steps, the final scale and the
 * peak act bytes with their ratio to fp32's; a run that did not finish says diverged or failed. */
void   precision_runs_print_table(const PrecisionRunsSetup *t, const PrecisionRunSummary *s,
                                  FILE *out);
/* The validation loss of every run (col[i] run i's log) at every eval_every-th step to steps. */
void   precision_runs_print_evals(const PrecisionRunLog *col, long steps, long eval_every,
                                  FILE *out);
/* Every seed's final validation loss and exact match: a row per run, a column per seed
 * (sum[k * PRECISION_RUNS_N + i] is run i with seeds[k]). */
void   precision_runs_print_seeds(const PrecisionRunSummary *sum, const long *seeds, int n_seeds,
                                  long steps, int threads, FILE *out);
/* The runs over the seeds: its legend, then a row per run: seeds solved, the geometric mean of
 * the final losses, the ratios' geometric mean with its 95% interval, median, range and count
 * within 2% (3 digits), the same at compare_step (5 digits; fp32's row: its geometric mean). */
void   precision_runs_print_over_seeds(const PrecisionOverSeeds *v, int n_seeds,
                                       long compare_step, FILE *out);

#endif

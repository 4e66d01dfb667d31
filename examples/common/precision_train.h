#ifndef TAPEGRAD_PRECISION_TRAIN_H
#define TAPEGRAD_PRECISION_TRAIN_H
/* The programs' side of the runs at several precisions (analysis/precision_runs.h) and of the
 * gradient probe (analysis/grad_probe.h), for loss_scaling and any program that compares
 * formats the same way:
 *   - the runs as train_gpt subprocesses (train_run.h) on the probe's model and schedule
 *     (grad_probe_defaults), their commands written to DIR/commands.txt before any starts, or
 *     read back from what an earlier run with the same commands left in DIR;
 *   - each run's log read into a PrecisionRunLog and summed up (precision_run_summarize);
 *   - the probe trained with its steps on stderr;
 *   - the rooms' result files written as DIR/NAME.
 * Every failure ends the program with a message (cli_die), naming the flag to blame where
 * there is one. The program prints its own markdown. */
#include <stdbool.h>
#include <stddef.h>

#include "analysis/grad_probe.h"
#include "analysis/precision_runs.h"

/* What the runs are, as the program's flags say. */
typedef struct {
    const char *train_gpt;            /* --train-gpt */
    const char *dir;                  /* --out: commands.txt, runs/FILE.tsv and runs/FILE.out */
    long        steps, seed;          /* of every run */
    long        eval_every;           /* train_gpt --eval-every */
    long        compare_step;         /* the early comparison's step (an evaluation's) */
    int         eval_examples;        /* train_gpt --eval-examples */
    int         threads, jobs;        /* per run (the control's: precision_runs_threads); at once */
    bool        from_logs;            /* start no run: read back what earlier ones left in dir */
} PrecisionTrain;

/* Every run of PRECISION_RUNS, `jobs` at a time (or read back with from_logs, after
 * dir/commands.txt says they were these commands): col[i] is run i's log by step (free each
 * with precision_run_log_free), summary[i] what it says in the end. */
void   precision_train_runs(const PrecisionTrain *t, PrecisionRunLog *col,
                            PrecisionRunSummary *summary);
/* The same runs with another seed, in t->dir/seed_S (made; its name in dir[0..len-1]). */
PrecisionTrain precision_train_seed(const PrecisionTrain *t, long seed, char *dir, size_t len);
/* Run i's training loss at step `step`, from its log in t->dir (NAN without one). */
double precision_train_logged_loss(const PrecisionTrain *t, int i, long step);

/* The gradient probe of the fp32 run that t's runs repeat, measured after probe_step steps,
 * its steps reported on stderr. */
GradProbe      *precision_train_probe(const PrecisionTrain *t, long probe_step);
/* grad_probe_measure at one loss scale (rule: how it was chosen). */
GradProbeResult precision_train_measure(GradProbe *p, float scale, const char *rule);

/* The result files as t->dir/name (or dir/name): precision_runs_write_curves, _table,
 * _seeds, _over_seeds with t's steps, threads and compare_step; grad_hist_write of the probe's
 * histogram, grad_probe_write_underflow. */
void   precision_train_write_curves(const PrecisionTrain *t, const char *name,
                                    const PrecisionRunLog *col);
void   precision_train_write_table(const PrecisionTrain *t, const char *name,
                                   const PrecisionRunSummary *summary);
void   precision_train_write_seeds(const PrecisionTrain *t, const char *name, const long *seeds,
                                   int n_seeds, const PrecisionRunSummary *sum,
                                   const PrecisionOverSeeds *v);
void   precision_train_write_over_seeds(const PrecisionTrain *t, const char *name, int n_seeds,
                                        const PrecisionOverSeeds *v);
void   precision_train_write_hist(const char *dir, const char *name, const GradProbe *p,
                                  int shift);
void   precision_train_write_underflow(const char *dir, const char *name, const GradProbe *p,
                                       const GradProbeResult *res, int n);

#endif

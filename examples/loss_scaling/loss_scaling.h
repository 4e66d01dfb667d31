#ifndef TAPEGRAD_LOSS_SCALING_H
#define TAPEGRAD_LOSS_SCALING_H
/* What the files of loss_scaling share: the options and part 1's output (loss_scaling.c), the
 * training runs of part 2 (runs.c) and part 2 over seeds (seeds.c). The measurements are
 * library: the gradient probe in analysis/grad_probe.h, the runs' summaries and the statistics
 * over seeds in analysis/precision_runs.h. */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "analysis/grad_probe.h"
#include "analysis/precision_runs.h"
#include "analysis/seed_stats.h"
#include "examples/common/tsv.h"
#include "optim/train.h"

typedef struct {
    bool        probe_only, runs_only;  /* the flags */
    bool        probe, curves;      /* the two parts; both by default */
    const char *out, *train_gpt;
    long        steps;              /* length of every run (and of the probe's schedule) */
    long        probe_step;         /* fp32 steps before the gradients are measured */
    long        eval_every, compare_step;
    int         eval_examples, threads, jobs;
    long        seed;
    long        seeds[SEED_MAX];    /* --seeds: part 2 for each of them (n_seeds 0: --seed) */
    int         n_seeds;
    bool        from_logs;          /* start no run: read what earlier ones left in --out */
} Options;

/* runs.c: the thread count of the control run, another one than --threads. */
int         runs_control_threads(const Options *o);
/* mkdir, or exit with a message; a folder that exists already is fine. */
void        runs_make_dir(const char *dir);

/* What every run trains with: train_gpt's defaults, written out. The probe trains with them in
 * this process and the runs get them as flags, so the two stay the same model on the same
 * schedule even if train_gpt's defaults move. The warmup is 100 steps, at most a tenth of the
 * run, as train_gpt's. */
GradProbeConfig runs_settings(const Options *o);

/* ---- part 2: train_gpt at each precision (runs.c) ----------------------------------------- */

enum { N_RUNS = 6 };

/* RUNS[0] is the reference, fp32; the last run is a control: fp32 again, on another number of
 * threads, so that only the order of the floating-point sums differs (1 ulp here and there). How
 * far it drifts from the reference is how far any small perturbation moves a run of this task,
 * the yardstick for the differences the formats make. */
typedef struct {
    const char *name;          /* "fp16 dynamic" */
    const char *file;          /* "fp16_dynamic": runs/FILE.tsv */
    const char *precision;     /* train_gpt --precision */
    const char *loss_scale;    /* train_gpt --loss-scale */
    bool        control;       /* on another thread count */
} RunConfig;

extern const RunConfig RUNS[N_RUNS];

/* Runs every configuration (--jobs at a time; with --from-logs, reads the logs of an earlier
 * run with the same commands instead), writes loss_scaling_curves.tsv and
 * loss_scaling_table.tsv into --out, prints the validation loss of every run at every
 * evaluation (markdown) and fills summary[N_RUNS]. */
void        runs_all(const Options *o, PrecisionRunSummary *summary);
/* The table in markdown on stdout. */
void        runs_print_table(const Options *o, const PrecisionRunSummary *summary);

/* ---- part 2 over several seeds (seeds.c) -------------------------------------------------- */

/* runs_all for each of o->seeds, in --out/seed_S (the files of a single-seed run), then the
 * validation losses of every run and seed, and their ratios to fp32's of the same seed summed
 * up per run, printed (markdown) and written to loss_scaling_seeds.tsv (a row per run and
 * seed) and loss_scaling_seeds_summary.tsv (a row per run) in --out. */
void        seeds_run_all(const Options *o);

#endif

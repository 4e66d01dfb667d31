#ifndef TAPEGRAD_LOSS_SCALING_H
#define TAPEGRAD_LOSS_SCALING_H
/* What the files of loss_scaling share: the options, the runs of part 2 (runs.c) and part 2
 * over seeds (seeds.c). The measurements are library: the gradient probe in
 * analysis/grad_probe.h, the runs compared, their summaries and the statistics over seeds in
 * analysis/precision_runs.h; the train_gpt subprocesses in examples/common/train_run.h. */
#include <stdbool.h>

#include "analysis/grad_probe.h"
#include "analysis/precision_runs.h"
#include "examples/common/tsv.h"

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

/* Runs every configuration of PRECISION_RUNS (--jobs at a time; with --from-logs, reads the
 * logs of an earlier run with the same commands instead), writes loss_scaling_curves.tsv and
 * loss_scaling_table.tsv into --out, prints the validation loss of every run at every
 * evaluation (markdown) and fills summary[PRECISION_RUNS_N]. */
void runs_all(const Options *o, PrecisionRunSummary *summary);
/* The table in markdown on stdout. */
void runs_print_table(const Options *o, const PrecisionRunSummary *summary);

/* runs_all for each of o->seeds, in --out/seed_S (the files of a single-seed run), then the
 * validation losses of every run and seed, and their ratios to fp32's of the same seed summed
 * up per run, printed (markdown) and written to loss_scaling_seeds.tsv (a row per run and
 * seed) and loss_scaling_seeds_summary.tsv (a row per run) in --out. */
void seeds_run_all(const Options *o);

#endif

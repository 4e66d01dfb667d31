/* Part 2 over several seeds (--seeds): is a format's final validation loss within 2% of fp32's?
 * One run of the default task cannot say (analysis/precision_runs.h says why and how many seeds
 * can); this file runs part 2 once per seed and prints and writes the runs over the seeds. On
 * the final loss read the t interval with the control's beside it: a mixture of two outcomes
 * (a run left on the plateau) is not what it assumes (docs/mixed_precision.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/cli.h"
#include "examples/common/train_run.h"
#include "examples/loss_scaling/loss_scaling.h"

/* ---- the TSV files ------------------------------------------------------------------------ */

static const char *const SEED_COLUMNS[] = {
    "run", "seed", "threads", "diverged", "val_loss", "val_acc", "val_loss_vs_fp32",
    "compare_step", "compare_val_loss", "compare_vs_fp32", NULL,
};

static void write_seeds(const Options *o, const PrecisionRunSummary *sum,
                        const PrecisionOverSeeds *v)
{
    TsvWriter *w = tsv_open_in(o->out, "loss_scaling_seeds.tsv", SEED_COLUMNS);
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        for (int k = 0; k < o->n_seeds; k++) {
            const PrecisionRunSummary *s = &sum[k * PRECISION_RUNS_N + i];
            tsv_str(w, PRECISION_RUNS[i].name);
            tsv_int(w, o->seeds[k]);
            tsv_int(w, precision_runs_threads(i, o->threads));
            tsv_int(w, s->diverged);
            tsv_num(w, v[i].loss[k]);
            tsv_num(w, s->ok ? s->val_acc : NAN);
            tsv_num(w, v[i].ratio[k]);
            tsv_int(w, o->compare_step);
            tsv_num(w, v[i].early[k]);
            tsv_num(w, v[i].early_ratio[k]);
            tsv_end_row(w);
        }
    tsv_close_or_die(w);
}

/* Per quantity (final, early): the losses' geometric mean, then the ratios' statistics. */
static const char *const SUMMARY_COLUMNS[] = {
    "run", "precision", "loss_scale", "threads", "seeds", "solved", "exact_match_mean",
    "n", "val_loss_geomean", "ratio_geomean", "ratio_ci_lo", "ratio_ci_hi", "ratio_log_sd",
    "ratio_median", "ratio_min", "ratio_max", "within_2pct",
    "compare_step", "compare_n", "compare_val_loss_geomean", "compare_ratio_geomean",
    "compare_ratio_ci_lo", "compare_ratio_ci_hi", "compare_ratio_log_sd",
    "compare_ratio_median", "compare_ratio_min", "compare_ratio_max", "compare_within_2pct",
    NULL,
};

static void write_stats(TsvWriter *w, const SeedStats *loss, const SeedStats *r, int within)
{
    tsv_int(w, loss->n);
    tsv_num(w, loss->geomean);
    tsv_num(w, r->geomean);
    tsv_num(w, r->ci_lo);
    tsv_num(w, r->ci_hi);
    tsv_num(w, r->log_sd);
    tsv_num(w, r->median);
    tsv_num(w, r->min);
    tsv_num(w, r->max);
    tsv_int(w, within);
}

static void write_summary(const Options *o, const PrecisionOverSeeds *v)
{
    TsvWriter *w = tsv_open_in(o->out, "loss_scaling_seeds_summary.tsv", SUMMARY_COLUMNS);
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        tsv_str(w, PRECISION_RUNS[i].name);
        tsv_str(w, PRECISION_RUNS[i].precision);
        tsv_str(w, PRECISION_RUNS[i].loss_scale);
        tsv_int(w, precision_runs_threads(i, o->threads));
        tsv_int(w, o->n_seeds);
        tsv_int(w, v[i].solved);
        tsv_num(w, v[i].acc_mean);
        write_stats(w, &v[i].loss_st, &v[i].ratio_st, v[i].within);
        tsv_int(w, o->compare_step);
        write_stats(w, &v[i].early_st, &v[i].early_ratio_st, v[i].early_within);
        tsv_end_row(w);
    }
    tsv_close_or_die(w);
}

/* ---- markdown ----------------------------------------------------------------------------- */

static void print_per_seed(const Options *o, const PrecisionRunSummary *sum)
{
    printf("\n## every seed\n\nfinal validation loss (exact match), %ld steps, %d thread%s per "
           "run (the fp32 control: %d)\n\n| run |", o->steps, o->threads,
           o->threads == 1 ? "" : "s", precision_runs_threads(PRECISION_RUNS_N - 1, o->threads));
    for (int k = 0; k < o->n_seeds; k++)
        printf(" seed %ld |", o->seeds[k]);
    printf("\n|---|");
    for (int k = 0; k < o->n_seeds; k++)
        printf("---|");
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        printf("\n| %s |", PRECISION_RUNS[i].name);
        for (int k = 0; k < o->n_seeds; k++) {
            const PrecisionRunSummary *s = &sum[k * PRECISION_RUNS_N + i];
            if (s->ok)
                printf(" %.3g (%.0f%%) |", s->val_loss, 100.0 * s->val_acc);
            else
                printf(" %s |", s->diverged ? "diverged" : "failed");
        }
    }
    printf("\n");
}

/* "geo. mean [lo, hi] | median | min..max | within" of one set of ratios. */
static void print_ratios(int digits, const SeedStats *r, int within)
{
    printf(" %.*g [%.*g, %.*g] | %.*g | %.*g..%.*g | %d of %d |", digits, r->geomean, digits,
           r->ci_lo, digits, r->ci_hi, digits, r->median, digits, r->min, digits, r->max,
           within, r->n);
}

static void print_summary(const Options *o, const PrecisionOverSeeds *v)
{
    printf("\n## over the seeds\n\nratio: a run's validation loss over fp32's of the same "
           "seed; geometric mean of the ratios with its 95%% interval (Student's t on the log "
           "ratios), median, min..max, and the seeds within 2%% (|ratio - 1| <= 0.02); solved: "
           "final exact match >= %.0f%%. Every seed is in (a run left on the plateau too); a "
           "diverged run is left out of its row's counts.\n\n", 100.0 * PRECISION_RUNS_SOLVED);
    printf("| run | solved | final val loss (geo. mean) | vs fp32: geo. mean [95%%] | median "
           "| min..max | within 2%% | at step %ld: vs fp32 [95%%] | median | min..max | "
           "within 2%% |\n|---|---|---|---|---|---|---|---|---|---|---|\n", o->compare_step);
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        printf("| %s | %d of %d | %.3g |", PRECISION_RUNS[i].name, v[i].solved, o->n_seeds,
               v[i].loss_st.geomean);
        if (i == 0) {
            printf(" (reference) | | | | (reference: geo. mean %.4g) | | | |\n",
                   v[i].early_st.geomean);
            continue;
        }
        /* the early ratios are near 1: more digits */
        print_ratios(3, &v[i].ratio_st, v[i].within);
        print_ratios(5, &v[i].early_ratio_st, v[i].early_within);
        printf("\n");
    }
}

/* ---- the seeds ---------------------------------------------------------------------------- */

void seeds_run_all(const Options *o)
{
    PrecisionRunSummary *sum = malloc((size_t)o->n_seeds * PRECISION_RUNS_N * sizeof *sum);
    if (!sum)
        cli_die(1, "out of memory");
    run_make_dir(o->out);
    for (int k = 0; k < o->n_seeds; k++) {
        char dir[600];
        Options one = *o;
        one.seed = o->seeds[k];
        snprintf(dir, sizeof dir, "%s/seed_%ld", o->out, one.seed);
        one.out = dir;
        run_make_dir(dir);
        fprintf(stderr, "seed %ld (%d of %d)\n", one.seed, k + 1, o->n_seeds);
        printf("\n# seed %ld\n", one.seed);
        runs_all(&one, &sum[k * PRECISION_RUNS_N]);
        runs_print_table(&one, &sum[k * PRECISION_RUNS_N]);
    }
    PrecisionOverSeeds *v = malloc(PRECISION_RUNS_N * sizeof *v);
    if (!v)
        cli_die(1, "out of memory");
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        v[i] = precision_runs_over_seeds(sum, PRECISION_RUNS_N, o->n_seeds, i);
    write_seeds(o, sum, v);
    write_summary(o, v);
    print_per_seed(o, sum);
    print_summary(o, v);
    free(v);
    free(sum);
}

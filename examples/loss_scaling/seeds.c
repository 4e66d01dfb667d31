/* Part 2 over several seeds (--seeds): is a format's final validation loss within 2% of fp32's?
 *
 * On the default task one run cannot say: the loss ends around 1e-3, after a sudden drop whose
 * timing any perturbation moves (or on the plateau near 0.5 to 1, if the drop has not come by
 * the last step), so even the fp32 control (the same computation with its sums in another
 * order) ends far from fp32. What can be said is whether a format moves the loss more than
 * that: each run's loss divided by fp32's of the same seed, over seeds, for the formats and for
 * the control side by side. The same ratios at --compare-step, on the plateau where the loss is
 * about 1.4, show the differences the formats make while the runs have not yet parted.
 *
 * Every seed counts: a run that stays on the plateau is a result, not a failure, and its ratio
 * (about 1e3, or 1e-3 when it is fp32 that stays) is in every statistic; the median and the
 * range are the ones it cannot drag. Such a mixture of two outcomes is not what the t interval
 * assumes, so on the final loss read the interval with the control's beside it
 * (docs/mixed_precision.md). A run that diverged has no loss and is left out (n says how many
 * are in). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/cli.h"
#include "examples/loss_scaling/loss_scaling.h"

#define WITHIN 0.02          /* the target: within 2% of fp32's loss */
#define SOLVED 0.99          /* exact match that counts as having learned the task */

/* One run (one format) over the seeds. */
typedef struct {
    double    loss[SEED_MAX], ratio[SEED_MAX];       /* final validation loss, / fp32's */
    double    early[SEED_MAX], early_ratio[SEED_MAX];  /* the same at --compare-step */
    SeedStats loss_st, ratio_st, early_st, early_ratio_st;
    int       within, early_within, solved;
    double    acc_mean;                              /* final exact match, over the seeds */
} OverSeeds;

/* A run's loss, NAN where it has none (it diverged or failed). */
static double final_loss(const RunSummary *s) { return s->ok ? s->val_loss : NAN; }

/* sum[k * N_RUNS + i] is run i with seed k. */
static OverSeeds over_seeds(const Options *o, const RunSummary *sum, int i)
{
    OverSeeds v = { .acc_mean = 0.0 };
    double ref[SEED_MAX], early_ref[SEED_MAX];
    int n = o->n_seeds, with_acc = 0;
    for (int k = 0; k < n; k++) {
        const RunSummary *s = &sum[k * N_RUNS + i], *r = &sum[k * N_RUNS];
        v.loss[k] = final_loss(s);
        v.early[k] = s->compare_loss;
        ref[k] = final_loss(r);
        early_ref[k] = r->compare_loss;
        if (s->ok) {
            v.solved += s->val_acc >= SOLVED;
            v.acc_mean += s->val_acc;
            with_acc++;
        }
    }
    v.acc_mean = with_acc ? v.acc_mean / with_acc : NAN;
    seed_ratios(v.loss, ref, n, v.ratio);
    seed_ratios(v.early, early_ref, n, v.early_ratio);
    v.loss_st = seed_stats(v.loss, n);
    v.ratio_st = seed_stats(v.ratio, n);
    v.early_st = seed_stats(v.early, n);
    v.early_ratio_st = seed_stats(v.early_ratio, n);
    v.within = seed_within(v.ratio, n, WITHIN);
    v.early_within = seed_within(v.early_ratio, n, WITHIN);
    return v;
}

static int run_threads(const Options *o, int i)
{
    return RUNS[i].control ? runs_control_threads(o) : o->threads;
}

/* ---- the TSV files ------------------------------------------------------------------------ */

static const char *const SEED_COLUMNS[] = {
    "run", "seed", "threads", "diverged", "val_loss", "val_acc", "val_loss_vs_fp32",
    "compare_step", "compare_val_loss", "compare_vs_fp32", NULL,
};

static void write_seeds(const Options *o, const RunSummary *sum, const OverSeeds *v)
{
    TsvWriter *w = tsv_open_in(o->out, "loss_scaling_seeds.tsv", SEED_COLUMNS);
    for (int i = 0; i < N_RUNS; i++)
        for (int k = 0; k < o->n_seeds; k++) {
            const RunSummary *s = &sum[k * N_RUNS + i];
            tsv_str(w, RUNS[i].name);
            tsv_int(w, o->seeds[k]);
            tsv_int(w, run_threads(o, i));
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

static void write_summary(const Options *o, const OverSeeds *v)
{
    TsvWriter *w = tsv_open_in(o->out, "loss_scaling_seeds_summary.tsv", SUMMARY_COLUMNS);
    for (int i = 0; i < N_RUNS; i++) {
        tsv_str(w, RUNS[i].name);
        tsv_str(w, RUNS[i].precision);
        tsv_str(w, RUNS[i].loss_scale);
        tsv_int(w, run_threads(o, i));
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

static void print_per_seed(const Options *o, const RunSummary *sum)
{
    printf("\n## every seed\n\nfinal validation loss (exact match), %ld steps, %d thread%s per "
           "run (the fp32 control: %d)\n\n| run |", o->steps, o->threads,
           o->threads == 1 ? "" : "s", runs_control_threads(o));
    for (int k = 0; k < o->n_seeds; k++)
        printf(" seed %ld |", o->seeds[k]);
    printf("\n|---|");
    for (int k = 0; k < o->n_seeds; k++)
        printf("---|");
    for (int i = 0; i < N_RUNS; i++) {
        printf("\n| %s |", RUNS[i].name);
        for (int k = 0; k < o->n_seeds; k++) {
            const RunSummary *s = &sum[k * N_RUNS + i];
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

static void print_summary(const Options *o, const OverSeeds *v)
{
    printf("\n## over the seeds\n\nratio: a run's validation loss over fp32's of the same "
           "seed; geometric mean of the ratios with its 95%% interval (Student's t on the log "
           "ratios), median, min..max, and the seeds within 2%% (|ratio - 1| <= 0.02); solved: "
           "final exact match >= %.0f%%. Every seed is in (a run left on the plateau too); a "
           "diverged run is left out of its row's counts.\n\n", 100.0 * SOLVED);
    printf("| run | solved | final val loss (geo. mean) | vs fp32: geo. mean [95%%] | median "
           "| min..max | within 2%% | at step %ld: vs fp32 [95%%] | median | min..max | "
           "within 2%% |\n|---|---|---|---|---|---|---|---|---|---|---|\n", o->compare_step);
    for (int i = 0; i < N_RUNS; i++) {
        printf("| %s | %d of %d | %.3g |", RUNS[i].name, v[i].solved, o->n_seeds,
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
    RunSummary *sum = malloc((size_t)o->n_seeds * N_RUNS * sizeof *sum);
    if (!sum)
        cli_die(1, "out of memory");
    runs_make_dir(o->out);
    for (int k = 0; k < o->n_seeds; k++) {
        char dir[600];
        Options one = *o;
        one.seed = o->seeds[k];
        snprintf(dir, sizeof dir, "%s/seed_%ld", o->out, one.seed);
        one.out = dir;
        runs_make_dir(dir);
        fprintf(stderr, "seed %ld (%d of %d)\n", one.seed, k + 1, o->n_seeds);
        printf("\n# seed %ld\n", one.seed);
        runs_all(&one, &sum[k * N_RUNS]);
        runs_print_table(&one, &sum[k * N_RUNS]);
    }
    OverSeeds *v = malloc(N_RUNS * sizeof *v);
    if (!v)
        cli_die(1, "out of memory");
    for (int i = 0; i < N_RUNS; i++)
        v[i] = over_seeds(o, sum, i);
    write_seeds(o, sum, v);
    write_summary(o, v);
    print_per_seed(o, sum);
    print_summary(o, v);
    free(v);
    free(sum);
}

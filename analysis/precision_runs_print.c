/* Runs at several precisions as loss_scaling prints them (declared in
 * analysis/precision_runs.h): the table of one set of runs against fp32, the validation loss of
 * every run at every evaluation, every seed's final losses, and the runs over the seeds with
 * their ratios to fp32. In: the rooms' rows (PrecisionRunSummary, PrecisionRunLog,
 * PrecisionOverSeeds); out: markdown, into the FILE the program gives. The program keeps its
 * own lines (the headings, the probe, where the files went). */
#include <stdio.h>

#include "analysis/precision_runs.h"

/* x relative to the reference: (x - ref) / ref. */
static double vs(double x, double ref) { return (x - ref) / ref; }

void precision_runs_print_table(const PrecisionRunsSetup *t, const PrecisionRunSummary *s,
                                FILE *out)
{
    fprintf(out, "\ntrain_gpt on the add task, %ld steps, seed %ld, %d thread%s per run (the "
            "fp32 control: %d); validation loss and exact match (teacher-forced) at the last "
            "evaluation, and the validation loss at step %ld; relative differences against "
            "fp32\n\n", t->steps, t->seed, t->threads, t->threads == 1 ? "" : "s",
            precision_runs_threads(PRECISION_RUNS_N - 1, t->threads), t->compare_step);
    fprintf(out, "| run | val loss | vs fp32 | exact match | val loss @%ld | vs fp32 | skipped "
            "| final scale | peak act bytes | vs fp32 |\n", t->compare_step);
    fprintf(out, "|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        if (!s[i].ok) {
            fprintf(out, "| %s | %s | | | | | | | | |\n", PRECISION_RUNS[i].name,
                    s[i].diverged ? "diverged" : "failed");
            continue;
        }
        fprintf(out, "| %s | %.4g | %+.1f%% | %.1f%% | %.4g | %+.1f%% | %.0f | %g | %.0f | "
                "%.3f |\n", PRECISION_RUNS[i].name, s[i].val_loss,
                100.0 * vs(s[i].val_loss, s[0].val_loss), 100.0 * s[i].val_acc,
                s[i].compare_loss, 100.0 * vs(s[i].compare_loss, s[0].compare_loss),
                s[i].skipped, s[i].final_scale, s[i].peak_act, s[i].peak_act / s[0].peak_act);
    }
}

/* The header row of a table whose columns are a first one, then the runs. */
static void runs_header(const char *first, FILE *out)
{
    fprintf(out, "| %s |", first);
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        fprintf(out, " %s |", PRECISION_RUNS[i].name);
    fprintf(out, "\n|---|");
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        fprintf(out, "---|");
    fprintf(out, "\n");
}

void precision_runs_print_evals(const PrecisionRunLog *col, long steps, long eval_every,
                                FILE *out)
{
    fprintf(out, "\nvalidation loss at every evaluation\n\n");
    runs_header("step", out);
    for (long s = eval_every; s <= steps; s += eval_every) {
        fprintf(out, "| %ld |", s);
        for (int i = 0; i < PRECISION_RUNS_N; i++)
            fprintf(out, " %.4g |", col[i].val_loss[s]);
        fprintf(out, "\n");
    }
}

void precision_runs_print_seeds(const PrecisionRunSummary *sum, const long *seeds, int n_seeds,
                                long steps, int threads, FILE *out)
{
    fprintf(out, "final validation loss (exact match), %ld steps, %d thread%s per run (the fp32 "
            "control: %d)\n\n| run |", steps, threads, threads == 1 ? "" : "s",
            precision_runs_threads(PRECISION_RUNS_N - 1, threads));
    for (int k = 0; k < n_seeds; k++)
        fprintf(out, " seed %ld |", seeds[k]);
    fprintf(out, "\n|---|");
    for (int k = 0; k < n_seeds; k++)
        fprintf(out, "---|");
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        fprintf(out, "\n| %s |", PRECISION_RUNS[i].name);
        for (int k = 0; k < n_seeds; k++) {
            const PrecisionRunSummary *s = &sum[k * PRECISION_RUNS_N + i];
            if (s->ok)
                fprintf(out, " %.3g (%.0f%%) |", s->val_loss, 100.0 * s->val_acc);
            else
                fprintf(out, " %s |", s->diverged ? "diverged" : "failed");
        }
    }
    fprintf(out, "\n");
}

/* "geo. mean [lo, hi] | median | min..max | within" of one set of ratios. */
static void print_ratios(int digits, const SeedStats *r, int within, FILE *out)
{
    fprintf(out, " %.*g [%.*g, %.*g] | %.*g | %.*g..%.*g | %d of %d |", digits, r->geomean,
            digits, r->ci_lo, digits, r->ci_hi, digits, r->median, digits, r->min, digits,
            r->max, within, r->n);
}

void precision_runs_print_over_seeds(const PrecisionOverSeeds *v, int n_seeds,
                                     long compare_step, FILE *out)
{
    fprintf(out, "ratio: a run's validation loss over fp32's of the same seed; geometric mean "
            "of the ratios with its 95%% interval (Student's t on the log ratios), median, "
            "min..max, and the seeds within 2%% (|ratio - 1| <= 0.02); solved: final exact "
            "match >= %.0f%%. Every seed is in (a run left on the plateau too); a diverged run "
            "is left out of its row's counts.\n\n", 100.0 * PRECISION_RUNS_SOLVED);
    fprintf(out, "| run | solved | final val loss (geo. mean) | vs fp32: geo. mean [95%%] | "
            "median | min..max | within 2%% | at step %ld: vs fp32 [95%%] | median | min..max "
            "| within 2%% |\n|---|---|---|---|---|---|---|---|---|---|---|\n", compare_step);
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        fprintf(out, "| %s | %d of %d | %.3g |", PRECISION_RUNS[i].name, v[i].solved, n_seeds,
                v[i].loss_st.geomean);
        if (i == 0) {
            fprintf(out, " (reference) | | | | (reference: geo. mean %.4g) | | | |\n",
                    v[i].early_st.geomean);
            continue;
        }
        /* the early ratios are near 1: more digits */
        print_ratios(3, &v[i].ratio_st, v[i].within, out);
        print_ratios(5, &v[i].early_ratio_st, v[i].early_within, out);
        fprintf(out, "\n");
    }
}

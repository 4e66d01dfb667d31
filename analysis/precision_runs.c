/* Runs at several precisions against fp32 (analysis/precision_runs.h): a run's log summed up,
 * and the runs over seeds. */
#include "analysis/precision_runs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/grad_hist.h"

const PrecisionRunConfig PRECISION_RUNS[PRECISION_RUNS_N] = {
    { "fp32", "fp32", "fp32", "none", false },
    { "bf16", "bf16", "bf16", "none", false },
    { "fp16", "fp16_none", "fp16", "none", false },
    { "fp16 dynamic", "fp16_dynamic", "fp16", "dynamic", false },
    { "fp8", "fp8", "fp8", "none", false },
    { "fp32 control", "fp32_control", "fp32", "none", true },
};

int precision_runs_threads(int i, int threads)
{
    if (!PRECISION_RUNS[i].control)
        return threads;
    return threads == 1 ? 2 : 1;
}

bool precision_run_log_alloc(PrecisionRunLog *log, long steps)
{
    size_t n = (size_t)steps + 1;
    double *buf = malloc(6 * n * sizeof *buf);
    if (!buf)
        return false;
    for (size_t i = 0; i < 6 * n; i++)
        buf[i] = NAN;
    *log = (PrecisionRunLog){ buf, buf + n, buf + 2 * n, buf + 3 * n, buf + 4 * n, buf + 5 * n };
    return true;
}

void precision_run_log_free(PrecisionRunLog *log)
{
    free(log->loss);              /* the one buffer behind all six columns */
    *log = (PrecisionRunLog){ 0 };
}

double precision_run_mean(const double *loss, long s)
{
    double sum = 0.0;
    int n = 0;
    for (long i = s; i >= 1 && i > s - PRECISION_RUNS_SMOOTH; i--)
        if (isfinite(loss[i])) {
            sum += loss[i];
            n++;
        }
    return n ? sum / n : NAN;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The largest and the median of the finite values of v[1..steps]. */
static bool max_median(const double *v, long steps, double *max, double *median)
{
    double *s = malloc((size_t)steps * sizeof *s);
    if (!s)
        return false;
    long n = 0;
    for (long i = 1; i <= steps; i++)
        if (isfinite(v[i]))
            s[n++] = v[i];
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    *max = n ? s[n - 1] : NAN;
    *median = n ? s[n / 2] : NAN;
    free(s);
    return true;
}

bool precision_run_summarize(bool ok, bool diverged, double val_loss, double val_acc,
                             const PrecisionRunLog *log, long steps, long compare_step,
                             PrecisionRunSummary *s)
{
    *s = (PrecisionRunSummary){ .ok = ok, .diverged = diverged, .val_loss = val_loss,
                                .val_acc = val_acc };
    s->compare_loss = compare_step <= steps ? log->val_loss[compare_step] : NAN;
    double unused;
    if (!max_median(log->peak_act, steps, &s->peak_act, &unused) ||
        !max_median(log->scale, steps, &unused, &s->median_scale))
        return false;
    s->final_scale = NAN;
    for (long i = 1; i <= steps; i++) {
        if (isfinite(log->scale[i]))
            s->final_scale = log->scale[i];
        if (isfinite(log->skipped[i]))
            s->skipped += log->skipped[i];
    }
    return true;
}

bool precision_run_curve_row(const PrecisionRunLog *log, long s, long steps)
{
    bool scale_moved = s > 1 && log->scale[s] != log->scale[s - 1] && !isnan(log->scale[s]);
    return s == 1 || s == steps || s % PRECISION_RUNS_CURVE_EVERY == 0 ||
           !isnan(log->val_loss[s]) || scale_moved;
}

float precision_runs_dynamic_scale(const PrecisionRunSummary *summary)
{
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        double m = summary[i].median_scale;
        if (strcmp(PRECISION_RUNS[i].loss_scale, "dynamic") == 0 && isfinite(m) && m > 0.0)
            return ldexpf(1.0f, grad_hist_exponent((float)m));
    }
    return NAN;
}

/* A run's loss, NAN where it has none (it diverged or failed). */
static double final_loss(const PrecisionRunSummary *s) { return s->ok ? s->val_loss : NAN; }

PrecisionOverSeeds precision_runs_over_seeds(const PrecisionRunSummary *sum, int n_runs,
                                             int n_seeds, int i)
{
    PrecisionOverSeeds v = { .acc_mean = 0.0 };
    double ref[SEED_MAX], early_ref[SEED_MAX];
    int n = n_seeds, with_acc = 0;
    for (int k = 0; k < n; k++) {
        const PrecisionRunSummary *s = &sum[k * n_runs + i], *r = &sum[k * n_runs];
        v.loss[k] = final_loss(s);
        v.early[k] = s->compare_loss;
        ref[k] = final_loss(r);
        early_ref[k] = r->compare_loss;
        if (s->ok) {
            v.solved += s->val_acc >= PRECISION_RUNS_SOLVED;
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
    v.within = seed_within(v.ratio, n, PRECISION_RUNS_WITHIN);
    v.early_within = seed_within(v.early_ratio, n, PRECISION_RUNS_WITHIN);
    return v;
}

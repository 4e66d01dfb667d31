/* Runs at several precisions against fp32 (analysis/precision_runs.h): a run's log summed up,
 * the runs over seeds, and their result files. */
#include "analysis/precision_runs.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/grad_hist.h"
#include "analysis/grad_probe.h"
#include "analysis/train_log.h"
#include "autograd/tsv.h"

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

/* ---- the runs as train_gpt commands, their logs read back --------------------------------- */

void precision_run_path(const PrecisionRunsSetup *s, int i, const char *ext, char *buf,
                        size_t len)
{
    snprintf(buf, len, "%s/runs/%s.%s", s->dir, PRECISION_RUNS[i].file, ext);
}

static void arg(PrecisionRunCommand *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void arg(PrecisionRunCommand *c, const char *fmt, ...)
{
    if (c->n == PRECISION_RUN_MAX_ARGS) {
        fprintf(stderr, "precision_run_command: more than %d arguments\n",
                PRECISION_RUN_MAX_ARGS);
        abort();
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->arg[c->n++], PRECISION_RUN_ARG_LEN, fmt, ap);
    va_end(ap);
}

void precision_run_command(const PrecisionRunsSetup *s, int i, PrecisionRunCommand *c)
{
    const PrecisionRunConfig *r = &PRECISION_RUNS[i];
    GradProbeConfig p = grad_probe_defaults(s->steps, 0, s->seed);
    char log[PRECISION_RUN_ARG_LEN];
    precision_run_path(s, i, "tsv", log, sizeof log);
    c->n = 0;
    arg(c, "%s", s->train_gpt);
    arg(c, "--precision=%s", r->precision);
    arg(c, "--loss-scale=%s", r->loss_scale);
    arg(c, "--steps=%ld", s->steps);
    arg(c, "--seed=%ld", s->seed);
    arg(c, "--task=add");
    arg(c, "--batch=%d", p.batch);
    arg(c, "--layers=%d", p.layers);
    arg(c, "--heads=%d", p.heads);
    arg(c, "--embd=%d", p.embd);
    arg(c, "--lr=%g", p.lr);
    arg(c, "--warmup=%ld", p.warmup);
    arg(c, "--warmup-type=gradual");
    arg(c, "--decay=cosine");
    arg(c, "--beta2=%g", p.beta2);
    arg(c, "--weight-decay=%g", p.weight_decay);
    arg(c, "--clip=%g", p.clip);
    arg(c, "--eval-every=%ld", s->eval_every);
    arg(c, "--eval-examples=%d", s->eval_examples);
    arg(c, "--threads=%d", precision_runs_threads(i, s->threads));
    arg(c, "--log=%s", log);
}

double precision_run_logged_loss(const PrecisionRunsSetup *s, int i, long step)
{
    char log[PRECISION_RUN_ARG_LEN];
    precision_run_path(s, i, "tsv", log, sizeof log);
    return train_log_at(log, "loss", step);
}

bool precision_run_log_read(const char *path, long steps, PrecisionRunLog *log)
{
    if (!precision_run_log_alloc(log, steps))
        return false;
    bool ok = train_log_by_step(path, "loss", steps, log->loss) &&
              train_log_by_step(path, "val_loss", steps, log->val_loss) &&
              train_log_by_step(path, "val_acc", steps, log->val_acc) &&
              train_log_by_step(path, "loss_scale", steps, log->scale) &&
              train_log_by_step(path, "skipped", steps, log->skipped) &&
              train_log_by_step(path, "peak_act", steps, log->peak_act);
    if (!ok)
        precision_run_log_free(log);
    return ok;
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

/* ---- the result files --------------------------------------------------------------------- */

static const char *const CURVE_COLUMNS[] = {
    "run", "step", "loss", "loss_mean20", "loss_mean20_vs_fp32", "val_loss", "val_loss_vs_fp32",
    "val_acc", "loss_scale", NULL,
};

/* One run's rows; ref is fp32's log, for the relative differences. */
static void write_curve(TsvWriter *w, const PrecisionRunConfig *c, const PrecisionRunLog *col,
                        const PrecisionRunLog *ref, long steps)
{
    for (long s = 1; s <= steps; s++) {
        if (isnan(col->loss[s]) || !precision_run_curve_row(col, s, steps))
            continue;
        double mean = precision_run_mean(col->loss, s);
        tsv_str(w, c->name);
        tsv_int(w, s);
        tsv_float(w, (float)col->loss[s]);
        tsv_float(w, (float)mean);
        tsv_float(w, (float)(mean / precision_run_mean(ref->loss, s) - 1.0));
        tsv_float(w, (float)col->val_loss[s]);
        tsv_float(w, (float)(col->val_loss[s] / ref->val_loss[s] - 1.0));
        tsv_float(w, (float)col->val_acc[s]);
        tsv_num(w, col->scale[s]);
        tsv_end_row(w);
    }
}

bool precision_runs_write_curves(const char *path, const PrecisionRunLog *col, long steps,
                                 char *err, size_t errlen)
{
    TsvWriter *w = tsv_open(path, CURVE_COLUMNS, err, errlen);
    if (!w)
        return false;
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        write_curve(w, &PRECISION_RUNS[i], &col[i], &col[0], steps);
    return tsv_close(w, err, errlen);
}

static const char *const TABLE_COLUMNS[] = {
    "run", "precision", "loss_scale", "steps", "diverged", "val_loss", "val_acc",
    "rel_diff_val_loss", "compare_step", "compare_val_loss", "rel_diff_compare", "skipped",
    "final_scale", "median_scale", "peak_act_bytes", "peak_act_vs_fp32", NULL,
};

static double rel(double x, double ref) { return (x - ref) / ref; }

/* The cells that name run i: as the table says it, and train_gpt's two flags. */
static void run_cells(TsvWriter *w, int i)
{
    tsv_str(w, PRECISION_RUNS[i].name);
    tsv_str(w, PRECISION_RUNS[i].precision);
    tsv_str(w, PRECISION_RUNS[i].loss_scale);
}

bool precision_runs_write_table(const char *path, const PrecisionRunSummary *s, long steps,
                                long compare_step, char *err, size_t errlen)
{
    TsvWriter *w = tsv_open(path, TABLE_COLUMNS, err, errlen);
    if (!w)
        return false;
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        run_cells(w, i);
        tsv_int(w, steps);
        tsv_int(w, s[i].diverged);
        tsv_num(w, s[i].val_loss);
        tsv_num(w, s[i].val_acc);
        tsv_num(w, rel(s[i].val_loss, s[0].val_loss));
        tsv_int(w, compare_step);
        tsv_num(w, s[i].compare_loss);
        tsv_num(w, rel(s[i].compare_loss, s[0].compare_loss));
        tsv_num(w, s[i].skipped);
        tsv_num(w, s[i].final_scale);
        tsv_num(w, s[i].median_scale);
        tsv_num(w, s[i].peak_act);
        tsv_num(w, s[i].peak_act / s[0].peak_act);
        tsv_end_row(w);
    }
    return tsv_close(w, err, errlen);
}

static const char *const SEED_COLUMNS[] = {
    "run", "seed", "threads", "diverged", "val_loss", "val_acc", "val_loss_vs_fp32",
    "compare_step", "compare_val_loss", "compare_vs_fp32", NULL,
};

bool precision_runs_write_seeds(const char *path, const PrecisionRunSummary *sum,
                                const PrecisionOverSeeds *v, const long *seeds, int n_seeds,
                                int threads, long compare_step, char *err, size_t errlen)
{
    TsvWriter *w = tsv_open(path, SEED_COLUMNS, err, errlen);
    if (!w)
        return false;
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        for (int k = 0; k < n_seeds; k++) {
            const PrecisionRunSummary *s = &sum[k * PRECISION_RUNS_N + i];
            tsv_str(w, PRECISION_RUNS[i].name);
            tsv_int(w, seeds[k]);
            tsv_int(w, precision_runs_threads(i, threads));
            tsv_int(w, s->diverged);
            tsv_num(w, v[i].loss[k]);
            tsv_num(w, s->ok ? s->val_acc : NAN);
            tsv_num(w, v[i].ratio[k]);
            tsv_int(w, compare_step);
            tsv_num(w, v[i].early[k]);
            tsv_num(w, v[i].early_ratio[k]);
            tsv_end_row(w);
        }
    return tsv_close(w, err, errlen);
}

/* Per quantity (final, early): the losses' geometric mean, then the ratios' statistics. */
static const char *const OVER_SEEDS_COLUMNS[] = {
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

bool precision_runs_write_over_seeds(const char *path, const PrecisionOverSeeds *v,
                                     int n_seeds, int threads, long compare_step, char *err,
                                     size_t errlen)
{
    TsvWriter *w = tsv_open(path, OVER_SEEDS_COLUMNS, err, errlen);
    if (!w)
        return false;
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        run_cells(w, i);
        tsv_int(w, precision_runs_threads(i, threads));
        tsv_int(w, n_seeds);
        tsv_int(w, v[i].solved);
        tsv_num(w, v[i].acc_mean);
        write_stats(w, &v[i].loss_st, &v[i].ratio_st, v[i].within);
        tsv_int(w, compare_step);
        write_stats(w, &v[i].early_st, &v[i].early_ratio_st, v[i].early_within);
        tsv_end_row(w);
    }
    return tsv_close(w, err, errlen);
}

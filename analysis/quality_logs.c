/* Quality tables from train_gpt's logs, and the tables written out (quality_logs.h). */
#include "analysis/quality_logs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis/train_log.h"
#include "autograd/tsv.h"

void quality_path(char *buf, size_t len, const char *dir, const char *name, long seed,
                  const char *ext)
{
    snprintf(buf, len, "%s/%s.s%ld%s", dir, name, seed, ext);
}

QualityRunStatus quality_read_final(const char *dir, const char *name, long seed, long steps,
                                    double *loss)
{
    char log[1024], out[1024];
    quality_path(log, sizeof log, dir, name, seed, ".tsv");
    quality_path(out, sizeof out, dir, name, seed, ".out");
    *loss = NAN;
    if (train_log_last(log, "step") == (double)steps)
        *loss = train_log_at(log, "val_loss", steps);
    if (!isnan(*loss))
        return QUALITY_RUN_OK;
    return train_log_mentions(out, "diverged") ? QUALITY_RUN_DIVERGED : QUALITY_RUN_MISSING;
}

void quality_collect(QualityTable *t, const char *dir)
{
    for (int i = 0; i < t->n_configs; i++)
        for (int k = 0; k < t->n_seeds; k++)
            t->row[i].status[k] = quality_read_final(dir, t->cfg[i].name, t->seeds[k],
                                                     t->steps, &t->row[i].final[k]);
    quality_summarize(t);
}

/* ---- output ------------------------------------------------------------------------------- */

const char *quality_status_word(QualityRunStatus s)
{
    return s == QUALITY_RUN_DIVERGED ? "diverged" : "missing";
}

const char *quality_target_text(const QualityTable *t, int i, char *buf, size_t len)
{
    const QualityConfig *c = &t->cfg[i];
    if (i == 0)
        snprintf(buf, len, "reference");
    else if (c->target == QUALITY_TARGET_WITHIN)
        snprintf(buf, len, "%g%%", 100.0 * c->within);
    else if (c->target == QUALITY_TARGET_NOISE)
        snprintf(buf, len, "noise (%.2f%%)", 100.0 * t->noise);
    else
        snprintf(buf, len, "none");
    return buf;
}

const char *quality_met_text(int met) { return met < 0 ? "" : met ? "yes" : "no"; }

bool quality_write_table(const QualityTable *t, const char *path, char *err, size_t errlen)
{
    static const char *const head[] = { "config", "flags" };
    static const char *const tail[] = {
        "n", "mean", "sd", "min", "max", "ratio", "paired_ratio", "paired_lo", "paired_hi",
        "target", "tolerance", "met",
    };
    enum { N_HEAD = 2, N_TAIL = 12 };
    char seed_names[SEED_MAX][32];
    const char *cols[N_HEAD + SEED_MAX + N_TAIL + 1];
    int nc = 0;
    for (int j = 0; j < N_HEAD; j++)
        cols[nc++] = head[j];
    for (int k = 0; k < t->n_seeds; k++) {
        snprintf(seed_names[k], sizeof seed_names[k], "seed_%ld", t->seeds[k]);
        cols[nc++] = seed_names[k];
    }
    for (int j = 0; j < N_TAIL; j++)
        cols[nc++] = tail[j];
    cols[nc] = NULL;
    TsvWriter *w = tsv_open(path, cols, err, errlen);
    if (!w)
        return false;
    for (int i = 0; i < t->n_configs; i++) {
        const QualityRow *r = &t->row[i];
        char target[64];
        tsv_str(w, t->cfg[i].name);
        tsv_str(w, t->cfg[i].flags);
        for (int k = 0; k < t->n_seeds; k++) {
            if (r->status[k] == QUALITY_RUN_OK)
                tsv_num(w, r->final[k]);
            else
                tsv_str(w, quality_status_word(r->status[k]));
        }
        tsv_int(w, r->n);
        tsv_num(w, r->mean);
        tsv_num(w, r->sd);
        tsv_num(w, r->min);
        tsv_num(w, r->max);
        tsv_num(w, r->ratio);
        tsv_num(w, r->paired.geomean);
        tsv_num(w, r->paired.ci_lo);
        tsv_num(w, r->paired.ci_hi);
        tsv_str(w, quality_target_text(t, i, target, sizeof target));
        tsv_num(w, r->tol);
        tsv_str(w, quality_met_text(r->met));
        tsv_end_row(w);
    }
    return tsv_close(w, err, errlen);
}

/* ---- curves ------------------------------------------------------------------------------- */

enum { CURVE_MAX_POINTS = 4096 };

/* One configuration's validation loss by evaluated step over its finished seeds: the sum, the
 * range and the sum of the ratios to the reference's loss of the same seed and step. */
typedef struct {
    double step[CURVE_MAX_POINTS], sum[CURVE_MAX_POINTS], min[CURVE_MAX_POINTS],
           max[CURVE_MAX_POINTS], ratio_sum[CURVE_MAX_POINTS];
    int    count[CURVE_MAX_POINTS], ratio_count[CURVE_MAX_POINTS];
    int    n;
} Curve;

/* The point of step in c, made (in order of step) if new; -1 when c is full. */
static int point_of(Curve *c, double step)
{
    for (int j = 0; j < c->n; j++)
        if (c->step[j] == step)
            return j;
    if (c->n == CURVE_MAX_POINTS)
        return -1;
    int j = c->n++;
    for (; j > 0 && c->step[j - 1] > step; j--) {
        c->step[j] = c->step[j - 1];
        c->sum[j] = c->sum[j - 1];
        c->min[j] = c->min[j - 1];
        c->max[j] = c->max[j - 1];
        c->ratio_sum[j] = c->ratio_sum[j - 1];
        c->count[j] = c->count[j - 1];
        c->ratio_count[j] = c->ratio_count[j - 1];
    }
    c->step[j] = step;
    c->sum[j] = c->ratio_sum[j] = 0.0;
    c->min[j] = INFINITY;
    c->max[j] = -INFINITY;
    c->count[j] = c->ratio_count[j] = 0;
    return j;
}

/* A log's (step, val_loss) pairs into xs, ys (CURVE_MAX_POINTS each); the count. */
static int read_val(const QualityTable *t, int i, int k, const char *dir, double *xs, double *ys)
{
    char log[1024];
    quality_path(log, sizeof log, dir, t->cfg[i].name, t->seeds[k], ".tsv");
    return train_log_columns(log, "step", "val_loss", xs, ys, CURVE_MAX_POINTS);
}

static double lookup(const double *xs, const double *ys, int n, double x)
{
    for (int p = 0; p < n; p++)
        if (xs[p] == x)
            return ys[p];
    return NAN;
}

/* buf: 4 CURVE_MAX_POINTS doubles of scratch. */
static void read_curve(const QualityTable *t, int i, const char *dir, Curve *c, double *buf)
{
    double *xs = buf, *ys = xs + CURVE_MAX_POINTS, *rx = ys + CURVE_MAX_POINTS,
           *ry = rx + CURVE_MAX_POINTS;
    c->n = 0;
    for (int k = 0; k < t->n_seeds; k++) {
        if (t->row[i].status[k] != QUALITY_RUN_OK)
            continue;
        int n = read_val(t, i, k, dir, xs, ys);
        int nr = t->row[0].status[k] == QUALITY_RUN_OK ? read_val(t, 0, k, dir, rx, ry) : 0;
        for (int p = 0; p < n; p++) {
            int j = point_of(c, xs[p]);
            if (j < 0)
                continue;
            c->sum[j] += ys[p];
            c->min[j] = ys[p] < c->min[j] ? ys[p] : c->min[j];
            c->max[j] = ys[p] > c->max[j] ? ys[p] : c->max[j];
            c->count[j]++;
            double ref = lookup(rx, ry, nr, xs[p]);
            if (ref > 0.0) {
                c->ratio_sum[j] += ys[p] / ref;
                c->ratio_count[j]++;
            }
        }
    }
}

bool quality_write_curves(const QualityTable *t, const char *dir, const char *path,
                          char *err, size_t errlen)
{
    static const char *const cols[] = { "config", "step", "n", "mean", "min", "max",
                                        "paired_n", "ratio", NULL };
    Curve *c = malloc(sizeof *c);
    double *buf = malloc(4 * CURVE_MAX_POINTS * sizeof *buf);
    TsvWriter *w = c && buf ? tsv_open(path, cols, err, errlen) : NULL;
    if (!w) {
        if (!(c && buf))
            snprintf(err, errlen, "out of memory");
        free(c);
        free(buf);
        return false;
    }
    for (int i = 0; i < t->n_configs; i++) {
        read_curve(t, i, dir, c, buf);
        for (int j = 0; j < c->n; j++) {
            tsv_str(w, t->cfg[i].name);
            tsv_num(w, c->step[j]);
            tsv_int(w, c->count[j]);
            tsv_num(w, c->sum[j] / c->count[j]);
            tsv_num(w, c->min[j]);
            tsv_num(w, c->max[j]);
            tsv_int(w, c->ratio_count[j]);
            tsv_num(w, c->ratio_count[j] ? c->ratio_sum[j] / c->ratio_count[j] : NAN);
            tsv_end_row(w);
        }
    }
    free(c);
    free(buf);
    return tsv_close(w, err, errlen);
}

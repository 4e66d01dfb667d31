/* A scaling-law study's result files: the figure's tables and the named quantities
 * (scaling_tables.h). */
#include "analysis/scaling_tables.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { MAX_PAIRS = 2048 };

const char *const SCALING_TABLE_FILES[SCALING_TABLES] = {
    "scaling_points.tsv", "scaling_isoflop.tsv", "scaling_optimal.tsv",
    "scaling_optimal_kaplan.tsv", "scaling_lines.tsv",
};
const char *const SCALING_ISOFLOP_COLUMNS[] = { "budget_index", "budget", "N", "parabola", NULL };
const char *const SCALING_QUANTITY_COLUMNS[] = { "quantity", "value", NULL };

static TsvWriter *open_table(const char *dir, ScalingTable t, const char *const *columns,
                             char *err, size_t errlen)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, SCALING_TABLE_FILES[t]);
    return tsv_open(path, columns, err, errlen);
}

static bool write_pairs(const char *dir, const ScalingPoint *pts, int n, const ScalingStudy *s,
                        char *err, size_t errlen)
{
    double (*pairs)[8] = malloc(MAX_PAIRS * sizeof *pairs);
    if (!pairs) {
        snprintf(err, errlen, "out of memory for %s", SCALING_TABLE_FILES[SCALING_TABLE_POINTS]);
        return false;
    }
    TsvWriter *w = open_table(dir, SCALING_TABLE_POINTS, SCALING_PAIR_COLUMNS, err, errlen);
    int np = w ? scaling_study_pairs(pts, n, s, pairs, MAX_PAIRS) : 0;
    for (int i = 0; i < np; i++)
        tsv_row(w, pairs[i]);
    free(pairs);
    return w && tsv_close(w, err, errlen);
}

static bool write_optimal(const char *dir, ScalingTable t, const ScalingProfile *prof, int nb,
                          char *err, size_t errlen)
{
    TsvWriter *w = open_table(dir, t, SCALING_OPTIMAL_COLUMNS, err, errlen);
    if (!w)
        return false;
    for (int b = 0; b < nb; b++) {
        double v[12];
        if (prof[b].ok) {
            scaling_study_optimal_row(&prof[b], v);
            tsv_row(w, v);
        }
    }
    return tsv_close(w, err, errlen);
}

static bool write_isoflop(const char *dir, const ScalingStudy *s, char *err, size_t errlen)
{
    TsvWriter *w = open_table(dir, SCALING_TABLE_ISOFLOP, SCALING_ISOFLOP_COLUMNS, err, errlen);
    if (!w)
        return false;
    for (int b = 0; b < s->nb; b++) {
        const ScalingProfile *p = &s->prof[b];
        for (int k = 0; k < SCALING_ISOFLOP_POINTS && p->ok; k++) {
            double x = log(p->n_min / 1.3) + k * log(1.69 * p->n_max / p->n_min) /
                       (SCALING_ISOFLOP_POINTS - 1);
            double v[4] = { b, s->budgets[b], exp(x), p->c[0] + p->c[1] * x + p->c[2] * x * x };
            tsv_row(w, v);
        }
    }
    return tsv_close(w, err, errlen);
}

static bool write_lines(const char *dir, const ScalingStudy *s, char *err, size_t errlen)
{
    TsvWriter *w = open_table(dir, SCALING_TABLE_LINES, SCALING_LINE_COLUMNS, err, errlen);
    if (!w)
        return false;
    double lo = s->budgets[0] / 2, hi = s->budgets[s->nb - 1] * 2, v[15];
    for (int k = 0; k < SCALING_LINE_POINTS; k++) {
        scaling_study_line_row(s, lo * pow(hi / lo, (double)k / (SCALING_LINE_POINTS - 1)), v);
        tsv_row(w, v);
    }
    return tsv_close(w, err, errlen);
}

bool scaling_tables_write(const char *dir, const ScalingPoint *pts, int n, const ScalingStudy *s,
                          char *err, size_t errlen)
{
    return write_pairs(dir, pts, n, s, err, errlen) &&
           write_optimal(dir, SCALING_TABLE_OPTIMAL, s->prof, s->nb, err, errlen) &&
           write_optimal(dir, SCALING_TABLE_KAPLAN, s->kprof, s->k2.ok ? s->nkb : 0, err,
                         errlen) &&
           write_isoflop(dir, s, err, errlen) && write_lines(dir, s, err, errlen);
}

void scaling_tables_write_quantities(TsvWriter *w, const ScalingStudy *s)
{
    for (int i = 0; i < s->nq; i++) {
        tsv_str(w, s->q[i].name);
        tsv_num(w, s->q[i].value);
        tsv_end_row(w);
    }
}

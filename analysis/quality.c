/* Final validation losses over seeds against a reference configuration: the statistics
 * (quality.h). */
#include "analysis/quality.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

QualityTable quality_table(const QualityConfig *cfg, int n_configs, const long *seeds,
                           int n_seeds, long steps)
{
    QualityTable t = { .cfg = cfg, .n_configs = n_configs, .n_seeds = n_seeds, .steps = steps };
    if (n_configs > QUALITY_MAX_CONFIGS || n_seeds > SEED_MAX || n_configs < 1 || n_seeds < 1) {
        fprintf(stderr, "quality_table: %d configurations and %d seeds do not fit\n",
                n_configs, n_seeds);
        abort();
    }
    memcpy(t.seeds, seeds, (size_t)n_seeds * sizeof *seeds);
    for (int i = 0; i < n_configs; i++)
        for (int k = 0; k < n_seeds; k++) {
            t.row[i].status[k] = QUALITY_RUN_MISSING;
            t.row[i].final[k] = NAN;
        }
    return t;
}

/* Mean, sample standard deviation and range of the finished seeds. */
static void describe(QualityRow *r, int n_seeds)
{
    double sum = 0.0, ss = 0.0;
    r->n = 0;
    r->min = r->max = NAN;
    for (int k = 0; k < n_seeds; k++) {
        if (r->status[k] != QUALITY_RUN_OK)
            continue;
        double x = r->final[k];
        sum += x;
        r->min = r->n == 0 || x < r->min ? x : r->min;
        r->max = r->n == 0 || x > r->max ? x : r->max;
        r->n++;
    }
    r->mean = r->n ? sum / r->n : NAN;
    for (int k = 0; k < n_seeds; k++)
        if (r->status[k] == QUALITY_RUN_OK)
            ss += (r->final[k] - r->mean) * (r->final[k] - r->mean);
    r->sd = r->n > 1 ? sqrt(ss / (r->n - 1)) : NAN;
}

void quality_summarize(QualityTable *t)
{
    for (int i = 0; i < t->n_configs; i++) {
        for (int k = 0; k < t->n_seeds; k++)
            if (t->row[i].status[k] != QUALITY_RUN_OK)
                t->row[i].final[k] = NAN;
        describe(&t->row[i], t->n_seeds);
    }
    const QualityRow *ref = &t->row[0];
    t->noise = ref->n > 1 ? 2.0 * sqrt(2.0 / ref->n) * ref->sd / ref->mean : NAN;
    for (int i = 0; i < t->n_configs; i++) {
        QualityRow *r = &t->row[i];
        double ratios[SEED_MAX];
        r->ratio = r->mean / ref->mean;
        seed_ratios(r->final, ref->final, t->n_seeds, ratios);
        r->paired = seed_stats(ratios, t->n_seeds);
        const QualityConfig *c = &t->cfg[i];
        r->tol = i == 0 ? NAN
               : c->target == QUALITY_TARGET_WITHIN ? c->within
               : c->target == QUALITY_TARGET_NOISE ? t->noise : NAN;
        r->met = isnan(r->tol) || isnan(r->ratio) ? -1 : fabs(r->ratio - 1.0) <= r->tol;
    }
}

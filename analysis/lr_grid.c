/* The large-batch grid's cells and their arithmetic (lr_grid.h). */
#include "analysis/lr_grid.h"

#include <math.h>
#include <string.h>

static const int K_FULL[] = { 1, 4, 16, 32 }, K_SHORT[] = { 1, 32 };

int lr_grid_cells(bool full, LrCell *cells)
{
    const int *ks = full ? K_FULL : K_SHORT;
    int n_k = full ? 4 : 2, n = 0;
    const char *optimizers[] = { "sgd", "adamw" };
    const SchedRule rules[] = { SCHED_RULE_NONE, SCHED_RULE_LINEAR, SCHED_RULE_SQRT };
    const SchedWarmup warmups[] = { SCHED_WARMUP_GRADUAL, SCHED_WARMUP_NONE };
    for (int w = 0; w < (full ? 2 : 1); w++)
        for (int opt = 0; opt < 2; opt++)
            for (int ki = 0; ki < n_k; ki++)
                for (int ri = 0; ri < (ks[ki] == 1 ? 1 : 3); ri++)
                    cells[n++] = (LrCell){ optimizers[opt], ks[ki], rules[ri], warmups[w] };
    return n;
}

bool lr_grid_has(bool full, const LrCell *c)
{
    LrCell cells[LR_GRID_MAX_CELLS];
    int n = lr_grid_cells(full, cells);
    for (int i = 0; i < n; i++)
        if (strcmp(cells[i].optimizer, c->optimizer) == 0 && cells[i].k == c->k &&
            cells[i].rule == c->rule && cells[i].warmup == c->warmup)
            return true;
    return false;
}

const char *const LR_GRID_CURVE_LABELS[LR_GRID_CURVES] = {
    "base batch", "no warmup", "constant warmup", "gradual warmup",
};

void lr_grid_curve_cells(bool full, const char *optimizer, LrCell *cells)
{
    int k_max = full ? K_FULL[3] : K_SHORT[1];
    SchedRule rule = strcmp(optimizer, "sgd") == 0 ? SCHED_RULE_LINEAR : SCHED_RULE_SQRT;
    cells[0] = (LrCell){ optimizer, 1, SCHED_RULE_NONE, SCHED_WARMUP_NONE };
    cells[1] = (LrCell){ optimizer, k_max, rule, SCHED_WARMUP_NONE };
    cells[2] = (LrCell){ optimizer, k_max, rule, SCHED_WARMUP_CONSTANT };
    cells[3] = (LrCell){ optimizer, k_max, rule, SCHED_WARMUP_GRADUAL };
}

int lr_grid_batch(const LrGrid *g, const LrCell *c) { return g->base_batch * c->k; }

int lr_grid_micro(const LrGrid *g, const LrCell *c)
{
    int batch = lr_grid_batch(g, c);
    return batch < g->max_micro ? batch : g->max_micro;
}

long lr_grid_steps(const LrGrid *g, const LrCell *c)
{
    long steps = (long)g->epochs * g->epoch_examples / ((long)g->base_batch * c->k);
    return steps > 0 ? steps : 1;
}

long lr_grid_warmup_steps(const LrGrid *g, const LrCell *c)
{
    if (c->warmup == SCHED_WARMUP_NONE)
        return 0;
    long w = lround(g->warmup_epochs * g->epoch_examples / ((double)g->base_batch * c->k));
    long last = lr_grid_steps(g, c) - 1;
    w = w < 1 ? 1 : w;
    return w > last ? last : w;
}

double lr_grid_base_lr(const LrGrid *g, const LrCell *c)
{
    return strcmp(c->optimizer, "sgd") == 0 ? g->lr_sgd : g->lr_adamw;
}

double lr_grid_peak_lr(const LrGrid *g, const LrCell *c)
{
    SchedConfig s = sched_defaults();
    s.base_lr = lr_grid_base_lr(g, c);
    s.base_batch = g->base_batch;
    s.batch = lr_grid_batch(g, c);
    s.accum = 1;
    s.rule = c->rule;
    return sched_peak_lr(&s);
}

/* Checkpoint strategies compared on the MLP chain (ckpt_frontier.h). */
#include "analysis/ckpt_frontier.h"

#include <stdlib.h>
#include <string.h>

static const char *family_of(CkptStrategy s)
{
    static const char *const names[] = { "vanilla", "memory-poor", "sqrt", "every", "budget" };
    return names[s.kind];
}

CkptRow ckpt_row_measure(CkptStrategy s, int n, int width, int batch, uint64_t seed, int reps)
{
    CkptRow r = { .family = family_of(s), .n = n, .formula = ckpt_formula_total(s, n) };
    ckpt_name(s, r.name, sizeof r.name);
    MlpChain *m = mlp_chain_new(n, width, batch, seed);
    mlp_chain_run(m, (CkptStrategy){ CKPT_VANILLA, 0 }, 1, NULL, NULL);
    size_t bytes, got_bytes;
    float *ref = mlp_chain_grads(m, &bytes);
    r.run = mlp_chain_run(m, s, reps, NULL, NULL);
    float *got = mlp_chain_grads(m, &got_bytes);
    r.same_grads = got_bytes == bytes && memcmp(got, ref, bytes) == 0;
    mem_free(got);
    mem_free(ref);
    mlp_chain_free(m);
    return r;
}

int ckpt_frontier_strategies(int n, const int *intervals, int n_intervals, const int *budgets,
                             int n_budgets, CkptStrategy *out)
{
    int count = 0;
    out[count++] = (CkptStrategy){ CKPT_VANILLA, 0 };
    out[count++] = (CkptStrategy){ CKPT_MEMORY_POOR, 0 };
    out[count++] = (CkptStrategy){ CKPT_SQRT, 0 };
    for (int i = 0; i < n_intervals; i++)
        if (intervals[i] < n)
            out[count++] = (CkptStrategy){ CKPT_EVERY, intervals[i] };
    for (int i = 0; i < n_budgets; i++)
        if (budgets[i] <= n)
            out[count++] = (CkptStrategy){ CKPT_BUDGET, budgets[i] };
    return count;
}

static int by_forwards(const void *a, const void *b)
{
    const CkptRow *x = a, *y = b;
    if (x->run.stats.forwards != y->run.stats.forwards)
        return x->run.stats.forwards < y->run.stats.forwards ? -1 : 1;
    return (x->run.peak_act > y->run.peak_act) - (x->run.peak_act < y->run.peak_act);
}

void ckpt_frontier_sort(CkptRow *rows, int count)
{
    for (int i = 0; i < count; i++) {
        rows[i].pareto = true;
        for (int j = 0; j < count && rows[i].pareto; j++) {
            long fi = rows[i].run.stats.forwards, fj = rows[j].run.stats.forwards;
            size_t mi = rows[i].run.peak_act, mj = rows[j].run.peak_act;
            if (fj <= fi && mj <= mi && (fj < fi || mj < mi))
                rows[i].pareto = false;
        }
    }
    qsort(rows, (size_t)count, sizeof *rows, by_forwards);
}

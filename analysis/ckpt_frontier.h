#ifndef TAPEGRAD_CKPT_FRONTIER_H
#define TAPEGRAD_CKPT_FRONTIER_H
/* Checkpoint strategies compared on the MLP chain (analysis/mlp_chain.h; examples/
 * backprop_strategies, docs/checkpointing.md): one strategy run on a fresh chain and checked
 * against vanilla's gradients bit for bit, and the memory-vs-recompute frontier at one length:
 * which strategies it shows, which points are Pareto-optimal (no other point has both fewer
 * forward evaluations and fewer act bytes), in the order its line is drawn. In: the chain's
 * shape, a seed and strategies; out: rows of measurements that the program prints. */
#include <stdbool.h>
#include <stdint.h>

#include "analysis/mlp_chain.h"

enum { CKPT_ROW_NAME = 32 };

/* One measured run. */
typedef struct {
    char        name[CKPT_ROW_NAME];    /* ckpt_name: "sqrt", "budget:4" */
    const char *family;       /* vanilla, memory-poor, sqrt, every, budget */
    int         n;
    MlpChainRun run;
    long        formula;      /* ckpt_formula_total: the forward evaluations it should take */
    bool        same_grads;   /* bit-identical to vanilla's */
    bool        pareto;       /* set by ckpt_frontier_sort */
} CkptRow;

/* Strategy s over a fresh chain of n layers (mlp_chain_new(n, width, batch, seed): the same
 * weights for every strategy), reps timed passes, its gradients against one vanilla pass's. */
CkptRow ckpt_row_measure(CkptStrategy s, int n, int width, int batch, uint64_t seed, int reps);

/* The frontier's strategies at n layers into out: vanilla, memory-poor, sqrt, every:K for each
 * interval K < n (K >= n is vanilla), budget:S for each budget S <= n (more slots than layers
 * change nothing). out needs room for 3 + n_intervals + n_budgets; returns the count. */
int     ckpt_frontier_strategies(int n, const int *intervals, int n_intervals,
                                 const int *budgets, int n_budgets, CkptStrategy *out);
/* Marks the Pareto points, then sorts the rows by forward evaluations (then act bytes), so
 * that the frontier's points join left to right. */
void    ckpt_frontier_sort(CkptRow *rows, int count);

#endif

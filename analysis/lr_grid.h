#ifndef TAPEGRAD_LR_GRID_H
#define TAPEGRAD_LR_GRID_H
/* The large-batch table in miniature (Goyal et al. 2017, "Accurate, Large Minibatch SGD";
 * examples/lr_scaling, docs/batch_and_lr.md): a base batch b and multiples k of it, the
 * learning rate scaled by a rule (optim/schedule.h: none, linear, sqrt), with or without a
 * warmup, SGD and AdamW, every run the same number of epochs. This file is the grid's design
 * as data and arithmetic: which cells there are, and for each its batch, micro-batches,
 * steps, warmup and peak rate. Running the runs and reading their logs is the caller's.
 *
 * Batches larger than max_micro rows are made by accumulation, as a real large-batch run on a
 * small machine would be. */
#include <stdbool.h>

#include "optim/schedule.h"

/* The grid's settings. */
typedef struct {
    int    epochs, epoch_examples;      /* every run: epochs of epoch_examples examples */
    int    base_batch, max_micro;       /* b; the largest micro-batch */
    double lr_sgd, lr_adamw;            /* each optimizer's base rate at b */
    double warmup_epochs;               /* warmup length in epochs */
} LrGrid;

/* One cell of the grid: everything but the seed. optimizer is "sgd" or "adamw". */
typedef struct {
    const char *optimizer;
    int         k;              /* multiple of the base batch */
    SchedRule   rule;
    SchedWarmup warmup;
} LrCell;

/* The table's cells in its order: warmup (gradual, then, with full, none), optimizer (sgd,
 * adamw), k (1 32, or with full 1 4 16 32), rule (k = 1: none only; else none linear sqrt).
 * Returns the count (at most LR_GRID_MAX_CELLS). */
enum { LR_GRID_MAX_CELLS = 40 };
int    lr_grid_cells(bool full, LrCell *cells);
/* Whether cell c is one of lr_grid_cells(full). */
bool   lr_grid_has(bool full, const LrCell *c);

/* The curves against the base batch: for an optimizer at the grid's largest k, the base batch
 * without warmup, then the largest batch with no, constant and gradual warmup, under the
 * optimizer's own rule: linear for SGD (Goyal et al.'s) and sqrt for AdamW (with the linear
 * rule AdamW at k = 32 ends on the loss plateau whatever the warmup, and its three curves
 * would show nothing apart). LR_GRID_CURVE_LABELS[i] names curve i. */
enum { LR_GRID_CURVES = 4 };
extern const char *const LR_GRID_CURVE_LABELS[LR_GRID_CURVES];
void   lr_grid_curve_cells(bool full, const char *optimizer, LrCell *cells);

/* The batch b k, and its micro-batch: at most max_micro rows (batch / micro of them make a
 * step). */
int    lr_grid_batch(const LrGrid *g, const LrCell *c);
int    lr_grid_micro(const LrGrid *g, const LrCell *c);
/* Steps for the epochs at batch b k (at least 1). */
long   lr_grid_steps(const LrGrid *g, const LrCell *c);
/* Warmup steps: warmup_epochs at batch b k, at least 1, and short of the run's end, since a
 * cosine needs a step to decay over (a run of one step has no warmup); 0 without warmup. */
long   lr_grid_warmup_steps(const LrGrid *g, const LrCell *c);
/* The optimizer's base rate at b, and the peak rate after the cell's rule
 * (sched_peak_lr at batch b k). */
double lr_grid_base_lr(const LrGrid *g, const LrCell *c);
double lr_grid_peak_lr(const LrGrid *g, const LrCell *c);

#endif

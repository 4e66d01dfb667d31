#ifndef TAPEGRAD_SCALING_GRID_H
#define TAPEGRAD_SCALING_GRID_H
/* One run of a scaling-law grid (examples/scaling_laws, docs/scaling_laws.md): a GPT of a given
 * depth and width trained in-process (optim/train.h) on a text corpus for a compute budget C,
 * i.e. for D = C / (6 N) tokens with N its non-embedding parameters, under a cosine schedule
 * whose length is exactly those D tokens; then its validation loss. And the results file that
 * holds one row per run, written as the runs finish and read back to refit without training.
 *
 * N counts what Kaplan et al. call non-embedding parameters: every block's weights and biases
 * and the final LayerNorm, 12 L C^2 + 13 L C + 2 C for this GPT; the token and position
 * embeddings (V C + T C) are left out, and so is the tied head that shares the token embedding.
 * The compute estimate is Kaplan's and Chinchilla's C = 6 N D (2 N FLOP per token forward,
 * 4 N backward), which leaves out attention's scores (12 L T C per token) and the head. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "autograd/tsv.h"
#include "data/dataset.h"
#include "nn/gpt.h"
#include "optim/train.h"

typedef struct {
    int    seq;             /* T */
    int    batch;           /* rows per step: a step trains batch * seq tokens */
    double lr;              /* AdamW's peak rate at width lr_width; a model of width C trains at
                             * lr * lr_width / C (wider models want smaller steps: the rate was
                             * tuned by hand at widths 16, 32 and 48, docs/scaling_laws.md) */
    int    lr_width;
    double warmup_frac;     /* warmup steps as a fraction of the run ... */
    long   warmup_max;      /* ... at most this many */
    double final_frac;      /* the cosine's floor, a fraction of the peak (Chinchilla: 0.1) */
    int    eval_windows;    /* validation windows evaluated (0: all) */
    int    threads;
    uint64_t seed;
} ScalingTrainConfig;

/* T 64, batch 4 (these runs are short: a small batch buys steps), lr 0.02 at width 16,
 * warmup 5% up to 100 steps, floor 0.1, every validation window, 1 thread, seed 1. */
ScalingTrainConfig scaling_train_defaults(void);

/* One row of the results. */
typedef struct {
    int    layers, width, heads;
    double N;               /* non-embedding parameters */
    double budget;          /* the budget C asked for (groups the rows of one IsoFLOP profile) */
    double D;               /* tokens trained: steps * batch * seq, the nearest to C / (6 N) */
    double C;               /* 6 N D, the budget actually spent (within half a step of budget) */
    long   steps;
    double lr;              /* the peak rate it trained at */
    double val_loss;        /* mean cross-entropy (nats per character) on the validation windows */
    double seconds;         /* training and evaluation, wall clock */
    double flop;            /* training FLOP counted by the tape (forward + backward, products and
                             * the rest; autograd/tape.h), NaN in a results file without them */
} ScalingRun;

/* 12 L C^2 + 13 L C + 2 C (above), from the model's own parameter count minus its embeddings. */
double scaling_non_embedding_params(const Gpt *model);
/* The same for a configuration, without building the model. */
double scaling_non_embedding_count(int layers, int width);
/* The peak rate of a model of this width. */
double scaling_lr_for(const ScalingTrainConfig *cfg, int width);
/* Steps for budget C at N parameters: round(C / (6 N batch seq)), at least 1. */
long   scaling_steps_for(double budget, double N, const ScalingTrainConfig *cfg);

/* Who watches a run's steps while it trains (a program's progress line): begin before the
 * first step with the run's length, step after each with its loss and tokens, end after the
 * last. The library draws nothing itself; any of the three may be NULL. */
typedef struct {
    void (*begin)(void *ctx, long steps);
    void (*step)(void *ctx, long step, double loss, long long tokens, const char *label);
    void (*end)(void *ctx);
    void *ctx;
} ScalingWatch;

/* Trains one model of the given shape (V from the data) for budget C and evaluates it; watch,
 * when not NULL, sees the steps, each with label. */
ScalingRun scaling_train_one(const Dataset *ds, const ScalingTrainConfig *cfg, int layers,
                             int width, int heads, double budget, const ScalingWatch *watch,
                             const char *label);

/* The mean cross-entropy (nats per token) of tr's model over the first n validation windows of
 * ds (all when n is 0 or more than there are), in batches of 32 windows: eval_teacher_forced's
 * loss (analysis/eval.h). */
double scaling_validation_loss(Trainer *tr, const Dataset *ds, int n);

/* The columns of the results file, in order (NULL-terminated), and one run's row written into
 * a writer opened with them (false when the write failed, autograd/tsv.h). */
extern const char *const SCALING_COLUMNS[];
bool   scaling_write_row(TsvWriter *w, const ScalingRun *run);
/* Reads a results file: up to max rows into runs, the count in *n. Columns are found by name,
 * so extra columns are ignored. False with a message (the file, the line, the column) in err
 * when the file cannot be read, a column is missing or a cell is not a number. */
bool   scaling_read_results(const char *path, ScalingRun *runs, int max, int *n, char *err,
                            size_t errlen);

#endif

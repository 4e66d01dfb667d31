#ifndef TAPEGRAD_FIT_LARGEST_H
#define TAPEGRAD_FIT_LARGEST_H
/* fit_largest's parts: the options, the search and the winner's run (fit_largest.c), and the
 * max-batch exercise (exercise.c). */
#include <stdbool.h>
#include <stddef.h>

#include "plan/fit_search.h"

/* The share of --time given to train_gpt's updates: the rest is for its start, the final
 * evaluation and the sample. */
#define FIT_TRAIN_SHARE 0.75

typedef struct {
    size_t       budget;
    double       seconds;
    const char  *data;
    int          seq, target_batch, verify, sample, threads;
    long         min_steps;
    bool         no_train, offload;
    const char  *out, *work, *train_gpt;
    const char  *base;           /* --base: fine-tune this model (NULL: from scratch) */
    GptConfig    base_model;     /* its shape */
    /* --exercise max-batch */
    int          exercise;       /* 0: the search; 1: max-batch */
    int          layers, embd, max_batch;
    FitPrecision precision;
    McOptimizer  optimizer;
    bool         exercise_flag_given;
} FitOptions;

/* exercise.c */
int        exercise_max_batch(const FitOptions *o, int V);

#endif

#ifndef TAPEGRAD_GRAD_PROBE_H
#define TAPEGRAD_GRAD_PROBE_H
/* The gradients a mixed-precision run would have to store (examples/loss_scaling, part 1;
 * docs/mixed_precision.md): a GPT trained in fp32 for a few hundred steps on the add task
 * (train_gpt's settings, seed and batches: the same weights its fp32 run has at that step,
 * thread count permitting), then one more batch forward and backward with tape->keep_grads set,
 * and every activation gradient (each node's output gradient, a "b node") copied out.
 *
 * Two ways to see what fp16 does to them at a loss scale S:
 *   rounded  each fp32 gradient times S, rounded to fp16 (grad_rounding): the paper's analysis
 *   pass     the same batch through a backward pass under the fp16 policy seeded with S, where
 *            the tape rounds every gradient to fp16 as it goes (autograd/tape.c), compared
 *            with the fp32 pass value by value. Rounding errors compound there (a gradient
 *            is made from rounded gradients), so the two need not agree exactly.
 * The fp32 steps reach a program through a watch. The measurements' result file is
 * grad_probe_write_underflow's (the histogram's is grad_hist_write's), their markdown table
 * grad_probe_print's, into the FILE the program gives. */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "analysis/grad_hist.h"
#include "data/dataset.h"
#include "optim/train.h"

/* The fp32 run the probe repeats: the model's shape and train_gpt's optimizer and schedule
 * (gradual warmup, then cosine decay over steps), and how far it goes before the measurement. */
typedef struct {
    int    batch, layers, heads, embd;
    long   warmup;
    double lr, beta2, weight_decay, clip;
    long   steps;            /* the schedule's length (the whole run's) */
    long   probe_step;       /* fp32 steps before the gradients are measured */
    long   seed;             /* weights and data */
} GradProbeConfig;

/* train_gpt's defaults, written out, for a run of `steps` steps: batch 64, 2 layers, 4 heads,
 * width 128, AdamW at 1e-3 with beta2 0.99 and weight decay 0.1, clipping at 1, a warmup of a
 * tenth of the run but at most 100 steps (as train_gpt's). A program that trains the probe in
 * its process and starts train_gpt runs beside it passes these as flags, so the two stay the
 * same model on the same schedule even if train_gpt's defaults move. */
GradProbeConfig grad_probe_defaults(long steps, long probe_step, long seed);

/* Who watches the fp32 steps: called at every 100th step and at the last one; may be NULL. */
typedef struct {
    void (*step)(void *ctx, long step, long steps, double loss);
    void *ctx;
} GradProbeWatch;

/* The model after probe_step steps, the measured batch, and every activation gradient of that
 * batch's backward pass (the output gradient of every node on the tape, concatenated in tape
 * order; reshape views are left out, since their gradient repeats their input's). */
typedef struct {
    Trainer  *tr;
    Dataset  *ds;
    int       B, T;
    int      *tokens, *targets;
    float    *grads;
    size_t    n_grads;
    int       n_tensors;
    float     amax;          /* largest |g| */
    double    loss;          /* of the measured batch */
    GradHist  hist;
} GradProbe;

/* What fp16 does to the probe's gradients at one loss scale S. */
typedef struct {
    float        scale;
    const char  *rule;       /* how S was chosen */
    GradRounding rounded;    /* the fp32 gradients times S, rounded to fp16 */
    /* A real backward pass under the fp16 policy seeded with S, node for node against fp32:
     * values that are nonzero in fp32 and 0 here, and values that are inf or NaN here. */
    long long    pass_zero, pass_nonfinite;
} GradProbeResult;

/* Trains and measures; NULL with a message in err when memory runs out. */
GradProbe *grad_probe_new(const GradProbeConfig *c, const GradProbeWatch *watch, char *err,
                          size_t errlen);
void       grad_probe_free(GradProbe *p);
/* The gradients at loss scale `scale` (rule: how it was chosen, kept in the result). False with
 * a message in err if the fp16 tape does not record what the fp32 one did. */
bool       grad_probe_measure(GradProbe *p, float scale, const char *rule, GradProbeResult *r,
                              char *err, size_t errlen);

/* What fp16 does at each loss scale measured (r[0..n-1]) as a TSV at path (autograd/tsv.h:
 * whole or not at all; false with a message in err): a row per scale with its rule, the value
 * and its exponent, the probe's count of values, and the nonzero ones that become 0 or
 * overflow when rounded, and that become 0 or non-finite in the fp16 backward pass, counts and
 * shares of the nonzero values. */
bool       grad_probe_write_underflow(const char *path, const GradProbe *p,
                                      const GradProbeResult *r, int n, char *err,
                                      size_t errlen);
/* The same measurements as loss_scaling prints them, into out: the probe's zeros, its largest
 * |g| and smallest nonzero bin, fp16's range, then a markdown row per loss scale: its exponent
 * and rule, the nonzero values, how many become 0 rounded and in the fp16 pass (with their
 * share of the nonzero ones) and how many overflow each way. */
void       grad_probe_print(const GradProbe *p, const GradProbeResult *r, int n, FILE *out);

#endif

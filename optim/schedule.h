#ifndef TAPEGRAD_SCHEDULE_H
#define TAPEGRAD_SCHEDULE_H
/* The learning rate of every step, as a pure function of a config: lr = sched_lr(&cfg, s).
 * Optimizers take the learning rate as an argument (optim.h); this is where it comes from.
 *
 * Steps are counted from 0: step s is the (s + 1)-th update, and a run has total_steps of them,
 * s = 0 .. S - 1. Three stages shape the curve:
 *
 * 1. Scaling to the batch. base_lr is the rate known to work at base_batch examples per update.
 *    The effective batch is b = batch * accum (micro-batch times accumulation steps), k = b /
 *    base_batch, and the peak rate is
 *        none    peak = base_lr
 *        linear  peak = base_lr * k         (Goyal et al. 2017: k times the batch, k times the
 *                                            step, for SGD; the same number of epochs then takes
 *                                            k times fewer, k times longer steps)
 *        sqrt    peak = base_lr * sqrt(k)   (keeps the variance of the update; often the better
 *                                            rule for Adam)
 *
 * 2. Warmup, over the first W = warmup_steps steps (s < W):
 *        none      no warmup stage: W is taken as 0 whatever warmup_steps says
 *        constant  lr = warmup_fraction * peak, a fixed small rate, then a jump to peak at s = W
 *                  (Goyal et al.'s "constant warmup"; warmup_fraction 0.1 by default, so
 *                  base/10 when the rule is none)
 *        gradual   lr = peak * (s + 1) / W, a linear ramp that reaches peak on step W - 1; the
 *                  first update is peak / W, never 0 (a zero-rate step would only waste a batch)
 *
 * 3. After warmup, the remaining R = S - W steps:
 *        constant  lr = peak
 *        cosine    lr = floor + (peak - floor) (1 + cos(pi u)) / 2,  u = (s - W) / R
 *        wsd       warmup-stable-decay: peak until the last D = cooldown_steps steps, then a
 *                  cooldown  lr = floor + (peak - floor) shape(u),  u = (s - (S - D)) / D,
 *                  shape(u) = 1 - u (linear) or 1 - sqrt(u) (1-sqrt, Hägele et al. 2024)
 *    floor = final_fraction * peak (0 by default). u is the part of the decay already done
 *    before step s, in [0, 1): the first decay step runs at peak and the last one at a small
 *    positive rate (peak / D for a linear cooldown to 0), so no step is spent at rate 0.
 *
 * Steps at or past S keep the last step's rate; a negative step is a programming error. */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/schema.h"

typedef enum { SCHED_RULE_NONE, SCHED_RULE_LINEAR, SCHED_RULE_SQRT } SchedRule;
typedef enum { SCHED_WARMUP_NONE, SCHED_WARMUP_CONSTANT, SCHED_WARMUP_GRADUAL } SchedWarmup;
typedef enum { SCHED_DECAY_CONSTANT, SCHED_DECAY_COSINE, SCHED_DECAY_WSD } SchedDecay;
typedef enum { SCHED_COOLDOWN_LINEAR, SCHED_COOLDOWN_1SQRT } SchedCooldown;

typedef struct {
    double        base_lr;
    int           base_batch;       /* examples per update at which base_lr is right */
    int           batch;            /* examples per micro-batch */
    int           accum;            /* micro-batches per update */
    SchedRule     rule;
    SchedWarmup   warmup;
    long          warmup_steps;     /* W */
    double        warmup_fraction;  /* constant warmup's rate, as a fraction of peak */
    SchedDecay    decay;
    long          total_steps;      /* S */
    long          cooldown_steps;   /* D (wsd only) */
    SchedCooldown cooldown;
    double        final_fraction;   /* floor of cosine and wsd, as a fraction of peak */
} SchedConfig;

/* The settings of a SchedConfig that a run chooses and a snapshot keeps, each declared once
 * (rows in optim/schedule.c): key ("schedule.lr"), range, default (sched_defaults'), help, and
 * the value a snapshot saved before the key existed had. The rest (batch, accum, S) a program
 * derives from its own settings. A program writes and reads them (by_program:
 * train_gpt's settings table references these rows). */
extern const Schema SCHED_SCHEMA;

/* base_lr 1e-3 at base batch = batch = 32, accum 1, rule none, no warmup (W = 0, fraction
 * 0.1), constant, S = 1000, D = 0, linear cooldown, floor 0. */
SchedConfig sched_defaults(void);
/* True when cfg is usable; otherwise false with one sentence naming the field in err:
 * base_lr > 0, batches and accum >= 1, S >= 1, 0 <= W, W + D <= S, D >= 1 for wsd, the
 * fractions in [0, 1]. */
bool        sched_check(const SchedConfig *cfg, char *err, size_t len);

/* The effective batch, batch * accum, and the peak rate after the scaling rule. */
long        sched_effective_batch(const SchedConfig *cfg);
double      sched_peak_lr(const SchedConfig *cfg);
/* The learning rate of step s (0-based). */
double      sched_lr(const SchedConfig *cfg, long step);

/* Names as the command line spells them, NULL-terminated and indexed by the enum (ready for
 * cli_choice): "none" "linear" "sqrt"; "none" "constant" "gradual"; "constant" "cosine" "wsd";
 * "linear" "1-sqrt". */
extern const char *const SCHED_RULE_NAMES[];
extern const char *const SCHED_WARMUP_NAMES[];
extern const char *const SCHED_DECAY_NAMES[];
extern const char *const SCHED_COOLDOWN_NAMES[];

#endif

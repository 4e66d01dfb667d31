#include "optim/schedule.h"

#include <math.h>
#include <stdio.h>

#include "autograd/tensor.h"

static const double PI = 3.14159265358979323846;

const char *const SCHED_RULE_NAMES[] = { "none", "linear", "sqrt", NULL };
const char *const SCHED_WARMUP_NAMES[] = { "none", "constant", "gradual", NULL };
const char *const SCHED_DECAY_NAMES[] = { "constant", "cosine", "wsd", NULL };
const char *const SCHED_COOLDOWN_NAMES[] = { "linear", "1-sqrt", NULL };

SchedConfig sched_defaults(void)
{
    return (SchedConfig){ .base_lr = 1e-3, .base_batch = 32, .batch = 32, .accum = 1,
                          .rule = SCHED_RULE_NONE, .warmup = SCHED_WARMUP_NONE,
                          .warmup_steps = 0, .warmup_fraction = 0.1,
                          .decay = SCHED_DECAY_CONSTANT, .total_steps = 1000,
                          .cooldown_steps = 0, .cooldown = SCHED_COOLDOWN_LINEAR,
                          .final_fraction = 0.0 };
}

/* W as the curve uses it: no warmup stage means W = 0. */
static long warmup_steps(const SchedConfig *c)
{
    return c->warmup == SCHED_WARMUP_NONE ? 0 : c->warmup_steps;
}

bool sched_check(const SchedConfig *c, char *err, size_t len)
{
    const char *why = NULL;
    long W = warmup_steps(c);
    if (!(c->base_lr > 0.0 && isfinite(c->base_lr)))
        why = "the base learning rate must be a positive number";
    else if (c->base_batch < 1 || c->batch < 1 || c->accum < 1)
        why = "the base batch, the batch and the accumulation steps must be at least 1";
    else if (c->total_steps < 1)
        why = "the total number of steps must be at least 1";
    else if (c->warmup_steps < 0 || c->cooldown_steps < 0)
        why = "warmup and cooldown steps cannot be negative";
    else if (c->decay == SCHED_DECAY_WSD && c->cooldown_steps < 1)
        why = "warmup-stable-decay needs at least 1 cooldown step";
    else if (W + (c->decay == SCHED_DECAY_WSD ? c->cooldown_steps : 0) > c->total_steps)
        why = "warmup and cooldown steps together exceed the total number of steps";
    else if (!(c->warmup_fraction >= 0.0 && c->warmup_fraction <= 1.0) ||
             !(c->final_fraction >= 0.0 && c->final_fraction <= 1.0))
        why = "the warmup and final fractions must be in [0, 1]";
    if (why)
        snprintf(err, len, "%s", why);
    return why == NULL;
}

long sched_effective_batch(const SchedConfig *c) { return (long)c->batch * c->accum; }

double sched_peak_lr(const SchedConfig *c)
{
    double k = (double)sched_effective_batch(c) / (double)c->base_batch;
    switch (c->rule) {
    case SCHED_RULE_NONE: return c->base_lr;
    case SCHED_RULE_LINEAR: return c->base_lr * k;
    case SCHED_RULE_SQRT: return c->base_lr * sqrt(k);
    }
    return c->base_lr;
}

/* The decay stage's multiplier of (peak - floor) at step s >= W, in (0, 1]. */
static double decay_shape(const SchedConfig *c, long s, long W)
{
    long S = c->total_steps, D = c->cooldown_steps;
    switch (c->decay) {
    case SCHED_DECAY_CONSTANT:
        return 1.0;
    case SCHED_DECAY_COSINE: {
        double u = (double)(s - W) / (double)(S - W);
        return 0.5 * (1.0 + cos(PI * u));
    }
    case SCHED_DECAY_WSD: {
        if (s < S - D)
            return 1.0;
        double u = (double)(s - (S - D)) / (double)D;
        return c->cooldown == SCHED_COOLDOWN_1SQRT ? 1.0 - sqrt(u) : 1.0 - u;
    }
    }
    return 1.0;
}

double sched_lr(const SchedConfig *c, long step)
{
    if (step < 0)
        tensor_fatal("sched_lr: step %ld (steps count from 0)", step);
    if (step >= c->total_steps)
        step = c->total_steps - 1;
    double peak = sched_peak_lr(c);
    long W = warmup_steps(c);
    if (step < W) {
        if (c->warmup == SCHED_WARMUP_CONSTANT)
            return c->warmup_fraction * peak;
        return peak * (double)(step + 1) / (double)W;
    }
    double floor = c->final_fraction * peak;
    return floor + (peak - floor) * decay_shape(c, step, W);
}

static const char *name_in(const char *const *names, int i)
{
    for (int k = 0; names[k]; k++)
        if (k == i)
            return names[k];
    return NULL;
}
static const char *rule_name(int i) { return name_in(SCHED_RULE_NAMES, i); }
static const char *warmup_name(int i) { return name_in(SCHED_WARMUP_NAMES, i); }
static const char *decay_name(int i) { return name_in(SCHED_DECAY_NAMES, i); }
static const char *cooldown_name(int i) { return name_in(SCHED_COOLDOWN_NAMES, i); }
/* Only a decaying schedule has a floor to decay to. */
static bool decays(const void *s) { return ((const SchedConfig *)s)->decay != SCHED_DECAY_CONSTANT; }

/* In the order train_gpt's table lists them. A key added after the first snapshots has the
 * value those runs had (before). */
#define SCHED(f) offsetof(SchedConfig, f)
static const SchemaRow SCHED_ROWS[] = {
    { .key = "schedule.lr", .type = SCHEMA_DOUBLE, .offset = SCHED(base_lr), .lo = 1e-12,
      .hi = 10.0, .def = "0.001", .kept = true, .help = "the base learning rate" },
    { .key = "schedule.lr_rule", .type = SCHEMA_CHOICE, .offset = SCHED(rule), .name = rule_name,
      .def = "none", .before = "none", .kept = true, .agrees = "schedule.base_batch",
      .help = "the lr scaled by the effective batch over base_batch: none, linear or sqrt" },
    { .key = "schedule.base_batch", .type = SCHEMA_INT, .offset = SCHED(base_batch), .lo = 1,
      .hi = 1 << 30, .zero_unset = true, .def = "32", .before = "0", .kept = true,
      .help = "the batch the base lr is meant for, 0 = the effective batch" },
    { .key = "schedule.warmup_type", .type = SCHEMA_CHOICE, .offset = SCHED(warmup),
      .name = warmup_name, .def = "none", .before = "gradual", .kept = true,
      .help = "none, constant or gradual" },
    { .key = "schedule.warmup", .type = SCHEMA_LONG, .offset = SCHED(warmup_steps), .lo = 0,
      .hi = 1000000000, .def = "0", .kept = true, .help = "warmup steps W" },
    { .key = "schedule.warmup_fraction", .type = SCHEMA_DOUBLE, .offset = SCHED(warmup_fraction),
      .lo = 0.0, .hi = 1.0, .def = "0.1", .before = "0.1", .kept = true,
      .agrees = "schedule.warmup_type", .help = "constant warmup's rate, a fraction of the peak" },
    { .key = "schedule.decay", .type = SCHEMA_CHOICE, .offset = SCHED(decay), .name = decay_name,
      .def = "constant", .before = "constant", .kept = true,
      .help = "after warmup: constant, cosine or wsd" },
    { .key = "schedule.cooldown", .type = SCHEMA_LONG, .offset = SCHED(cooldown_steps), .lo = 1,
      .hi = 1000000000, .zero_unset = true, .def = "0", .before = "0", .kept = true,
      .agrees = "schedule.decay", .help = "wsd's cooldown steps D, 0 = not set" },
    { .key = "schedule.cooldown_shape", .type = SCHEMA_CHOICE, .offset = SCHED(cooldown),
      .name = cooldown_name, .def = "linear", .before = "linear", .kept = true,
      .agrees = "schedule.decay", .help = "wsd's cooldown: linear or 1-sqrt" },
    { .key = "schedule.final_fraction", .type = SCHEMA_DOUBLE, .offset = SCHED(final_fraction),
      .lo = 0.0, .hi = 1.0, .def = "0", .before = "0", .kept = true, .applies = decays,
      .agrees = "schedule.decay", .help = "cosine's and wsd's floor, a fraction of the peak" },
};
#undef SCHED
const Schema SCHED_SCHEMA = { .name = "SchedConfig", .rows = SCHED_ROWS,
                              .n = sizeof SCHED_ROWS / sizeof SCHED_ROWS[0],
                              .by_program = true };

#include "optim/loss_scale.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

const char *const LOSS_SCALE_MODE_NAMES[] = { "none", "static", "dynamic", NULL };

LossScaleConfig loss_scale_defaults(void)
{
    return (LossScaleConfig){ .mode = LOSS_SCALE_NONE, .init_scale = 65536.0,
                              .growth_factor = 2.0, .backoff_factor = 0.5,
                              .growth_interval = 2000 };
}

__attribute__((format(printf, 3, 4)))
static bool fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return false;
}

/* The whole of s as a positive finite number. */
static bool positive_number(const char *s, double *out)
{
    char *end;
    double x = strtod(s, &end);
    if (end == s || *end || !(x > 0.0) || !isfinite(x) || (float)x > FLT_MAX)
        return false;
    *out = x;
    return true;
}

bool loss_scale_parse(const char *s, LossScaleConfig *out, char *err, size_t len)
{
    LossScaleConfig c = loss_scale_defaults();
    const char *colon = strchr(s, ':');
    size_t name_len = colon ? (size_t)(colon - s) : strlen(s);
    int mode = 0;
    while (LOSS_SCALE_MODE_NAMES[mode] && (strlen(LOSS_SCALE_MODE_NAMES[mode]) != name_len ||
                                           strncmp(LOSS_SCALE_MODE_NAMES[mode], s, name_len)))
        mode++;
    if (!LOSS_SCALE_MODE_NAMES[mode])
        return fail(err, len, "'%s' is not a loss scaling: expected none, static:S or "
                    "dynamic (or dynamic:INIT)", s);
    c.mode = (LossScaleMode)mode;
    if (c.mode == LOSS_SCALE_NONE && colon)
        return fail(err, len, "'%s': none takes no value", s);
    if (c.mode == LOSS_SCALE_STATIC && !colon)
        return fail(err, len, "'%s' needs its scale: static:S, for example static:1024", s);
    if (colon && !positive_number(colon + 1, &c.init_scale))
        return fail(err, len, "'%s': '%s' is not a positive number a float can hold", s,
                    colon + 1);
    *out = c;
    return true;
}

const char *loss_scale_format(const LossScaleConfig *c, char *buf, size_t len)
{
    if (c->mode == LOSS_SCALE_NONE)
        snprintf(buf, len, "none");
    else
        snprintf(buf, len, "%s:%.17g", LOSS_SCALE_MODE_NAMES[c->mode], c->init_scale);
    return buf;
}

bool loss_scale_check(const LossScaleConfig *c, char *err, size_t len)
{
    if ((unsigned)c->mode > LOSS_SCALE_DYNAMIC)
        return fail(err, len, "loss scaling mode %d is not none, static or dynamic",
                    (int)c->mode);
    double init = c->init_scale;
    if (c->mode != LOSS_SCALE_NONE && !(init > 0.0 && (float)init <= FLT_MAX))
        return fail(err, len, "the initial scale %g is not a positive finite float", init);
    if (c->mode != LOSS_SCALE_DYNAMIC)
        return true;
    if (!(c->growth_factor > 1.0 && isfinite(c->growth_factor)))
        return fail(err, len, "the growth factor %g is not above 1", c->growth_factor);
    if (!(c->backoff_factor > 0.0 && c->backoff_factor < 1.0))
        return fail(err, len, "the backoff factor %g is not in (0, 1)", c->backoff_factor);
    if (c->growth_interval < 1)
        return fail(err, len, "the growth interval %ld is not at least 1 step",
                    c->growth_interval);
    return true;
}

LossScaler loss_scale_new(const LossScaleConfig *c)
{
    char err[160];
    if (!loss_scale_check(c, err, sizeof err))
        tensor_fatal("loss_scale_new: %s", err);
    return (LossScaler){ .cfg = *c,
                         .scale = c->mode == LOSS_SCALE_NONE ? 1.0f : (float)c->init_scale };
}

float loss_scale_value(const LossScaler *s) { return s->scale; }

/* g *= inv, and whether any result is an inf or a NaN. The test |v| <= FLT_MAX is false for
 * both (NaN compares false), and unlike a call to isfinite it keeps the loop vectorizable. An
 * integer OR is the same whatever order the threads finish in. */
static int unscale_buffer(float *g, size_t n, float inv)
{
    int bad = 0;
    long m = (long)n;
    #pragma omp parallel for schedule(static) reduction(| : bad) if (m >= OPTIM_PARALLEL_MIN)
    for (long j = 0; j < m; j++) {
        float v = g[j] * inv;
        g[j] = v;
        bad |= !(fabsf(v) <= FLT_MAX);
    }
    return bad;
}

/* PyTorch computes 1/S in double and rounds it to float once. */
static float inverse(const LossScaler *s) { return (float)(1.0 / (double)s->scale); }

bool loss_scale_unscale(LossScaler *s, float *const *grads, const size_t *counts, int n)
{
    s->checks++;
    float inv = inverse(s);
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (grads[i])
            bad |= unscale_buffer(grads[i], counts[i], inv);
    return bad != 0;
}

bool loss_scale_unscale_grads(LossScaler *s, Tensor *const *params, int n)
{
    s->checks++;
    float inv = inverse(s);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        Tensor *p = params[i];
        if (p->grad) {
            bad |= unscale_buffer(p->grad, p->size, inv);
        } else if (p->grad_packed) {
            /* Packed: the products are checked here and made again by every later read
             * (tensor_grad_scale), never rounded back into the gradient's 2 bytes. */
            float *g;
            tensor_grad_read(p, &g);
            bad |= unscale_buffer(g, p->size, inv);
            mem_free(g);
            tensor_grad_scale(p, inv);
        }
    }
    return bad != 0;
}

/* The rule of PyTorch's GradScaler (docs/mixed_precision.md, "Loss scaling"), after a step's
 * gradients were checked; found_inf: some gradient is inf or NaN. Returns whether the step is
 * skipped (the optimizer must not move).
 *   - Every mode: a step with found_inf is counted in s->skipped and skipped; in the static
 *     and none modes nothing else happens (the scale never changes).
 *   - Dynamic, found_inf: scale <- scale * backoff_factor; the count of clean steps in a row,
 *     s->growth_tracker, restarts at 0; the step is skipped.
 *   - Dynamic, a clean step: growth_tracker + 1; when it reaches growth_interval, scale <-
 *     scale * growth_factor unless that product is not finite (then the scale stays), and the
 *     count restarts at 0 either way; the step is not skipped.
 * The products are taken in double and rounded to float, as GradScaler's update kernel does
 * with its float scale and double factors. */
bool loss_scale_update(LossScaler *s, bool found_inf)
{
    const LossScaleConfig *c = &s->cfg;
    if (found_inf)
        s->skipped++;
    if (c->mode != LOSS_SCALE_DYNAMIC)
        return found_inf;
    /* BEGIN SOLUTION loss_scale_update */
    if (found_inf) {
        s->scale = (float)((double)s->scale * c->backoff_factor);
        s->growth_tracker = 0;
        return true;
    }
    if (++s->growth_tracker == c->growth_interval) {
        float grown = (float)((double)s->scale * c->growth_factor);
        if (isfinite(grown))
            s->scale = grown;
        s->growth_tracker = 0;
    }
    return false;
    /* STUDENT
    return found_inf;
    */
    /* END SOLUTION loss_scale_update */
}

/* The schema ------------------------------------------------------------------------------------ */

static const char *mode_name(int i)
{
    return i >= 0 && i <= LOSS_SCALE_DYNAMIC ? LOSS_SCALE_MODE_NAMES[i] : NULL;
}

/* A factor as the dynamic mode (and its --scale-* flag) checks it, whatever the mode. */
static bool factor_valid(const SchemaRow *r, const void *s, char *why, size_t len)
{
    LossScaleConfig one = loss_scale_defaults();
    one.mode = LOSS_SCALE_DYNAMIC;
    double v = *(const double *)((const char *)s + r->offset);
    *(double *)((char *)&one + r->offset) = v;
    char sub[160];
    if (loss_scale_check(&one, sub, sizeof sub))
        return true;
    snprintf(why, len, "'loss_scale.%s' = %g: %s", r->key, v, sub);
    return false;
}

#define LS(f) offsetof(LossScaleConfig, f)
static const SchemaRow LOSS_SCALE_ROWS[] = {
    { .key = "mode", .type = SCHEMA_CHOICE, .offset = LS(mode), .name = mode_name,
      .def = "none", .kept = true, .help = "none, static or dynamic" },
    { .key = "init_scale", .type = SCHEMA_DOUBLE, .offset = LS(init_scale),
      .lo = 0.0, .hi = FLT_MAX,
      .check = factor_valid, .def = "65536", .kept = true, .help = "the scale S a run starts from" },
    { .key = "growth_factor", .type = SCHEMA_DOUBLE, .offset = LS(growth_factor),
      .lo = 0.0, .hi = FLT_MAX,
      .check = factor_valid, .def = "2", .kept = true,
      .help = "dynamic: S is multiplied by it when it grows (> 1)" },
    { .key = "backoff_factor", .type = SCHEMA_DOUBLE, .offset = LS(backoff_factor),
      .lo = 0.0, .hi = FLT_MAX,
      .check = factor_valid, .def = "0.5", .kept = true,
      .help = "dynamic: S is multiplied by it on an inf/NaN gradient" },
    { .key = "growth_interval", .type = SCHEMA_LONG, .offset = LS(growth_interval), .lo = 1.0,
      .hi = (double)LOSS_SCALE_MAX_INTERVAL, .def = "2000", .kept = true,
      .help = "dynamic: clean steps in a row before S grows" },
};
#undef LS
const Schema LOSS_SCALE_SCHEMA = { .name = "LossScaleConfig", .rows = LOSS_SCALE_ROWS,
                                   .n = sizeof LOSS_SCALE_ROWS / sizeof LOSS_SCALE_ROWS[0] };

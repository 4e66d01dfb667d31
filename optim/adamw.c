#include "optim/adamw.h"

#include <math.h>
#include <stdlib.h>

AdamWConfig adamw_defaults(void)
{
    return (AdamWConfig){ .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01,
                          .decay_rule = OPTIM_DECAY_MATRICES };
}

/* What one step shares across parameters, worked out once in double. */
typedef struct {
    float b1, one_minus_b1, b2, one_minus_b2, eps;
    float step_size;      /* lr / (1 - b1^t) */
    float bc2_sqrt;       /* sqrt(1 - b2^t) */
} AdamWStep;

/* The rule in adamw.h for one tensor; shrink = 1 - lr wd (1 where no decay). */
static void adamw_update_tensor(const AdamWStep *s, float shrink, Tensor *p, float *m, float *v)
{
    float *w = p->data;
    const float *grad = p->grad;
    long n = (long)p->size;
#pragma omp parallel for schedule(static) if (n >= OPTIM_PARALLEL_MIN)
    for (long j = 0; j < n; j++) {
        float g = grad[j];
        w[j] *= shrink;
        m[j] = s->b1 * m[j] + s->one_minus_b1 * g;
        v[j] = s->b2 * v[j] + s->one_minus_b2 * g * g;
        float denom = sqrtf(v[j]) / s->bc2_sqrt + s->eps;
        w[j] -= s->step_size * (m[j] / denom);
    }
}

static void adamw_update(Optim *o, double lr)
{
    const AdamWConfig *c = &((AdamW *)o)->cfg;
    double t = (double)o->step;
    AdamWStep s = {
        .b1 = (float)c->beta1, .one_minus_b1 = (float)(1.0 - c->beta1),
        .b2 = (float)c->beta2, .one_minus_b2 = (float)(1.0 - c->beta2),
        .eps = (float)c->eps,
        .step_size = (float)(lr / (1.0 - pow(c->beta1, t))),
        .bc2_sqrt = (float)sqrt(1.0 - pow(c->beta2, t)),
    };
    float shrink_decayed = (float)(1.0 - lr * c->weight_decay);
    for (int i = 0; i < o->n; i++) {
        if (!o->params[i]->grad)
            continue;
        float shrink = o->decay[i] ? shrink_decayed : 1.0f;
        adamw_update_tensor(&s, shrink, o->params[i], o->state[2 * i]->data,
                            o->state[2 * i + 1]->data);
    }
}

AdamW *adamw_new(Tensor *const *params, int n, AdamWConfig cfg)
{
    if (!(cfg.beta1 >= 0.0 && cfg.beta1 < 1.0 && cfg.beta2 >= 0.0 && cfg.beta2 < 1.0))
        tensor_fatal("adamw: betas (%g, %g) must be in [0, 1)", cfg.beta1, cfg.beta2);
    AdamW *a = calloc(1, sizeof *a);
    if (!a)
        tensor_fatal("out of memory for an optimizer");
    a->cfg = cfg;
    const char *slots[] = { "m", "v" };
    optim_init(&a->base, "adamw", params, n, cfg.decay_rule, 2, slots, adamw_update);
    return a;
}

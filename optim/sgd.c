#include "optim/sgd.h"

#include <stdio.h>
#include <stdlib.h>

SgdConfig sgd_defaults(void)
{
    return (SgdConfig){ .momentum = 0.9, .nesterov = false, .weight_decay = 0.0,
                        .decay_rule = OPTIM_DECAY_MATRICES };
}

/* The rule in sgd.h for one tensor; buf is NULL without momentum. */
static void sgd_update_tensor(float lr, float wd, float mu, bool nesterov, Tensor *p,
                              const float *grad, float *buf)
{
    float *w = p->data;
    long n = (long)p->size;
#pragma omp parallel for schedule(static) if (n >= OPTIM_PARALLEL_MIN)
    for (long j = 0; j < n; j++) {
        float g = grad[j] + wd * w[j];
        if (buf) {
            buf[j] = mu * buf[j] + g;
            g = nesterov ? g + mu * buf[j] : buf[j];
        }
        w[j] -= lr * g;
    }
}

static void sgd_update(Optim *o, double lr)
{
    const SgdConfig *c = &((Sgd *)o)->cfg;
    for (int i = 0; i < o->n; i++) {
        if (!tensor_has_grad(o->params[i]))
            continue;
        float wd = o->decay[i] ? (float)c->weight_decay : 0.0f;
        float *buf = o->n_slots ? o->state[i]->data : NULL;
        float *scratch;     /* a packed gradient's fp32 values, for this tensor's update */
        const float *grad = tensor_grad_read(o->params[i], &scratch);
        sgd_update_tensor((float)lr, wd, (float)c->momentum, c->nesterov, o->params[i], grad,
                          buf);
        mem_free(scratch);
    }
}

Sgd *sgd_new(Tensor *const *params, int n, SgdConfig cfg)
{
    if (cfg.nesterov && cfg.momentum <= 0.0)
        tensor_fatal("sgd: Nesterov momentum needs momentum > 0 (got %g)", cfg.momentum);
    Sgd *s = calloc(1, sizeof *s);
    if (!s)
        tensor_fatal("out of memory for an optimizer");
    s->cfg = cfg;
    const char *slots[] = { "momentum" };
    optim_init(&s->base, "sgd", params, n, cfg.decay_rule, cfg.momentum != 0.0 ? 1 : 0, slots,
               sgd_update);
    return s;
}

/* Nesterov's look-ahead is a multiple of the momentum: without momentum SGD refuses it. */
static bool nesterov_has_momentum(const SchemaRow *r, const void *s, char *why, size_t len)
{
    (void)r;
    const SgdConfig *c = s;
    if (!c->nesterov || c->momentum > 0.0)
        return true;
    snprintf(why, len, "'optim.nesterov' is true with 'optim.momentum' = %g: Nesterov momentum "
             "needs momentum > 0", c->momentum);
    return false;
}

#define SGD(f) offsetof(SgdConfig, f)
static const SchemaRow SGD_ROWS[] = {
    { .key = "momentum", .type = SCHEMA_DOUBLE, .offset = SGD(momentum), .lo = 0.0, .hi = 0.999,
      .def = "0.9", .kept = true, .help = "sgd momentum" },
    { .key = "nesterov", .type = SCHEMA_BOOL, .offset = SGD(nesterov),
      .check = nesterov_has_momentum, .def = "false", .kept = true, .agrees = "optim.momentum",
      .help = "sgd with Nesterov's look-ahead" },
    { .key = "weight_decay", .type = SCHEMA_DOUBLE, .offset = SGD(weight_decay), .lo = 0.0,
      .hi = 10.0, .def = "0", .kept = true, .help = "sgd's L2 penalty" },
    { .key = "decay_rule", .type = SCHEMA_CHOICE, .offset = SGD(decay_rule),
      .name = optim_decay_rule_name, .def = "matrices", .kept = true,
      .help = "which tensors decay: matrices, all or none" },
};
#undef SGD
const Schema SGD_SCHEMA = { .name = "SgdConfig", .rows = SGD_ROWS,
                            .n = sizeof SGD_ROWS / sizeof SGD_ROWS[0] };

/* The MLP chain (analysis/mlp_chain.h). */
#include "analysis/mlp_chain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autograd/ops.h"
#include "autograd/rng.h"

/* A tensor of normal values times scale. */
static Tensor *mlp_chain_normal(Rng *rng, MemCategory cat, int ndim, const int *shape,
                                float scale)
{
    Tensor *t = tensor_new(cat, ndim, shape);
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = scale * rng_normal(rng);
    return t;
}

MlpChain *mlp_chain_new(int n, int width, int batch, uint64_t seed)
{
    MlpChain *m = calloc(1, sizeof *m);
    if (m) {
        m->w = calloc((size_t)n, sizeof *m->w);
        m->b = calloc((size_t)n, sizeof *m->b);
    }
    if (!m || !m->w || !m->b)
        tensor_fatal("out of memory for a chain of %d layers", n);
    m->n = n;
    m->width = width;
    m->batch = batch;
    Rng rng = rng_new(seed, RNG_STREAM_INIT);
    /* He-style scale keeps the activations' size steady through many gelu layers. */
    float scale = sqrtf(2.0f / (float)width);
    for (int j = 0; j < n; j++) {
        m->w[j] = mlp_chain_normal(&rng, MEM_PARAM, 2, (int[]){ width, width }, scale);
        m->b[j] = mlp_chain_normal(&rng, MEM_PARAM, 1, (int[]){ width }, 0.1f);
        m->w[j]->requires_grad = m->b[j]->requires_grad = true;
        m->w[j]->is_param = m->b[j]->is_param = true;
    }
    Rng data = rng_new(seed, RNG_STREAM_DATA);
    m->x = mlp_chain_normal(&data, MEM_TEMP, 2, (int[]){ batch, width }, 1.0f);
    m->x->requires_grad = true;
    m->probe = mlp_chain_normal(&data, MEM_TEMP, 2, (int[]){ batch, width }, 1.0f);
    return m;
}

void mlp_chain_free(MlpChain *m)
{
    for (int j = 0; j < m->n; j++) {
        tensor_free(m->w[j]);
        tensor_free(m->b[j]);
    }
    tensor_free(m->x);
    tensor_free(m->probe);
    free(m->w);
    free(m->b);
    free(m);
}

void mlp_chain_zero_grad(MlpChain *m)
{
    for (int j = 0; j < m->n; j++) {
        tensor_zero_grad(m->w[j]);
        tensor_zero_grad(m->b[j]);
    }
    tensor_zero_grad(m->x);
}

double mlp_chain_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

Tensor *mlp_chain_segment(Tape *tape, Tensor *x, int j, void *ctx)
{
    const MlpChain *m = ctx;
    return op_gelu(tape, op_bias_add(tape, op_matmul(tape, x, m->w[j], false), m->b[j]));
}

Tensor *mlp_chain_loss(const MlpChain *m, Tape *tape, Tensor *y)
{
    return op_sum(tape, op_mul(tape, y, m->probe));
}

MlpChainRun mlp_chain_run(MlpChain *m, CkptStrategy s, int reps, CkptObserver observe,
                          void *observe_ctx)
{
    CkptChain chain = { .fn = mlp_chain_segment, .ctx = m, .n = m->n, .observe = observe,
                        .observe_ctx = observe_ctx };
    CkptRun *run = ckpt_run_new(&chain, s);
    Tape *head = tape_new();
    MlpChainRun r = { .ms = INFINITY };
    for (int rep = 0; rep < reps; rep++) {
        mlp_chain_zero_grad(m);
        size_t act0 = mem_current(MEM_ACT);
        mem_reset_peaks();
        double t0 = mlp_chain_now_ms();
        Tensor *y = ckpt_forward(run, m->x);
        Tensor *loss = mlp_chain_loss(m, head, y);
        tape_backward(head, loss);
        r.loss = loss->data[0];
        /* dL/dx_n now sits on x_n; the head's own activations can go before the chain's
         * backward, as a training step would do. */
        tape_reset(head);
        ckpt_backward(run);
        double ms = mlp_chain_now_ms() - t0;
        r.ms = ms < r.ms ? ms : r.ms;
        r.peak_act = mem_peak(MEM_ACT) - act0;
        r.stats = ckpt_stats(run);
    }
    tape_free(head);
    ckpt_run_free(run);
    return r;
}

float *mlp_chain_grads(const MlpChain *m, size_t *bytes)
{
    size_t W = (size_t)m->width, total = (size_t)m->n * (W * W + W) + m->x->size;
    float *g = mem_alloc(MEM_TEMP, total * sizeof *g), *p = g;
    for (int j = 0; j < m->n; j++) {
        memcpy(p, m->w[j]->grad, W * W * sizeof *p);
        memcpy(p + W * W, m->b[j]->grad, W * sizeof *p);
        p += W * W + W;
    }
    memcpy(p, m->x->grad, m->x->size * sizeof *p);
    *bytes = total * sizeof *g;
    return g;
}


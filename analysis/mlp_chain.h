#ifndef TAPEGRAD_MLP_CHAIN_H
#define TAPEGRAD_MLP_CHAIN_H
/* A checkpointing workload (examples/backprop_strategies, docs/checkpointing.md): the lecture's
 * chain, n segments, each one MLP layer at width W on a batch of B rows,
 *     x_{j+1} = gelu(x_j W_j + b_j)        x_j [B, W], W_j [W, W], b_j [W]
 * followed by the loss L = sum(x_n * r) for a fixed random r [B, W] (so dL/dx_n = r).
 *
 * Every segment keeps three act tensors of B x W floats on a recording tape (the product, the
 * biased product and the gelu), so a "unit" of U = 4 B W bytes measures everything here: vanilla
 * holds 3n units, a checkpoint is 1 unit.
 *
 * Used by backprop_strategies, the benchmark bench/bench_checkpoint.c and the tests
 * tests/test_checkpoint.c and tests/test_policy_checkpoint.c. */
#include <stddef.h>
#include <stdint.h>

#include "autograd/checkpoint.h"


typedef struct {
    int      n, width, batch;
    Tensor **w, **b;       /* [n] parameters of each segment */
    Tensor  *x;            /* x_0 [B, W]: category temp (an input), requires_grad */
    Tensor  *probe;        /* r [B, W] */
} MlpChain;

/* What one forward + backward with a strategy did, measured. */
typedef struct {
    CkptStats stats;
    size_t    peak_act;    /* bytes: peak of the act category above what was in use before */
    double    ms;          /* fastest of the repetitions */
    float     loss;
} MlpChainRun;
/* The chain's weights (He-style scale) and bias from seed's init stream, x_0 and r from its
 * data stream. */
MlpChain   *mlp_chain_new(int n, int width, int batch, uint64_t seed);
void        mlp_chain_free(MlpChain *m);
void        mlp_chain_zero_grad(MlpChain *m);
/* The segment function of the chain (CkptSegmentFn). */
Tensor     *mlp_chain_segment(Tape *tape, Tensor *x, int j, void *ctx);
/* The loss after the chain, on the caller's tape. */
Tensor     *mlp_chain_loss(const MlpChain *m, Tape *tape, Tensor *y);
/* reps forward + backward passes with strategy s (gradients zeroed before each, so they hold
 * one pass's gradient after); observe, if not NULL, watches every pass. */
MlpChainRun mlp_chain_run(MlpChain *m, CkptStrategy s, int reps, CkptObserver observe,
                          void *observe_ctx);
/* A monotonic clock in milliseconds (the runs' timings). */
double      mlp_chain_now_ms(void);
/* Every gradient of the chain (parameters, then the input) in one buffer (temp), to compare
 * runs bit for bit with memcmp. *bytes receives its size. */
float      *mlp_chain_grads(const MlpChain *m, size_t *bytes);

#endif

/* memcalc_measure: one real training step of our GPT, with autograd/mem's peaks, to hold the
 * formulas of memcalc.c against. */
#include "examples/common/memcalc.h"

#include <stdlib.h>

#include "autograd/rng.h"
#include "nn/gpt_checkpoint.h"
#include "optim/adafactor.h"
#include "optim/adam8bit.h"
#include "optim/adamw.h"
#include "optim/sgd.h"

static Optim *make_optimizer(McOptimizer o, Tensor *const *params, int n)
{
    switch (o) {
    case MC_SGD:
    case MC_MOMENTUM: {
        SgdConfig c = sgd_defaults();
        c.momentum = o == MC_MOMENTUM ? 0.9 : 0.0;
        return &sgd_new(params, n, c)->base;
    }
    case MC_ADAM8BIT: return &adam8bit_new(params, n, adam8bit_defaults())->base;
    case MC_ADAFACTOR: return &adafactor_new(params, n, adafactor_defaults())->base;
    default: return &adamw_new(params, n, adamw_defaults())->base;
    }
}

/* Forward and backward: one tape (gpt_loss, as the trainer does) for vanilla, the checkpoint
 * runner otherwise. */
static void forward_backward(const Gpt *model, const McRun *run, const int *tokens,
                             const int *targets)
{
    if (run->strategy.kind != CKPT_VANILLA) {
        gpt_checkpoint_forward_backward(model, run->strategy, tokens, targets, run->B, run->T,
                                        NULL);
        return;
    }
    Tape *tape = tape_new();
    Tensor *loss = gpt_loss(model, tape, tokens, targets, run->B, run->T);
    tape_backward(tape, loss);
    tape_free(tape);
}

McPeaks memcalc_measure(const GptConfig *cfg, const McRun *run, McOptimizer o, uint64_t seed)
{
    size_t base[MEM_NCAT + 1];
    for (int c = 0; c <= MEM_NCAT; c++)
        base[c] = mem_current((MemCategory)c);
    mem_reset_peaks();

    Gpt *model = gpt_new(cfg, seed);
    int n;
    Tensor *const *params = gpt_params(model, &n);
    Optim *opt = make_optimizer(o, params, n);
    int count = run->B * run->T;
    /* Token arrays are the program's, not tensor storage: plain malloc, uncounted. */
    int *tokens = malloc((size_t)count * sizeof *tokens);
    int *targets = malloc((size_t)count * sizeof *targets);
    if (!tokens || !targets)
        tensor_fatal("out of memory for %d tokens", count);
    Rng rng = rng_new(seed, RNG_STREAM_DATA);
    for (int i = 0; i < count; i++) {
        tokens[i] = (int)rng_below(&rng, (uint32_t)cfg->vocab_size);
        targets[i] = (int)rng_below(&rng, (uint32_t)cfg->vocab_size);
    }
    forward_backward(model, run, tokens, targets);
    optim_step(opt, 1e-3);
    optim_zero_grad(opt);

    McPeaks p;
    for (int c = 0; c <= MEM_NCAT; c++)
        p.bytes[c] = (double)(mem_peak((MemCategory)c) - base[c]);
    free(tokens);
    free(targets);
    optim_free(opt);
    gpt_free(model);
    return p;
}

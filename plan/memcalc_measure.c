/* memcalc_measure: one real training step of our GPT, with autograd/mem's peaks, to hold the
 * formulas of memcalc.c against; and the sweep of layers and strategies drawn from both (the
 * figure's TSV). */
#include "plan/memcalc.h"

#include <math.h>
#include <stdlib.h>

#include "autograd/policy.h"
#include "autograd/rng.h"
#include "nn/gpt_lora.h"
#include "nn/gpt_pass.h"
#include "optim/adafactor.h"
#include "optim/adam8bit.h"
#include "optim/adamw.h"
#include "optim/offload.h"
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

/* The policy a tape carries: none for fp32, as optim/train.c does. */
static const PrecisionPolicy *tape_policy(const McRun *run)
{
    return run->policy && !policy_is_fp32(run->policy) ? run->policy : NULL;
}

/* Forward and backward as the trainer runs them (nn/gpt_pass.h: one tape for vanilla, the
 * checkpoint runner otherwise), under the policy. */
static void forward_backward(const Gpt *model, const McRun *run, const int *tokens,
                             const int *targets)
{
    Tape *tape = tape_new_under(tape_policy(run));
    gpt_forward_backward(model, tape, run->strategy, tokens, targets, run->B, run->T, 1.0f, NULL,
                         NULL);
    tape_free(tape);
}

/* One update on random tokens, its peaks counted from here (the set-up's are not the step's:
 * packing a parameter holds its fp32 and packed copies for a moment, which a step never does),
 * less what was in use before the model existed (base). */
static McPeaks measured_step(const Gpt *model, Optim *opt, const GptConfig *cfg,
                             const McRun *run, uint64_t seed, const size_t *base,
                             const size_t *host_base)
{
    mem_reset_peaks();
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
    McPeaks p = { .bytes = { 0 } };
    for (int c = 0; c <= MEM_NCAT; c++) {
        p.bytes[c] = (double)(mem_peak((MemCategory)c) - base[c]);
        p.host[c] = (double)(mem_host_peak((MemCategory)c) - host_base[c]);
    }
    OptimOffloadTraffic t = optim_offload_traffic(opt);
    p.to_host = (double)t.to_host;
    p.to_device = (double)t.to_device;
    free(tokens);
    free(targets);
    return p;
}

/* What is in use before the model exists, on the device and on the host. */
static void bases(size_t *base, size_t *host_base)
{
    for (int c = 0; c <= MEM_NCAT; c++) {
        base[c] = mem_current((MemCategory)c);
        host_base[c] = mem_host_current((MemCategory)c);
    }
}

/* The optimizer with the policy's masters, offloaded as optim/train.c's trainer_new_optimizer
 * does it under run->offload. */
static Optim *make_trained(McOptimizer o, const McRun *run, Tensor *const *params, int n)
{
    unsigned old = mem_host_categories(run->offload ? 1u << MEM_OPTIM : MEM_HOST_NONE);
    Optim *opt = make_optimizer(o, params, n);
    if (run->policy)
        optim_use_policy(opt, run->policy);
    if (run->offload)
        optim_offload(opt);
    mem_host_categories(old);
    return opt;
}

McPeaks memcalc_measure(const GptConfig *cfg, const McRun *run, McOptimizer o, uint64_t seed)
{
    size_t base[MEM_NCAT + 1], host_base[MEM_NCAT + 1];
    bases(base, host_base);

    Gpt *model = gpt_new(cfg, seed);
    gpt_set_tiled_attention(model, run->tiled);
    int n;
    Tensor *const *params = gpt_params(model, &n);
    Optim *opt = make_trained(o, run, params, n);
    McPeaks p = measured_step(model, opt, cfg, run, seed, base, host_base);
    optim_free(opt);
    gpt_free(model);
    return p;
}

/* A LoRA run's step (memcalc.h, "LoRA and QLoRA"): the base packed in place under the policy,
 * as trainer_new_lora leaves it (no masters), the adapters attached (QLoRA quantizes the block
 * weights), the optimizer over the adapters with their masters. The set-up's transients are
 * not the step's: the peaks restart after it. */
McPeaks memcalc_measure_lora(const GptConfig *cfg, const McRun *run, McOptimizer o,
                             const McLora *lora, uint64_t seed)
{
    if (lora->rank == 0)
        return memcalc_measure(cfg, run, o, seed);
    size_t base[MEM_NCAT + 1], host_base[MEM_NCAT + 1];
    bases(base, host_base);
    Gpt *model = gpt_new(cfg, seed);
    gpt_set_tiled_attention(model, run->tiled);
    int n;
    Tensor *const *params = gpt_params(model, &n);
    if (run->policy && run->policy->param != DTYPE_F32)
        for (int i = 0; i < n; i++) {
            Format f = tensor_dtype_format(run->policy->param);
            tensor_pack(params[i], run->policy->param,
                        policy_current_scale(f, params[i]->data, params[i]->size));
        }
    LoraConfig lc = { .rank = lora->rank, .alpha = 16.0f, .targets = lora->targets,
                      .qlora = lora->qlora };
    GptLora *gl = gpt_lora_new(model, &lc, seed + 1);
    Tensor *const *train = gpt_lora_params(gl, &n);
    Optim *opt = make_trained(o, run, train, n);
    McPeaks p = measured_step(model, opt, cfg, run, seed, base, host_base);
    optim_free(opt);
    gpt_lora_free(gl);
    gpt_free(model);
    return p;
}

const char *const MC_TABLE_STRATEGIES[MC_NTABLE_STRATEGIES] = { "vanilla", "sqrt",
                                                                 "memory-poor" };

void memcalc_sweep_write(FILE *out, const GptConfig *cfg, const McRun *run, McOptimizer o,
                         int layers, bool measure)
{
    const char *const *names = MC_TABLE_STRATEGIES;
    fprintf(out, "layers\tstrategy\tpredicted_act\tmeasured_act\n");
    for (int L = 1; L <= layers; L++) {
        for (int i = 0; i < MC_NTABLE_STRATEGIES; i++) {
            GptConfig m = *cfg;
            m.n_layer = L;
            McRun r = *run;
            char err[80];
            ckpt_parse(names[i], &r.strategy, err, sizeof err);
            double measured = measure ? memcalc_measure(&m, &r, o, 1).bytes[MEM_ACT] : NAN;
            fprintf(out, "%d\t%s\t%.0f\t%.0f\n", L, names[i], memcalc_act_peak(&m, &r), measured);
        }
    }
}

/* What emulated mixed precision costs: a full GPT training step (forward, backward, AdamW,
 * zero grad) under each precision preset against fp32, same model, batch and thread count,
 * steps interleaved preset by preset so that a busy machine slows all of them alike. Prints the
 * median ms per step, the ratio to fp32 and the peak bytes of activations and parameters.
 *
 * Target (issue #6): an emulated bf16 step costs at most 1.3x an fp32 step.
 *
 * Emulation is not free: every op decodes its packed inputs into fp32 scratch and encodes its
 * output, and the backward decodes each node's tensors again and rounds the gradients it
 * produced. A bf16 decode is a 16-bit shift and an encode a few integer operations per value,
 * so the cost is memory traffic; fp8 pays an amax pass per tensor as well. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/parallel.h"
#include "autograd/policy.h"
#include "autograd/rng.h"
#include "bench/bench_util.h"
#include "nn/gpt.h"
#include "optim/adamw.h"

enum { THREADS = 2, STEPS = 9, WARMUP = 2 };

typedef struct {
    const char *name;
    GptConfig   cfg;
    int         B;
} BenchCase;

static const BenchCase CASES[] = {
    { "small", { .vocab_size = 65, .max_seq = 64, .n_layer = 4, .n_head = 4, .n_embd = 128,
                 .tied = true, .fused_qkv = true }, 16 },
    { "large", { .vocab_size = 65, .max_seq = 128, .n_layer = 6, .n_head = 6, .n_embd = 384,
                 .tied = true, .fused_qkv = true }, 8 },
};

static const char *const PRESETS[] = { "fp32", "tf32", "bf16", "fp16", "fp8" };
enum { N_PRESETS = sizeof PRESETS / sizeof PRESETS[0] };

typedef struct {
    PrecisionPolicy policy;
    Gpt            *model;
    Optim          *opt;
    Tape           *tape;
    double          ms[STEPS];
    size_t          peak_act, param_bytes;
} Run;

/* The median of a run's step times, leaving them in step order. */
static double median(const double *v, int n)
{
    double s[STEPS];
    memcpy(s, v, (size_t)n * sizeof *v);
    return bench_median(s, n);
}

static void run_init(Run *r, const char *preset, const BenchCase *c)
{
    if (!policy_preset(preset, &r->policy))
        abort();
    size_t param0 = mem_current(MEM_PARAM);
    r->model = gpt_new(&c->cfg, 1);
    int n;
    Tensor *const *params = gpt_params(r->model, &n);
    r->opt = &adamw_new(params, n, adamw_defaults())->base;
    optim_use_policy(r->opt, &r->policy);
    r->param_bytes = mem_current(MEM_PARAM) - param0;
    r->tape = tape_new();
    r->tape->policy = policy_is_fp32(&r->policy) ? NULL : &r->policy;
}

static void run_free(Run *r)
{
    tape_free(r->tape);
    optim_free(r->opt);
    gpt_free(r->model);
}

static double step(Run *r, const BenchCase *c, const int *tokens, const int *targets)
{
    mem_reset_peaks();
    size_t act0 = mem_current(MEM_ACT);
    double t0 = bench_now_ms();
    Tensor *loss = gpt_loss(r->model, r->tape, tokens, targets, c->B, c->cfg.max_seq);
    tape_backward(r->tape, loss);
    optim_step(r->opt, 1e-4);
    optim_zero_grad(r->opt);
    tape_reset(r->tape);
    double ms = bench_now_ms() - t0;
    r->peak_act = mem_peak(MEM_ACT) - act0;
    return ms;
}

static void bench_case(const BenchCase *c, const int *tokens, const int *targets)
{
    Run runs[N_PRESETS];
    for (int p = 0; p < N_PRESETS; p++)
        run_init(&runs[p], PRESETS[p], c);
    for (int s = -WARMUP; s < STEPS; s++)
        for (int p = 0; p < N_PRESETS; p++) {
            double ms = step(&runs[p], c, tokens, targets);
            if (s >= 0)
                runs[p].ms[s] = ms;
        }
    double base = median(runs[0].ms, STEPS);
    for (int p = 0; p < N_PRESETS; p++) {
        double ms = median(runs[p].ms, STEPS);
        printf("%s\t%s\t%.1f\t%.3f\t%zu\t%.3f\t%zu\n", c->name, PRESETS[p], ms, ms / base,
               runs[p].peak_act, (double)runs[p].peak_act / (double)runs[0].peak_act,
               runs[p].param_bytes);
    }
    double bf16 = median(runs[2].ms, STEPS) / base;
    printf("  %s bf16 step / fp32 step: %.3f (target <= 1.3) %s\n", c->name, bf16,
           bf16 <= 1.3 ? "PASS" : "FAIL (target missed)");
    for (int p = 0; p < N_PRESETS; p++)
        run_free(&runs[p]);
}

int main(void)
{
    par_set_threads(THREADS);
    printf("GPT training step under each precision preset, %d threads, median of %d steps "
           "(interleaved)\n", THREADS, STEPS);
    printf("case\tprecision\tms_per_step\tvs_fp32\tpeak_act_bytes\tact_vs_fp32\tparam_bytes\n");
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        const BenchCase *c = &CASES[k];
        int n = c->B * c->cfg.max_seq;
        int *tokens = malloc(sizeof(int) * (size_t)n), *targets = malloc(sizeof(int) * (size_t)n);
        Rng rng = rng_new(7, RNG_STREAM_DATA);
        for (int i = 0; i < n; i++) {
            tokens[i] = (int)rng_below(&rng, (uint32_t)c->cfg.vocab_size);
            targets[i] = (int)rng_below(&rng, (uint32_t)c->cfg.vocab_size);
        }
        bench_case(c, tokens, targets);
        free(tokens);
        free(targets);
    }
    return 0;
}

/* Checkpointed backprop over a chain of n = 64 MLP layers (W = 256, B = 32;
 * analysis/mlp_chain.h): peak activation bytes (measured by the accounting allocator), layer
 * forward evaluations (counted by the runner) and milliseconds per forward + backward, for
 * vanilla, sqrt and a few other strategies. The targets of the "backprop strategies" issue, both for sqrt at n = 64:
 *     peak activation bytes <= 1/3 of vanilla's
 *     forward evaluations   <= 2n + sqrt(n) = 136
 *
 * Then the GPT of the step-time target, V=65 T=128 L=6 H=6 C=384 B=8: one training
 * forward + backward (nn/gpt_pass.h) with vanilla and with sqrt over the 6 blocks, the
 * fastest of 5 each. Target: sqrt's time <= 1.4 x vanilla's. (The optimizer update that
 * completes a training step is the same for both, so the ratio of whole steps is closer to 1.)
 *
 * Prints TSV rows, then the targets with PASS or FAIL; exits 1 on any FAIL. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/mlp_chain.h"
#include "autograd/parallel.h"
#include "nn/gpt_pass.h"

enum { N = 64, WIDTH = 256, BATCH = 32, REPS = 5 };

typedef struct {
    double ms;
    size_t peak_act;
    long   forwards;
} GptRun;

static GptRun gpt_run(const Gpt *m, CkptStrategy s, const int *tokens, int B, int T)
{
    GptRun r = { .ms = INFINITY };
    for (int rep = 0; rep < REPS; rep++) {
        size_t act0 = mem_current(MEM_ACT);
        mem_reset_peaks();
        double t0 = mlp_chain_now_ms();
        CkptStats st;
        Tape *tape = tape_new();
        gpt_forward_backward(m, tape, s, tokens, tokens, B, T, 1.0f, NULL, &st);
        tape_free(tape);
        double ms = mlp_chain_now_ms() - t0;
        r.ms = ms < r.ms ? ms : r.ms;
        r.peak_act = mem_peak(MEM_ACT) - act0;
        r.forwards = st.forwards;
    }
    return r;
}

/* sqrt against vanilla on the GPT; true when the time target is met. */
static bool gpt_target(void)
{
    GptConfig cfg = { .vocab_size = 65, .max_seq = 128, .n_layer = 6, .n_head = 6,
                      .n_embd = 384, .tied = true, .fused_qkv = true };
    enum { B = 8, T = 128 };
    Gpt *m = gpt_new(&cfg, 1);
    static int tokens[B * T];
    for (int i = 0; i < B * T; i++)
        tokens[i] = (i * 7) % cfg.vocab_size;
    GptRun v = gpt_run(m, (CkptStrategy){ CKPT_VANILLA, 0 }, tokens, B, T);
    GptRun s = gpt_run(m, (CkptStrategy){ CKPT_SQRT, 0 }, tokens, B, T);
    gpt_free(m);
    printf("\nmodel\tstrategy\tthreads\tpeak_act_bytes\tblock_forwards\tms_fwd_bwd\n");
    printf("V=65 T=128 L=6 H=6 C=384 B=8\tvanilla\t%d\t%zu\t%ld\t%.1f\n", par_threads(),
           v.peak_act, v.forwards, v.ms);
    printf("V=65 T=128 L=6 H=6 C=384 B=8\tsqrt\t%d\t%zu\t%ld\t%.1f\n", par_threads(), s.peak_act,
           s.forwards, s.ms);
    double ratio = s.ms / v.ms;
    bool pass = ratio <= 1.4;
    printf("GPT L=6 sqrt forward+backward time / vanilla: %.3f (target <= 1.4) %s; peak act "
           "bytes %.3f of vanilla's\n", ratio, pass ? "PASS" : "FAIL",
           (double)s.peak_act / (double)v.peak_act);
    return pass;
}

int main(void)
{
    par_set_threads(0);
    const char *names[] = { "vanilla", "sqrt", "every:4", "budget:8", "budget:3",
                            "memory-poor" };
    enum { VANILLA = 0, SQRT = 1 };
    MlpChainRun r[sizeof names / sizeof names[0]];
    MlpChain *m = mlp_chain_new(N, WIDTH, BATCH, 1);
    printf("strategy\tn\tW\tB\tthreads\tpeak_act_bytes\tforward_evals\tmax_checkpoints\t"
           "max_tapes\tms_fwd_bwd\n");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        CkptStrategy s;
        char err[160];
        if (!ckpt_parse(names[i], &s, err, sizeof err))
            tensor_fatal("%s", err);
        r[i] = mlp_chain_run(m, s, strcmp(names[i], "memory-poor") ? REPS : 1, NULL, NULL);
        printf("%s\t%d\t%d\t%d\t%d\t%zu\t%ld\t%d\t%d\t%.3f\n", names[i], N, WIDTH, BATCH,
               par_threads(), r[i].peak_act, r[i].stats.forwards, r[i].stats.max_checkpoints,
               r[i].stats.max_recorded, r[i].ms);
    }
    mlp_chain_free(m);

    double act_ratio = (double)r[SQRT].peak_act / (double)r[VANILLA].peak_act;
    double fwd_limit = 2.0 * N + sqrt((double)N);
    bool act_pass = act_ratio <= 1.0 / 3.0;
    bool fwd_pass = (double)r[SQRT].stats.forwards <= fwd_limit;
    printf("n=64 sqrt peak act bytes / vanilla: %.4f (%zu / %zu; target <= 1/3) %s\n", act_ratio,
           r[SQRT].peak_act, r[VANILLA].peak_act, act_pass ? "PASS" : "FAIL");
    printf("n=64 sqrt forward evaluations: %ld (target <= 2n + sqrt(n) = %.0f) %s\n",
           r[SQRT].stats.forwards, fwd_limit, fwd_pass ? "PASS" : "FAIL");
    printf("n=64 sqrt time / vanilla: %.3f (%.2f ms / %.2f ms; no target)\n",
           r[SQRT].ms / r[VANILLA].ms, r[SQRT].ms, r[VANILLA].ms);
    bool gpt_pass = gpt_target();
    return act_pass && fwd_pass && gpt_pass ? 0 : 1;
}

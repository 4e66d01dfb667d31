/* Checkpointed backprop over a chain of n = 64 MLP layers (W = 256, B = 32; mlp_chain.h):
 * peak activation bytes (measured by the accounting allocator), layer forward evaluations
 * (counted by the runner) and milliseconds per forward + backward, for vanilla, sqrt and a few
 * other strategies. The targets of the "backprop strategies" issue, both for sqrt at n = 64:
 *     peak activation bytes <= 1/3 of vanilla's
 *     forward evaluations   <= 2n + sqrt(n) = 136
 *
 * Prints one TSV row per strategy, then the two targets with PASS or FAIL; exits 1 on FAIL. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/parallel.h"
#include "examples/backprop_strategies/mlp_chain.h"

enum { N = 64, WIDTH = 256, BATCH = 32, REPS = 5 };

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
    return act_pass && fwd_pass ? 0 : 1;
}

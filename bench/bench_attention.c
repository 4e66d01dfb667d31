/* Causal self-attention speed: milliseconds per forward + backward of op_attention_qkv, and of
 * the same attention built from the parts (split_heads, bmm, causal_softmax, bmm, merge_heads),
 * at two GPT-sized configurations. Prints one TSV row per configuration and path.
 *
 * Useful FLOPs count only the causal triangle (the products a causal kernel cannot skip):
 * forward 2 products, backward 4, each T(T+1)/2 * D multiply-adds per (b, h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/rng.h"
#include "bench/bench_util.h"

typedef struct {
    int B, T, H, D;
} Config;

static Tensor *composed(Tape *tape, Tensor *qkv, int H)
{
    int B = qkv->shape[0], T = qkv->shape[1], C = qkv->shape[2] / 3;
    /* Separate q, k, v copies stand in for three projections. */
    Tensor *part[3];
    for (int p = 0; p < 3; p++) {
        part[p] = tape_tensor(tape, 3, (int[]){ B, T, C });
        for (long r = 0; r < (long)B * T; r++)
            for (int c = 0; c < C; c++)
                part[p]->data[r * C + c] = qkv->data[r * 3 * C + p * C + c];
        part[p]->requires_grad = true;
    }
    Tensor *q = op_split_heads(tape, part[0], H), *k = op_split_heads(tape, part[1], H);
    Tensor *v = op_split_heads(tape, part[2], H);
    Tensor *p = op_causal_softmax(tape, op_bmm(tape, q, k, true), 1.0f / sqrtf((float)(C / H)));
    return op_merge_heads(tape, op_bmm(tape, p, v, false));
}

/* Median of `reps` timed forward + backward passes, after two warm-up passes. */
static double time_pass(Tensor *qkv, Config c, bool fused, const float *seed)
{
    enum { REPS = 21 };
    double t[REPS];
    Tape *tape = tape_new();
    for (int r = -2; r < REPS; r++) {
        double t0 = bench_now_ms();
        Tensor *out = fused ? op_attention_qkv(tape, qkv, c.H) : composed(tape, qkv, c.H);
        tape_backward_seeded(tape, out, seed);
        if (r >= 0)
            t[r] = bench_now_ms() - t0;
        tape_reset(tape);
        tensor_zero_grad(qkv);
    }
    tape_free(tape);
    for (int i = 1; i < REPS; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double s = t[j]; t[j] = t[j - 1]; t[j - 1] = s;
        }
    return t[REPS / 2];
}

int main(void)
{
    par_set_threads(0);
    const Config configs[] = { { 16, 64, 4, 32 }, { 8, 128, 6, 64 } };
    printf("B\tT\tH\tD\tthreads\tpath\tms_fwd_bwd\tuseful_gflops\tP_MiB\n");
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        Config c = configs[i];
        int C = c.H * c.D;
        Rng rng = rng_new(42, RNG_STREAM_DATA);
        Tensor *qkv = tensor_new3(MEM_TEMP, c.B, c.T, 3 * C);
        for (size_t j = 0; j < qkv->size; j++)
            qkv->data[j] = rng_normal(&rng);
        qkv->requires_grad = true;
        size_t n_out = (size_t)c.B * c.T * C;
        float *seed = malloc(n_out * sizeof *seed);
        for (size_t j = 0; j < n_out; j++)
            seed[j] = rng_normal(&rng);
        double flops = 6.0 * 2.0 * c.B * c.H * (c.T * (c.T + 1) / 2.0) * c.D;
        double p_mib = (double)c.B * c.H * c.T * c.T * sizeof(float) / (1 << 20);
        for (int fused = 1; fused >= 0; fused--) {
            double ms = time_pass(qkv, c, fused, seed);
            printf("%d\t%d\t%d\t%d\t%d\t%s\t%.3f\t%.1f\t%.2f\n", c.B, c.T, c.H, c.D, par_threads(),
                   fused ? "op_attention_qkv" : "composed", ms, flops / ms * 1e-6, p_mib);
        }
        free(seed);
        tensor_free(qkv);
    }
    return 0;
}

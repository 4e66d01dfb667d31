#ifndef TAPEGRAD_ATTENTION_MEASURE_H
#define TAPEGRAD_ATTENTION_MEASURE_H
/* One forward + backward of causal self-attention on a fused [q | k | v] input, standard
 * (op_attention_qkv, keeps P [B, H, T, T]) or tiled (op_attention_qkv_tiled, keeps the output
 * and L [B, H, T]): the peak bytes it adds to the act and temp categories, and its median time.
 * Shared by examples/attention_memory (the figure) and bench/bench_attention_tiled.c (the
 * target), so both measure the same thing. Header-only, as the program is one file plus this. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "autograd/ops.h"
#include "autograd/rng.h"

typedef enum { ATTN_STANDARD, ATTN_TILED } AttnKind;

static const char *const ATTN_NAME[] = { "standard", "tiled" };

typedef struct {
    size_t peak_act;     /* mem_peak(MEM_ACT) during the pass, minus what was in use before */
    size_t peak_temp;    /* the same for temp: the input's gradient, dO, scratch buffers */
    double ms;           /* median wall time of one forward + backward */
} AttnMeasure;

static inline double attn_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static inline int attn_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Forward and backward on a fresh tape, then the tape reset (its act bytes return). */
static inline void attn_pass(AttnKind kind, Tape *tape, Tensor *qkv, int H, const float *dout)
{
    Tensor *y = kind == ATTN_TILED ? op_attention_qkv_tiled(tape, qkv, H)
                                   : op_attention_qkv(tape, qkv, H);
    tape_backward_seeded(tape, y, dout);
    tape_reset(tape);
    tensor_zero_grad(qkv);
}

/* The first pass is measured for memory (and warms up); `reps` more are timed. */
static inline AttnMeasure attn_measure(AttnKind kind, int B, int T, int H, int D, int reps,
                                       uint64_t seed)
{
    Rng rng = rng_new(seed, RNG_STREAM_DATA);
    Tensor *qkv = tensor_new3(MEM_TEMP, B, T, 3 * H * D);
    for (size_t i = 0; i < qkv->size; i++)
        qkv->data[i] = rng_normal(&rng);
    qkv->requires_grad = true;
    size_t n_out = (size_t)B * T * H * D;
    float *dout = malloc(n_out * sizeof *dout);
    for (size_t i = 0; i < n_out; i++)
        dout[i] = rng_normal(&rng);
    Tape *tape = tape_new();

    size_t act0 = mem_current(MEM_ACT), temp0 = mem_current(MEM_TEMP);
    mem_reset_peaks();
    attn_pass(kind, tape, qkv, H, dout);
    AttnMeasure m = { .peak_act = mem_peak(MEM_ACT) - act0,
                      .peak_temp = mem_peak(MEM_TEMP) - temp0 };

    double *t = malloc((size_t)(reps > 0 ? reps : 1) * sizeof *t);
    for (int r = 0; r < reps; r++) {
        double t0 = attn_now_ms();
        attn_pass(kind, tape, qkv, H, dout);
        t[r] = attn_now_ms() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, attn_cmp_double);
    m.ms = reps > 0 ? t[reps / 2] : 0.0;

    free(t);
    free(dout);
    tape_free(tape);
    tensor_free(qkv);
    return m;
}

#endif

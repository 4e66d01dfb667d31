/* Conversion throughput of precision/, single-threaded: values per second to encode fp32 into
 * each format (nearest-even, and stochastic for comparison) and to decode back, median of 7
 * runs over a buffer that stays in L2. The target of the issue: at least 1e9 values/s on one core
 * for fp32 -> bf16, fp16 and e4m3 with nearest-even. Prints TSV, then one line per target. */
#include "precision/format.h"
#include "bench/bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 1 << 15, RUNS = 7 };
static const double TARGET = 1e9;
static const double RUN_SECONDS = 0.05;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef enum { OP_ENCODE, OP_DECODE } Op;

/* Values per second of one run: repeat the conversion for about RUN_SECONDS. */
static double one_run(Format f, Op op, Rounding r, const float *x, void *packed, float *y)
{
    long reps = 0;
    double t0 = now(), t;
    do {
        for (int k = 0; k < 16; k++, reps++) {
            if (op == OP_ENCODE)
                fmt_encode_array(f, x, packed, N, r, (uint64_t)reps * N);
            else
                fmt_decode_array(f, packed, y, N);
        }
        t = now() - t0;
    } while (t < RUN_SECONDS);
    return (double)reps * N / t;
}

static double median_rate(Format f, Op op, Rounding r, const float *x, void *packed, float *y)
{
    double rate[RUNS];
    one_run(f, op, r, x, packed, y);        /* warm caches and clocks */
    for (int i = 0; i < RUNS; i++)
        rate[i] = one_run(f, op, r, x, packed, y);
    qsort(rate, RUNS, sizeof *rate, bench_cmp_double);
    return rate[RUNS / 2];
}

/* Normal-ish values over several binades, a few tiny and huge ones: the loops are branch-free,
 * so the mix does not change the speed, but the numbers should look like tensors anyway. */
static void fill(float *x)
{
    for (size_t i = 0; i < N; i++) {
        uint32_t u = fmt_random_bits(1, i);
        float v = ((float)(u >> 8) * 0x1p-24f - 0.5f) * 8.0f;
        x[i] = i % 97 == 0 ? v * 1e-6f : i % 89 == 0 ? v * 1e5f : v;
    }
}

int main(void)
{
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    void *packed = malloc(N * sizeof(float));
    fill(x);
    Rounding rne = {.mode = FMT_ROUND_NEAREST_EVEN};
    Rounding sr = {.mode = FMT_ROUND_STOCHASTIC, .seed = 1};
    double rne_rate[FMT_COUNT];

    printf("format\tencode_rne_per_s\tencode_stochastic_per_s\tdecode_per_s\n");
    for (int f = 0; f < FMT_COUNT; f++) {
        rne_rate[f] = median_rate(f, OP_ENCODE, rne, x, packed, y);
        double sr_rate = median_rate(f, OP_ENCODE, sr, x, packed, y);
        fmt_encode_array(f, x, packed, N, rne, 0);
        double dec_rate = median_rate(f, OP_DECODE, rne, x, packed, y);
        printf("%s\t%.3g\t%.3g\t%.3g\n", fmt_name(f), rne_rate[f], sr_rate, dec_rate);
    }
    const Format targets[] = {FMT_BF16, FMT_FP16, FMT_E4M3};
    for (int i = 0; i < 3; i++) {
        Format f = targets[i];
        bool ok = rne_rate[f] >= TARGET;
        printf("target fp32->%s rne >= 1e9 values/s on one core: %.3g values/s, %s\n",
               fmt_name(f), rne_rate[f], ok ? "met" : "NOT met");
    }
    free(x);
    free(y);
    free(packed);
    /* a miss is reported, not failed: a loaded machine or a portable build (ARCH=) is slower */
    return 0;
}

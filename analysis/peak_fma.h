#ifndef TAPEGRAD_EXAMPLES_PEAK_FMA_H
#define TAPEGRAD_EXAMPLES_PEAK_FMA_H
/* The machine's peak fp32 multiply-add throughput, measured rather than computed from a clock
 * and a data sheet (a virtual machine's /proc/cpuinfo clock says little about the real one).
 *
 * The loop keeps ACC independent vector accumulators, each updated a = a m + c: a fused
 * multiply-add has a latency of about 4 cycles and a core issues two per cycle, so at least 8
 * chains must be in flight to fill both pipes; 12 leaves a margin and still fits the register
 * file. Each FMA counts as 2 FLOP per lane. m is just below 1 and c tiny, so the values stay
 * normal (no denormal slow path) however long the loop runs.
 *
 * Three widths, each compiled for its own instruction set with __attribute__((target)) and
 * chosen at run time: AVX-512 (16 floats), AVX2 (8 floats), and plain C for any other machine
 * (whatever the compiler makes of it). Header-only: bench/bench_gpt.c and train_gpt (the
 * denominator of its model FLOP utilisation) use it. */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <time.h>

enum { PEAK_ACC = 12 };

typedef enum { PEAK_AVX512, PEAK_AVX2, PEAK_PORTABLE } PeakIsa;

static const char *const peak_isa_name[] = { "avx512", "avx2", "portable" };
static const int peak_isa_lanes[] = { 16, 8, 1 };

/* Each of these returns a value computed from every accumulator, so the compiler cannot drop
 * the loop. */
__attribute__((target("avx512f"))) static float peak_loop_avx512(long iters)
{
    __m512 m = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f), a[PEAK_ACC];
    for (int i = 0; i < PEAK_ACC; i++)
        a[i] = _mm512_set1_ps((float)i);
    for (long n = 0; n < iters; n++) {
        #pragma GCC unroll 12
        for (int i = 0; i < PEAK_ACC; i++)
            a[i] = _mm512_fmadd_ps(a[i], m, c);
    }
    for (int i = 1; i < PEAK_ACC; i++)
        a[0] = _mm512_add_ps(a[0], a[i]);
    return _mm512_reduce_add_ps(a[0]);
}

__attribute__((target("avx2,fma"))) static float peak_loop_avx2(long iters)
{
    __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f), a[PEAK_ACC];
    for (int i = 0; i < PEAK_ACC; i++)
        a[i] = _mm256_set1_ps((float)i);
    for (long n = 0; n < iters; n++) {
        #pragma GCC unroll 12
        for (int i = 0; i < PEAK_ACC; i++)
            a[i] = _mm256_fmadd_ps(a[i], m, c);
    }
    for (int i = 1; i < PEAK_ACC; i++)
        a[0] = _mm256_add_ps(a[0], a[i]);
    float out[8];
    _mm256_storeu_ps(out, a[0]);
    return out[0];
}

static float peak_loop_portable(long iters)
{
    float a[PEAK_ACC];
    for (int i = 0; i < PEAK_ACC; i++)
        a[i] = (float)i;
    for (long n = 0; n < iters; n++)
        for (int i = 0; i < PEAK_ACC; i++)
            a[i] = fmaf(a[i], 0.9999999f, 1e-7f);
    float s = 0.0f;
    for (int i = 0; i < PEAK_ACC; i++)
        s += a[i];
    return s;
}

static bool peak_isa_available(PeakIsa isa)
{
    __builtin_cpu_init();
    if (isa == PEAK_AVX512)
        return __builtin_cpu_supports("avx512f");
    if (isa == PEAK_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return true;
}

/* The widest of the three this CPU has: the one a peak is quoted for. */
static inline PeakIsa peak_best_isa(void)
{
    if (peak_isa_available(PEAK_AVX512))
        return PEAK_AVX512;
    return peak_isa_available(PEAK_AVX2) ? PEAK_AVX2 : PEAK_PORTABLE;
}

static float peak_loop(PeakIsa isa, long iters)
{
    if (isa == PEAK_AVX512)
        return peak_loop_avx512(iters);
    if (isa == PEAK_AVX2)
        return peak_loop_avx2(iters);
    return peak_loop_portable(iters);
}

static double peak_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* GFLOP/s of `threads` threads running the loop at once, the best of `repeats` runs of about
 * 12 ms: other processes on the machine can only slow a run down, so the fastest run is the
 * closest to what the hardware does. */
static double peak_gflops(PeakIsa isa, int threads, int repeats)
{
    const long iters = isa == PEAK_PORTABLE ? 2000000 : 8000000;
    double best = 0.0;
    volatile float sink = 0.0f;
    for (int r = 0; r < repeats; r++) {
        double t0 = 0.0, t1 = 0.0;
        #pragma omp parallel num_threads(threads)
        {
            #pragma omp barrier
            #pragma omp master
            t0 = peak_now_s();
            float v = peak_loop(isa, iters);
            #pragma omp barrier
            #pragma omp master
            {
                t1 = peak_now_s();
                sink = v;
            }
        }
        double flops = 2.0 * peak_isa_lanes[isa] * PEAK_ACC * (double)iters * threads;
        double g = flops / (t1 - t0) * 1e-9;
        best = g > best ? g : best;
    }
    (void)sink;
    return best;
}

#endif

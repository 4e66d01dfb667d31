#include "autograd/parallel.h"

#include "autograd/gemm.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int n_threads = 1;
static bool split_always = false;

void par_set_threads(int n)
{
    if (n <= 0)
        n = omp_get_num_procs();
    n_threads = n;
    omp_set_num_threads(n);
    gemm_single_thread();
    const char *split = getenv("TAPEGRAD_SPLIT");
    if (!split || !*split)
        return;
    if (strcmp(split, "always") != 0 && strcmp(split, "auto") != 0) {
        fprintf(stderr, "tapegrad: TAPEGRAD_SPLIT=%s: choose always or auto\n", split);
        exit(2);
    }
    split_always = strcmp(split, "always") == 0;
}

void par_set_split_always(bool always) { split_always = always; }

bool par_worth(double flops) { return split_always || flops >= PAR_MIN_FLOPS; }

bool par_worth_madds(double madds) { return split_always || madds >= PAR_MIN_MADDS; }

int par_threads(void) { return n_threads; }

/* ---- The product clock (parallel.h) ---- */

static ParProductClock product_clock;
static _Thread_local int product_depth;     /* > 0 inside a product this thread started */

/* Whether this is the step's thread: thread 0 of every enclosing region. */
static bool on_step_thread(void)
{
    for (int level = omp_get_level(); level > 0; level--)
        if (omp_get_ancestor_thread_num(level) != 0)
            return false;
    return true;
}

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The start time of a product to count, or -1 for one that is not counted. */
static long long product_begin(void)
{
    if (product_depth++ > 0 || !on_step_thread())
        return -1;
    return now_ns();
}

static void product_end(long long t0)
{
    product_depth--;
    if (t0 < 0)
        return;
    product_clock.ns += now_ns() - t0;
    product_clock.calls++;
}

ParProductClock par_product_clock(void) { return product_clock; }

void par_product_clock_reset(void) { product_clock = (ParProductClock){ 0 }; }

/* ---- Products ---- */

static void split_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                        const float *A, int lda, const float *B, int ldb, float beta, float *C,
                        int ldc)
{
    int parts = n_threads;
    if (!par_worth_madds((double)M * N * K) || M < 2 * parts)
        parts = 1;
    if (parts == 1) {
        gemm_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* Row i of op(A) starts at A + i*lda, or at column i (A + i) when A is transposed. */
    #pragma omp parallel for schedule(static) num_threads(parts)
    for (int p = 0; p < parts; p++) {
        int m0 = (int)((long)M * p / parts), m1 = (int)((long)M * (p + 1) / parts);
        const float *a = trans_a ? A + m0 : A + (long)m0 * lda;
        gemm_sgemm(trans_a, trans_b, m1 - m0, N, K, alpha, a, lda, B, ldb, beta,
                   C + (long)m0 * ldc, ldc);
    }
}

void par_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
               const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    long long t0 = product_begin();
    split_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    product_end(t0);
}

void par_sgemm_serial(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc)
{
    long long t0 = product_begin();
    gemm_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    product_end(t0);
}

/* A block of at most SUM_BLOCK columns is 1 KiB of running sums: they stay in L1 while the rows
 * stream past. The blocks come in a multiple of the threads, of equal widths (whole vectors),
 * so that every thread sums as many columns: 384 columns cut as 256 + 128 kept one of two
 * threads waiting a third of the time (a bias of width C), 1152 as 3 x 256 against 2 x 256
 * the same. The cut changes no bit: each column is summed on its own, in row order. */
enum { SUM_BLOCK = 256 };

static int sum_block_width(int n, int threads)
{
    int blocks = (n + SUM_BLOCK - 1) / SUM_BLOCK;
    blocks = (blocks + threads - 1) / threads * threads;
    int w = (n + blocks - 1) / blocks;
    return (w + 15) / 16 * 16;      /* <= SUM_BLOCK: blocks >= n / SUM_BLOCK */
}

void par_sum_rows(const float *x, size_t rows, int n, float *sum)
{
    bool split = par_worth((double)rows * n);
    int width = sum_block_width(n, split ? par_threads() : 1);
    int blocks = (n + width - 1) / width;
    #pragma omp parallel for schedule(static) if (blocks > 1 && split)
    for (int b = 0; b < blocks; b++) {
        int j0 = b * width, w = n - j0 < width ? n - j0 : width;
        float acc[SUM_BLOCK] = { 0 };
        for (size_t r = 0; r < rows; r++) {
            const float *xr = x + r * n + j0;
            #pragma omp simd
            for (int j = 0; j < w; j++)
                acc[j] += xr[j];
        }
        for (int j = 0; j < w; j++)
            sum[j0 + j] += acc[j];
    }
}

void par_sgemm_naive(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                     const float *A, int lda, const float *B, int ldb, float beta, float *C,
                     int ldc)
{
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double acc = 0.0;
            for (int k = 0; k < K; k++) {
                float a = trans_a ? A[(long)k * lda + i] : A[(long)i * lda + k];
                float b = trans_b ? B[(long)j * ldb + k] : B[(long)k * ldb + j];
                acc += (double)a * b;
            }
            float *c = &C[(long)i * ldc + j];
            /* beta = 0 ignores C, as BLAS does, so uninitialised output is fine. */
            *c = (float)(alpha * acc + (beta == 0.0f ? 0.0 : (double)beta * *c));
        }
    }
}

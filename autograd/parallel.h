#ifndef TAPEGRAD_PARALLEL_H
#define TAPEGRAD_PARALLEL_H
/* Who owns the cores. One pool of threads, OpenMP's, does all parallel work: our loops and our
 * matrix products. The GEMM library (OpenBLAS, or oneDNN: autograd/gemm.h) runs
 * single-threaded, called once per OpenMP thread on a block of rows (par_sgemm). Two pools on the same cores fight: OpenMP threads that keep spinning after
 * a loop steal the cores OpenBLAS's own threads need (measured by bench/bench_threads.c; see
 * docs/autograd.md), and with one pool that cannot happen. */
#include <stdbool.h>
#include <stddef.h>

/* How many threads a parallel region takes is decided by the region, from its own work: one
 * thread below a threshold, all of them above. With OMP_WAIT_POLICY=PASSIVE (the programs'
 * default, docs/performance.md "Who owns the cores") the other thread sleeps between regions,
 * and a region pays for waking it and waiting for it to arrive: 11 to 16 us on the 2-vCPU EPYC
 * this was measured on (load average 3 to 4), 30 to 50 us in earlier idle measurements, and any
 * amount when the other core is busy with another process. A small model's step is nothing but
 * such regions, which is how two threads came to be slower than one (issue 32).
 *
 * The thresholds are set where the work takes one core about half a millisecond or more:
 * ten or more wake-ups, so that halving it pays even when a wake-up is slow. bench/bench_split
 * measured both (serial against split, under PASSIVE; docs/performance.md, "How many threads a
 * region takes"), three runs: an add over 2^20 floats took 410-900 us on one core, a product of
 * 2^24 multiply-adds 440-580 us, and a wake-up, the split of a 4096-float add minus its serial
 * time, 11-16 us. Below them, two threads lost to one in every measurement; above, they lost
 * too while other processes held the second core, which no threshold can help.
 *
 * A loop's work is the FLOPs it counts for the tape's "other" column (tape_count): one per
 * element for an add, about 8 for layernorm, and so on. Splitting a loop never changes a bit:
 * every element, or every row's or column's fixed-order sum, is computed by one thread the same
 * way whatever the thread count. */
enum { PAR_MIN_FLOPS = 1 << 20 };

/* Whether a loop of this many FLOPs takes all the threads. */
bool par_worth(double flops);

/* The same threshold in elements, for loops of about four operations per element (the
 * optimizers' updates, optim.h). */
enum { PAR_MIN_ELEMENTS = PAR_MIN_FLOPS / 4 };

/* A matrix product (par_sgemm, a batch of them in op_bmm, or attention's heads) is split over
 * the threads from this many multiply-adds up. In the fast mode this also decides which bits a
 * product gives (a library's blocking depends on the rows each call gets); in the portable mode
 * it changes nothing but the time. */
enum { PAR_MIN_MADDS = 1 << 24 };

/* Whether a product (or a batch of them) of this many multiply-adds takes all the threads. */
bool par_worth_madds(double madds);

/* Every region and product splits whatever its size (true), or each decides by the thresholds
 * above (false, the default): for tests, whose small cases must still run the threaded paths,
 * and to measure what the thresholds save. par_set_threads sets it from TAPEGRAD_SPLIT, "always"
 * or "auto" (auto when unset; anything else is a fatal error naming it). */
void par_set_split_always(bool always);

/* Threads for everything that follows; n <= 0 means one per core. Also pins BLAS to one
 * thread. Call once at start-up, outside parallel regions. */
void par_set_threads(int n);
int  par_threads(void);

/* C = alpha op(A) op(B) + beta C, row-major, op(X) = X or X^T, like cblas_sgemm, with the rows of
 * C split across the threads (each calls the single-threaded GEMM on its block) when the product
 * has PAR_MIN_MADDS or more, on the calling thread alone below that. M, N, K >= 1. The split
 * depends only on the shape and the thread count, so results are reproducible. */
void par_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
               const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* The same product on the calling thread only: for use inside our own parallel loops. */
void par_sgemm_serial(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc);

/* How long the step spends in products: the counter behind bench_gpt's "share of the step
 * outside the products" (issue 32). It counts calls of par_sgemm and par_sgemm_serial, the two
 * doors every product of the library goes through (gemm_sgemm below them, in either kernel
 * mode, is the library call; a program calling it directly is not counted), and the wall time
 * from entering one to leaving it, on CLOCK_MONOTONIC: two clock reads per product, microseconds
 * at least, and nothing a product computes depends on it.
 *
 * What is counted is the clock of the step's thread, the one that starts every parallel region
 * (OpenMP's thread 0 at every nesting level), so the time is wall time of the step during which
 * a product was running, never the sum of several threads' times:
 *   - a par_sgemm split over the threads counts once, on the thread that called it, from before
 *     the split to after the join: one call, its whole wall time;
 *   - a product run by each thread inside someone else's region (attention's heads, a batched
 *     matmul's batch: par_sgemm_serial inside their loops) counts only on thread 0. The other
 *     threads run the same kind of work on the same static schedule meanwhile, so thread 0's
 *     time in products stands for the region's; there the calls counted are thread 0's share
 *     (they depend on the thread count) and the time is an estimate, exact everywhere else;
 *   - a product started inside a counted product (none today) is not counted again.
 * One step thread per process is assumed: the counter is not for several threads each running
 * steps of their own. */
typedef struct {
    long long calls;          /* products counted */
    long long ns;             /* wall time inside them, nanoseconds */
} ParProductClock;

/* What has been counted since the last reset (or the start of the process). */
ParProductClock par_product_clock(void);
void par_product_clock_reset(void);

/* sum[j] += x[0, j] + x[1, j] + ... + x[rows-1, j] for the n columns of a row-major
 * [rows, n] matrix: the gradient of a bias added to every row. Each thread owns blocks of
 * columns and walks the rows in order, reading a contiguous stretch of each row, so every sum
 * runs in the same order whatever the thread count (bit-identical results, no atomics). */
void par_sum_rows(const float *x, size_t rows, int n, float *sum);

/* The same product by three plain loops, accumulated in double: the reference par_sgemm is
 * tested against, and the definition to read. */
void par_sgemm_naive(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                     const float *A, int lda, const float *B, int ldb, float beta, float *C,
                     int ldc);

#endif

#ifndef TAPEGRAD_PARALLEL_H
#define TAPEGRAD_PARALLEL_H
/* Who owns the cores. One pool of threads, OpenMP's, does all parallel work: our loops and our
 * matrix products. The GEMM library (OpenBLAS, or oneDNN: autograd/gemm.h) runs
 * single-threaded, called once per OpenMP thread on a block of rows (par_sgemm). Two pools on the same cores fight: OpenMP threads that keep spinning after
 * a loop steal the cores OpenBLAS's own threads need (measured by bench/bench_threads.c; see
 * docs/autograd.md), and with one pool that cannot happen. */
#include <stdbool.h>
#include <stddef.h>

/* Below this many elements a loop of a few operations per element runs on the calling thread
 * alone: waking the other thread costs more than it saves. With OMP_WAIT_POLICY=PASSIVE (the
 * programs' default, docs/performance.md "Who owns the cores") the other thread sleeps between
 * parallel regions, and a region measured 30 to 50 us more than with spinning threads on a
 * 2-vCPU machine: the time one core takes to add about 2^18 floats held in its cache. Loops
 * that do more per element (layernorm, gelu, softmax) and the products keep their own rules.
 * The loops that use it give the same bits on any number of threads. */
enum { PAR_MIN_ELEMENTS = 1 << 18 };

/* Threads for everything that follows; n <= 0 means one per core. Also pins BLAS to one
 * thread. Call once at start-up, outside parallel regions. */
void par_set_threads(int n);
int  par_threads(void);

/* C = alpha op(A) op(B) + beta C, row-major, op(X) = X or X^T, like cblas_sgemm, with the rows of
 * C split across the threads (each calls the single-threaded GEMM on its block). M, N, K >= 1. The
 * split depends only on M and the thread count, so results are reproducible. */
void par_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
               const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* The same product on the calling thread only: for use inside our own parallel loops. */
void par_sgemm_serial(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc);

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

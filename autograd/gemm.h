#ifndef TAPEGRAD_GEMM_H
#define TAPEGRAD_GEMM_H
/* The one place tapegrad calls a GEMM library. Which library is a build-time choice, the
 * Makefile's GEMM variable (docs/performance.md has the measurements behind it):
 *
 *   make GEMM=openblas   OpenBLAS's cblas_sgemm (the default; Debian's libopenblas-dev)
 *   make GEMM=onednn     oneDNN's dnnl_sgemm   (Debian's libdnnl-dev; what PyTorch calls)
 *
 * Every call here runs on the calling thread only: autograd/parallel.c owns the threads and
 * splits the rows of a product across them. */
#include <stdbool.h>
#include <stddef.h>

/* C = alpha op(A) op(B) + beta C, row-major, like cblas_sgemm, single-threaded. beta = 0
 * ignores what C held. M, N, K >= 1. */
void gemm_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* Keeps the library's own threads out of the way (parallel.h: one pool of threads). Called
 * by par_set_threads. */
void gemm_single_thread(void);

/* The library this build calls: "openblas" or "onednn". */
const char *gemm_backend(void);

/* The width of the vectors its sgemm kernels use, in bits: 512 (AVX-512), 256 (AVX2), or 0
 * for anything else (narrower, or a kernel set this code does not know). */
int gemm_vector_bits(void);

/* One line for a program's description: library, version, kernels. */
const char *gemm_describe(char *buf, size_t len);

#endif

#ifndef TAPEGRAD_GEMM_H
#define TAPEGRAD_GEMM_H
/* The one place tapegrad calls a GEMM library. Which libraries are linked is a build-time
 * choice, the Makefile's GEMM variable (docs/performance.md has the measurements behind it):
 *
 *   make GEMM=auto       both; oneDNN runs the products where it has AVX-512 kernels, OpenBLAS
 *                        everywhere else (the default; gemm_library has the rule)
 *   make GEMM=openblas   OpenBLAS's cblas_sgemm only (Debian's libopenblas-dev)
 *   make GEMM=onednn     oneDNN's dnnl_sgemm only   (Debian's libdnnl-dev; what PyTorch calls)
 *
 * One library runs every product of a process: the two round differently in the last bits.
 * Every call runs on the calling thread only: autograd/parallel.c owns the threads and splits
 * the rows of a product across them. */
#include <stdbool.h>
#include <stddef.h>

typedef enum { GEMM_OPENBLAS, GEMM_ONEDNN } GemmLib;

/* The library that runs this process's products. */
GemmLib gemm_library(void);

/* C = alpha op(A) op(B) + beta C, row-major, like cblas_sgemm, single-threaded, on
 * gemm_library(). beta = 0 ignores what C held. M, N, K >= 1. */
void gemm_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* Keeps the libraries' own threads out of the way (parallel.h: one pool of threads). Called
 * by par_set_threads. */
void gemm_single_thread(void);

/* What this build links: "openblas", "onednn" or "auto" (both, gemm_library choosing). */
const char *gemm_backend(void);

/* The width of the vectors gemm_library()'s sgemm kernels use, in bits: 512 (AVX-512), 256
 * (AVX2), or 0 for anything else (narrower, or a kernel set this code does not know). */
int gemm_vector_bits(void);

/* One line for a program's description: the library running the products, its version and
 * kernels, and the rule that chose it (GEMM=auto). */
const char *gemm_describe(char *buf, size_t len);

#endif

#ifndef TAPEGRAD_GEMM_PORTABLE_H
#define TAPEGRAD_GEMM_PORTABLE_H
/* tapegrad's own matrix product, for the portable kernel mode (autograd/kernels.h): the same
 * bits on every x86-64 CPU with FMA, whatever the vector width or the thread count. */
#include <stdbool.h>

/* C = alpha op(A) op(B) + beta C, row-major, like cblas_sgemm, on the calling thread, with
 * each element of C computed as
 *     acc = beta C_ij;  acc = fma(alpha A_ik, B_kj, acc) for k = 0 .. K-1 in order;  C_ij = acc
 * (beta = 0 ignores what C held; alpha A_ik is rounded to float before the fma). M, N, K >= 1. */
void gemm_portable_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc);

/* Runs the plain C kernel (one fmaf per element and k) instead of the AVX2 one, on any CPU:
 * for the test that the two give the same bits. */
void gemm_portable_force_plain(bool plain);

#endif

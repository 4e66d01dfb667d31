/* The portable product (autograd/gemm_portable.h): the same bits on every x86-64 CPU with FMA.
 *
 * The rule that makes it portable: every element of C is one chain of fused multiply-adds,
 *
 *     acc = beta C_ij   (0 when beta = 0: C is not read)
 *     acc = fma(alpha A_ik, B_kj, acc)   for k = 0, 1, ..., K-1, in that order
 *     C_ij = acc
 *
 * and nothing else touches it. Vectors run along j (eight or sixteen different elements of C
 * side by side), never along k, so the vector width does not enter a sum; blocks of k are
 * taken in ascending order, with acc stored in C between them, so the blocking does not
 * either; threads split rows of C (parallel.c), which are independent. fmaf rounds once, as
 * IEEE defines it, on every CPU; this file is compiled without contraction (the Makefile's
 * -ffp-contract=off), so no other multiply-add is fused differently on different -march.
 *
 * Speed comes from the usual GEMM structure (Goto's): B is copied into panels of NR columns
 * and A into tiles of MR rows, both contiguous in the order the kernel reads them and sized to
 * stay in cache, and the kernel keeps an MR x NR block of C in registers for a whole block of
 * k. The copies change no value (alpha A_ik is rounded once, in the copy). */
#include "autograd/gemm_portable.h"
#include "autograd/tensor.h"

#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A 6 x 16 block of C is 12 AVX2 registers (6 AVX-512 ones); with one broadcast of A and two
 * vectors of B the kernel fits in the 16 registers AVX2 has. */
enum { MR = 6, NR = 16 };
/* KC values of k per block: a tile of A (MR x KC) stays in L1, a panel of B (KC x NR) in L1
 * too, and the copied block of B (KC x NC) in L2. */
enum { KC = 256, MC = 120, NC = 512 };

static int imin(int a, int b) { return a < b ? a : b; }

/* c[r][j] = fma(a[k][r], b[k][j], c[r][j]) for k = 0..kc-1, where c[r][j] is c[r ldc + j]:
 * a is a tile of MR rows stored k-major (MR values per k), b a panel of NR columns (NR values
 * per k). The definition; CPUs without AVX2 and FMA run it (slowly: the compiler does not keep
 * the block of C in registers). */
static void kernel_plain(int kc, const float *restrict a, const float *restrict b,
                         float *restrict c, long ldc)
{
    for (int k = 0; k < kc; k++)
        for (int r = 0; r < MR; r++)
            for (int j = 0; j < NR; j++)
                c[r * ldc + j] = fmaf(a[(long)k * MR + r], b[(long)k * NR + j], c[r * ldc + j]);
}

/* The same fmas, written with AVX2 intrinsics so that the 6 x 16 block stays in twelve
 * registers: each _mm256_fmadd_ps is eight of kernel_plain's fmaf, on eight elements of C, so
 * the bits are kernel_plain's (tests/test_gemm_portable.c compares the two). CPUs with AVX-512
 * run this one too. */
__attribute__((target("avx2,fma"))) static void kernel_avx2(int kc, const float *restrict a,
                                                            const float *restrict b,
                                                            float *restrict c, long ldc)
{
    __m256 acc[MR][2];
    for (int r = 0; r < MR; r++) {
        acc[r][0] = _mm256_loadu_ps(c + r * ldc);
        acc[r][1] = _mm256_loadu_ps(c + r * ldc + 8);
    }
    for (int k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(b + (long)k * NR), b1 = _mm256_loadu_ps(b + (long)k * NR + 8);
        for (int r = 0; r < MR; r++) {
            __m256 ar = _mm256_broadcast_ss(a + (long)k * MR + r);
            acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);
        }
    }
    for (int r = 0; r < MR; r++) {
        _mm256_storeu_ps(c + r * ldc, acc[r][0]);
        _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
    }
}

static bool use_plain = false;

void gemm_portable_force_plain(bool plain) { use_plain = plain; }

static void kernel(int kc, const float *a, const float *b, float *c, long ldc)
{
    if (!use_plain && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        kernel_avx2(kc, a, b, c, ldc);
    else
        kernel_plain(kc, a, b, c, ldc);
}

/* Rows i0..i0+mc-1, columns k0..k0+kc-1 of alpha op(A), as tiles of MR rows, each k-major:
 * tile t holds a[k][r] = alpha op(A)[i0 + t + r][k0 + k]. Rows past the end repeat the last
 * real row (any finite values do: their results are never stored). */
static void pack_a(float *dst, const float *A, bool trans, long lda, int i0, int mc, int k0,
                   int kc, float alpha)
{
    for (int t = 0; t < mc; t += MR) {
        const float *row[MR];   /* where op(A)[i][k0] is; the next k is one step further */
        long step = trans ? lda : 1, across = trans ? 1 : lda;
        for (int r = 0; r < MR; r++)
            row[r] = A + (long)(i0 + (t + r < mc ? t + r : mc - 1)) * across + k0 * step;
        for (int k = 0; k < kc; k++, dst += MR)
            for (int r = 0; r < MR; r++)
                dst[r] = row[r][(long)k * step];
        if (alpha != 1.0f)
            for (int i = -kc * MR; i < 0; i++)
                dst[i] *= alpha;
    }
}

/* Rows k0..k0+kc-1, columns j0..j0+nc-1 of op(B), as panels of NR columns, each k-major:
 * panel p holds b[k][j] = op(B)[k0 + k][j0 + p + j]. Columns past the end are 0. */
static void pack_b(float *dst, const float *B, bool trans, long ldb, int k0, int kc, int j0,
                   int nc)
{
    for (int p = 0; p < nc; p += NR) {
        int w = nc - p < NR ? nc - p : NR;
        for (int k = 0; k < kc; k++, dst += NR) {
            if (trans) {
                const float *col = B + (long)(j0 + p) * ldb + k0 + k;
                for (int j = 0; j < w; j++)
                    dst[j] = col[(long)j * ldb];
            } else {
                memcpy(dst, B + (long)(k0 + k) * ldb + j0 + p, (size_t)w * sizeof *dst);
            }
            for (int j = w; j < NR; j++)
                dst[j] = 0.0f;
        }
    }
}

/* The block of C at (i, j), mr x nr of it real, after one block of k: the first block starts
 * from beta C, the later ones from what the earlier left in C. A whole block is worked on where
 * it lies in C; a partial one (the last rows or columns) in a copy padded to MR x NR. */
static void block(int kc, const float *a, const float *b, bool first, float beta, float *C,
                  long ldc, int mr, int nr)
{
    if (first && beta != 1.0f)
        for (int r = 0; r < mr; r++)
            for (int j = 0; j < nr; j++)
                C[r * ldc + j] = beta == 0.0f ? 0.0f : beta * C[r * ldc + j];
    if (mr == MR && nr == NR) {
        kernel(kc, a, b, C, ldc);
        return;
    }
    float acc[MR][NR] = { { 0 } };
    for (int r = 0; r < mr; r++)
        memcpy(acc[r], C + r * ldc, (size_t)nr * sizeof(float));
    kernel(kc, a, b, &acc[0][0], NR);
    for (int r = 0; r < mr; r++)
        memcpy(C + r * ldc, acc[r], (size_t)nr * sizeof(float));
}

/* The copies of A and B live in buffers each thread keeps from call to call (and never frees:
 * the process's end does). A fresh malloc of a few hundred KiB per call is a fresh mmap, whose
 * pages fault in on first touch: that alone made the small products of a tiny model twice as
 * slow. They are scratch of the product, like OpenBLAS's own buffers, not tensor storage, so
 * they are not in the memory accounting: both kernel modes report the same bytes. */
typedef struct {
    float *data;
    size_t floats;
} Buffer;

static _Thread_local Buffer a_buffer, b_buffer;

static float *buffer_at_least(Buffer *b, size_t floats)
{
    if (b->floats < floats) {
        free(b->data);
        b->data = malloc(floats * sizeof *b->data);
        if (!b->data) {
            fprintf(stderr, "%s: out of memory for the portable product's %zu-byte "
                    "buffer\n", tensor_program(), floats * sizeof *b->data);
            exit(1);
        }
        b->floats = floats;
    }
    return b->data;
}

void gemm_portable_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc)
{
    int kc_max = imin(KC, K), mc_max = imin(MC, M), nc_max = imin(NC, N);
    /* Room for whole tiles and panels: the last ones are padded. */
    float *a_pack = buffer_at_least(&a_buffer, (size_t)(mc_max + MR - 1) / MR * MR * kc_max);
    float *b_pack = buffer_at_least(&b_buffer, (size_t)(nc_max + NR - 1) / NR * NR * kc_max);
    for (int j0 = 0; j0 < N; j0 += NC) {
        int nc = imin(NC, N - j0);
        for (int k0 = 0; k0 < K; k0 += KC) {
            int kc = imin(KC, K - k0);
            pack_b(b_pack, B, trans_b, ldb, k0, kc, j0, nc);
            for (int i0 = 0; i0 < M; i0 += MC) {
                int mc = imin(MC, M - i0);
                pack_a(a_pack, A, trans_a, lda, i0, mc, k0, kc, alpha);
                for (int p = 0; p < nc; p += NR)
                    for (int t = 0; t < mc; t += MR)
                        block(kc, a_pack + (long)t * kc, b_pack + (long)p * kc, k0 == 0, beta,
                              C + (long)(i0 + t) * ldc + j0 + p, ldc, imin(MR, mc - t),
                              imin(NR, nc - p));
            }
        }
    }
}

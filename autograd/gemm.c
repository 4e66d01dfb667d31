/* The GEMM libraries behind every product (autograd/gemm.h). */
#include "autograd/gemm.h"

#include "autograd/gemm_portable.h"
#include "autograd/kernels.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- OpenBLAS: linked in every build ---- */

static void openblas_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                           const float *A, int lda, const float *B, int ldb, float beta,
                           float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* From the name of the kernel set OpenBLAS picked when it loaded. */
static int openblas_bits(void)
{
    static const char *const wide[] = { "skylakex", "cooperlake", "sapphirerapids", NULL };
    static const char *const avx2[] = { "haswell", "zen", "skylake", "broadwell", NULL };
    const char *core = openblas_get_corename();
    for (int i = 0; wide[i]; i++)
        if (strcasecmp(core, wide[i]) == 0)
            return 512;
    for (int i = 0; avx2[i]; i++)
        if (strcasecmp(core, avx2[i]) == 0)
            return 256;
    return 0;
}

/* ---- oneDNN: linked by GEMM=onednn and GEMM=auto ---- */

#ifdef TAPEGRAD_WITH_ONEDNN

#include <dnnl.h>
#include <omp.h>

/* oneDNN threads with OpenMP, the same pool as ours: inside one of our parallel loops it runs
 * on the calling thread by itself, but called from outside one it would spread a product over
 * all of omp_get_max_threads(). That would split the product differently from par_sgemm's
 * fixed row blocks, so outside a parallel region the call is held to one thread. */
static void onednn_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc)
{
    int threads = omp_in_parallel() ? 0 : omp_get_max_threads();
    if (threads > 1)
        omp_set_num_threads(1);
    dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A,
                                  lda, B, ldb, beta, C, ldc);
    if (threads > 1)
        omp_set_num_threads(threads);
    if (st != dnnl_success) {
        fprintf(stderr, "tapegrad: dnnl_sgemm(%d x %d x %d) failed with status %d\n", M, N, K,
                (int)st);
        abort();
    }
}

static int onednn_bits(void)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    /* oneDNN's ISA codes are bit sets: every AVX-512 level contains avx512_core's bits. */
    if ((isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core)
        return 512;
    return (isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2 ? 256 : 0;
}

static void onednn_describe(char *buf, size_t len)
{
    const dnnl_version_t *v = dnnl_version();
    const char *cap = getenv("DNNL_MAX_CPU_ISA");
    snprintf(buf, len, "oneDNN %d.%d.%d dnnl_sgemm, %d-bit kernels%s%s", v->major, v->minor,
             v->patch, onednn_bits(), cap ? ", DNNL_MAX_CPU_ISA=" : "", cap ? cap : "");
}

#else

/* An OpenBLAS-only build: gemm_library never picks oneDNN. */
static void onednn_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc)
{
    openblas_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static int onednn_bits(void) { return 0; }

#endif

/* ---- The choice ---- */

/* bench/bench_gemm times both libraries on every product of a training step (docs/performance.md,
 * "Which GEMM library"). With AVX-512 kernels oneDNN was the faster on every product of every
 * case, on 1 thread and on 2 (a Zen 4; on 1 thread also an AVX-512 Xeon), and the small case's
 * step 8% shorter.
 * With AVX2 kernels neither won throughout: oneDNN was faster on most small products and much
 * slower on a few wide ones (weight gradients of 128 x 512 and more, NN with N = 3072), and the
 * training step was no faster with either or with each product on its faster library. There
 * OpenBLAS, the long-standing default, stays. */
GemmLib gemm_library(void)
{
#if defined(TAPEGRAD_GEMM_AUTO)
    return onednn_bits() == 512 ? GEMM_ONEDNN : GEMM_OPENBLAS;
#elif defined(TAPEGRAD_WITH_ONEDNN)
    return GEMM_ONEDNN;
#else
    return GEMM_OPENBLAS;
#endif
}

void gemm_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (kernels_mode() == KERNELS_PORTABLE)
        gemm_portable_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else if (gemm_library() == GEMM_ONEDNN)
        onednn_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        openblas_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* oneDNN needs nothing: onednn_sgemm holds each call to one thread. */
void gemm_single_thread(void) { openblas_set_num_threads(1); }

const char *gemm_backend(void)
{
#if defined(TAPEGRAD_GEMM_AUTO)
    return "auto";
#elif defined(TAPEGRAD_WITH_ONEDNN)
    return "onednn";
#else
    return "openblas";
#endif
}

int gemm_vector_bits(void)
{
    if (kernels_mode() == KERNELS_PORTABLE)
        return 256; /* gemm_portable.c's kernel is AVX2's on every CPU */
    return gemm_library() == GEMM_ONEDNN ? onednn_bits() : openblas_bits();
}

const char *gemm_describe(char *buf, size_t len)
{
    if (kernels_mode() == KERNELS_PORTABLE) {
        snprintf(buf, len, "tapegrad's portable product (kernels portable: one fma chain "
                           "per element in k order, the same bits on every CPU)");
        return buf;
    }
    const char *rule = "";
#if defined(TAPEGRAD_GEMM_AUTO)
    rule = gemm_library() == GEMM_ONEDNN ? " (GEMM=auto: oneDNN has AVX-512 kernels here)"
                                         : " (GEMM=auto: oneDNN has no AVX-512 kernels here)";
#endif
#ifdef TAPEGRAD_WITH_ONEDNN
    if (gemm_library() == GEMM_ONEDNN) {
        char dnnl[128];
        onednn_describe(dnnl, sizeof dnnl);
        snprintf(buf, len, "%s%s", dnnl, rule);
        return buf;
    }
#endif
    snprintf(buf, len, "OpenBLAS cblas_sgemm, %s kernels%s", openblas_get_corename(), rule);
    return buf;
}

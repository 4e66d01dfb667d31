/* The GEMM library behind every product (autograd/gemm.h). */
#include "autograd/gemm.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef TAPEGRAD_GEMM_ONEDNN

#include <dnnl.h>
#include <omp.h>

/* oneDNN threads with OpenMP, the same pool as ours: inside one of our parallel loops it runs
 * on the calling thread by itself, but called from outside one it would spread a product over
 * all of omp_get_max_threads(). That would split the product differently from par_sgemm's
 * fixed row blocks, so outside a parallel region the call is held to one thread. */
void gemm_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                int lda, const float *B, int ldb, float beta, float *C, int ldc)
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

/* Nothing to do: gemm_sgemm holds each call to one thread. */
void gemm_single_thread(void) {}

const char *gemm_backend(void) { return "onednn"; }

int gemm_vector_bits(void)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    /* oneDNN's ISA codes are bit sets: every AVX-512 level contains avx512_core's bits. */
    if ((isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core)
        return 512;
    return (isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2 ? 256 : 0;
}

const char *gemm_describe(char *buf, size_t len)
{
    const dnnl_version_t *v = dnnl_version();
    const char *cap = getenv("DNNL_MAX_CPU_ISA");
    snprintf(buf, len, "oneDNN %d.%d.%d dnnl_sgemm, %d-bit kernels%s%s", v->major, v->minor,
             v->patch, gemm_vector_bits(), cap ? ", DNNL_MAX_CPU_ISA=" : "", cap ? cap : "");
    return buf;
}

#else

#include <cblas.h>
#include <string.h>
#include <strings.h>

void gemm_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_single_thread(void) { openblas_set_num_threads(1); }

const char *gemm_backend(void) { return "openblas"; }

/* From the name of the kernel set OpenBLAS picked when it loaded. */
int gemm_vector_bits(void)
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

const char *gemm_describe(char *buf, size_t len)
{
    snprintf(buf, len, "OpenBLAS cblas_sgemm, %s kernels", openblas_get_corename());
    return buf;
}

#endif

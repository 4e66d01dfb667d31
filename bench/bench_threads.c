/* Who owns the cores? One run, four ways to multiply the same matrices, median of many repeats:
 *
 *   blas-threads          OpenBLAS's own threads, nothing else running            (baseline)
 *   omp-loop+blas-threads an OpenMP loop, then OpenBLAS's own threads              (the trap)
 *   omp-loop+par_sgemm    an OpenMP loop, then our rows-per-thread split with
 *                         single-threaded OpenBLAS inside the same OpenMP threads  (our choice)
 *   one-thread            single-threaded OpenBLAS                                 (1 core)
 *
 * After an OpenMP loop, its idle threads keep spinning for a while (OMP_WAIT_POLICY, GOMP_SPINCOUNT)
 * and sit on the cores OpenBLAS's threads want. Run it again with OMP_WAIT_POLICY=PASSIVE in the
 * environment to see the trap disappear at the price of slower wake-ups. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "autograd/parallel.h"
#include "autograd/rng.h"
#include "bench/bench_util.h"

enum { REPEATS = 41 };

/* A cheap elementwise loop like the ones between matmuls in a training step. */
static void omp_loop(float *v, int n)
{
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        v[i] = v[i] * 0.999f + 0.001f;
}

typedef enum { BLAS_THREADS, LOOP_BLAS_THREADS, LOOP_PAR_SGEMM, ONE_THREAD } Mode;
static const char *const mode_names[] = { "blas-threads", "omp-loop+blas-threads",
                                          "omp-loop+par_sgemm", "one-thread" };

static double median_ms(Mode mode, int M, int N, int K, const float *A, const float *B, float *C,
                        float *v, int nv)
{
    double t[REPEATS];
    openblas_set_num_threads(mode == BLAS_THREADS || mode == LOOP_BLAS_THREADS ? 2 : 1);
    for (int r = 0; r < REPEATS; r++) {
        if (mode != BLAS_THREADS && mode != ONE_THREAD)
            omp_loop(v, nv);
        double t0 = bench_now_ms();
        if (mode == LOOP_PAR_SGEMM)
            par_sgemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, B, N,
                        0.0f, C, N);
        t[r] = bench_now_ms() - t0;
    }
    openblas_set_num_threads(1);
    qsort(t, REPEATS, sizeof t[0], bench_cmp_double);
    return t[REPEATS / 2];
}

int main(void)
{
    par_set_threads(2);
    const char *policy = getenv("OMP_WAIT_POLICY");
    printf("threads 2, OMP_WAIT_POLICY=%s, median of %d\n", policy ? policy : "(unset)", REPEATS);
    printf("M\tN\tK\tmode\tms\tGFLOP/s\tvs_baseline\n");
    const int shapes[][3] = { { 1024, 384, 384 }, { 1024, 1536, 384 }, { 1024, 128, 128 } };
    Rng rng = rng_new(1, 1);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], nv = 1 << 16;
        float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
        float *C = malloc(sizeof(float) * M * N), *v = malloc(sizeof(float) * nv);
        for (int i = 0; i < M * K; i++)
            A[i] = rng_uniform(&rng);
        for (int i = 0; i < K * N; i++)
            B[i] = rng_uniform(&rng);
        for (int i = 0; i < nv; i++)
            v[i] = 1.0f;
        double base = 0.0;
        for (int m = 0; m < 4; m++) {
            double ms = median_ms((Mode)m, M, N, K, A, B, C, v, nv);
            if (m == 0)
                base = ms;
            printf("%d\t%d\t%d\t%s\t%.3f\t%.1f\t%.2fx\n", M, N, K, mode_names[m], ms,
                   2.0 * M * N * K / (ms * 1e6), ms / base);
        }
        free(A); free(B); free(C); free(v);
    }
    return 0;
}

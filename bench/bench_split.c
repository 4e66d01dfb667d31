/* When is a second thread worth waking? The measurement behind PAR_MIN_MADDS and
 * PAR_MIN_ELEMENTS (autograd/parallel.h; docs/performance.md, "How many threads a region
 * takes").
 *
 * For each size, the same work is done on the calling thread alone and split in two halves
 * over two OpenMP threads, alternating the two ways repeat by repeat so that a burst of load on
 * the shared machine hits both, and the median time of each is printed with split / serial.
 * The work is:
 *
 *   product  C = A B with A [M, K], B [K, N] in the library gemm_sgemm picks (TAPEGRAD_KERNELS
 *            chooses fast or portable), rows of C split as par_sgemm splits them; the shapes of
 *            a transformer's linear layers at width W: (tokens x W) (W x 4W) and the weight
 *            gradient's (W x tokens) (tokens x 4W)
 *   add      y = x + z over n floats, a loop of one operation per element
 *   exp      y = exp(x) over n floats, the heaviest per element of the step's loops (softmax)
 *
 * It runs under OMP_WAIT_POLICY=PASSIVE, the programs' default (examples/common/wait_policy.h),
 * starting itself again with it when the environment sets no policy: then every parallel region
 * starts with a futex wake-up of the sleeping thread, the cost a small region does not earn
 * back. A policy in the environment is kept (and printed). Usage: bench_split [REPEATS] */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "autograd/gemm.h"
#include "autograd/parallel.h"
#include "autograd/rng.h"
#include "bench/bench_util.h"

typedef struct {
    const char *what;
    int M, N, K;        /* a product; or n = M elements for add and exp */
} Work;

static float *A, *B, *Cm, *X, *Z, *Y;

static void run(const Work *w, int parts)
{
    if (w->what[0] == 'p') {
        #pragma omp parallel for schedule(static) num_threads(parts)
        for (int p = 0; p < parts; p++) {
            int m0 = (int)((long)w->M * p / parts), m1 = (int)((long)w->M * (p + 1) / parts);
            gemm_sgemm(false, false, m1 - m0, w->N, w->K, 1.0f, A + (long)m0 * w->K, w->K, B,
                       w->N, 0.0f, Cm + (long)m0 * w->N, w->N);
        }
    } else if (w->what[0] == 'a') {
        #pragma omp parallel for simd schedule(static) num_threads(parts)
        for (int i = 0; i < w->M; i++)
            Y[i] = X[i] + Z[i];
    } else {
        #pragma omp parallel for simd schedule(static) num_threads(parts)
        for (int i = 0; i < w->M; i++)
            Y[i] = expf(X[i]);
    }
}

static void fill(float *v, size_t n, Rng *r)
{
    for (size_t i = 0; i < n; i++)
        v[i] = rng_normal(r) * 0.5f;
}

int main(int argc, char **argv)
{
    /* libgomp reads the policy before main: set it, then start again. */
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT")) {
        setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
        execv("/proc/self/exe", argv);
        perror("bench_split: execv /proc/self/exe");
        return 1;
    }
    int repeats = argc > 1 ? atoi(argv[1]) : 31;
    if (repeats < 1) {
        fprintf(stderr, "bench_split: REPEATS must be a positive count, not '%s'\n", argv[1]);
        return 2;
    }
    par_set_threads(2);
    const char *policy = getenv("OMP_WAIT_POLICY");
    printf("# %s, OMP_WAIT_POLICY=%s, median of %d alternating repeats\n",
           getenv("TAPEGRAD_KERNELS") ? getenv("TAPEGRAD_KERNELS") : "fast",
           policy ? policy : "(unset)", repeats);
    size_t big = (size_t)4096 * 3072;
    A = malloc(big * sizeof *A), B = malloc(big * sizeof *B), Cm = malloc(big * sizeof *Cm);
    X = malloc(big * sizeof *X), Z = malloc(big * sizeof *Z), Y = malloc(big * sizeof *Y);
    if (!A || !B || !Cm || !X || !Z || !Y) {
        fprintf(stderr, "bench_split: out of memory\n");
        return 1;
    }
    Rng r = rng_new(1, RNG_STREAM_INIT);
    fill(A, big, &r), fill(B, big, &r), fill(X, big, &r), fill(Z, big, &r);

    Work works[64];
    int n = 0;
    static const int widths[] = { 16, 32, 64, 128, 256 };
    for (int t = 256; t <= 4096; t *= 16)
        for (int i = 0; i < 5; i++) {
            works[n++] = (Work){ "product", t, 4 * widths[i], widths[i] };
            works[n++] = (Work){ "product", widths[i], 4 * widths[i], t };
        }
    for (int e = 1 << 12; e <= 1 << 20; e <<= 2) {
        works[n++] = (Work){ "add", e, 1, 1 };
        works[n++] = (Work){ "exp", e, 1, 1 };
    }
    printf("work\tM\tN\tK\tmadds or elements\tserial us\tsplit us\tsplit/serial\n");
    for (int i = 0; i < n; i++) {
        double t1[1024], t2[1024];
        int reps = repeats < 1024 ? repeats : 1024;
        run(&works[i], 1), run(&works[i], 2);       /* warm the caches and the buffers */
        for (int k = 0; k < reps; k++) {
            double t0 = bench_now_ms();
            run(&works[i], 1);
            t1[k] = bench_now_ms() - t0;
            t0 = bench_now_ms();
            run(&works[i], 2);
            t2[k] = bench_now_ms() - t0;
        }
        double s = bench_median(t1, reps), p = bench_median(t2, reps);
        const Work *w = &works[i];
        double amount = w->what[0] == 'p' ? (double)w->M * w->N * w->K : (double)w->M;
        printf("%s\t%d\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.2f\n", w->what, w->M, w->N, w->K, amount,
               1e3 * s, 1e3 * p, p / s);
    }
    return 0;
}

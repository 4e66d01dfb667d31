/* Which GEMM library should run tapegrad's products? (issue 16: "a dependency choice, not a
 * given"). sgemm GFLOP/s per library on exactly the products a training step of bench_gpt's
 * three cases runs, as autograd/ops_matmul.c calls par_sgemm (row-major):
 *
 *   linear layer, W [in, out]:  forward Y = X W        NN  M = rows  N = out  K = in
 *                               input grad dX = dY W^T NT  M = rows  N = in   K = out
 *                               weight grad dW = X^T dY TN M = in    N = out  K = rows
 *   tied head, W [V, C]:        forward NT, input grad NN, weight grad TN (the same, transposed)
 *
 * for the layers qkv (C -> 3C, fused), attn.proj (C -> C), mlp.fc (C -> 4C), mlp.proj
 * (4C -> C) and the head (C -> V), rows = B T. "1t" is one call on one thread; "2t" is what
 * par_sgemm does with 2 threads: the rows of C split in two, each half a single-threaded call
 * on its own OpenMP thread (autograd/parallel.h: one pool of threads, ours). Every figure is
 * the median of SAMPLES calls, each timed on its own, in rounds where every shape, thread
 * count and library takes its turn (CaseRun says why). The "step" rows weigh each
 * shape by how often a step runs it (L times per block layer, once for the head): the GEMM
 * rate of the step's linear layers. The attention's per-head products are not included.
 *
 * Libraries that export the same cblas symbols cannot share one binary, so each is opened with
 * dlopen (RTLD_LOCAL, and RTLD_DEEPBIND so that a library's internal calls, such as BLIS's
 * cblas_sgemm calling its own sgemm_, do not land in the OpenBLAS this program is linked with):
 *   OpenBLAS   libopenblas.so.0   cblas_sgemm  (kernels chosen by OPENBLAS_CORETYPE at load)
 *   BLIS       libblis.so.4       cblas_sgemm  (Debian's 0.9.0: no AVX-512 kernels at all)
 *   oneDNN     libdnnl.so.2       dnnl_sgemm   (row-major; DNNL_MAX_CPU_ISA caps its kernels)
 *   libxsmm    libxsmm.so         libxsmm_sgemm, when a shared library exists
 * and, linked in, tapegrad's own portable product (autograd/gemm_portable.h: what
 * TAPEGRAD_KERNELS=portable runs; it is the same code, and the same bits, under either --isa).
 * A library that is not installed is skipped with a line saying so.
 *
 * The instruction set is fixed when a library loads, so the program runs itself twice, in
 * children: `--isa native` (OpenBLAS's own choice, or SkylakeX/Haswell where it would fall back
 * to SSE3: examples/common/blas_kernels.h) and `--isa avx2`, which holds every library to AVX2
 * as on an AVX2-only CPU: OPENBLAS_CORETYPE=Haswell, DNNL_MAX_CPU_ISA=AVX2,
 * LIBXSMM_TARGET=hsw (BLIS has nothing to hold). Each child measures the FMA peak of its ISA
 * (analysis/peak_fma.h) and prints GFLOP/s beside it.
 *
 * Usage: build/bench/bench_gemm [--isa native|avx2] [small|large|gpt2]
 * Output: TSV, one row per shape and pass; lines starting with '#' are notes. */
#define _GNU_SOURCE             /* RTLD_DEEPBIND */
#include <dlfcn.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analysis/peak_fma.h"
#include "autograd/gemm_portable.h"
#include "bench/bench_util.h"
#include "examples/common/blas_kernels.h"

enum { THREADS = 2, SAMPLES = 31, PEAK_RUNS = 20, MAX_LIBS = 5, MAX_SHAPES = 16 };
/* par_sgemm's rule (autograd/parallel.c): smaller products run on one thread. */
static const double SPLIT_MIN_FLOPS = 1 << 18;

/* ---- the shapes ----------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int         rows, C, L, V;      /* rows = B T */
} GemmCase;

/* bench_gpt's cases (bench/bench_gpt.c): small B=16 T=64, large B=8 T=128, gpt2 B=4 T=64. */
static const GemmCase CASES[] = {
    { "small", 16 * 64, 128, 4, 65 },
    { "large", 8 * 128, 384, 6, 65 },
    { "gpt2", 4 * 64, 768, 12, 65 },
};
enum { N_CASES = sizeof CASES / sizeof CASES[0] };

typedef struct {
    char layer[16];
    const char *pass;               /* fwd, dX, dW */
    bool ta, tb;
    int  M, N, K, count;            /* count: how many times one step runs it */
} Shape;

static int add_passes(Shape *s, int n, const char *layer, int rows, int in, int out, int count,
                      bool trans_w)
{
    /* Weight [in, out] (or [out, in] when trans_w), as ops_matmul.c's product() calls. */
    Shape fwd = { .pass = "fwd", .ta = false, .tb = trans_w, .M = rows, .N = out, .K = in };
    Shape dx = { .pass = "dX", .ta = false, .tb = !trans_w, .M = rows, .N = in, .K = out };
    Shape dw = trans_w ? (Shape){ .pass = "dW", .ta = true, .tb = false, .M = out, .N = in, .K = rows }
                       : (Shape){ .pass = "dW", .ta = true, .tb = false, .M = in, .N = out, .K = rows };
    Shape three[3] = { fwd, dx, dw };
    for (int i = 0; i < 3; i++) {
        three[i].count = count;
        snprintf(three[i].layer, sizeof three[i].layer, "%s", layer);
        s[n++] = three[i];
    }
    return n;
}

static int case_shapes(const GemmCase *c, Shape *s)
{
    int n = 0, C = c->C, L = c->L, R = c->rows;
    n = add_passes(s, n, "qkv", R, C, 3 * C, L, false);
    n = add_passes(s, n, "attn.proj", R, C, C, L, false);
    n = add_passes(s, n, "mlp.fc", R, C, 4 * C, L, false);
    n = add_passes(s, n, "mlp.proj", R, 4 * C, C, L, false);
    n = add_passes(s, n, "head", R, C, c->V, 1, true);
    return n;
}

static const char *layout(const Shape *s)
{
    return s->ta ? (s->tb ? "TT" : "TN") : (s->tb ? "NT" : "NN");
}

/* ---- the libraries -------------------------------------------------------------------------- */

/* The CBLAS enum values every implementation shares. */
enum { CB_ROW_MAJOR = 101, CB_NO_TRANS = 111, CB_TRANS = 112 };
typedef void (*CblasSgemm)(int, int, int, int, int, int, float, const float *, int,
                           const float *, int, float, float *, int);
typedef int (*DnnlSgemm)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t,
                         const float *, int64_t, float, float *, int64_t);
/* libxsmm's BLAS-like entry: Fortran conventions (column-major, arguments by pointer). */
typedef void (*XsmmSgemm)(const char *, const char *, const int *, const int *, const int *,
                          const float *, const float *, const int *, const float *, const int *,
                          const float *, float *, const int *);

typedef struct {
    const char *name;
    void       *handle;
    CblasSgemm  cblas;
    DnnlSgemm   dnnl;
    XsmmSgemm   xsmm;
    bool        portable;       /* gemm_portable_sgemm, linked in */
    char        about[160];
} Lib;

/* One row-major product C = op(A) op(B) (beta 0) by library l. */
static void lib_sgemm(const Lib *l, bool ta, bool tb, int M, int N, int K, const float *A,
                      int lda, const float *B, int ldb, float *C, int ldc)
{
    if (l->cblas) {
        l->cblas(CB_ROW_MAJOR, ta ? CB_TRANS : CB_NO_TRANS, tb ? CB_TRANS : CB_NO_TRANS, M, N,
                 K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
    } else if (l->dnnl) {
        l->dnnl(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
    } else if (l->portable) {
        gemm_portable_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
    } else {
        /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T. */
        float one = 1.0f, zero = 0.0f;
        l->xsmm(tb ? "T" : "N", ta ? "T" : "N", &N, &M, &K, &one, B, &ldb, A, &lda, &zero, C,
                &ldc);
    }
}

static void *open_lib(const char *file, const char *name)
{
    void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h)
        printf("# %s: skipped, not installed (%s)\n", name, dlerror());
    return h;
}

static bool load_openblas(Lib *l)
{
    if (!(l->handle = open_lib("libopenblas.so.0", "OpenBLAS")))
        return false;
    l->cblas = (CblasSgemm)dlsym(l->handle, "cblas_sgemm");
    void (*threads)(int) = (void (*)(int))dlsym(l->handle, "openblas_set_num_threads");
    char *(*core)(void) = (char *(*)(void))dlsym(l->handle, "openblas_get_corename");
    char *(*config)(void) = (char *(*)(void))dlsym(l->handle, "openblas_get_config");
    if (threads)
        threads(1);
    snprintf(l->about, sizeof l->about, "%s, %s kernels", config ? config() : "?",
             core ? core() : "?");
    return l->cblas != NULL;
}

static bool load_blis(Lib *l)
{
    if (!(l->handle = open_lib("libblis.so.4", "BLIS")))
        return false;
    l->cblas = (CblasSgemm)dlsym(l->handle, "cblas_sgemm");
    void (*threads)(int) = (void (*)(int))dlsym(l->handle, "bli_thread_set_num_threads");
    const char *(*version)(void) = (const char *(*)(void))dlsym(l->handle,
                                                                "bli_info_get_version_str");
    int (*arch)(void) = (int (*)(void))dlsym(l->handle, "bli_arch_query_id");
    const char *(*arch_name)(int) = (const char *(*)(int))dlsym(l->handle, "bli_arch_string");
    if (threads)
        threads(1);
    snprintf(l->about, sizeof l->about, "BLIS %s, %s kernels", version ? version() : "?",
             arch && arch_name ? arch_name(arch()) : "?");
    return l->cblas != NULL;
}

/* oneDNN's ISA codes (dnnl_types.h, dnnl_cpu_isa_t) for the ones an x86 CPU of today reports. */
static const char *dnnl_isa_name(int isa)
{
    switch (isa) {
    case 0x7: return "avx2";
    case 0x407: return "avx2_vnni";
    case 0x27: return "avx512_core";
    case 0x67: return "avx512_core_vnni";
    case 0xe7: return "avx512_core_bf16";
    case 0x3e7: return "avx512_core_amx";
    default: return "other";
    }
}

static bool load_dnnl(Lib *l)
{
    if (!(l->handle = open_lib("libdnnl.so.2", "oneDNN")))
        return false;
    l->dnnl = (DnnlSgemm)dlsym(l->handle, "dnnl_sgemm");
    typedef struct { int major, minor, patch; const char *hash; unsigned cpu_runtime, gpu_runtime; }
        DnnlVersion;
    const DnnlVersion *(*version)(void) = (const DnnlVersion *(*)(void))dlsym(l->handle,
                                                                              "dnnl_version");
    int (*isa)(void) = (int (*)(void))dlsym(l->handle, "dnnl_get_effective_cpu_isa");
    const DnnlVersion *v = version ? version() : NULL;
    snprintf(l->about, sizeof l->about, "oneDNN %d.%d.%d, effective ISA %s", v ? v->major : 0,
             v ? v->minor : 0, v ? v->patch : 0, isa ? dnnl_isa_name(isa()) : "?");
    return l->dnnl != NULL;
}

static bool load_xsmm(Lib *l)
{
    /* Debian 12's libxsmm-dev ships static archives only (/usr/lib/libxsmm.a): nothing to
     * dlopen unless a shared build is on the library path. */
    if (!(l->handle = open_lib("libxsmm.so", "libxsmm")))
        return false;
    l->xsmm = (XsmmSgemm)dlsym(l->handle, "libxsmm_sgemm");
    snprintf(l->about, sizeof l->about, "libxsmm, LIBXSMM_TARGET=%s",
             getenv("LIBXSMM_TARGET") ? getenv("LIBXSMM_TARGET") : "(its own choice)");
    return l->xsmm != NULL;
}

static bool load_portable(Lib *l)
{
    l->portable = true;
    snprintf(l->about, sizeof l->about, "tapegrad's portable product, 6 x 16 AVX2 kernel");
    return true;
}

static int load_libs(Lib *libs)
{
    static const struct { const char *name; bool (*load)(Lib *); } all[] = {
        { "openblas", load_openblas }, { "blis", load_blis }, { "onednn", load_dnnl },
        { "libxsmm", load_xsmm }, { "portable", load_portable },
    };
    int n = 0;
    for (int i = 0; i < (int)(sizeof all / sizeof all[0]); i++) {
        Lib l = { .name = all[i].name };
        if (all[i].load(&l)) {
            printf("# %-8s %s\n", l.name, l.about);
            libs[n++] = l;
        } else if (l.handle) {
            printf("# %s: skipped, its sgemm entry is missing\n", all[i].name);
        }
    }
    return n;
}

/* ---- timing --------------------------------------------------------------------------------- */

typedef struct {
    float *A, *B, *C;
} Operands;

/* One product as par_sgemm runs it on `threads` threads: rows of C split evenly. */
static void run_split(const Lib *l, const Shape *s, const Operands *o, int threads)
{
    int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N, ldc = s->N;
    int parts = threads;
    if ((double)s->M * s->N * s->K < SPLIT_MIN_FLOPS || s->M < 2 * parts)
        parts = 1;
    if (parts == 1) {
        lib_sgemm(l, s->ta, s->tb, s->M, s->N, s->K, o->A, lda, o->B, ldb, o->C, ldc);
        return;
    }
    #pragma omp parallel for schedule(static) num_threads(parts)
    for (int p = 0; p < parts; p++) {
        int m0 = (int)((long)s->M * p / parts), m1 = (int)((long)s->M * (p + 1) / parts);
        const float *a = s->ta ? o->A + m0 : o->A + (long)m0 * lda;
        lib_sgemm(l, s->ta, s->tb, m1 - m0, s->N, s->K, a, lda, o->B, ldb,
                  o->C + (long)m0 * ldc, ldc);
    }
}

/* Milliseconds of one call. */
static double time_call(const Lib *l, const Shape *s, const Operands *o, int threads)
{
    double t0 = bench_now_ms();
    run_split(l, s, o, threads);
    return bench_now_ms() - t0;
}

/* Largest |C - reference| over largest |reference|: a library that computes something else
 * must not be timed as if it were fast. */
static double rel_error(const float *c, const float *ref, long n)
{
    double err = 0.0, scale = 0.0;
    for (long i = 0; i < n; i++) {
        err = fmax(err, fabs((double)c[i] - ref[i]));
        scale = fmax(scale, fabs((double)ref[i]));
    }
    return scale > 0.0 ? err / scale : err;
}

static float *random_floats(long n, unsigned *seed)
{
    float *v = aligned_alloc(64, ((size_t)n * sizeof *v + 63) / 64 * 64);
    if (!v) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        exit(1);
    }
    for (long i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        v[i] = (float)((*seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    return v;
}

/* ---- one case ------------------------------------------------------------------------------- */

/* Every call of a case, timed one by one: for each thread count, SAMPLES rounds, each round
 * one call of every shape and library in turn. One call at a time and in rounds, not a batch
 * of calls per library, because on a shared machine another process takes the second core for
 * a second or so now and then: a batch, or all of one library's calls, would fall into such a
 * stretch together; spread over the rounds, a stretch hits every library alike and the median
 * passes over it. The thread counts are not mixed within a round: a one-thread call lets our
 * second thread fall asleep, and waking it on a core another process holds cost up to a
 * scheduler time slice per call (measured here: 2-thread figures of 3 to 20 GFLOP/s for every
 * library), which is the machine, not the library. */
typedef struct {
    int      n_shapes, n_libs;
    Shape    shapes[MAX_SHAPES];
    Operands ops[MAX_SHAPES];
    double   ms[MAX_SHAPES][MAX_LIBS][THREADS][SAMPLES];
} CaseRun;

static void case_prepare(CaseRun *r, const GemmCase *c, int n_libs)
{
    r->n_shapes = case_shapes(c, r->shapes);
    r->n_libs = n_libs;
    unsigned seed = 12345u;
    for (int i = 0; i < r->n_shapes; i++) {
        const Shape *s = &r->shapes[i];
        r->ops[i].A = random_floats((long)s->M * s->K, &seed);
        r->ops[i].B = random_floats((long)s->K * s->N, &seed);
        r->ops[i].C = random_floats((long)s->M * s->N, &seed);
    }
}

static void case_time(CaseRun *r, const Lib *libs)
{
    for (int t = 0; t < THREADS; t++)
        for (int round = -2; round < SAMPLES; round++)  /* two rounds of warm-up */
            for (int i = 0; i < r->n_shapes; i++)
                for (int l = 0; l < r->n_libs; l++) {
                    double ms = time_call(&libs[l], &r->shapes[i], &r->ops[i], t + 1);
                    if (round >= 0)
                        r->ms[i][l][t][round] = ms;
                }
}

/* Each library's product against OpenBLAS's (libs[0]), one thread: the largest relative
 * difference over the case. */
static void case_check(CaseRun *r, const Lib *libs, double *err)
{
    for (int i = 0; i < r->n_shapes; i++) {
        const Shape *s = &r->shapes[i];
        long nc = (long)s->M * s->N;
        float *ref = malloc((size_t)nc * sizeof *ref);
        if (!ref)
            exit(1);
        for (int l = 0; l < r->n_libs; l++) {
            run_split(&libs[l], s, &r->ops[i], 1);
            if (l == 0)
                memcpy(ref, r->ops[i].C, (size_t)nc * sizeof *ref);
            else
                err[l] = fmax(err[l], rel_error(r->ops[i].C, ref, nc));
        }
        free(ref);
    }
}

static void case_free(CaseRun *r)
{
    for (int i = 0; i < r->n_shapes; i++) {
        free(r->ops[i].A);
        free(r->ops[i].B);
        free(r->ops[i].C);
    }
}

static void print_header(const Lib *libs, int n_libs)
{
    printf("isa\tcase\tlayer\tpass\tlayout\tM\tN\tK\tper_step");
    for (int t = 1; t <= THREADS; t++)
        for (int i = 0; i < n_libs; i++)
            printf("\t%s_%dt", libs[i].name, t);
    printf("\n");
}

/* One row per shape, GFLOP/s from the median call; then the step row, whose time is the sum
 * of the shapes' medians weighted by how often a step runs each. */
static void case_print(CaseRun *r, const char *isa, const GemmCase *c)
{
    double flops[MAX_LIBS][THREADS] = { { 0 } }, ms[MAX_LIBS][THREADS] = { { 0 } };
    for (int i = 0; i < r->n_shapes; i++) {
        const Shape *s = &r->shapes[i];
        double flop = 2.0 * s->M * s->N * s->K;
        printf("%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d", isa, c->name, s->layer, s->pass,
               layout(s), s->M, s->N, s->K, s->count);
        for (int t = 0; t < THREADS; t++)
            for (int l = 0; l < r->n_libs; l++) {
                double med = bench_median(r->ms[i][l][t], SAMPLES);
                printf("\t%.1f", flop / med * 1e-6);
                flops[l][t] += flop * s->count;
                ms[l][t] += med * s->count;
            }
        printf("\n");
    }
    printf("%s\t%s\tstep\tall\t-\t-\t-\t-\t-", isa, c->name);
    for (int t = 0; t < THREADS; t++)
        for (int l = 0; l < r->n_libs; l++)
            printf("\t%.1f", flops[l][t] / ms[l][t] * 1e-6);
    printf("\n");
}

static void run_case(const Lib *libs, int n_libs, const char *isa, const GemmCase *c)
{
    static CaseRun r;
    case_prepare(&r, c, n_libs);
    case_time(&r, libs);
    double err[MAX_LIBS] = { 0 };
    case_check(&r, libs, err);
    case_print(&r, isa, c);
    for (int l = 1; l < n_libs; l++)
        if (err[l] > 1e-5)
            printf("# %s %s: WRONG, %.1e off OpenBLAS\n", c->name, libs[l].name, err[l]);
    fflush(stdout);
    case_free(&r);
}

static void print_peaks(bool avx2)
{
    PeakIsa isa = avx2 ? PEAK_AVX2 : peak_best_isa();
    double one = peak_gflops(isa, 1, PEAK_RUNS), two = peak_gflops(isa, THREADS, PEAK_RUNS);
    printf("# FMA peak, %s: %.1f GFLOP/s on 1 thread, %.1f on %d (analysis/peak_fma.h, "
           "best of %d)\n", peak_isa_name[isa], one, two, THREADS, PEAK_RUNS);
}

static int run_isa(bool avx2, const char *only)
{
    if (!avx2)
        blas_kernels_check();     /* OpenBLAS's SSE3 fallback is no measure of the CPU */
    omp_set_num_threads(1);       /* oneDNN's calls outside our parallel loops: one thread */
    printf("# --isa %s  OPENBLAS_CORETYPE=%s DNNL_MAX_CPU_ISA=%s LIBXSMM_TARGET=%s\n",
           avx2 ? "avx2" : "native", getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "",
           getenv("DNNL_MAX_CPU_ISA") ? getenv("DNNL_MAX_CPU_ISA") : "",
           getenv("LIBXSMM_TARGET") ? getenv("LIBXSMM_TARGET") : "");
    Lib libs[MAX_LIBS];
    int n_libs = load_libs(libs);
    if (n_libs == 0 || strcmp(libs[0].name, "openblas") != 0) {
        printf("# OpenBLAS, the reference, did not load: nothing measured\n");
        return 1;
    }
    print_peaks(avx2);
    print_header(libs, n_libs);
    int ran = 0;
    for (int i = 0; i < N_CASES; i++) {
        if (only && strcmp(only, CASES[i].name) != 0)
            continue;
        run_case(libs, n_libs, avx2 ? "avx2" : "native", &CASES[i]);
        ran++;
    }
    return ran ? 0 : 1;
}

/* ---- the two children ----------------------------------------------------------------------- */

static int run_child(const char *isa, const char *only)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        if (strcmp(isa, "avx2") == 0) {
            setenv("OPENBLAS_CORETYPE", "Haswell", 1);
            setenv("DNNL_MAX_CPU_ISA", "AVX2", 1);
            setenv("LIBXSMM_TARGET", "hsw", 1);
        } else {
            unsetenv("DNNL_MAX_CPU_ISA");
            unsetenv("LIBXSMM_TARGET");
        }
        char *argv[] = { "bench_gemm", "--isa", (char *)isa, (char *)only, NULL };
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static int usage(FILE *f, int code)
{
    fprintf(f, "usage: bench_gemm [--isa native|avx2] [small|large|gpt2]\n"
               "sgemm GFLOP/s of OpenBLAS, BLIS, oneDNN and libxsmm on a training step's "
               "products,\n1 and 2 threads; without --isa, both ISAs, each in a child.\n");
    return code;
}

int main(int argc, char **argv)
{
    const char *isa = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc)
            isa = argv[++i];
        else if (strcmp(argv[i], "--help") == 0)
            return usage(stdout, 0);
        else if (argv[i][0] != '-' && !only)
            only = argv[i];
        else
            return usage(stderr, 2);
    }
    bool known = !only;
    for (int i = 0; i < N_CASES; i++)
        known = known || strcmp(only, CASES[i].name) == 0;
    if (!known || (isa && strcmp(isa, "native") != 0 && strcmp(isa, "avx2") != 0))
        return usage(stderr, 2);
    if (isa)
        return run_isa(strcmp(isa, "avx2") == 0, only);
    __builtin_cpu_init();
    int status = run_child("native", only);
    if (__builtin_cpu_supports("avx2"))
        status |= run_child("avx2", only);
    return status;
}

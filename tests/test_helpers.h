#ifndef TAPEGRAD_TEST_HELPERS_H
#define TAPEGRAD_TEST_HELPERS_H
/* Shared by the test files: random leaves and a gradcheck assertion that prints the worst
 * element when it fails. Header-only so each test binary stays one file plus this. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "autograd/gradcheck.h"
#include "autograd/parallel.h"
#include "autograd/rng.h"
#include "autograd/tensor.h"

/* n N(0, 1) floats in a malloc'd array (for the products' tests, which take plain arrays). */
static inline float *test_normal_floats(Rng *rng, long n)
{
    float *x = malloc((size_t)n * sizeof(float));
    assert_non_null(x);
    for (long i = 0; i < n; i++)
        x[i] = rng_normal(rng);
    return x;
}

/* A leaf tensor (category temp, requires_grad) filled with N(0, scale^2) values. */
static inline Tensor *test_leaf(Rng *rng, float scale, int ndim, const int *shape)
{
    Tensor *t = tensor_new(MEM_TEMP, ndim, shape);
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = scale * rng_normal(rng);
    t->requires_grad = true;
    return t;
}

/* Moves every element at least `margin` away from zero, for ops with a kink at 0 (relu), where
 * a finite difference straddling the kink measures neither side's slope. */
static inline void test_away_from_zero(Tensor *t, float margin)
{
    for (size_t i = 0; i < t->size; i++)
        if (fabsf(t->data[i]) < margin)
            t->data[i] = t->data[i] < 0.0f ? t->data[i] - margin : t->data[i] + margin;
}

/* True when fn(arg), run in a child process, dies of SIGABRT (tensor_fatal) rather than
 * returning. stderr of the child is silenced. The child runs on one thread: OpenMP's thread
 * pool does not survive fork(), and a child that waits for it would hang. */
static inline int test_aborts(void (*fn)(void *), void *arg)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stderr);
        par_set_threads(1);
        alarm(60);   /* a call that neither returns nor aborts fails instead of hanging */
        fn(arg);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

/* Runs the shell command cmd and keeps the first len - 1 bytes of what it prints in out (the
 * rest is read and dropped, so the command never blocks on a full pipe). Returns its exit
 * status, or -1 for a signal or a status of 128 and above (timeout -s KILL's 137). The command
 * line tests run programs with it, stderr joined to stdout by the command's own 2>&1. */
static inline int test_run_shell(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    while (fgetc(p) != EOF) {}
    int st = pclose(p);
    return WIFEXITED(st) && WEXITSTATUS(st) < 128 ? WEXITSTATUS(st) : -1;
}

/* max_i |a_i - b_i|, in double. */
static inline double test_max_abs_diff(const float *a, const float *b, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > worst || d != d)
            worst = d;
    }
    return worst;
}

static inline void test_gradcheck(const char *label, GradcheckFn fn, Tensor *const *in, int n,
                                  void *ctx, GradcheckOptions opt)
{
    GradcheckResult r = gradcheck(fn, in, n, ctx, opt);
    gradcheck_print(label, &r);
    assert_true(r.ok);
}

/* Adds N(0, scale^2) noise (random stream `seed`) to every element of the n tensors. GPT-2's
 * initialisation makes a tiny model almost linear (weights of 0.02) and its gradients tiny, so a
 * gradient check at init would pass with almost any backward; the tests perturb the parameters
 * first (0.3 makes attention non-uniform, LayerNorm scales differ from 1, biases nonzero, and
 * gradients of order 0.01-1). */
static inline void test_perturb(Tensor *const *p, int n, float scale, uint64_t seed)
{
    Rng rng = rng_new(seed, RNG_STREAM_DATA);
    for (int k = 0; k < n; k++)
        for (size_t i = 0; i < p[k]->size; i++)
            p[k]->data[i] += scale * rng_normal(&rng);
}

#endif

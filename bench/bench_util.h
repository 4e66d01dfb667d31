#ifndef TAPEGRAD_BENCH_UTIL_H
#define TAPEGRAD_BENCH_UTIL_H
/* What every benchmark needs: a monotonic clock and the median of repeated timings (the
 * median, because a shared machine only ever makes a run slower, and one slow run must not
 * move the result). Header-only: each benchmark is a program of its own. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Debian's own interpreter, which has python3-torch when it is installed (the first python3 on
 * PATH may be another one). */
#define BENCH_PYTHON "/usr/bin/python3"

static inline double bench_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v in place. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Whether PyTorch can be imported; if not, says that the comparison with it is skipped. */
static inline bool bench_torch_available(void)
{
    if (system(BENCH_PYTHON " -c 'import torch' >/dev/null 2>&1") == 0)
        return true;
    printf("torch: %s cannot import torch; the PyTorch comparison is skipped (install "
           "python3-torch to run it)\n", BENCH_PYTHON);
    return false;
}

#endif

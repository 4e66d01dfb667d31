#ifndef TAPEGRAD_BENCH_UTIL_H
#define TAPEGRAD_BENCH_UTIL_H
/* What every benchmark needs: a monotonic clock and the median of repeated timings (the
 * median, because a shared machine only ever makes a run slower, and one slow run must not
 * move the result). Header-only: each benchmark is a program of its own. */
#include <stdlib.h>
#include <time.h>

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

#endif

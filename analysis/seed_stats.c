/* Seed lists and statistics over seeds (seed_stats.h). */
#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdlib.h>

#include "analysis/seed_stats.h"

#define SEED_LIMIT (1L << 40)          /* the largest --seed the programs take */

/* One number of a list at *p, advancing *p past it; -1 if there is none or it is too large. */
static long parse_seed(const char **p)
{
    if (**p < '0' || **p > '9')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(*p, &end, 10);
    if (errno != 0 || v > SEED_LIMIT)
        return -1;
    *p = end;
    return v;
}

static int add_seed(long *seeds, int n, int max, long v)
{
    if (n == max)
        return -1;
    for (int i = 0; i < n; i++)
        if (seeds[i] == v)
            return -1;
    seeds[n] = v;
    return n + 1;
}

int seed_list_parse(const char *s, long *seeds, int max)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        long lo = parse_seed(&p), hi = lo;
        if (lo < 0)
            return -1;
        if (*p == '-') {
            p++;
            hi = parse_seed(&p);
            if (hi < lo)
                return -1;
        }
        for (long v = lo; v <= hi; v++)
            if ((n = add_seed(seeds, n, max, v)) < 0)
                return -1;
        if (*p == '\0')
            return n;
        if (*p++ != ',')
            return -1;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

SeedStats seed_stats(const double *x, int n)
{
    SeedStats st = { 0, NAN, NAN, NAN, NAN, NAN, NAN, NAN };
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v)
        return st;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i]) && x[i] > 0.0)
            v[st.n++] = x[i];
    if (st.n > 0) {
        qsort(v, (size_t)st.n, sizeof *v, cmp_double);
        st.min = v[0];
        st.max = v[st.n - 1];
        st.median = st.n % 2 ? v[st.n / 2] : 0.5 * (v[st.n / 2 - 1] + v[st.n / 2]);
        /* summed in sorted order, so the result does not depend on the order of the seeds */
        double sum = 0.0;
        for (int i = 0; i < st.n; i++)
            sum += log(v[i]);
        double mean = sum / st.n;
        st.geomean = exp(mean);
        if (st.n > 1) {
            double ss = 0.0;
            for (int i = 0; i < st.n; i++)
                ss += (log(v[i]) - mean) * (log(v[i]) - mean);
            st.log_sd = sqrt(ss / (st.n - 1));
            double half = seed_t975(st.n - 1) * st.log_sd / sqrt(st.n);
            st.ci_lo = exp(mean - half);
            st.ci_hi = exp(mean + half);
        }
    }
    free(v);
    return st;
}

SeedMeanSd seed_mean_sd(const double *x, int n)
{
    SeedMeanSd s = { 0, NAN, NAN };
    double sum = 0.0, sum2 = 0.0;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i])) {
            sum += x[i];
            s.n++;
        }
    if (s.n == 0)
        return s;
    s.mean = sum / s.n;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i]))
            sum2 += (x[i] - s.mean) * (x[i] - s.mean);
    s.sd = s.n > 1 ? sqrt(sum2 / (s.n - 1)) : 0.0;
    return s;
}

void seed_ratios(const double *x, const double *ref, int n, double *r)
{
    for (int i = 0; i < n; i++) {
        bool usable = isfinite(x[i]) && x[i] > 0.0 && isfinite(ref[i]) && ref[i] > 0.0;
        r[i] = usable ? x[i] / ref[i] : NAN;
    }
}

int seed_within(const double *r, int n, double tol)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += isfinite(r[i]) && fabs(r[i] - 1.0) <= tol;
    return k;
}

double seed_t975(int df)
{
    /* from a table of Student's t distribution, four decimals */
    static const double t[30] = {
        12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
        2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
        2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
    };
    return df >= 1 && df <= 30 ? t[df - 1] : NAN;
}

#include "analysis/grad_hist.h"

#include <math.h>

#include "autograd/tsv.h"

int grad_hist_exponent(float x)
{
    /* frexpf: x = m 2^e with 0.5 <= |m| < 1, exact for subnormals too, so 2^(e-1) <= |x|. */
    int e;
    frexpf(x, &e);
    return e - 1;
}

void grad_hist_add(GradHist *h, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (g[i] == 0.0f)
            h->zeros++;
        else if (!isfinite(g[i]))
            h->nonfinite++;
        else
            h->bins[grad_hist_exponent(g[i]) - GRAD_HIST_MIN_EXP]++;
    }
    h->total += (long long)n;
}

long long grad_hist_count(const GradHist *h, int e)
{
    if (e < GRAD_HIST_MIN_EXP || e > GRAD_HIST_MAX_EXP)
        return 0;
    return h->bins[e - GRAD_HIST_MIN_EXP];
}

void grad_hist_range(const GradHist *h, int *lo, int *hi)
{
    *lo = GRAD_HIST_MAX_EXP;
    *hi = GRAD_HIST_MIN_EXP;
    for (int e = GRAD_HIST_MIN_EXP; e <= GRAD_HIST_MAX_EXP; e++)
        if (grad_hist_count(h, e)) {
            *lo = e < *lo ? e : *lo;
            *hi = e;
        }
}

static const char *const HIST_COLUMNS[] = {
    "kind", "log2_bin", "count", "fraction", "count_scaled", "log2_scale", NULL,
};

bool grad_hist_write(const char *path, const GradHist *h, int shift, char *err, size_t errlen)
{
    TsvWriter *w = tsv_open(path, HIST_COLUMNS, err, errlen);
    if (!w)
        return false;
    int lo, hi;
    grad_hist_range(h, &lo, &hi);
    double total = (double)h->total;
    tsv_str(w, "zero");
    tsv_num(w, NAN);
    tsv_int(w, h->zeros);
    tsv_num(w, h->zeros / total);
    tsv_int(w, h->zeros);
    tsv_int(w, shift);
    tsv_end_row(w);
    for (int e = lo; e <= hi + shift; e++) {
        tsv_str(w, "bin");
        tsv_int(w, e);
        tsv_int(w, grad_hist_count(h, e));
        tsv_num(w, grad_hist_count(h, e) / total);
        tsv_int(w, grad_hist_count(h, e - shift));
        tsv_int(w, shift);
        tsv_end_row(w);
    }
    return tsv_close(w, err, errlen);
}

GradRounding grad_rounding(const float *g, size_t n, Format f, float scale)
{
    const Rounding rne = { 0 };
    GradRounding r = { 0, 0, 0 };
    for (size_t i = 0; i < n; i++) {
        if (g[i] == 0.0f || !isfinite(g[i]))
            continue;
        r.nonzero++;
        float y = fmt_round(f, g[i] * scale, rne, 0);
        r.underflow += y == 0.0f;
        r.overflow += !isfinite(y);       /* e4m3 has no inf: NaN */
    }
    return r;
}

float grad_max_pow2_scale(Format f, float amax)
{
    if (!(amax > 0.0f) || !isfinite(amax))
        return 1.0f;
    const Rounding rne = { 0 };
    /* Start one power above the exponent gap between the format's max and amax, and step down
     * until the product rounds to a finite value (at most two steps). */
    int k = grad_hist_exponent(fmt_info(f)->max_finite) - grad_hist_exponent(amax) + 1;
    if (k > GRAD_HIST_MAX_EXP)
        k = GRAD_HIST_MAX_EXP;
    while (k > GRAD_HIST_MIN_EXP && !isfinite(fmt_round(f, amax * ldexpf(1.0f, k), rne, 0)))
        k--;
    return ldexpf(1.0f, k);
}

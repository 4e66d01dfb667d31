#ifndef TAPEGRAD_GRAD_HIST_H
#define TAPEGRAD_GRAD_HIST_H
/* Gradient magnitudes in powers of two, and what storing them in a narrow format does to them:
 * the measurement behind loss scaling (Micikevicius et al. 2018, "Mixed Precision Training",
 * figure 3). A value g falls in bin e when 2^e <= |g| < 2^(e+1), so every finite nonzero fp32
 * value has a bin, from -149 (fp32's smallest subnormal) to 127; zeros and non-finite values
 * are counted apart.
 *
 * Scaling the loss by S multiplies every gradient of the backward pass by S (backward is linear
 * in its seed), which moves the histogram S's exponent bins to the right: values that were
 * below half the format's smallest subnormal, and rounded to zero, land where it can hold them. */
#include <stdbool.h>
#include <stddef.h>

#include "precision/format.h"

enum { GRAD_HIST_MIN_EXP = -149, GRAD_HIST_MAX_EXP = 127,
       GRAD_HIST_BINS = GRAD_HIST_MAX_EXP - GRAD_HIST_MIN_EXP + 1 };

typedef struct {
    long long bins[GRAD_HIST_BINS];   /* bins[e - GRAD_HIST_MIN_EXP] */
    long long zeros, nonfinite, total;
} GradHist;

/* floor(log2 |x|), exactly (from the exponent field, not from a rounded log2), for a finite
 * nonzero x; subnormals included. */
int       grad_hist_exponent(float x);
/* Adds n values to h (which starts zero-filled: GradHist h = { 0 }). */
void      grad_hist_add(GradHist *h, const float *g, size_t n);
/* The count of bin e; 0 outside [GRAD_HIST_MIN_EXP, GRAD_HIST_MAX_EXP]. */
long long grad_hist_count(const GradHist *h, int e);
/* The smallest and the largest nonempty bin in *lo, *hi; with every bin empty, lo is
 * GRAD_HIST_MAX_EXP and hi GRAD_HIST_MIN_EXP (an empty range). */
void      grad_hist_range(const GradHist *h, int *lo, int *hi);

/* The histogram as a TSV at path (autograd/tsv.h: whole or not at all; false with a message in
 * err): a row for the exact zeros (kind "zero"), then one per bin (kind "bin", log2_bin e)
 * from the smallest nonempty bin to `shift` bins past the largest, with its count and share of
 * every value, count_scaled the count of bin e - shift (the histogram of the values times
 * 2^shift: a loss scale's outline) and log2_scale shift on every row. */
bool      grad_hist_write(const char *path, const GradHist *h, int shift, char *err,
                          size_t errlen);

/* What rounding g * scale to format f (nearest-even, as the tape rounds gradients) does to n
 * values: how many were finite and nonzero, how many of those become 0 (underflow) and how
 * many become infinite, or NaN in e4m3, which has no infinity (overflow). scale should be a
 * power of two, so that g * scale is exact in fp32. */
typedef struct {
    long long nonzero, underflow, overflow;
} GradRounding;

GradRounding grad_rounding(const float *g, size_t n, Format f, float scale);

/* The paper's choice of a static scale: the largest power of two S for which amax * S still
 * rounds to a finite value of f (so no gradient overflows), at most 2^127; 1 when amax is 0,
 * infinite or NaN. */
float     grad_max_pow2_scale(Format f, float amax);

#endif

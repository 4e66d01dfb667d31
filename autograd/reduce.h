#ifndef TAPEGRAD_REDUCE_H
#define TAPEGRAD_REDUCE_H
/* Sums along a row in one fixed order, the same on every CPU and every build.
 *
 * A plain loop `s += x[j]` is one long chain the compiler may not reorder (it would change the
 * rounding), so it runs at one add per 3-4 cycles. `#pragma omp simd reduction(+:s)` lets it
 * keep one partial sum per vector lane instead, fast, but then the order depends on the vector
 * width: an AVX-512 build adds in 16 lanes, an AVX2 build in 8, and the last bits differ.
 *
 * Here the lanes are written out: RED_LANES = 16 running sums, lane l adding x[l], x[l + 16],
 * x[l + 32], ... in order (the tail x[16q + l] into lane l too), then the lanes folded in a
 * fixed tree (red_fold). The compiler vectorizes the loop over the lanes — two 8-wide or one
 * 16-wide register, each lane still its own chain — so the speed is the pragma's and the order
 * is the same everywhere. Every reduction of a row in autograd/ goes through these. */
#include "autograd/vexp.h"

enum { RED_LANES = 16 };

/* lane[0] + ... + lane[15] as ((0+8) + (4+12)) + ... : halves added pairwise, 8 + 4 + 2 + 1. */
static inline float red_fold(float lane[RED_LANES])
{
    for (int w = RED_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++)
            lane[l] += lane[l + w];
    return lane[0];
}

/* sum_j x[j] */
static inline float red_sum(const float *x, int n)
{
    float lane[RED_LANES] = { 0 };
    int body = n - n % RED_LANES;
    for (int i = 0; i < body; i += RED_LANES)
        for (int l = 0; l < RED_LANES; l++)
            lane[l] += x[i + l];
    for (int i = body; i < n; i++)
        lane[i - body] += x[i];
    return red_fold(lane);
}

/* sum_j x[j] y[j] */
static inline float red_dot(const float *x, const float *y, int n)
{
    float lane[RED_LANES] = { 0 };
    int body = n - n % RED_LANES;
    for (int i = 0; i < body; i += RED_LANES)
        for (int l = 0; l < RED_LANES; l++)
            lane[l] += x[i + l] * y[i + l];
    for (int i = body; i < n; i++)
        lane[i - body] += x[i] * y[i];
    return red_fold(lane);
}

/* sum_j (x[j] - m)^2 */
static inline float red_sum_sq_dev(const float *x, float m, int n)
{
    float lane[RED_LANES] = { 0 };
    int body = n - n % RED_LANES;
    for (int i = 0; i < body; i += RED_LANES)
        for (int l = 0; l < RED_LANES; l++) {
            float d = x[i + l] - m;
            lane[l] += d * d;
        }
    for (int i = body; i < n; i++) {
        float d = x[i] - m;
        lane[i - body] += d * d;
    }
    return red_fold(lane);
}

/* sum_j x[j] y[j] (z[j] - m): layernorm's backward, sum of dxhat (x - mu) */
static inline float red_dot_dev(const float *x, const float *y, const float *z, float m, int n)
{
    float lane[RED_LANES] = { 0 };
    int body = n - n % RED_LANES;
    for (int i = 0; i < body; i += RED_LANES)
        for (int l = 0; l < RED_LANES; l++)
            lane[l] += x[i + l] * y[i + l] * (z[i + l] - m);
    for (int i = body; i < n; i++)
        lane[i - body] += x[i] * y[i] * (z[i] - m);
    return red_fold(lane);
}

/* sum_j exp(x[j] - m), for m >= every x[j] (vexp_nonpos) */
static inline float red_sum_exp(const float *x, float m, int n)
{
    float lane[RED_LANES] = { 0 };
    int body = n - n % RED_LANES;
    for (int i = 0; i < body; i += RED_LANES)
        for (int l = 0; l < RED_LANES; l++)
            lane[l] += vexp_nonpos(x[i + l] - m);
    for (int i = body; i < n; i++)
        lane[i - body] += vexp_nonpos(x[i] - m);
    return red_fold(lane);
}

#endif

/* The dynamic 8-bit code: its construction, nearest-level search and blockwise (de)quantization,
 * rounding to the nearest level or stochastically.
 * The layout of the levels is explained in quant_dynamic.h. */
#include "precision/quant_dynamic.h"

#include <math.h>
#include <stdlib.h>

#include "precision/format_kernel.h"

enum { DECADES = 7 };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void qdyn_code_init(QdynCode *code, bool is_signed)
{
    /* Built in double and rounded once, so each level is the float nearest its definition. */
    double v[QDYN_LEVELS];
    int n = 0;
    int fraction_bits_e0 = is_signed ? 6 : 7;   /* the bits decade 0 has after the indicator */
    for (int e = 0; e < DECADES; e++) {
        int k = 1 << (fraction_bits_e0 - e);
        double scale = pow(10.0, -e);
        for (int j = 0; j < k; j++) {
            double magnitude = scale * (0.1 + (j + 0.5) * 0.9 / k);
            v[n++] = magnitude;
            if (is_signed)
                v[n++] = -magnitude;
        }
    }
    v[n++] = 0.0;
    v[n++] = 1.0;
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    code->is_signed = is_signed;
    for (int i = 0; i < QDYN_LEVELS; i++)
        code->level[i] = (float)v[i];
    for (int i = 0; i < QDYN_LEVELS - 1; i++)
        code->mid[i] = 0.5f * (code->level[i] + code->level[i + 1]);
}

/* The number of midpoints below v, found in eight halvings. Branch-free (each step adds its
 * half or not, a conditional move), since the direction of every step is as good as random:
 * a branching search mispredicts about half of them, which made it 70 ns per value. */
uint8_t qdyn_nearest(const QdynCode *code, float v)
{
    int lo = 0;
    for (int step = QDYN_LEVELS / 2; step > 0; step /= 2) {
        int below = code->mid[lo + step - 1] < v;
        lo += below * step;
    }
    return (uint8_t)lo;
}

uint8_t qdyn_zero_code(const QdynCode *code) { return code->is_signed ? 127 : 0; }

/* The block's absmax, or 0 after filling codes with the zero code (a block of zeros). */
static float block_absmax(const QdynCode *code, const float *x, size_t n, uint8_t *codes)
{
    float absmax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        absmax = a > absmax ? a : absmax;
    }
    if (absmax == 0.0f)
        for (size_t i = 0; i < n; i++)
            codes[i] = qdyn_zero_code(code);
    return absmax;
}

/* An unsigned code holds second moments, which divide: a positive value must not become 0
 * (m / (sqrt(0) + eps) would be an enormous step), so it keeps the smallest positive level. */
static uint8_t keep_positive(const QdynCode *code, uint8_t c, float x)
{
    return !code->is_signed && c == 0 && x > 0.0f ? 1 : c;
}

float qdyn_quantize_block(const QdynCode *code, const float *x, size_t n, uint8_t *codes)
{
    float absmax = block_absmax(code, x, n, codes);
    if (absmax == 0.0f)
        return 0.0f;
    float inv = 1.0f / absmax;
    for (size_t i = 0; i < n; i++)
        codes[i] = keep_positive(code, qdyn_nearest(code, x[i] * inv), x[i]);
    return absmax;
}

/* The code of the largest level <= v (0 below the lowest level), in eight halvings as
 * qdyn_nearest. */
static int level_below(const QdynCode *code, float v)
{
    int lo = 0;
    for (int step = QDYN_LEVELS / 2; step > 0; step /= 2) {
        int below = code->level[lo + step] <= v;
        lo += below * step;
    }
    return lo;
}

/* Up from level k with probability (v - level[k]) / (level[k + 1] - level[k]): 24 random bits
 * make a uniform u in [0, 1), and u < p happens with probability p to within 2^-24. */
static uint8_t round_stochastic(const QdynCode *code, float v, uint32_t random)
{
    int k = level_below(code, v);
    if (k == QDYN_LEVELS - 1 || v <= code->level[k])
        return (uint8_t)k;
    float p = (v - code->level[k]) / (code->level[k + 1] - code->level[k]);
    float u = (float)(random >> 8) * 0x1p-24f;
    return (uint8_t)(k + (u < p));
}

float qdyn_quantize_block_stochastic(const QdynCode *code, const float *x, size_t n,
                                     uint64_t seed, uint64_t index0, uint8_t *codes)
{
    float absmax = block_absmax(code, x, n, codes);
    if (absmax == 0.0f)
        return 0.0f;
    float inv = 1.0f / absmax;
    uint64_t key = fmt_mix64(seed);
    for (size_t i = 0; i < n; i++) {
        uint32_t random = fmt_kernel_random(key, index0 + i);
        codes[i] = keep_positive(code, round_stochastic(code, x[i] * inv, random), x[i]);
    }
    return absmax;
}

uint64_t qdyn_stream_seed(uint64_t seed, uint64_t a, uint64_t b)
{
    return fmt_mix64(fmt_mix64(fmt_mix64(seed) + a) + b);
}

void qdyn_dequantize_block(const QdynCode *code, const uint8_t *codes, size_t n, float absmax,
                           float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = code->level[codes[i]] * absmax;
}

static size_t block_len(size_t n, size_t block, size_t b)
{
    size_t first = b * block;
    return n - first < block ? n - first : block;
}

void qdyn_quantize(const QdynCode *code, const float *x, size_t n, size_t block, uint8_t *codes,
                   float *absmax)
{
    size_t nblocks = (n + block - 1) / block;
    for (size_t b = 0; b < nblocks; b++)
        absmax[b] = qdyn_quantize_block(code, x + b * block, block_len(n, block, b),
                                        codes + b * block);
}

void qdyn_dequantize(const QdynCode *code, const uint8_t *codes, size_t n, size_t block,
                     const float *absmax, float *y)
{
    size_t nblocks = (n + block - 1) / block;
    for (size_t b = 0; b < nblocks; b++)
        qdyn_dequantize_block(code, codes + b * block, block_len(n, block, b), absmax[b],
                              y + b * block);
}

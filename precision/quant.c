/* Linear int8/int4 and NF4 quantization with block constants and double quantization. The
 * layout of the storage, the constants per block, then codes per value. */
#include "precision/quant.h"
#include "precision/format.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[QUANT_KIND_COUNT] = {"int8", "int4", "nf4"};

const char *quant_kind_name(QuantKind k) { return kind_names[k]; }

int quant_kind_from_name(const char *name)
{
    for (int k = 0; k < QUANT_KIND_COUNT; k++)
        if (strcmp(name, kind_names[k]) == 0)
            return k;
    return -1;
}

int quant_code_bits(QuantKind k) { return k == QUANT_INT8 ? 8 : 4; }

size_t quant_code_bytes(QuantKind k, size_t n)
{
    return k == QUANT_INT8 ? n : (n + 1) / 2;
}

/* Largest code magnitude: symmetric codes are in [-qmax, qmax], asymmetric in [0, 2 qmax + 1].
 * NF4's levels are already in [-1, 1]. */
static int code_max(QuantKind k) { return k == QUANT_INT8 ? 127 : 7; }

static bool config_valid(QuantConfig cfg)
{
    return cfg.kind >= 0 && cfg.kind < QUANT_KIND_COUNT &&
           !(cfg.kind == QUANT_NF4 && cfg.asymmetric);
}

static QuantConfig resolve(QuantConfig cfg, size_t n)
{
    if (cfg.block == 0)
        cfg.block = n > 0 ? n : 1;
    if (cfg.dq_block == 0)
        cfg.dq_block = 256;
    return cfg;
}

typedef struct {
    size_t nblocks, ndq, floats, code_bytes, zero_bytes, scale_code_bytes;
} Layout;

/* Floats first (scales, or the double-quantization constants and the mean), then bytes, so
 * that one float-aligned buffer holds everything. */
static Layout layout(QuantConfig cfg, size_t n)
{
    Layout l = {0};
    l.nblocks = (n + cfg.block - 1) / cfg.block;
    l.ndq = cfg.double_quant ? (l.nblocks + cfg.dq_block - 1) / cfg.dq_block : 0;
    l.floats = cfg.double_quant ? l.ndq + 1 : l.nblocks;
    l.code_bytes = quant_code_bytes(cfg.kind, n);
    l.zero_bytes = cfg.asymmetric ? l.nblocks : 0;
    l.scale_code_bytes = cfg.double_quant ? l.nblocks : 0;
    return l;
}

size_t quant_bytes(QuantConfig cfg, size_t n)
{
    if (!config_valid(cfg))
        return 0;
    Layout l = layout(resolve(cfg, n), n);
    return l.floats * sizeof(float) + l.code_bytes + l.zero_bytes + l.scale_code_bytes;
}

double quant_bits_per_param(QuantConfig cfg)
{
    double bits = quant_code_bits(cfg.kind);
    if (cfg.block == 0)
        return bits;
    double block = (double)cfg.block, dq_block = cfg.dq_block ? (double)cfg.dq_block : 256.0;
    bits += (cfg.double_quant ? 8.0 : 32.0) / block;
    bits += cfg.asymmetric ? 8.0 / block : 0.0;
    bits += cfg.double_quant ? 32.0 / (block * dq_block) : 0.0;
    return bits;
}

int quant_bind(QuantTensor *q, QuantConfig cfg, size_t n, void *storage)
{
    if (!config_valid(cfg))
        return -1;
    cfg = resolve(cfg, n);
    Layout l = layout(cfg, n);
    float *floats = storage;
    uint8_t *bytes = (uint8_t *)(floats + l.floats);
    *q = (QuantTensor){.cfg = cfg, .n = n, .nblocks = l.nblocks, .ndq = l.ndq};
    q->codes = bytes;
    q->zeros = cfg.asymmetric ? bytes + l.code_bytes : NULL;
    if (cfg.double_quant) {
        q->dq_scales = floats;
        q->scale_mean = floats + l.ndq;
        q->scale_codes = bytes + l.code_bytes + l.zero_bytes;
    } else {
        q->scales = floats;
    }
    return 0;
}

QuantTensor *quant_new(QuantConfig cfg, size_t n)
{
    size_t bytes = quant_bytes(cfg, n);
    if (bytes == 0 || n == 0)
        return NULL;
    QuantTensor *q = malloc(sizeof *q);
    void *storage = malloc(bytes);
    if (!q || !storage) {
        free(q);
        free(storage);
        return NULL;
    }
    quant_bind(q, cfg, n, storage);
    return q;
}

void quant_free(QuantTensor *q)
{
    if (!q)
        return;
    /* the storage starts with the floats, whichever array is first */
    free(q->cfg.double_quant ? (void *)q->dq_scales : (void *)q->scales);
    free(q);
}

/* ---- block constants --------------------------------------------------------------------- */

static size_t block_len(const QuantTensor *q, size_t b)
{
    size_t start = b * q->cfg.block;
    return q->n - start < q->cfg.block ? q->n - start : q->cfg.block;
}

/* The range of block b, stretched to include 0 (so that 0 stays exact when asymmetric). */
static void block_range(const QuantTensor *q, const float *x, size_t b, float *lo, float *hi)
{
    const float *v = x + b * q->cfg.block;
    float mn = 0.0f, mx = 0.0f;
    for (size_t i = 0; i < block_len(q, b); i++) {
        mn = v[i] < mn ? v[i] : mn;
        mx = v[i] > mx ? v[i] : mx;
    }
    *lo = mn;
    *hi = mx;
}

/* The fp32 scale of block b computed from the data, before any double quantization. */
static float raw_scale(const QuantTensor *q, const float *x, size_t b)
{
    float lo, hi;
    block_range(q, x, b, &lo, &hi);
    if (q->cfg.asymmetric)
        return (hi - lo) / (float)(2 * code_max(q->cfg.kind) + 1);
    float absmax = -lo > hi ? -lo : hi;
    return q->cfg.kind == QUANT_NF4 ? absmax : absmax / (float)code_max(q->cfg.kind);
}

float quant_block_scale(const QuantTensor *q, size_t b)
{
    if (!q->cfg.double_quant)
        return q->scales[b];
    float centred = fmt_decode(FMT_E4M3, q->scale_codes[b]) * q->dq_scales[b / q->cfg.dq_block];
    float s = centred + *q->scale_mean;
    return s > 0.0f ? s : 0.0f;     /* a scale near 0 may land just below it */
}

int quant_block_zero(const QuantTensor *q, size_t b)
{
    return q->cfg.asymmetric ? q->zeros[b] : 0;
}

/* Double quantization (QLoRA): the scales minus their mean, stored as e4m3 in blocks of
 * dq_block, each block with the fp32 constant that maps its absmax onto e4m3's max (448). The
 * scales are recomputed from x rather than kept in a scratch buffer: no allocation here. */
static void double_quantize(QuantTensor *q, const float *x)
{
    double sum = 0.0;
    for (size_t b = 0; b < q->nblocks; b++)
        sum += raw_scale(q, x, b);
    float mean = q->nblocks ? (float)(sum / (double)q->nblocks) : 0.0f;
    *q->scale_mean = mean;
    Rounding rne = {0};
    for (size_t d = 0; d < q->ndq; d++) {
        size_t first = d * q->cfg.dq_block, last = first + q->cfg.dq_block;
        last = last < q->nblocks ? last : q->nblocks;
        float absmax = 0.0f;
        for (size_t b = first; b < last; b++)
            absmax = fmaxf(absmax, fabsf(raw_scale(q, x, b) - mean));
        float c = absmax / fmt_info(FMT_E4M3)->max_finite;
        q->dq_scales[d] = c;
        for (size_t b = first; b < last; b++) {
            float centred = raw_scale(q, x, b) - mean;
            q->scale_codes[b] = (uint8_t)fmt_encode(FMT_E4M3, c > 0 ? centred / c : 0.0f, rne, 0);
        }
    }
}

/* ---- codes ------------------------------------------------------------------------------ */

static void put_code(QuantTensor *q, size_t i, int code)
{
    if (q->cfg.kind == QUANT_INT8) {
        q->codes[i] = (uint8_t)code;
        return;
    }
    uint8_t nib = (uint8_t)(code & 0xf), *byte = &q->codes[i / 2];
    *byte = i % 2 ? (uint8_t)((*byte & 0x0f) | (nib << 4)) : (uint8_t)((*byte & 0xf0) | nib);
}

int quant_code_at(const QuantTensor *q, size_t i)
{
    if (q->cfg.kind == QUANT_INT8)
        return q->cfg.asymmetric ? q->codes[i] : (int8_t)q->codes[i];
    int nib = (q->codes[i / 2] >> (4 * (i % 2))) & 0xf;
    bool is_signed = q->cfg.kind == QUANT_INT4 && !q->cfg.asymmetric;
    return is_signed && nib > 7 ? nib - 16 : nib;
}

static int clamp_int(float v, int lo, int hi)
{
    return v < (float)lo ? lo : v > (float)hi ? hi : (int)v;
}

/* Codes of block b, given the scale dequantization will use. Returns the zero point. */
static int quantize_block(QuantTensor *q, const float *x, size_t b, float scale)
{
    size_t start = b * q->cfg.block, len = block_len(q, b);
    int qmax = code_max(q->cfg.kind), zero = 0;
    float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    if (q->cfg.asymmetric) {
        float lo, hi;
        block_range(q, x, b, &lo, &hi);
        zero = clamp_int(rintf(-lo * inv), 0, 2 * qmax + 1);
    }
    for (size_t i = start; i < start + len; i++) {
        int code;
        if (q->cfg.kind == QUANT_NF4)
            code = quant_nf4_nearest(scale > 0.0f ? x[i] / scale : 0.0f);
        else if (q->cfg.asymmetric)
            code = clamp_int(rintf(x[i] * inv) + (float)zero, 0, 2 * qmax + 1);
        else
            code = clamp_int(rintf(x[i] * inv), -qmax, qmax);
        put_code(q, i, code);
    }
    return zero;
}

void quant_quantize(QuantTensor *q, const float *x)
{
    if (q->cfg.kind != QUANT_INT8 && q->n % 2)
        q->codes[q->n / 2] = 0;     /* the unused last nibble stays 0 */
    if (q->cfg.double_quant)
        double_quantize(q, x);
    for (size_t b = 0; b < q->nblocks; b++) {
        float scale = q->cfg.double_quant ? quant_block_scale(q, b) : raw_scale(q, x, b);
        if (!q->cfg.double_quant)
            q->scales[b] = scale;
        int zero = quantize_block(q, x, b, scale);
        if (q->cfg.asymmetric)
            q->zeros[b] = (uint8_t)zero;
    }
}

/* 4-bit codes of one block: the 16 possible values are computed once per block, then every
 * byte is two table lookups. */
static void dequantize_nibbles(const QuantTensor *q, size_t i, size_t end, float scale,
                               int zero, float *y)
{
    float lut[16];
    const float *levels = quant_nf4_codebook();
    for (int c = 0; c < 16; c++) {
        int value = q->cfg.asymmetric ? c - zero : (c ^ 8) - 8;     /* 4-bit two's complement */
        lut[c] = q->cfg.kind == QUANT_NF4 ? levels[c] * scale : (float)value * scale;
    }
    if (i < end && i % 2)
        *y++ = lut[q->codes[i++ / 2] >> 4];
    for (; i + 1 < end; i += 2) {
        uint8_t byte = q->codes[i / 2];
        *y++ = lut[byte & 0xf];
        *y++ = lut[byte >> 4];
    }
    if (i < end)
        *y = lut[q->codes[i / 2] & 0xf];
}

static void dequantize_bytes(const QuantTensor *q, size_t i, size_t end, float scale, int zero,
                             float *y)
{
    for (; i < end; i++)
        *y++ = (float)(quant_code_at(q, i) - zero) * scale;
}

void quant_dequantize_range(const QuantTensor *q, size_t first, size_t count, float *y)
{
    size_t i = first, end = first + count;
    while (i < end) {
        size_t b = i / q->cfg.block, block_end = (b + 1) * q->cfg.block;
        block_end = block_end < end ? block_end : end;
        float scale = quant_block_scale(q, b);
        int zero = quant_block_zero(q, b);
        if (q->cfg.kind == QUANT_INT8)
            dequantize_bytes(q, i, block_end, scale, zero, y + (i - first));
        else
            dequantize_nibbles(q, i, block_end, scale, zero, y + (i - first));
        i = block_end;
    }
}

void quant_dequantize(const QuantTensor *q, float *y)
{
    quant_dequantize_range(q, 0, q->n, y);
}

QuantError quant_error(const float *x, const float *y, size_t n)
{
    double max_abs = 0.0, err2 = 0.0, sig2 = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - (double)y[i];
        max_abs = fabs(d) > max_abs ? fabs(d) : max_abs;
        err2 += d * d;
        sig2 += (double)x[i] * x[i];
    }
    QuantError e = {max_abs, n ? sqrt(err2 / (double)n) : 0.0, INFINITY};
    if (err2 > 0.0)
        e.sqnr_db = 10.0 * log10(sig2 / err2);
    return e;
}

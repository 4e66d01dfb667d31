/* Array conversions: the hot path. Each loop calls the scalar kernel with the rounding mode as
 * a compile-time constant, so the switch disappears and GCC vectorizes the loop body (check
 * with -fopt-info-vec). Codes go through a small uint32 buffer that stays in L1: one encode loop
 * serves every container width, and the narrowing store is a loop of its own. */
#include "precision/format.h"
#include "precision/format_kernel.h"

#include <float.h>
#include <string.h>

enum { CHUNK = 512 };

size_t fmt_packed_bytes(Format f, size_t n)
{
    int bits = fmt_info(f)->bits_per_element;
    return bits == 4 ? (n + 1) / 2 : n * (size_t)(bits / 8);
}

/* One loop per rounding mode; `mode` is a constant in each call after inlining. */
static inline void encode_loop(const float *restrict x, uint32_t *restrict code, size_t n,
                               FormatSpec s, RoundMode mode)
{
    for (size_t i = 0; i < n; i++)
        code[i] = fmt_kernel_encode(fmt_bits_of(x[i]), s, mode, 0);
}

static void encode_stochastic(const float *restrict x, uint32_t *restrict code, size_t n,
                              FormatSpec s, uint64_t key, uint64_t index0)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t rnd = fmt_kernel_random(key, index0 + i);
        code[i] = fmt_kernel_encode(fmt_bits_of(x[i]), s, FMT_ROUND_STOCHASTIC, rnd);
    }
}

static void encode_codes(Format f, const float *restrict x, uint32_t *restrict code, size_t n,
                         Rounding r, uint64_t index0)
{
    const FormatSpec s = fmt_spec_for(f, r.saturate);
    switch (r.mode) {
    case FMT_ROUND_NEAREST_EVEN:
        encode_loop(x, code, n, s, FMT_ROUND_NEAREST_EVEN);
        break;
    case FMT_ROUND_NEAREST_AWAY:
        encode_loop(x, code, n, s, FMT_ROUND_NEAREST_AWAY);
        break;
    case FMT_ROUND_TOWARD_ZERO:
        encode_loop(x, code, n, s, FMT_ROUND_TOWARD_ZERO);
        break;
    case FMT_ROUND_UP:
        encode_loop(x, code, n, s, FMT_ROUND_UP);
        break;
    case FMT_ROUND_DOWN:
        encode_loop(x, code, n, s, FMT_ROUND_DOWN);
        break;
    default:
        encode_stochastic(x, code, n, s, fmt_mix64(r.seed), index0);
        break;
    }
}

/* fp32 -> fp32 is a copy, except that saturation turns infinities into +-max. */
static void copy_fp32(const float *x, float *y, size_t n, bool saturate)
{
    if (y != x)
        memmove(y, x, n * sizeof *y);
    if (!saturate)
        return;
    for (size_t i = 0; i < n; i++)
        y[i] = y[i] > FLT_MAX ? FLT_MAX : (y[i] < -FLT_MAX ? -FLT_MAX : y[i]);
}

/* Narrow n codes into the packed buffer at element offset `at` (even for e2m1). */
static void store_codes(Format f, const uint32_t *restrict code, void *restrict packed,
                        size_t at, size_t n)
{
    int bits = fmt_info(f)->bits_per_element;
    if (bits == 32) {
        memcpy((uint32_t *)packed + at, code, n * sizeof *code);
    } else if (bits == 16) {
        uint16_t *out = (uint16_t *)packed + at;
        for (size_t i = 0; i < n; i++)
            out[i] = (uint16_t)code[i];
    } else if (bits == 8) {
        uint8_t *out = (uint8_t *)packed + at;
        for (size_t i = 0; i < n; i++)
            out[i] = (uint8_t)code[i];
    } else {
        uint8_t *out = (uint8_t *)packed + at / 2;
        for (size_t i = 0; i < n / 2; i++)
            out[i] = (uint8_t)(code[2 * i] | (code[2 * i + 1] << 4));
        if (n % 2)
            out[n / 2] = (uint8_t)code[n - 1];
    }
}

/* Widen n codes from the packed buffer at element offset `at` (even for e2m1). */
static void load_codes(Format f, const void *restrict packed, uint32_t *restrict code,
                       size_t at, size_t n)
{
    int bits = fmt_info(f)->bits_per_element;
    if (bits == 32) {
        memcpy(code, (const uint32_t *)packed + at, n * sizeof *code);
    } else if (bits == 16) {
        const uint16_t *in = (const uint16_t *)packed + at;
        for (size_t i = 0; i < n; i++)
            code[i] = in[i];
    } else if (bits == 8) {
        const uint8_t *in = (const uint8_t *)packed + at;
        for (size_t i = 0; i < n; i++)
            code[i] = in[i];
    } else {
        const uint8_t *in = (const uint8_t *)packed + at / 2;
        for (size_t i = 0; i < n / 2; i++) {
            code[2 * i] = in[i] & 0xf;
            code[2 * i + 1] = in[i] >> 4;
        }
        if (n % 2)
            code[n - 1] = in[n / 2] & 0xf;
    }
}

static void decode_codes(Format f, const uint32_t *restrict code, float *restrict y, size_t n)
{
    const FormatSpec s = fmt_spec[f];
    for (size_t i = 0; i < n; i++)
        y[i] = fmt_kernel_decode(code[i], s);
}

void fmt_encode_array(Format f, const float *x, void *packed, size_t n, Rounding r,
                      uint64_t index0)
{
    uint32_t code[CHUNK];
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t m = n - at < CHUNK ? n - at : CHUNK;
        if (f == FMT_FP32) {
            copy_fp32(x + at, (float *)packed + at, m, r.saturate);
            continue;
        }
        encode_codes(f, x + at, code, m, r, index0 + at);
        store_codes(f, code, packed, at, m);
    }
}

void fmt_decode_array(Format f, const void *packed, float *y, size_t n)
{
    if (f == FMT_FP32) {
        memmove(y, packed, n * sizeof *y);
        return;
    }
    if (f == FMT_BF16) {
        /* bf16 is the top half of an fp32: decoding is a shift. Mixed-precision training
         * decodes every activation twice per step, so this case gets its own loop. */
        const uint16_t *in = packed;
        for (size_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)in[i] << 16;
            memcpy(y + i, &bits, sizeof bits);
        }
        return;
    }
    uint32_t code[CHUNK];
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t m = n - at < CHUNK ? n - at : CHUNK;
        load_codes(f, packed, code, at, m);
        decode_codes(f, code, y + at, m);
    }
}

void fmt_round_array(Format f, const float *x, float *y, size_t n, Rounding r, uint64_t index0)
{
    if (f == FMT_FP32) {
        copy_fp32(x, y, n, r.saturate);
        return;
    }
    uint32_t code[CHUNK];
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t m = n - at < CHUNK ? n - at : CHUNK;
        encode_codes(f, x + at, code, m, r, index0 + at);
        decode_codes(f, code, y + at, m);
    }
}

/* The format table, names, and the scalar encode/decode/round. The arithmetic itself is in
 * format_kernel.h, shared with the array loops in format_array.c. */
#include "precision/format.h"
#include "precision/format_kernel.h"

#include <float.h>
#include <string.h>

/* Values written as hex floats so that each is exact and its power of two is visible. */
static const FormatInfo info_table[FMT_COUNT] = {
    [FMT_FP32] = {"fp32", 1, 8, 23, 127, 32, 32, FLT_MAX, 0x1p-126f, 0x1p-149f, 0x1p-23f,
                  true, true},
    [FMT_TF32] = {"tf32", 1, 8, 10, 127, 19, 32, 0x1.ffcp127f, 0x1p-126f, 0x1p-136f, 0x1p-10f,
                  true, true},
    [FMT_BF16] = {"bf16", 1, 8, 7, 127, 16, 16, 0x1.fep127f, 0x1p-126f, 0x1p-133f, 0x1p-7f,
                  true, true},
    [FMT_FP16] = {"fp16", 1, 5, 10, 15, 16, 16, 65504.0f, 0x1p-14f, 0x1p-24f, 0x1p-10f,
                  true, true},
    [FMT_E4M3] = {"e4m3", 1, 4, 3, 7, 8, 8, 448.0f, 0x1p-6f, 0x1p-9f, 0x1p-3f, false, true},
    [FMT_E5M2] = {"e5m2", 1, 5, 2, 15, 8, 8, 57344.0f, 0x1p-14f, 0x1p-16f, 0x1p-2f, true, true},
    [FMT_E2M1] = {"e2m1", 1, 2, 1, 1, 4, 4, 6.0f, 1.0f, 0.5f, 0.5f, false, false},
};

/* Field order: mbits, emin32, max_code, inf_code, nan_code, special_from, inf_mag, mag_mask,
 * sign_shift, container_shift, decode_scale. Magnitude codes are exponent|mantissa without the
 * sign; the fp32 row is unused (fp32 is the identity) but filled in for completeness. */
const FormatSpec fmt_spec[FMT_COUNT] = {
    [FMT_FP32] = {23, 1, 0x7f7fffff, 0x7f800000, 0x7fc00000, 0x7f800000, 0x7f800000,
                  0x7fffffff, 31, 0, 1.0f},
    [FMT_TF32] = {10, 1, 0x3fbff, 0x3fc00, 0x3fe00, 0x3fc00, 0x3fc00, 0x3ffff, 31, 13, 1.0f},
    [FMT_BF16] = {7, 1, 0x7f7f, 0x7f80, 0x7fc0, 0x7f80, 0x7f80, 0x7fff, 15, 0, 1.0f},
    [FMT_FP16] = {10, 113, 0x7bff, 0x7c00, 0x7e00, 0x7c00, 0x7c00, 0x7fff, 15, 0, 0x1p112f},
    /* e4m3: S.1111.111 is the only NaN, so infinity and overflow become NaN */
    [FMT_E4M3] = {3, 121, 0x7e, 0x7f, 0x7f, 0x7f, 0xffffffff, 0x7f, 7, 0, 0x1p120f},
    [FMT_E5M2] = {2, 113, 0x7b, 0x7c, 0x7e, 0x7c, 0x7c, 0x7f, 7, 0, 0x1p112f},
    /* e2m1: no inf, no NaN: everything out of range becomes max */
    [FMT_E2M1] = {1, 127, 0x7, 0x7, 0x7, 0x8, 0xffffffff, 0x7, 3, 0, 0x1p126f},
};

static const char *const round_names[FMT_ROUND_COUNT] = {
    "rne", "rna", "rtz", "rup", "rdown", "stochastic",
};

const FormatInfo *fmt_info(Format f) { return &info_table[f]; }

const char *fmt_name(Format f) { return info_table[f].name; }

int fmt_from_name(const char *name)
{
    for (int f = 0; f < FMT_COUNT; f++)
        if (strcmp(name, info_table[f].name) == 0)
            return f;
    return -1;
}

const char *fmt_round_name(RoundMode m) { return round_names[m]; }

int fmt_round_from_name(const char *name)
{
    for (int m = 0; m < FMT_ROUND_COUNT; m++)
        if (strcmp(name, round_names[m]) == 0)
            return m;
    return -1;
}

uint32_t fmt_random_bits(uint64_t seed, uint64_t index)
{
    return fmt_kernel_random(fmt_mix64(seed), index);
}

/* fp32 to fp32 changes nothing but infinities under saturation. */
static uint32_t encode_fp32(uint32_t u, bool saturate)
{
    bool inf = (u & 0x7fffffffu) == 0x7f800000u;
    return (saturate && inf) ? (u & 0x80000000u) | 0x7f7fffffu : u;
}

uint32_t fmt_encode(Format f, float x, Rounding r, uint64_t index)
{
    uint32_t u = fmt_bits_of(x);
    if (f == FMT_FP32)
        return encode_fp32(u, r.saturate);
    uint32_t rnd = r.mode == FMT_ROUND_STOCHASTIC ? fmt_random_bits(r.seed, index) : 0;
    return fmt_kernel_encode(u, fmt_spec_for(f, r.saturate), r.mode, rnd);
}

float fmt_decode(Format f, uint32_t bits)
{
    if (f == FMT_FP32)
        return fmt_float_of(bits);
    return fmt_kernel_decode(bits, fmt_spec[f]);
}

float fmt_round(Format f, float x, Rounding r, uint64_t index)
{
    return fmt_decode(f, fmt_encode(f, x, r, index));
}

/* The format table, names, and the scalar encode/decode/round. The arithmetic itself is in
 * format_kernel.h, shared with the array loops in format_array.c. */
#include "precision/format.h"
#include "precision/format_kernel.h"

#include <float.h>
#include <string.h>

/* Values written as hex floats so that each is exact and its power of two is visible. */
static const FormatInfo info_table[FMT_COUNT] = {
    [FMT_FP32] = { .name = "fp32", .sign_bits = 1, .exponent_bits = 8, .mantissa_bits = 23,
                   .bias = 127, .bits = 32, .bits_per_element = 32,
                   .max_finite = FLT_MAX, .min_normal = 0x1p-126f, .min_subnormal = 0x1p-149f,
                   .epsilon = 0x1p-23f, .has_inf = true, .has_nan = true },
    [FMT_TF32] = { .name = "tf32", .sign_bits = 1, .exponent_bits = 8, .mantissa_bits = 10,
                   .bias = 127, .bits = 19, .bits_per_element = 32,
                   .max_finite = 0x1.ffcp127f, .min_normal = 0x1p-126f, .min_subnormal = 0x1p-136f,
                   .epsilon = 0x1p-10f, .has_inf = true, .has_nan = true },
    [FMT_BF16] = { .name = "bf16", .sign_bits = 1, .exponent_bits = 8, .mantissa_bits = 7,
                   .bias = 127, .bits = 16, .bits_per_element = 16,
                   .max_finite = 0x1.fep127f, .min_normal = 0x1p-126f, .min_subnormal = 0x1p-133f,
                   .epsilon = 0x1p-7f, .has_inf = true, .has_nan = true },
    [FMT_FP16] = { .name = "fp16", .sign_bits = 1, .exponent_bits = 5, .mantissa_bits = 10,
                   .bias = 15, .bits = 16, .bits_per_element = 16,
                   .max_finite = 65504.0f, .min_normal = 0x1p-14f, .min_subnormal = 0x1p-24f,
                   .epsilon = 0x1p-10f, .has_inf = true, .has_nan = true },
    [FMT_E4M3] = { .name = "e4m3", .sign_bits = 1, .exponent_bits = 4, .mantissa_bits = 3,
                   .bias = 7, .bits = 8, .bits_per_element = 8,
                   .max_finite = 448.0f, .min_normal = 0x1p-6f, .min_subnormal = 0x1p-9f,
                   .epsilon = 0x1p-3f, .has_inf = false, .has_nan = true },
    [FMT_E5M2] = { .name = "e5m2", .sign_bits = 1, .exponent_bits = 5, .mantissa_bits = 2,
                   .bias = 15, .bits = 8, .bits_per_element = 8,
                   .max_finite = 57344.0f, .min_normal = 0x1p-14f, .min_subnormal = 0x1p-16f,
                   .epsilon = 0x1p-2f, .has_inf = true, .has_nan = true },
    [FMT_E2M1] = { .name = "e2m1", .sign_bits = 1, .exponent_bits = 2, .mantissa_bits = 1,
                   .bias = 1, .bits = 4, .bits_per_element = 4,
                   .max_finite = 6.0f, .min_normal = 1.0f, .min_subnormal = 0.5f,
                   .epsilon = 0.5f, .has_inf = false, .has_nan = false },
};

/* Magnitude codes are exponent|mantissa without the sign; the fp32 row is unused (fp32 is the
 * identity) but filled in for completeness. */
const FormatSpec fmt_spec[FMT_COUNT] = {
    [FMT_FP32] = { .mbits = 23, .emin32 = 1, .max_code = 0x7f7fffff, .inf_code = 0x7f800000,
                   .nan_code = 0x7fc00000, .special_from = 0x7f800000, .inf_mag = 0x7f800000,
                   .mag_mask = 0x7fffffff, .sign_shift = 31, .container_shift = 0,
                   .decode_scale = 1.0f },
    [FMT_TF32] = { .mbits = 10, .emin32 = 1, .max_code = 0x3fbff, .inf_code = 0x3fc00,
                   .nan_code = 0x3fe00, .special_from = 0x3fc00, .inf_mag = 0x3fc00,
                   .mag_mask = 0x3ffff, .sign_shift = 31, .container_shift = 13,
                   .decode_scale = 1.0f },
    [FMT_BF16] = { .mbits = 7, .emin32 = 1, .max_code = 0x7f7f, .inf_code = 0x7f80,
                   .nan_code = 0x7fc0, .special_from = 0x7f80, .inf_mag = 0x7f80,
                   .mag_mask = 0x7fff, .sign_shift = 15, .container_shift = 0,
                   .decode_scale = 1.0f },
    [FMT_FP16] = { .mbits = 10, .emin32 = 113, .max_code = 0x7bff, .inf_code = 0x7c00,
                   .nan_code = 0x7e00, .special_from = 0x7c00, .inf_mag = 0x7c00,
                   .mag_mask = 0x7fff, .sign_shift = 15, .container_shift = 0,
                   .decode_scale = 0x1p112f },
    /* e4m3: S.1111.111 is the only NaN, so infinity and overflow become NaN */
    [FMT_E4M3] = { .mbits = 3, .emin32 = 121, .max_code = 0x7e, .inf_code = 0x7f,
                   .nan_code = 0x7f, .special_from = 0x7f, .inf_mag = 0xffffffff,
                   .mag_mask = 0x7f, .sign_shift = 7, .container_shift = 0,
                   .decode_scale = 0x1p120f },
    [FMT_E5M2] = { .mbits = 2, .emin32 = 113, .max_code = 0x7b, .inf_code = 0x7c,
                   .nan_code = 0x7e, .special_from = 0x7c, .inf_mag = 0x7c,
                   .mag_mask = 0x7f, .sign_shift = 7, .container_shift = 0,
                   .decode_scale = 0x1p112f },
    /* e2m1: no inf, no NaN: everything out of range becomes max */
    [FMT_E2M1] = { .mbits = 1, .emin32 = 127, .max_code = 0x7, .inf_code = 0x7,
                   .nan_code = 0x7, .special_from = 0x8, .inf_mag = 0xffffffff,
                   .mag_mask = 0x7, .sign_shift = 3, .container_shift = 0,
                   .decode_scale = 0x1p126f },
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

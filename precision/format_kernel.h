#ifndef TAPEGRAD_FORMAT_KERNEL_H
#define TAPEGRAD_FORMAT_KERNEL_H
/* Private to precision/: the one rounding algorithm that every format, every mode, the scalar
 * functions and the array loops share. Written as straight-line integer code (ternaries, no
 * early returns) so that GCC turns the array loops into SIMD code; a scalar call and element i of
 * an array call therefore run exactly the same arithmetic.
 *
 * The idea, for a format with M mantissa bits and smallest normal exponent emin:
 *   1. take the fp32 significand as an integer sig (24 bits, implicit 1 included);
 *   2. the format keeps M fraction bits, and fewer below its min normal (gradual underflow), so
 *      the last kept bit has weight 2^(max(exponent, emin) - M): drop `shift` low bits of sig;
 *   3. the dropped bits decide the increment (the rounding mode lives only here);
 *   4. write the kept bits straight into the format's exponent|mantissa layout. Adding the
 *      increment there carries a full mantissa into the exponent for free, and turns the largest
 *      subnormal into the smallest normal, so no case needs special code;
 *   5. a code above the largest finite one is an overflow: the overflow rule picks the result.
 * For bf16 (M = 7, emin as fp32's) step 2 drops the low 16 bits of a normal number and step 3
 * rounds them to nearest even: every bf16 value the trainer stores is rounded here. */
#include "precision/format.h"

#include <stdint.h>
#include <string.h>

typedef struct {
    uint32_t mbits;         /* mantissa bits M */
    uint32_t emin32;        /* fp32 biased exponent of the format's min normal: 128 - bias */
    uint32_t max_code;      /* magnitude code of the largest finite value */
    uint32_t inf_code;      /* magnitude code that "infinity" becomes: inf, NaN (e4m3), max (e2m1) */
    uint32_t nan_code;      /* magnitude code of the quiet NaN (max for e2m1, which has none) */
    uint32_t special_from;  /* decode: magnitudes >= this are inf or NaN */
    uint32_t inf_mag;       /* decode: the magnitude that is inf (all ones if none) */
    uint32_t mag_mask;      /* decode: the magnitude bits of a code */
    uint32_t sign_shift;    /* position of the sign bit in the container */
    uint32_t container_shift; /* tf32 lives in the top 19 bits of a 32-bit container */
    float    decode_scale;  /* 2^(127 - bias): moves fp32's exponent onto the format's */
} FormatSpec;

extern const FormatSpec fmt_spec[FMT_COUNT];

/* The spec to encode with: saturation is the same arithmetic with "infinity" replaced by max. */
static inline FormatSpec fmt_spec_for(Format f, bool saturate)
{
    FormatSpec s = fmt_spec[f];
    if (saturate)
        s.inf_code = s.max_code;
    return s;
}

static inline uint32_t fmt_bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float fmt_float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Should the dropped bits `rem` (of `sh` dropped bits; true shift `shift` may be larger) round
 * the kept integer up? `rnd` is 32 uniform random bits, used by stochastic rounding only. */
static inline uint32_t fmt_round_increment(RoundMode mode, uint32_t sign, uint32_t kept,
                                           uint32_t rem, uint32_t sig, uint32_t shift,
                                           uint32_t sh, uint32_t rnd)
{
    /* Nearest modes as a carry: adding just under half a unit (RNE: just under for an even kept
     * value, exactly half for an odd one) carries into the kept bits exactly when rounding up.
     * Also the form GCC vectorizes; comparisons against 1 << (sh - 1) defeat it. */
    uint32_t half = 1u << (sh - 1);
    switch (mode) {
    case FMT_ROUND_NEAREST_EVEN:
        /* BEGIN SOLUTION rounding */
        return (rem + half - 1 + (kept & 1)) >> sh;
        /* STUDENT
        (void)kept;
        return 0;
        */
        /* END SOLUTION rounding */
    case FMT_ROUND_NEAREST_AWAY:
        return (rem + half) >> sh;
    case FMT_ROUND_TOWARD_ZERO:
        return 0;
    case FMT_ROUND_UP:
        return (uint32_t)(rem != 0) & (sign ^ 1);
    case FMT_ROUND_DOWN:
        return (uint32_t)(rem != 0) & sign;
    default: {
        /* The dropped fraction as a 32-bit fixed-point number: round up with exactly that
         * probability. Beyond 32 dropped bits it is truncated (tiny inputs only). */
        uint32_t left = shift <= 32 ? 32 - shift : 0;
        uint32_t right = shift > 32 ? (shift - 32 < 31 ? shift - 32 : 31) : 0;
        uint32_t frac = shift <= 32 ? rem << left : sig >> right;
        return rnd < frac;
    }
    }
}

/* fp32 bits u -> code of format s (in its container: sign included, tf32 shifted). Not for
 * FMT_FP32, which is the identity. Saturation is not an argument: it is a different spec (see
 * fmt_spec_for), whose "infinity" is max. A loop-invariant flag tested inside the loop body stops
 * GCC from vectorizing it. */
static inline uint32_t fmt_kernel_encode(uint32_t u, FormatSpec s, RoundMode mode, uint32_t rnd)
{
    uint32_t sign = u >> 31;
    uint32_t a = u & 0x7fffffffu;
    uint32_t e32 = a >> 23;
    /* fp32 subnormals have the same scale as exponent field 1, without the implicit bit */
    uint32_t eff = e32 > 1 ? e32 : 1;
    uint32_t sig = (a & 0x7fffffu) | (e32 ? 0x800000u : 0);
    /* BEGIN SOLUTION rounding */
    uint32_t under = s.emin32 > eff ? s.emin32 - eff : 0;
    /* STUDENT
    uint32_t under = 0;
    */
    /* END SOLUTION rounding */
    uint32_t shift = 23 - s.mbits + under;
    /* sig has 24 bits: past 31 every shift drops all of it, and half stays above it */
    uint32_t sh = shift < 31 ? shift : 31;
    uint32_t kept = sig >> sh;
    uint32_t rem = sig & ((1u << sh) - 1);
    uint32_t inc = fmt_round_increment(mode, sign, kept, rem, sig, shift, sh, rnd);
    uint32_t exp_part = (eff > s.emin32 ? eff - s.emin32 : 0) << s.mbits;
    uint32_t code = exp_part + kept + inc;

    /* overflows that round away from zero become infinity (or its stand-in); the rest max */
    uint32_t toward_inf = mode == FMT_ROUND_UP     ? sign ^ 1
                        : mode == FMT_ROUND_DOWN   ? sign
                        : mode == FMT_ROUND_TOWARD_ZERO ? 0 : 1;
    uint32_t overflow = toward_inf ? s.inf_code : s.max_code;
    code = code > s.max_code ? overflow : code;
    code = a == 0x7f800000u ? s.inf_code : code;
    code = a > 0x7f800000u ? s.nan_code : code;
    return (code << s.container_shift) | (sign << s.sign_shift);
}

/* code of format s -> fp32 value. Placing the code's exponent|mantissa at fp32's mantissa
 * position reads it as an fp32 number 2^(bias - 127) times too small (subnormals included,
 * since both sides are subnormal by the same rule); one exact multiply by a power of two fixes
 * the exponent. Assumes the FPU does not flush subnormals (no -ffast-math). */
static inline float fmt_kernel_decode(uint32_t c, FormatSpec s)
{
    uint32_t sign = (c >> s.sign_shift) & 1;
    uint32_t mag = (c >> s.container_shift) & s.mag_mask;
    float v = fmt_float_of(mag << (23 - s.mbits)) * s.decode_scale;
    uint32_t special = mag == s.inf_mag ? 0x7f800000u : 0x7fc00000u;
    uint32_t vb = mag >= s.special_from ? special : fmt_bits_of(v);
    return fmt_float_of(vb | (sign << 31));
}

/* SplitMix64's output function: a bijective mix with good avalanche. */
static inline uint64_t fmt_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* key = fmt_mix64(seed), computed once per call. The index-th SplitMix64 output from state key. */
static inline uint32_t fmt_kernel_random(uint64_t key, uint64_t index)
{
    return (uint32_t)(fmt_mix64(key + (index + 1) * 0x9e3779b97f4a7c15u) >> 32);
}

#endif

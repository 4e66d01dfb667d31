#ifndef TAPEGRAD_FORMAT_H
#define TAPEGRAD_FORMAT_H
/* Number formats emulated in software: fp32, tf32, bf16, fp16 and the OCP 8-bit and 4-bit
 * floats. Every function here is a pure function on scalars or arrays; nothing allocates.
 *
 * Three operations per format:
 *   encode  fp32 value -> the format's bits        (the rounding happens here)
 *   decode  bits       -> the exact fp32 value     (every format here fits in fp32 exactly)
 *   round   fp32 value -> nearest representable fp32 value, always decode(encode(x))
 *
 * Bits and containers. A scalar code is returned in the low bits of a uint32_t:
 *   fp32, tf32  32 bits: the fp32 bit pattern (tf32 is an fp32 with the low 13 bits zero)
 *   bf16, fp16  16 bits      e4m3, e5m2  8 bits      e2m1  4 bits
 * Packed arrays hold fp32/tf32 as uint32_t, bf16/fp16 as uint16_t, e4m3/e5m2 as uint8_t, and
 * e2m1 two per byte: element 2k in the LOW nibble of byte k, element 2k+1 in the high nibble
 * (an odd count leaves the last high nibble 0). fmt_packed_bytes() gives the size.
 *
 * Rounding (see Rounding below) is exact for every fp32 input, subnormals included (no flush to
 * zero), with gradual underflow in every target format. Overflow is decided on the rounded
 * magnitude: a value just above max that rounds down to max is not an overflow. On overflow:
 *   fp16, bf16, tf32, e5m2 (IEEE 754): nearest and stochastic modes give inf, toward zero gives
 *       max, up gives +inf or -max, down gives +max or -inf;
 *   e4m3 (no inf): the same, with NaN (sign kept) wherever IEEE would give inf;
 *   e2m1 (no inf, no NaN): always max;
 *   saturate = true: every format gives +-max, infinite inputs included.
 * An infinite input is not an overflow: it gives inf where the format has inf, NaN for e4m3, max
 * for e2m1 (and max in every format when saturating). A NaN input gives the format's quiet NaN
 * with the sign kept (fp32 keeps the exact bits); e2m1 has no NaN and gives +-max.
 * A zero result keeps the input's sign. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    FMT_FP32,
    FMT_TF32,
    FMT_BF16,
    FMT_FP16,
    FMT_E4M3,
    FMT_E5M2,
    FMT_E2M1,
    FMT_COUNT
} Format;

typedef enum {
    FMT_ROUND_NEAREST_EVEN,     /* "rne": ties to the even code (IEEE default) */
    FMT_ROUND_NEAREST_AWAY,     /* "rna": ties away from zero */
    FMT_ROUND_TOWARD_ZERO,      /* "rtz": truncate the magnitude */
    FMT_ROUND_UP,               /* "rup": toward +infinity */
    FMT_ROUND_DOWN,             /* "rdown": toward -infinity */
    FMT_ROUND_STOCHASTIC,       /* "stochastic": up with probability (x - lo) / (hi - lo) */
    FMT_ROUND_COUNT
} RoundMode;

/* How to round. (Rounding){0} is nearest-even without saturation. With
 * FMT_ROUND_STOCHASTIC, element i of a conversion draws its 32 random bits from
 * fmt_random_bits(seed, index of element i), so a result depends only on the value, the seed and
 * the element's index: never on how an array was split into chunks or threads. The probability of
 * rounding up is exact whenever fewer than 32 bits are dropped (always for normal results); for
 * inputs far below the smallest subnormal it is truncated to a multiple of 2^-32. */
typedef struct {
    RoundMode mode;
    bool      saturate;     /* overflow and infinities give +-max instead of inf or NaN */
    uint64_t  seed;         /* stochastic rounding only */
} Rounding;

typedef struct {
    const char *name;           /* "fp32", "tf32", "bf16", "fp16", "e4m3", "e5m2", "e2m1" */
    int    sign_bits;           /* 1 for all of them */
    int    exponent_bits;
    int    mantissa_bits;       /* stored fraction bits, without the implicit leading 1 */
    int    bias;                /* value = 2^(e - bias) * 1.m for exponent field e > 0 */
    int    bits;                /* sign + exponent + mantissa: the information content */
    int    bits_per_element;    /* storage in a packed array (tf32 lives in 32-bit containers) */
    float  max_finite;
    float  min_normal;          /* 2^(1 - bias) */
    float  min_subnormal;       /* 2^(1 - bias - mantissa_bits) */
    float  epsilon;             /* 2^-mantissa_bits: the gap between 1 and the next value */
    bool   has_inf;
    bool   has_nan;
} FormatInfo;

const FormatInfo *fmt_info(Format f);
/* Name of a format ("bf16"), and back; fmt_from_name returns -1 for an unknown name. */
const char *fmt_name(Format f);
int         fmt_from_name(const char *name);
/* Short name of a rounding mode ("rne", "rna", "rtz", "rup", "rdown", "stochastic"), and back
 * (-1 for an unknown name). */
const char *fmt_round_name(RoundMode m);
int         fmt_round_from_name(const char *name);

/* Scalars. index is the element index used by stochastic rounding (ignored otherwise); the
 * scalar result at index i equals element i of the array functions called with index0 = 0. */
uint32_t fmt_encode(Format f, float x, Rounding r, uint64_t index);
float    fmt_decode(Format f, uint32_t bits);
float    fmt_round(Format f, float x, Rounding r, uint64_t index);

/* The 32 random bits stochastic rounding uses for (seed, index): a counter-based hash (the
 * index-th output of SplitMix64 started from a scrambled seed). */
uint32_t fmt_random_bits(uint64_t seed, uint64_t index);

/* Arrays: the hot path. n values; element i uses stochastic index index0 + i. Single-threaded
 * on purpose (the caller decides who owns the cores): split an array into chunks, pass each
 * chunk's offset as index0, and the result is identical to one call. For e2m1 the packed buffer
 * starts at element 0 of the chunk, so chunks must start at even element offsets. */
size_t fmt_packed_bytes(Format f, size_t n);
void   fmt_encode_array(Format f, const float *x, void *packed, size_t n, Rounding r,
                        uint64_t index0);
void   fmt_decode_array(Format f, const void *packed, float *y, size_t n);
/* y[i] = fmt_round(f, x[i], r, index0 + i). x == y (in place) is allowed. */
void   fmt_round_array(Format f, const float *x, float *y, size_t n, Rounding r, uint64_t index0);

#endif

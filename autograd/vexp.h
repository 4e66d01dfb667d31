#ifndef TAPEGRAD_VEXP_H
#define TAPEGRAD_VEXP_H
/* exp(x) for x <= 0, and tanh(x) built on it, written so that a loop calling them vectorizes.
 *
 * Softmax, cross-entropy and attention all exponentiate x - max <= 0, and with libm's expf —
 * a function call the compiler cannot vectorize without -ffast-math — the exponentials were
 * half of an attention forward pass. This is the textbook method instead: x = n ln2 + r with n
 * an integer and |r| <= ln2/2, exp(r) by its Taylor series to degree 7 (truncation below 1e-8
 * relative), and 2^n put straight into the exponent bits. Against exp in double, on every 16th
 * float in [-87, 0]: within 1.2 ulp (tests/test_vexp.c prints the worst case). Below -87 the
 * result would be subnormal (exp reaches the last subnormal near -103) and is flushed to 0: a
 * probability of 1e-38 or less is zero to every softmax and cross-entropy here. NaN stays NaN,
 * so an overflow upstream still shows. */
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float vexp_nonpos(float x_in)
{
    const float LOG2E = 1.44269504f, LN2_HI = 0.693145752f, LN2_LO = 1.42860677e-6f;
    const float ROUND = 12582912.0f;           /* 1.5 * 2^23: adding it rounds to an integer */
    float x = x_in < -87.0f ? -87.0f : x_in;   /* keeps 2^n a normal float */
    float shifted = x * LOG2E + ROUND;         /* n sits in the low mantissa bits */
    float n = shifted - ROUND;
    float r = (x - n * LN2_HI) - n * LN2_LO;   /* ln2 in two parts keeps r exact enough */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    uint32_t bits;
    memcpy(&bits, &shifted, sizeof bits);
    bits = (bits - 0x4B400000u + 127u) << 23;  /* (n + 127) << 23 is the float 2^n */
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return x_in < -87.0f ? 0.0f : p * two_n;
}

/* tanh(u), also written to vectorize: GELU calls it once per element of the widest activation
 * of the model, and libm's tanhf, a call the compiler cannot vectorize, was a quarter of a
 * training step. tanh is odd, so work with a = |u| and put the sign back at the end:
 *     a >= 0.4:  tanh a = (1 - e) / (1 + e),  e = exp(-2a) = vexp_nonpos(-2a) <= 1
 *     a <  0.4:  its Taylor series to a^11; there 1 - e would cancel (e is close to 1 and its
 *                rounding error becomes a large relative error of 1 - e), while the series,
 *                whose terms shrink by (2a/pi)^2 < 0.07 each, is exact to well below an ulp.
 * Both are computed and one is picked, so the loop has no branch. Against tanh in double on
 * every 16th float in [0, 10] (larger u gives exactly 1): within 2.5 ulp (tests/test_vexp.c
 * prints the worst case, 2.2 ulp near 0.51). NaN stays NaN. */
static inline float vtanh(float u)
{
    float a = fabsf(u), a2 = a * a;
    float p = -1382.0f / 155925.0f;
    p = p * a2 + 62.0f / 2835.0f;
    p = p * a2 - 17.0f / 315.0f;
    p = p * a2 + 2.0f / 15.0f;
    p = p * a2 - 1.0f / 3.0f;
    float series = a + a * a2 * p;
    float e = vexp_nonpos(-2.0f * a);
    float ratio = (1.0f - e) / (1.0f + e);
    return copysignf(a < 0.4f ? series : ratio, u);
}

#endif

#ifndef TAPEGRAD_QUANT_DYNAMIC_H
#define TAPEGRAD_QUANT_DYNAMIC_H
/* The dynamic 8-bit code of 8-bit optimizers (Dettmers et al. 2021, "8-bit Optimizers via
 * Block-wise Quantization"): 256 levels in [-1, 1] (signed) or [0, 1] (unsigned), dense near 0
 * and spread over seven decades, for values divided by the absmax of their block.
 *
 * Linear int8 (quant.h) spaces its levels evenly, so everything below absmax / 254 becomes 0:
 * that is most of an Adam second moment, whose entries span many orders of magnitude. The
 * dynamic code spends its bits like a float: a level is 10^-e times a fraction in (0.1, 1),
 * and the smaller e, the more fractions. In the paper's bit layout an 8-bit code is
 *     [sign] [e zero bits] [indicator 1] [f fraction bits]
 * with e + 1 + f = 7 (signed), so decade e (magnitudes in (10^-e / 10, 10^-e)) has 2^(6-e)
 * fractions, e = 0 .. 6: 64 + 32 + 16 + 8 + 4 + 2 + 1 = 127 magnitudes per sign. The unsigned
 * code gives the sign bit to the fraction: 2^(7-e) per decade, 254 magnitudes. The f fraction
 * bits split (0.1, 1) into 2^f equal intervals and stand for their midpoints, 0.1 + (j + 1/2)
 * 0.9 / 2^f. Two levels complete the 256: exactly 0, and exactly 1 (so the block's absmax is
 * stored without error).
 *
 * Levels are sorted ascending and a code is a level's index: signed codes run from -0.993 (code
 * 0) through 0 (code 127) to 1 (code 255); unsigned ones from 0 (code 0) to 1 (code 255). The
 * smallest non-zero magnitude is 10^-6 times 0.55 (signed) or 0.325 (unsigned).
 *
 * Blockwise use: each block of values is divided by its absmax (one fp32 per block), mapped to
 * the nearest level, and stored as one byte per value.
 *
 * Or mapped stochastically: to one of the two levels around it, the upper one with probability
 * (v - lower) / (upper - lower), so the decoded value equals the input on average. A state that
 * is re-encoded every step needs this when its changes are smaller than half a level gap:
 * rounding to the nearest level undoes each change, and the state sticks where it is (8-bit
 * Adam's first moment, docs/memory.md). The random bits of element i come from a counter-based
 * hash of (seed, index0 + i) (fmt_random_bits' generator, precision/format.h): no shared
 * generator state, so a result depends on the value, the seed and the element's index alone,
 * never on how the work was split between threads. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { QDYN_LEVELS = 256 };

typedef struct {
    bool  is_signed;
    float level[QDYN_LEVELS];           /* ascending */
    float mid[QDYN_LEVELS - 1];         /* mid[k] = (level[k] + level[k + 1]) / 2 */
} QdynCode;

/* Builds the signed or unsigned code from the construction above. */
void    qdyn_code_init(QdynCode *code, bool is_signed);
/* The code of the level nearest to v (v in [-1, 1], or [0, 1] unsigned; beyond, the end
 * levels). A value exactly between two levels takes the lower one. */
uint8_t qdyn_nearest(const QdynCode *code, float v);
/* The code of exactly 0 (127 signed, 0 unsigned). */
uint8_t qdyn_zero_code(const QdynCode *code);

/* One block: absmax of x[0..n), then codes of x / absmax. A block of zeros has absmax 0 and the
 * zero code everywhere. Returns the absmax. */
float   qdyn_quantize_block(const QdynCode *code, const float *x, size_t n, uint8_t *codes);
/* The same with stochastic rounding; element i draws its random bits from (seed, index0 + i).
 * Unsigned, a positive value below the smallest positive level still keeps that level. */
float   qdyn_quantize_block_stochastic(const QdynCode *code, const float *x, size_t n,
                                       uint64_t seed, uint64_t index0, uint8_t *codes);
/* A seed for one stochastic encode made from a run's seed and two counters (8-bit Adam: the
 * step, and the parameter and moment), scrambled so that neighbouring counters give unrelated
 * random bits. */
uint64_t qdyn_stream_seed(uint64_t seed, uint64_t a, uint64_t b);
/* y = level[codes] * absmax. */
void    qdyn_dequantize_block(const QdynCode *code, const uint8_t *codes, size_t n, float absmax,
                              float *y);

/* Whole arrays in blocks of `block` values (the last one may be shorter): nblocks =
 * ceil(n / block) absmax values. */
void    qdyn_quantize(const QdynCode *code, const float *x, size_t n, size_t block,
                      uint8_t *codes, float *absmax);
void    qdyn_dequantize(const QdynCode *code, const uint8_t *codes, size_t n, size_t block,
                        const float *absmax, float *y);

#endif

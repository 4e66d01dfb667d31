#ifndef TAPEGRAD_QUANT_H
#define TAPEGRAD_QUANT_H
/* Quantization: a tensor stored as small integer codes plus a few fp32 constants.
 *
 *   int8, int4  linear. Symmetric (absmax): scale = absmax / qmax, code = round(x / scale) in
 *               [-127, 127] or [-7, 7]; x ~ code * scale. Asymmetric: scale = (max - min) /
 *               (2^bits - 1) over a range stretched to include 0, an integer zero point z so that
 *               0 is exact, code = round(x / scale) + z in [0, 255] or [0, 15]; x ~ (code - z) *
 *               scale.
 *   nf4         the 16 NormalFloat levels of QLoRA (quantiles of N(0,1) with an exact zero,
 *               normalised to [-1, 1]); scale = absmax, code = the nearest level to x / scale.
 *
 * Constants come per block of `block` consecutive values: 0 means one block for the whole
 * tensor, the row length gives one per row, 64 is QLoRA's choice for nf4. The last block may be
 * shorter. Double quantization (QLoRA) then quantizes the block scales themselves: subtract
 * their mean, and store them as e4m3 8-bit floats in blocks of dq_block (256), each with one fp32
 * constant (its absmax / 448). Codes are chosen against the scales that dequantization will use
 * (after double quantization), so the two steps do not add up their errors blindly.
 *
 * Storage. Codes: int8 one byte each (two's complement when symmetric, unsigned when
 * asymmetric); int4 and nf4 two per byte, element 2k in the LOW nibble of byte k (int4 symmetric
 * as a 4-bit two's complement). All arrays of a QuantTensor live in one caller-provided buffer of
 * quant_bytes() bytes (so an allocator can account for every byte), carved by quant_bind();
 * quant_new() / quant_free() do the same with malloc for standalone use. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { QUANT_INT8, QUANT_INT4, QUANT_NF4, QUANT_KIND_COUNT } QuantKind;

typedef struct {
    QuantKind kind;
    size_t    block;          /* values per block of constants; 0 = one block for all */
    bool      asymmetric;     /* int8/int4 only: scale and zero point instead of absmax */
    bool      double_quant;   /* quantize the block scales to e4m3 */
    size_t    dq_block;       /* scales per double-quantization block; 0 means 256 */
} QuantConfig;

typedef struct {
    QuantConfig cfg;          /* as bound: block and dq_block resolved (never 0) */
    size_t   n;               /* values */
    size_t   nblocks;         /* blocks of cfg.block values */
    size_t   ndq;             /* double-quantization blocks (0 without double quantization) */
    uint8_t *codes;           /* quant_code_bytes(kind, n) bytes */
    float   *scales;          /* nblocks fp32 scales; NULL with double quantization */
    uint8_t *zeros;           /* nblocks zero points; NULL unless asymmetric */
    uint8_t *scale_codes;     /* nblocks e4m3 codes of the centred scales (double quant) */
    float   *dq_scales;       /* ndq fp32 constants (double quant) */
    float   *scale_mean;      /* one fp32: the mean subtracted from the scales (double quant) */
} QuantTensor;

typedef struct {
    double max_abs;           /* max |x - y| */
    double rms;               /* sqrt(mean (x - y)^2) */
    double sqnr_db;           /* 10 log10(sum x^2 / sum (x - y)^2); +inf when y == x */
} QuantError;

const char *quant_kind_name(QuantKind k);            /* "int8", "int4", "nf4" */
int         quant_kind_from_name(const char *name);  /* -1 when unknown */
int         quant_code_bits(QuantKind k);            /* 8 or 4 */
size_t      quant_code_bytes(QuantKind k, size_t n);

/* Storage of n values under cfg, every constant included; 0 for an invalid cfg (asymmetric
 * nf4). Bits per parameter for a large tensor (per-tensor constants left out): codes +
 * constants per block + double-quantization constants, e.g. 4 + 8/64 + 32/(64*256) = 4.127
 * for nf4 with double quantization at 64/256, 4 + 32/64 = 4.5 without. */
size_t quant_bytes(QuantConfig cfg, size_t n);
double quant_bits_per_param(QuantConfig cfg);

/* Point q's arrays into storage (quant_bytes(cfg, n) bytes, aligned for float). Returns 0, or
 * -1 for an invalid cfg. */
int          quant_bind(QuantTensor *q, QuantConfig cfg, size_t n, void *storage);
QuantTensor *quant_new(QuantConfig cfg, size_t n);   /* NULL: invalid cfg, n == 0, no memory */
void         quant_free(QuantTensor *q);

/* Quantize x[0..n) into q (n as bound). */
void  quant_quantize(QuantTensor *q, const float *x);
/* Dequantize all of q into an fp32 buffer of q->n values: the path a QLoRA matmul takes. */
void  quant_dequantize(const QuantTensor *q, float *y);
/* Dequantize values [first, first + count) into y[0..count): a row or a tile. */
void  quant_dequantize_range(const QuantTensor *q, size_t first, size_t count, float *y);
/* The scale block b dequantizes with (after double quantization, if any), and its zero point
 * (0 when symmetric). */
float quant_block_scale(const QuantTensor *q, size_t b);
int   quant_block_zero(const QuantTensor *q, size_t b);
/* The integer code of value i: int8/int4 as the signed or unsigned integer, nf4 as 0..15. */
int   quant_code_at(const QuantTensor *q, size_t i);

QuantError quant_error(const float *x, const float *y, size_t n);

/* NF4. The 16 levels, ascending, from -1 to 1 with level 7 exactly 0, as fp32. */
const float *quant_nf4_codebook(void);
/* The levels built from their definition (quantiles of the standard normal, see quant_nf4.c):
 * what quant_nf4_codebook() holds, derived instead of written down. */
void         quant_nf4_construct(double levels[16]);
/* Index of the level nearest to v (v in [-1, 1]; beyond, the end levels). A tie between two
 * levels goes to the lower one. */
int          quant_nf4_nearest(float v);

#endif

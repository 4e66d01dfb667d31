#ifndef TAPEGRAD_ADAM8BIT_H
#define TAPEGRAD_ADAM8BIT_H
/* 8-bit AdamW (Dettmers et al. 2021, "8-bit Optimizers via Block-wise Quantization"): the rule
 * of adamw.h, with both moments stored in one byte per element instead of four.
 *
 * Storage, per parameter of n >= min_8bit elements, in blocks of `block` (2048) elements:
 *     m   n bytes: codes of the signed dynamic code (precision/quant_dynamic.h)
 *     v   n bytes: codes of the unsigned dynamic code (v >= 0, so the sign bit is a fraction bit)
 *     m_absmax, v_absmax   one fp32 per block: the block's largest magnitude
 * so 2 + 8 / 2048 bytes per element, 0.2505 of AdamW's 8. Blocks keep one outlier from
 * flattening a whole tensor to zero, and let every block be processed on its own. Parameters
 * under min_8bit (4096) elements (biases, LayerNorm gains) keep fp32 m and v, as bitsandbytes
 * does: they are a sliver of the memory, and quantizing them costs accuracy for nothing.
 *
 * One step, per block: decode m and v into a block-sized fp32 buffer on the stack (the
 * "registers" of the paper's GPU kernel), apply AdamW's update to the parameter with the fp32
 * moments, and encode the new moments with fresh absmax values. The update itself is therefore
 * exact given the decoded state; the only error is what rounding to 256 levels forgets
 * between steps. Blocks are independent, so they run in parallel with results that do not
 * depend on the thread count.
 *
 * Rounding: to the nearest level by default (the paper's), or stochastically, to one of the two
 * neighbouring levels with the probability that makes the stored moment right on average.
 * Nearest rounding loses every change smaller than half a level gap: for a small entry in a
 * block whose absmax is large, b1 = 0.9 moves m a tenth of the way to a new gradient, so m can
 * stick on a stale level (test_adam8bit.c shows it a third short; stochastic rounding is exact
 * on average). On train_gpt's task that made no measurable difference to the final loss
 * (docs/memory.md has the paired runs), so the paper's rule stays the default. The random bits
 * come from a hash of (seed, step, parameter, moment, element): no generator state, nothing to
 * save beyond the step counter, and the same bits on any number of threads.
 *
 * Buffer names: "adam8bit.m.<name>", "adam8bit.v.<name>" (U8 codes, or F32 moments for a small
 * parameter), "adam8bit.m_absmax.<name>", "adam8bit.v_absmax.<name>" (F32, 8-bit ones only). */
#include <stddef.h>

#include "optim/adamw.h"
#include "optim/optim.h"
#include "precision/quant_dynamic.h"

/* How the moments are re-encoded after each update (precision/quant_dynamic.h). */
typedef enum {
    ADAM8BIT_ROUND_NEAREST,     /* "nearest": the paper's rule */
    ADAM8BIT_ROUND_STOCHASTIC,  /* "stochastic": unbiased, a small change is kept on average */
    ADAM8BIT_ROUND_COUNT
} Adam8bitRounding;

typedef struct {
    AdamWConfig      adam;      /* betas, eps, weight decay and its rule: as AdamW */
    size_t           block;     /* elements per absmax block (2048) */
    size_t           min_8bit;  /* smaller parameters keep fp32 moments (4096) */
    Adam8bitRounding rounding;
    uint64_t         seed;      /* stochastic rounding's: element j of parameter i at step t
                                 * draws from (seed, t, i, the moment, j) */
} Adam8bitConfig;

typedef struct {
    Optim          base;    /* first: an Adam8bit * is an Optim * */
    Adam8bitConfig cfg;
    QdynCode       code_m;  /* signed */
    QdynCode       code_v;  /* unsigned */
} Adam8bit;

/* adamw_defaults(), block 2048, min_8bit 4096, nearest rounding, seed 0. */
Adam8bitConfig adam8bit_defaults(void);
/* "nearest", "stochastic" (NULL-terminated, indexed by Adam8bitRounding); a rounding's name. */
extern const char *const ADAM8BIT_ROUNDING_NAMES[];
const char    *adam8bit_rounding_name(Adam8bitRounding r);
Adam8bit      *adam8bit_new(Tensor *const *params, int n, Adam8bitConfig cfg);
/* True when parameter i keeps its moments as 8-bit codes. */
bool           adam8bit_is_quantized(const Adam8bit *a, int i);
/* Parameter i's moments decoded to fp32, n elements each (for tests and inspection). */
void           adam8bit_moments(const Adam8bit *a, int i, float *m, float *v);

#endif

#ifndef TAPEGRAD_MEMCALC_LECTURE_H
#define TAPEGRAD_MEMCALC_LECTURE_H
/* The lecture's activation numbers, by the memory model (memory_calculator --lecture,
 * docs/memory.md): GPT-2 1.5B as the slide sizes it (L 48, C 1600, H 25, T 1024, GPT-2's
 * vocabulary, B 32), the slide's count of activations beside ours (every tensor our ops keep,
 * nn/gpt_acts.c) for vanilla, per-block (every:1) and sqrt checkpointing, standard or tiled
 * attention, fp32 or 16-bit (a bf16 policy) activations. In: nothing but the shape; out: bytes,
 * and the lecture's tables that set them beside what the slide and the ZeRO paper cite. */
#include <stdio.h>

#include "plan/memcalc.h"

extern const GptConfig MC_GPT2_XL;
enum { MC_GPT2_XL_BATCH = 32 };

/* The strategies of the table, in its order: "vanilla", "every:1", "sqrt". */
enum { MC_LECTURE_NSTRATEGIES = 3 };
extern const char *const MC_LECTURE_STRATEGIES[MC_LECTURE_NSTRATEGIES];

typedef struct {
    double slide[2];        /* the slide's formula 12 x C B T L, 4 and 2 bytes a value */
    /* Our peak act: [strategy][standard, tiled][fp32, 16-bit]. */
    double ours[MC_LECTURE_NSTRATEGIES][2][2];
    double slide_sqrt;      /* the slide's 16-bit count over sqrt(L): the ZeRO paper's saving */
    /* The slide's values with per-block checkpoints: one block input (B T C, 2 bytes) kept per
     * layer and one layer's 12 B T C recorded again at a time. */
    double slide_per_block;
    double probs_fp32;      /* one block's attention probabilities [B, H, T, T] in fp32 */
    double logits_fp32;     /* the head's B x T x V logits in fp32 */
    int    sqrt_interval;   /* sqrt's K = ceil(sqrt(L)) */
} McLectureActs;

McLectureActs memcalc_lecture_acts(void);

/* What the optim category holds for an optimizer, in words per parameter (Psi): "fp32 master
 * weights 4 Psi + AdamW's m 4 Psi + v 4 Psi" with master weights, "AdamW's m 4 Psi + v 4 Psi"
 * without. */
const char *memcalc_optim_holds(McOptimizer o, bool masters);

/* The lecture's tables as memory_calculator --lecture prints them (docs/lecture.md and
 * docs/memory.md quote them): GPT-2 1.5B's fp16 weights and model states under mixed-precision
 * Adam, ZeRO's stages for 7.5e9 parameters on 64 ranks and the other optimizers' states, the
 * activations (memcalc_lecture_acts) beside what the slide and the ZeRO paper cite, with notes,
 * and the 6 GB fused gradient buffer. */
void memcalc_lecture_print(FILE *out);

#endif

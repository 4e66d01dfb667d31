#ifndef TAPEGRAD_ADAMW_H
#define TAPEGRAD_ADAMW_H
/* Adam with decoupled weight decay (Loshchilov and Hutter, 2019), as torch.optim.AdamW, so a
 * PyTorch run with the same numbers gives the same parameters. At step t = 1, 2, ... (the step
 * counter after it is incremented), for parameter p with gradient g, at learning rate lr:
 *
 *     p <- p - lr wd p                       decoupled weight decay (where decay[i]): it shrinks
 *                                            p directly, never passing through m and v, so it
 *                                            is not rescaled by 1/sqrt(v) as an L2 term would be
 *     m <- b1 m + (1 - b1) g                 first moment
 *     v <- b2 v + (1 - b2) g^2               second moment
 *     p <- p - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 *
 * m and v start at 0, so without the bias corrections 1 - b^t they are too small early on; with
 * them the first update is lr g / (|g| + eps), about lr sign(g), whatever the scale of g.
 *
 * Arithmetic, matched to PyTorch's: the constants (b1, 1 - b1, b2, 1 - b2, eps, 1 - lr wd,
 * lr / (1 - b1^t), sqrt(1 - b2^t)) are computed in double and rounded to float once, and the
 * per-element work is in float, in the form
 *     p <- p - (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * (PyTorch updates m with lerp, m + (1 - b1)(g - m), which is the same number up to rounding.) */
#include "optim/optim.h"

typedef struct {
    double         beta1, beta2;
    double         eps;
    double         weight_decay;   /* wd */
    OptimDecayRule decay_rule;
} AdamWConfig;

typedef struct {
    Optim       base;              /* first: an AdamW * is an Optim * */
    AdamWConfig cfg;
} AdamW;

/* What update number t shares across parameters, worked out once in double and rounded to
 * float where PyTorch rounds (8-bit Adam, adam8bit.h, uses the same constants). */
typedef struct {
    float b1, one_minus_b1, b2, one_minus_b2, eps;
    float step_size;       /* lr / (1 - b1^t) */
    float bc2_sqrt;        /* sqrt(1 - b2^t) */
    float shrink_decayed;  /* 1 - lr wd: the decoupled decay of a parameter that decays */
} AdamWStep;

AdamWStep adamw_step_constants(const AdamWConfig *c, double lr, long t);

/* PyTorch's defaults: b1 0.9, b2 0.999, eps 1e-8, weight decay 0.01; OPTIM_DECAY_MATRICES. */
AdamWConfig adamw_defaults(void);
/* Every field of an AdamWConfig, each declared once (rows in optim/adamw.c): a training snapshot
 * keeps them as "optim.*" (TRAINER_SCHEMA, optim/train.h; 8-bit Adam's too). The ranges are
 * the ones a run can use: the betas short of 1 by at least what a float tells apart at that
 * length of memory, eps a normal float (the update rounds it to float). */
extern const Schema ADAMW_SCHEMA;
/* State: "adamw.m.<name>" and "adamw.v.<name>" per parameter (8 bytes per parameter element). */
AdamW      *adamw_new(Tensor *const *params, int n, AdamWConfig cfg);

#endif

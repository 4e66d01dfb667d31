#ifndef TAPEGRAD_ADAFACTOR_H
#define TAPEGRAD_ADAFACTOR_H
/* Adafactor (Shazeer and Stern 2018, "Adafactor: Adaptive Learning Rates with Sublinear Memory
 * Cost"): Adam's per-element second moment replaced, for a matrix, by its row and column sums,
 * so the state of an r x c matrix is r + c floats instead of 2 r c.
 *
 * At step t = 1, 2, ... for a parameter X with gradient G (a tensor of two or more dimensions is
 * seen as a matrix [rows, last dimension]):
 *
 *     b2  = 1 - t^(-0.8)                      (0 on the first step: no bias correction needed,
 *                                              and the average lengthens as training goes on)
 *     matrix:  R <- b2 R + (1 - b2) (G^2 + e1) 1      row sums      [rows]
 *              C <- b2 C + (1 - b2) 1^T (G^2 + e1)    column sums   [cols]
 *              V = R C / sum(R)                       rank-1 estimate of the second moment
 *     vector:  V <- b2 V + (1 - b2) (G^2 + e1)        full, as Adam
 *     U   = G / sqrt(V)
 *     U  <- U / max(1, RMS(U) / d)            update clipping, d = 1: a step with an unusually
 *                                              large gradient for its V is shrunk as a whole
 *     M  <- b1 M + (1 - b1) U;  U <- M        only with a first moment (b1 > 0; off by default:
 *                                              it costs as much memory as the parameter)
 *     rho = min(1e-2, 1 / sqrt(t))            relative step size (relative_step), or the lr
 *                                              argument of optim_step (absolute mode)
 *     a   = rho * max(e2, RMS(X))             scale_parameter; a = rho without it
 *     X  <- X - a wd X - a U                  decoupled weight decay (where decay[i]) with the
 *                                              same step size a
 * with e1 = 1e-30 and e2 = 1e-3. RMS(X) is taken before the step.
 *
 * Modes. The paper's (relative_step and scale_parameter, the defaults) ignores the lr passed to
 * optim_step: the schedule is built in. The absolute mode (relative_step false) takes lr from
 * the caller, so train_gpt's --lr and its schedules (optim/schedule.h) drive Adafactor as they
 * drive AdamW; with scale_parameter still on, lr is then relative to each tensor's RMS (lr 1e-2
 * moves a weight of RMS 0.02 by 2e-4), so set scale_parameter false for an Adam-like lr.
 *
 * Buffers (F32): "adafactor.row.<name>" [rows] and "adafactor.col.<name>" [cols] for a matrix,
 * "adafactor.v.<name>" [n] for a vector, "adafactor.m.<name>" [n] when b1 > 0.
 *
 * Sums are accumulated in double, in an order fixed by the shape alone, so results do not depend
 * on the number of threads. */
#include <stdbool.h>

#include "optim/optim.h"

typedef struct {
    double         beta1;            /* 0: no first moment */
    double         decay_exponent;   /* 0.8: b2 = 1 - t^-0.8 */
    double         eps1, eps2;       /* 1e-30, 1e-3 */
    double         clip_threshold;   /* d = 1; 0 turns clipping off */
    bool           relative_step;    /* rho = min(1e-2, 1/sqrt(t)) instead of the lr argument */
    bool           scale_parameter;  /* step size times max(eps2, RMS(X)) */
    bool           factored;         /* row and column sums for matrices (else full V) */
    double         weight_decay;
    OptimDecayRule decay_rule;
} AdafactorConfig;

typedef struct {
    Optim           base;            /* first: an Adafactor * is an Optim * */
    AdafactorConfig cfg;
} Adafactor;

/* The paper's: no first moment, relative step, parameter scaling, factored, d = 1, no decay. */
AdafactorConfig adafactor_defaults(void);
/* Every field of an AdafactorConfig, each declared once (rows in optim/adafactor.c): a training
 * snapshot keeps them as "optim.*" (TRAINER_SCHEMA, optim/train.h). The epsilons normal floats
 * (the updates round them to float). */
extern const Schema ADAFACTOR_SCHEMA;
Adafactor      *adafactor_new(Tensor *const *params, int n, AdafactorConfig cfg);
/* True when parameter i has a factored second moment (row and column sums). */
bool            adafactor_is_factored(const Adafactor *a, int i);

#endif

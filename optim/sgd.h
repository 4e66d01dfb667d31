#ifndef TAPEGRAD_SGD_H
#define TAPEGRAD_SGD_H
/* Stochastic gradient descent with momentum, as torch.optim.SGD (dampening 0), so a PyTorch
 * run with the same numbers gives the same parameters. For parameter p with gradient g, at
 * learning rate lr:
 *
 *     g <- g + wd p              weight decay as an L2 term added to the gradient (where
 *                                decay[i]); PyTorch's SGD does this, unlike AdamW's decoupled
 *                                decay. Without momentum the two are the same update.
 *     b <- mu b + g              momentum buffer; it starts at 0, so the first b is g
 *     g <- g + mu b  (Nesterov)  or  g <- b
 *     p <- p - lr g
 *
 * With momentum 0 there is no buffer and no state. Nesterov needs momentum > 0. */
#include <stdbool.h>

#include "optim/optim.h"

typedef struct {
    double         momentum;       /* mu; 0 is plain SGD */
    bool           nesterov;
    double         weight_decay;   /* wd */
    OptimDecayRule decay_rule;
} SgdConfig;

typedef struct {
    Optim     base;                /* first: an Sgd * is an Optim * */
    SgdConfig cfg;
} Sgd;

/* momentum 0.9, no Nesterov, no weight decay, OPTIM_DECAY_MATRICES. */
SgdConfig sgd_defaults(void);
/* Every field of an SgdConfig, each declared once (rows in optim/sgd.c): a training snapshot
 * keeps them as "optim.*" (TRAINER_SCHEMA, optim/train.h). Nesterov needs momentum > 0. */
extern const Schema SGD_SCHEMA;
/* State: one buffer per parameter, "sgd.momentum.<name>", when momentum != 0. */
Sgd      *sgd_new(Tensor *const *params, int n, SgdConfig cfg);

#endif

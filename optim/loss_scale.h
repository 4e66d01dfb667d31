#ifndef TAPEGRAD_LOSS_SCALE_H
#define TAPEGRAD_LOSS_SCALE_H
/* Loss scaling: backward is seeded with S instead of 1, so every gradient is S times larger and
 * small ones that fp16 would flush to zero survive (Micikevicius et al. 2018); before the
 * optimizer sees them the parameter gradients are multiplied by 1/S again (unscaled). A power
 * of two cancels exactly: the unscaled gradients are the bits an unscaled run would have made,
 * as long as nothing overflowed or underflowed on the way.
 *
 * Three modes, with the rules of PyTorch's torch.cuda.amp.GradScaler:
 *
 *   none      S = 1.
 *   static    a fixed S, given by the user.
 *   dynamic   S starts at init_scale (2^16); a step whose gradients hold an inf or a NaN (S was
 *             too large: something overflowed) multiplies S by backoff_factor (0.5); after
 *             growth_interval (2000) clean steps in a row S is multiplied by growth_factor (2),
 *             unless that would make it infinite, and the count restarts.
 *
 * In every mode a step with an inf or NaN gradient is skipped: the optimizer does not move, so
 * one overflow cannot poison the weights or the optimizer's moments. The scale is only read by
 * the next backward, so "skip, then update the scale" and the reverse give the same run.
 *
 * One optimizer step is one check and one update, however many micro-batches were accumulated
 * before it (their gradients add up scaled; unscaling once at the end is exact for a power of
 * two), and clipping comes after unscaling, so the clip threshold means the same at any S.
 *
 *     LossScaler s = loss_scale_new(&cfg);
 *     ... tape_backward_seeded(tape, loss, &(float){ loss_scale_value(&s) }) ...
 *     bool found_inf = loss_scale_unscale_grads(&s, params, n);
 *     ... clip ...
 *     if (!loss_scale_update(&s, found_inf))
 *         optim_step(opt, lr);
 */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/schema.h"
#include "autograd/tensor.h"

typedef enum { LOSS_SCALE_NONE, LOSS_SCALE_STATIC, LOSS_SCALE_DYNAMIC } LossScaleMode;

typedef struct {
    LossScaleMode mode;
    double        init_scale;       /* static: S; dynamic: the first S (default 65536) */
    double        growth_factor;    /* dynamic: > 1 (default 2) */
    double        backoff_factor;   /* dynamic: in (0, 1) (default 0.5) */
    long          growth_interval;  /* dynamic: clean steps before growing, >= 1 (default 2000) */
} LossScaleConfig;

typedef struct {
    LossScaleConfig cfg;
    float           scale;          /* S of the next backward (a float, as PyTorch keeps it) */
    long            growth_tracker; /* dynamic: clean steps in a row since S last changed */
    long            checks;         /* loss_scale_unscale* calls: one per optimizer step */
    long            skipped;        /* steps loss_scale_update said to skip */
} LossScaler;

/* Mode none with GradScaler's defaults for the other fields (so "dynamic" only sets mode). */
LossScaleConfig loss_scale_defaults(void);
/* "none", "static:S" (S > 0 and finite) or "dynamic", "dynamic:INIT"; other fields keep
 * GradScaler's defaults. On failure false, with one message in err ("static:abc: 'abc' is not
 * a positive number"). */
bool            loss_scale_parse(const char *s, LossScaleConfig *out, char *err, size_t len);
/* The inverse of loss_scale_parse: "none", "static:1024", "dynamic:65536". */
const char     *loss_scale_format(const LossScaleConfig *c, char *buf, size_t len);
/* Mode names by LossScaleMode, NULL-terminated: "none", "static", "dynamic". */
extern const char *const LOSS_SCALE_MODE_NAMES[];
/* The fields in their ranges (above); false with a message naming the field otherwise. */
bool            loss_scale_check(const LossScaleConfig *c, char *err, size_t len);
/* The longest growth interval a user or a file may give (train_gpt's --scale-growth-interval,
 * its LOSS_SCALE_SCHEMA row for a snapshot). */
#define LOSS_SCALE_MAX_INTERVAL 1000000000L
/* Every field of a LossScaleConfig, each declared once (rows in optim/loss_scale.c): a training
 * snapshot keeps them as "loss_scale.*" (TRAINER_SCHEMA's loss_scale row, optim/train.h). The
 * factors are checked as the dynamic mode takes them, whatever the mode: a file holds no value
 * that is wrong but unused. */
extern const Schema LOSS_SCALE_SCHEMA;

/* A scaler at the start: S = init_scale (1 for none), no step counted. An invalid config is a
 * programming error (check it with loss_scale_check). */
LossScaler      loss_scale_new(const LossScaleConfig *c);
/* S for the next backward. */
float           loss_scale_value(const LossScaler *s);

/* Multiplies the n buffers grads[i] of counts[i] floats by 1/S in place (NULL buffers are
 * skipped) and returns whether any unscaled value is an inf or a NaN: one pass over the data.
 * 1/S is rounded to float once, as PyTorch does, so for a power of two S the result is exact. */
bool            loss_scale_unscale(LossScaler *s, float *const *grads, const size_t *counts,
                                   int n);
/* The same over the gradients of n tensors (those without one are skipped). */
bool            loss_scale_unscale_grads(LossScaler *s, Tensor *const *params, int n);
/* After the step's check: moves S by the mode's rules and returns true when the optimizer step
 * must be skipped (found_inf, in every mode). */
bool            loss_scale_update(LossScaler *s, bool found_inf);

#endif

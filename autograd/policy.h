#ifndef TAPEGRAD_POLICY_H
#define TAPEGRAD_POLICY_H
/* A precision policy: which dtype each kind of tensor is stored in and which format a matmul
 * rounds its inputs to. One struct, given to the tape (tape->policy), read by the ops and the
 * optimizer; NULL means plain fp32 everywhere.
 *
 *   param    storage of the model's parameters: the working copy the forward reads. When it is
 *            not fp32 the optimizer holds fp32 master weights (optim category) and refreshes
 *            the packed copy from them after every step (optim/optim.h).
 *   act      storage of the activations the tape keeps for backward: every op's output is
 *            rounded to this dtype and packed as soon as the op has recorded it, so a bf16
 *            activation occupies 2 bytes in the act category. Ops decode their inputs into a
 *            scratch (temp) copy for the length of one forward or backward call.
 *   grad     the format activation gradients are rounded to after every backward step (this
 *            is where fp16 underflows); they are held in fp32 buffers (temp) with the low
 *            format's values. A parameter's gradient is rounded to the parameter's dtype after
 *            every node and stored in it, packed in the grad category (autograd/tensor.h,
 *            "packed gradients"; docs/mixed_precision.md); under fp8 it is the policy's
 *            e5m2 instead (policy_param_grad_dtype).
 *   compute  the format of matmul inputs (x and w forward; dy, x and w backward), with fp32
 *            accumulation; with accumulate_low set every partial sum is rounded to it too, to
 *            show why nobody accumulates in 16 bits.
 *   grad_compute  the format of dy in the backward products: e5m2 for fp8, else = compute.
 *
 * Softmax, layernorm, reductions and the loss compute in fp32 (they decode, compute, round the
 * result to the act dtype), as mixed-precision training does.
 *
 * fp8 (e4m3, e5m2) has too little range to store a tensor as is: it is stored as
 * round(x * s) with a per-tensor scale s = max_finite / amax (policy_fp8_scale below), the amax
 * of the tensor itself (current scaling) or the largest of the last `fp8_window` steps' amaxes
 * at the same place in the tape (delayed scaling; a step is a recorded forward: a pass that does
 * not record, like an evaluation, uses current scaling and leaves the history alone). */
#include <stdbool.h>

#include "autograd/schema.h"
#include "autograd/tensor.h"
#include "precision/format.h"

typedef enum { POLICY_FP8_CURRENT, POLICY_FP8_DELAYED } PolicyFp8Scaling;

typedef struct {
    const char      *name;          /* "fp32", "tf32", "bf16", "fp16", "fp8" */
    Dtype            param, act, grad;
    Format           compute, grad_compute;
    bool             accumulate_low;
    PolicyFp8Scaling fp8_scaling;
    int              fp8_window;    /* delayed scaling: amax history length (steps) */
} PrecisionPolicy;

/* Every field of a PrecisionPolicy, each declared once (rows in autograd/policy.c): the preset
 * it started from ("policy", the whole struct by its name), then every field, which must agree
 * with the preset (a training snapshot's reader checks it), then the fp8 scaling and its window,
 * the run's own choice on top of the preset. A training snapshot keeps them as "precision.*"
 * (TRAINER_SCHEMA's precision row, optim/train.h). */
extern const Schema POLICY_SCHEMA;

/* The presets train_gpt --precision offers:
 *   fp32   everything fp32 (the same as no policy)
 *   tf32   fp32 storage, matmul inputs rounded to tf32
 *   bf16   params, activations and gradients bf16, bf16 matmul inputs
 *   fp16   params, activations and gradients fp16, fp16 matmul inputs (needs loss scaling)
 *   fp8    params bf16; activations e4m3, gradients e5m2, each with a per-tensor scale;
 *          matmul inputs e4m3 forward, dy e5m2 backward (current scaling)
 * Returns false for an unknown name. */
bool        policy_preset(const char *name, PrecisionPolicy *out);
/* "fp32|tf32|bf16|fp16|fp8" for help texts. */
const char *policy_preset_names(void);
/* True when the policy changes nothing (all fp32, fp32 compute): the fast path. */
bool        policy_is_fp32(const PrecisionPolicy *p);
/* fp8 (e4m3, e5m2): the formats stored with a per-tensor scale. */
bool        policy_is_scaled(Format f);
/* The dtype of a parameter's gradient (p not NULL): the parameter's own (PyTorch's rule: bf16
 * under bf16, fp16 under fp16, the policy's grad dtype as well in those presets), except when
 * the policy's gradients are fp8: then e5m2, the gradient format of fp8 training, 1 byte a
 * value with a per-tensor scale (autograd/tensor.h, "packed gradients"). The fp8 preset's
 * bf16 parameters therefore get e5m2 gradients. */
Dtype       policy_param_grad_dtype(const PrecisionPolicy *p);
/* Whether p (NULL: fp32) stores activations in fp8 with delayed scaling, the one case with an
 * amax history. */
bool        policy_delays_fp8(const PrecisionPolicy *p);
/* The longest window of amax history a policy may ask for (Transformer Engine's default is
 * 1024): --fp8-scaling delayed:W and a snapshot's precision.fp8_window are held to it. */
#define POLICY_FP8_MAX_WINDOW 4096
/* Steps of amax history delayed scaling keeps: fp8_window, a window of 0 counting as 1. */
int         policy_fp8_window(const PrecisionPolicy *p);

/* fp8's per-tensor scale for a tensor whose largest magnitude is amax: max_finite / amax, so
 * the largest value lands on the format's largest; 1 for other formats and for amax 0, inf or
 * NaN (an inf or NaN then stays one, for loss scaling to see). */
float       policy_fp8_scale(Format f, float amax);
/* Largest |x[i]| (NaN if any is NaN), in parallel. */
float       policy_amax(const float *x, size_t n);
/* The current scale for storing x in f: policy_fp8_scale of x's amax for fp8, else 1 without
 * reading x. */
float       policy_current_scale(Format f, const float *x, size_t n);
/* The values of x as a matmul in format f sees them: x itself for fp32, else a rounded copy
 * (category temp, with fp8's current per-tensor scale) that the caller frees with mem_free.
 * *copy is set to the buffer to free, or NULL. */
const float *policy_compute_input(Format f, const float *x, size_t n, float **copy);
/* The format a product operand must still be rounded to (op_matmul's rule, and every product
 * that follows it): none (fp32) without a policy or when t is stored in the compute format
 * already, so a bf16 weight is not rounded again (a stored fp8 tensor keeps its own scale, as an
 * fp8 matmul would take it); else the compute format. */
Format      policy_operand_format(const PrecisionPolicy *p, const Tensor *t);
/* The same for a gradient operand (dY), which has the policy's gradient dtype: grad_compute
 * unless gradients are stored in it already. */
Format      policy_grad_operand_format(const PrecisionPolicy *p);

#endif

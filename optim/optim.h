#ifndef TAPEGRAD_OPTIM_H
#define TAPEGRAD_OPTIM_H
/* What every optimizer shares: the parameters it updates, which of them get weight decay, the
 * step counter, and its state tensors, each with a name so a snapshot can save and restore it.
 *
 * An optimizer (sgd.h, adamw.h, adam8bit.h, adafactor.h) is a struct whose first member is an Optim, so code that does
 * not care which one it has (the trainer's loop, a snapshot) holds an Optim *:
 *
 *     AdamW *adam = adamw_new(params, n, adamw_defaults());
 *     Optim *opt = &adam->base;
 *     ... forward, tape_backward ...
 *     optim_step(opt, lr);        // the learning rate is an argument: schedules live outside
 *     optim_zero_grad(opt);
 *     optim_free(opt);
 *
 * State tensors are allocated zero-filled in the optim memory category when the optimizer is
 * made, so their bytes show in mem_current(MEM_OPTIM) from the start. State names are
 * "<kind>.<slot>.<parameter name>", e.g. "adamw.m.h.0.attn.qkv.weight"; a parameter without a
 * name is called "#<index>". Two parameters with the same name are refused, since their state
 * names would collide. The step counter is `step` (updates applied so far): a snapshot saves
 * it with the state tensors and sets it back on restore.
 *
 * Weight decay: which parameters it applies to is a rule fixed at creation, and can be changed
 * per parameter afterwards through decay[i]. The default rule is the GPT convention: decay
 * tensors with two or more dimensions (matmul weights, embedding tables) and leave vectors
 * (biases, LayerNorm gains and shifts) alone, since shrinking those toward zero only fights the
 * normalisation and biases have nothing to overfit with.
 *
 * A parameter whose gradient is NULL (it took no part in the loss) is skipped by a step, as in
 * PyTorch; the step counter is shared, so its bias correction does not pause.
 *
 * Hyperparameters (learning rate, betas, decay) are doubles, like the Python floats PyTorch
 * takes, and are rounded to float where PyTorch rounds them: so the constants of an update are
 * the same floats in both, and so are the updates, up to the order of float operations. */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/parallel.h"
#include "autograd/policy.h"
#include "autograd/schema.h"
#include "autograd/tensor.h"

typedef enum {
    OPTIM_DECAY_MATRICES,   /* ndim >= 2 (the default) */
    OPTIM_DECAY_ALL,
    OPTIM_DECAY_NONE,
} OptimDecayRule;
/* "matrices", "all", "none": the i-th OptimDecayRule's name, NULL past the last (a schema's
 * choice of the optimizers' configs). */
const char *optim_decay_rule_name(int i);

enum { OPTIM_MAX_SLOTS = 2, OPTIM_NAME_LEN = TENSOR_NAME_LEN + 64 };

/* State that is not an fp32 tensor shaped as its parameter: 8-bit codes and their per-block
 * constants (adam8bit.h), row and column statistics (adafactor.h). A buffer is a flat array of
 * `count` elements of one type, zero-filled in MEM_OPTIM, named like a state tensor
 * ("adam8bit.m.wte.weight", "adafactor.row.wte.weight"). A snapshot stores it as a 1-D tensor
 * of its type (U8 or F32); optim_state_bytes counts it. */
typedef enum { OPTIM_BUF_F32, OPTIM_BUF_U8 } OptimBufType;

typedef struct {
    char         name[OPTIM_NAME_LEN];
    OptimBufType type;
    size_t       count;                         /* elements */
    void        *data;
} OptimBuffer;

typedef struct Optim Optim;
typedef struct OptimOffload OptimOffload;      /* optim/offload.h */
/* Applies update number o->step (already incremented, so 1 on the first call). */
typedef void (*OptimUpdateFn)(Optim *o, double lr);

struct Optim {
    const char   *kind;                         /* "sgd", "adamw" */
    Tensor      **params;                       /* the caller's tensors; not owned */
    int           n;
    bool         *decay;                        /* per parameter */
    long          step;                         /* updates applied so far */
    int           n_slots;                      /* state tensors per parameter */
    const char   *slot_names[OPTIM_MAX_SLOTS];  /* "m", "v"; "momentum" */
    Tensor      **state;                        /* state[i * n_slots + s], shaped as params[i] */
    OptimBuffer  *bufs;                         /* buffers, in the order they were added */
    float       **masters;                      /* fp32 master weights, or NULL (below) */
    int           n_bufs, cap_bufs;
    OptimUpdateFn update;
    OptimOffload *offload;                      /* the update on the host, or NULL */
};

/* For optimizer implementations: fills o (the first member of a calloc'ed optimizer struct)
 * and allocates n_slots zero state tensors per parameter in MEM_OPTIM. */
void    optim_init(Optim *o, const char *kind, Tensor *const *params, int n,
                   OptimDecayRule rule, int n_slots, const char *const *slot_names,
                   OptimUpdateFn update);
/* Frees the state and the optimizer struct itself. NULL is allowed. */
void    optim_free(Optim *o);

/* One update with learning rate lr: step += 1, then the optimizer's rule (on the master
 * weights, when there are some, then the packed parameters are refreshed from them); on the
 * host, the gradients down and the parameters up, when o is offloaded (optim/offload.h). */
void    optim_step(Optim *o, double lr);
void    optim_zero_grad(Optim *o);

/* Mixed precision (autograd/policy.h): keeps an fp32 master copy of every parameter (an
 * optimizer buffer "master.<name>" in MEM_OPTIM) and packs the parameters themselves into
 * param_dtype (fp8 with a per-tensor scale from the amax). Call it once, before training;
 * DTYPE_F32 does nothing. optim_master is NULL for a parameter without a master. */
void         optim_use_master_weights(Optim *o, Dtype param_dtype);
const float *optim_master(const Optim *o, int i);
/* optim_use_master_weights also stores every parameter's gradient in param_dtype
 * (autograd/tensor.h, "packed gradients"): 2Psi of gradients under bf16 and fp16 (and
 * optim_use_policy in e5m2 under fp8). This undoes it, for code whose buffers take fp32
 * gradients (dist/); call it before the first backward. */
void         optim_keep_fp32_grads(Optim *o);
/* A policy's storage, what a trainer calls once before training: master weights and packed
 * parameters in p->param (optim_use_master_weights), and every parameter's gradient (a
 * scalar's stays fp32) stored in policy_param_grad_dtype(p): the parameter's dtype, or e5m2
 * under fp8, 1 byte a value, 1Psi of gradients. */
void         optim_use_policy(Optim *o, const PrecisionPolicy *p);
/* The master buffers alone, zero-filled, for parameters packed already: the caller fills them
 * (dist/zero.h gathers them from the ranks' shards). Does nothing if there are masters. */
void         optim_add_masters(Optim *o);
/* For code that reads or writes parameters as fp32 (an update, a snapshot): expose points
 * every packed parameter's data at its master; pack encodes the masters back into the packed
 * parameters and hides them again. No-ops without master weights. An exposed parameter only
 * borrows its master (tensor_borrow_data): tensor_release, the tape's release of an op's
 * inputs and tensor_free leave the master alone. */
void         optim_expose_masters(Optim *o);
void         optim_pack_masters(Optim *o);

bool    optim_rule_decays(OptimDecayRule rule, const Tensor *p);

/* The state tensors, in a fixed order (parameter by parameter, slot by slot). */
int         optim_state_count(const Optim *o);
Tensor     *optim_state_tensor(const Optim *o, int i);
const char *optim_state_name(const Optim *o, int i, char *buf, size_t len);
/* The state tensor of that name, or NULL. */
Tensor     *optim_find_state(const Optim *o, const char *name);
/* Bytes of state, tensors and buffers (what the optimizer adds to MEM_OPTIM). */
size_t      optim_state_bytes(const Optim *o);

/* For optimizer implementations: a new zero-filled buffer for parameter `param` under the
 * static string `slot`; returns its storage. */
void       *optim_add_buffer(Optim *o, int param, const char *slot, OptimBufType type,
                             size_t count);
/* The buffers, in the order they were added; by name, or NULL. */
int          optim_buffer_count(const Optim *o);
OptimBuffer *optim_buffer(const Optim *o, int i);
OptimBuffer *optim_find_buffer(const Optim *o, const char *name);
size_t       optim_buffer_bytes(const OptimBuffer *b);

/* For update rules: elementwise loops of this size and above are split across the OpenMP
 * threads (autograd/parallel.h says why not below). */
enum { OPTIM_PARALLEL_MIN = PAR_MIN_ELEMENTS };

#endif

#ifndef TAPEGRAD_TENSOR_H
#define TAPEGRAD_TENSOR_H
/* Contiguous, row-major tensors of up to 4 dimensions.
 *
 * Storage comes from the accounting allocator (autograd/mem.h) in the tensor's category. The
 * gradient is allocated on demand, zero-filled, the first time a gradient flows in: a
 * parameter's in the grad category (it persists and accumulates across backward passes until
 * tensor_zero_grad), an activation's in temp (a "b node", freed by the tape as soon as it has
 * been propagated). It is fp32, except a packed parameter's under mixed precision (below,
 * "packed gradients"), which lives in the grad category in 2 or 1 bytes per element.
 *
 * A view (tensor_view) shares another tensor's storage with a different shape; it owns neither
 * storage nor bytes, so memory is never counted twice. */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/mem.h"
#include "precision/format.h"

enum { TENSOR_MAX_DIMS = 4, TENSOR_NAME_LEN = 64, TENSOR_MAX_GRAD_FACTORS = 4 };

/* Storage format of a tensor's data. A tensor is made fp32; tensor_pack turns it into one of
 * the packed dtypes, which really occupy 2 or 1 bytes per element in the tensor's category
 * (through precision/format.h, nearest-even; e4m3 and e5m2 saturate, bf16 and fp16 overflow
 * to infinity as the hardware does). */
typedef enum {
    DTYPE_F32,
    DTYPE_BF16,
    DTYPE_F16,
    DTYPE_E4M3,
    DTYPE_E5M2,
    DTYPE_COUNT
} Dtype;

/* A packed tensor keeps its values in `packed` (value = code / scale; scale is 1 except for
 * fp8, whose per-tensor scale maps the tensor's range onto the format's). Its `data` is NULL
 * except while someone computes with it: tensor_unpack decodes a scratch fp32 copy (category
 * temp) and tensor_release frees it. Ops never see the difference: the tape unpacks an op's
 * inputs before it runs and releases them after (autograd/tape.h). */
typedef struct Tensor {
    int         ndim;
    int         shape[TENSOR_MAX_DIMS];
    size_t      size;             /* number of elements */
    Dtype       dtype;
    float      *data;             /* fp32 values; for a packed tensor only while unpacked */
    void       *packed;           /* packed storage (category cat), NULL for fp32 */
    float       scale;            /* packed value = code / scale */
    float      *grad;             /* NULL until a gradient flows in; for a packed gradient
                                   * its fp32 working copy (temp), NULL between nodes */
    Dtype       grad_dtype;       /* storage of the gradient between nodes (packed gradients) */
    void       *grad_packed;      /* that storage (category grad), NULL for fp32 or none yet */
    float       grad_scale;       /* packed gradient value = code / grad_scale (fp8; else 1) */
    int         n_grad_factors;   /* multipliers pending on the packed gradient, in order */
    float       grad_factor[TENSOR_MAX_GRAD_FACTORS];
    MemCategory cat;              /* category of data (of the packed storage, once packed) */
    bool        requires_grad;    /* set on leaves by the user, propagated by ops */
    bool        is_param;         /* gradient persists (grad category) rather than temp */
    bool        owns_data;        /* false for views */
    bool        borrows_data;     /* packed, with data pointing at fp32 storage owned elsewhere
                                   * (an optimizer's master weights, optim/optim.h):
                                   * tensor_release and tensor_free leave it alone */
    char        name[TENSOR_NAME_LEN];
} Tensor;

/* A new tensor with uninitialised data in category cat. ndim in 1..4, every dimension >= 1. */
Tensor *tensor_new(MemCategory cat, int ndim, const int *shape);
/* A new tensor in category cat holding src's values in src's dtype (a packed tensor's codes
 * and scale are copied as they are). */
Tensor *tensor_clone(MemCategory cat, const Tensor *src);
Tensor *tensor_new1(MemCategory cat, int d0);
Tensor *tensor_new2(MemCategory cat, int d0, int d1);
Tensor *tensor_new3(MemCategory cat, int d0, int d1, int d2);
Tensor *tensor_new4(MemCategory cat, int d0, int d1, int d2, int d3);
/* A parameter: category param, requires_grad and is_param set, named. */
Tensor *tensor_param(const char *name, int ndim, const int *shape);
/* Same storage as t, another shape of the same size (packed if t is). Free it before t. */
Tensor *tensor_view(Tensor *t, int ndim, const int *shape);
void    tensor_free(Tensor *t);

/* ---- packed storage ---- */
/* The Format behind a dtype (DTYPE_BF16 -> FMT_BF16, ..., DTYPE_F32 -> FMT_FP32) and its name. */
Format      tensor_dtype_format(Dtype d);
const char *tensor_dtype_name(Dtype d);
/* Bytes of storage t owns: size x 4 for fp32, the packed bytes otherwise (a view owns none). */
size_t  tensor_bytes(const Tensor *t);
/* An fp32 tensor that owns its data becomes dtype d: its values are encoded (x * scale,
 * rounded to nearest-even) into new storage in its category and the fp32 data is freed. */
void    tensor_pack(Tensor *t, Dtype d, float scale);
/* The fp32 values of t: t->data itself for fp32; for a packed tensor a decoded scratch copy
 * (category temp), made on the first call and kept until tensor_release. */
float  *tensor_unpack(Tensor *t);
void    tensor_release(Tensor *t);
/* Elements [first, first + n) of t's values into dst: copied from data when t has it (fp32, or
 * unpacked), else decoded from the packed storage, the same floats tensor_unpack gives. For an
 * op that reads a packed input a chunk at a time into a small buffer of its own, instead of
 * holding a decoded copy of the whole tensor in temp. */
void    tensor_unpack_range(const Tensor *t, size_t first, size_t n, float *dst);
/* A packed tensor's data pointed at values fp32 owned by someone else (NULL: none), which
 * tensor_release and tensor_free will never free; its own scratch copy is freed first. */
void    tensor_borrow_data(Tensor *t, float *values);
/* Encodes n = t->size values from src into t's storage (a packed tensor keeps its scale). */
void    tensor_store(Tensor *t, const float *src);
/* y[i] = the value x[i] * scale rounds to in format f, divided by scale again: what storing in
 * f and loading back gives. x == y (in place) is allowed. */
void    tensor_round_values(const float *x, float *y, size_t n, Format f, float scale);

void    tensor_fill(Tensor *t, float value);
void    tensor_copy_data(Tensor *dst, const Tensor *src);   /* same size required */
/* The gradient buffer, allocated zero-filled if absent; for a packed gradient its working copy
 * (temp), holding the stored values (pending factors applied) until tensor_grad_pack. */
float  *tensor_grad(Tensor *t);
/* For a backward about to add its term to t's gradient: the buffer, and *fresh set when this
 * call created it, in which case it is NOT zero-filled and the caller stores 0 + its term
 * without reading the buffer (a product with beta 0, or a loop that zeroes a chunk just before
 * adding into it). The values are those of adding to zeros; what it saves is a pass of its own
 * over memory the size of t, on one thread while the others sleep: zero-filling new gradients
 * was 2.5% of the large case's step (docs/performance.md). Anything but an fp32 gradient (a
 * packed one's working copy) comes from tensor_grad with *fresh false. */
float  *tensor_grad_begin(Tensor *t, bool *fresh);
void    tensor_zero_grad(Tensor *t);
void    tensor_free_grad(Tensor *t);
void    tensor_set_name(Tensor *t, const char *name);

/* ---- packed gradients ------------------------------------------------------------------------
 * Under a precision policy a parameter's gradient has the parameter's dtype (PyTorch's rule), or
 * e5m2 when the policy's gradients are fp8 (policy_param_grad_dtype, autograd/policy.h); the
 * tape rounds it to that format after every node (autograd/tape_precision.c). With grad_dtype
 * set to that dtype (optim_use_policy) it is also stored in it, in the grad category: 2 bytes
 * per element under bf16 and fp16, so a step measures the lecture's 2Psi; 1 byte under fp8,
 * code = round(g x grad_scale) in e5m2, with grad_scale = 57344 / amax of the values when they
 * were rounded (fp8's current scaling, as its activations'), so a step measures 1Psi: the
 * scale is a field here, not an allocation. The values are those of the fp32 buffer it
 * replaces, so training is unchanged to the bit.
 *
 * Arithmetic is fp32, on copies in temp that live no longer than one use:
 *   - a backward node adds its term into a working copy: tensor_grad decodes the stored values
 *     into it (zero the first time), the op adds in fp32, and the tape rounds the sum, encodes
 *     it after the node (tensor_grad_pack, with the scale of the new sum under fp8: a sum that
 *     grew past the old scale's amax would saturate under it) and frees the copy. The running
 *     sum is rounded to the gradient format after every node, across micro-batches too: what
 *     PyTorch does with a bf16 .grad; no fp32 accumulator of the parameter's size outlives a
 *     node.
 *   - a reader (clip's norm, the overflow check, an optimizer's update) takes the values with
 *     tensor_grad_read, one parameter at a time.
 *   - a multiplier (the loss scale's 1/S, clipping's coefficient) is not rounded back into the
 *     2 (or 1) bytes: tensor_grad_scale records it and every later read applies the recorded
 *     factors in order, so the update sees the fp32 products g * (1/S) * c exactly as with
 *     fp32 storage. tensor_zero_grad clears them.
 * With grad_dtype fp32 (the default) all of this is the plain fp32 buffer. */
/* Gradients of t stored in d from now on; t must have no gradient yet. */
void    tensor_set_grad_dtype(Tensor *t, Dtype d);
/* Whether t has a gradient (a plain buffer, a working copy or packed storage). */
bool    tensor_has_grad(const Tensor *t);
/* The fp32 values of t's gradient, NULL if it has none: t->grad when that exists (fp32, or a
 * working copy); else the packed values decoded, pending factors applied, into a new temp
 * buffer returned in *scratch as well (NULL otherwise), which the caller frees with mem_free. */
const float *tensor_grad_read(const Tensor *t, float **scratch);
/* Multiplies t's gradient by factor: in place in fp32, pending for a packed one. */
void    tensor_grad_scale(Tensor *t, float factor);
/* A packed gradient's working copy encoded into its storage with that scale (values already
 * rounded to the format with it encode exactly), the copy freed. Nothing for fp32. */
void    tensor_grad_pack(Tensor *t, float scale);

bool    tensor_same_shape(const Tensor *a, const Tensor *b);
/* Product of all dimensions but the last: the number of rows when the tensor is seen as a
 * matrix [rows, last]. Ops that act on the last dimension treat leading ones this way. */
size_t  tensor_rows(const Tensor *t);
int     tensor_last_dim(const Tensor *t);
/* "[2, 3, 4]" into buf. */
const char *tensor_shape_str(const Tensor *t, char *buf, size_t len);

/* A programming error (shapes that do not fit an op, a bad argument): prints
 * "PROGRAM: <message>" and aborts, so a debugger or sanitizer stops at the caller. */
_Noreturn void tensor_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The name the library's messages (tensor_fatal, out of memory in mem_alloc, a kernel's) start
 * with: "tapegrad" until a program gives its own (cli_init does; the string must outlive it). */
void        tensor_set_program(const char *name);
const char *tensor_program(void);

#endif

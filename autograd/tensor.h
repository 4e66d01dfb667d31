#ifndef TAPEGRAD_TENSOR_H
#define TAPEGRAD_TENSOR_H
/* Contiguous, row-major tensors of up to 4 dimensions.
 *
 * Storage comes from the accounting allocator (autograd/mem.h) in the tensor's category. The
 * gradient is always fp32 and is allocated on demand, zero-filled, the first time a gradient
 * flows in: a parameter's in the grad category (it persists and accumulates across backward
 * passes until tensor_zero_grad), an activation's in temp (a "b node", freed by the tape as soon
 * as it has been propagated).
 *
 * A view (tensor_view) shares another tensor's storage with a different shape; it owns neither
 * storage nor bytes, so memory is never counted twice. */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/mem.h"
#include "precision/format.h"

enum { TENSOR_MAX_DIMS = 4, TENSOR_NAME_LEN = 64 };

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
    float      *grad;             /* NULL until a gradient flows in */
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
/* The gradient buffer, allocated zero-filled if absent. */
float  *tensor_grad(Tensor *t);
void    tensor_zero_grad(Tensor *t);
void    tensor_free_grad(Tensor *t);
void    tensor_set_name(Tensor *t, const char *name);

bool    tensor_same_shape(const Tensor *a, const Tensor *b);
/* Product of all dimensions but the last: the number of rows when the tensor is seen as a
 * matrix [rows, last]. Ops that act on the last dimension treat leading ones this way. */
size_t  tensor_rows(const Tensor *t);
int     tensor_last_dim(const Tensor *t);
/* "[2, 3, 4]" into buf. */
const char *tensor_shape_str(const Tensor *t, char *buf, size_t len);

/* A programming error (shapes that do not fit an op, a bad argument): prints
 * "tapegrad: <message>" and aborts, so a debugger or sanitizer stops at the caller. */
_Noreturn void tensor_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

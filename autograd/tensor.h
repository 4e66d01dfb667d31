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

enum { TENSOR_MAX_DIMS = 4, TENSOR_NAME_LEN = 64 };

/* Storage format of a tensor's data. Packed low-precision dtypes arrive with the
 * mixed-precision work; today every tensor is fp32. */
typedef enum {
    DTYPE_F32,
} Dtype;

typedef struct Tensor {
    int         ndim;
    int         shape[TENSOR_MAX_DIMS];
    size_t      size;             /* number of elements */
    Dtype       dtype;
    float      *data;
    float      *grad;             /* NULL until a gradient flows in */
    MemCategory cat;              /* category of data */
    bool        requires_grad;    /* set on leaves by the user, propagated by ops */
    bool        is_param;         /* gradient persists (grad category) rather than temp */
    bool        owns_data;        /* false for views */
    char        name[TENSOR_NAME_LEN];
} Tensor;

/* A new tensor with uninitialised data in category cat. ndim in 1..4, every dimension >= 1. */
Tensor *tensor_new(MemCategory cat, int ndim, const int *shape);
Tensor *tensor_new1(MemCategory cat, int d0);
Tensor *tensor_new2(MemCategory cat, int d0, int d1);
Tensor *tensor_new3(MemCategory cat, int d0, int d1, int d2);
Tensor *tensor_new4(MemCategory cat, int d0, int d1, int d2, int d3);
/* A parameter: category param, requires_grad and is_param set, named. */
Tensor *tensor_param(const char *name, int ndim, const int *shape);
/* Same storage as t, another shape of the same size. Free it before t. */
Tensor *tensor_view(Tensor *t, int ndim, const int *shape);
void    tensor_free(Tensor *t);

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

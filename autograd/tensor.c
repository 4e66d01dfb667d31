#include "autograd/tensor.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tensor_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tapegrad: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

static size_t checked_size(int ndim, const int *shape)
{
    if (ndim < 1 || ndim > TENSOR_MAX_DIMS)
        tensor_fatal("tensor of %d dimensions (1 to %d allowed)", ndim, TENSOR_MAX_DIMS);
    size_t size = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 1)
            tensor_fatal("tensor dimension %d is %d (must be >= 1)", i, shape[i]);
        size *= (size_t)shape[i];
    }
    return size;
}

static Tensor *tensor_header(int ndim, const int *shape)
{
    Tensor *t = calloc(1, sizeof *t);
    if (!t)
        tensor_fatal("out of memory for a tensor header");
    t->size = checked_size(ndim, shape);
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->dtype = DTYPE_F32;
    return t;
}

Tensor *tensor_new(MemCategory cat, int ndim, const int *shape)
{
    Tensor *t = tensor_header(ndim, shape);
    t->cat = cat;
    t->data = mem_alloc(cat, t->size * sizeof(float));
    t->owns_data = true;
    return t;
}

Tensor *tensor_new1(MemCategory cat, int d0) { return tensor_new(cat, 1, (int[]){ d0 }); }

Tensor *tensor_new2(MemCategory cat, int d0, int d1)
{
    return tensor_new(cat, 2, (int[]){ d0, d1 });
}

Tensor *tensor_new3(MemCategory cat, int d0, int d1, int d2)
{
    return tensor_new(cat, 3, (int[]){ d0, d1, d2 });
}

Tensor *tensor_new4(MemCategory cat, int d0, int d1, int d2, int d3)
{
    return tensor_new(cat, 4, (int[]){ d0, d1, d2, d3 });
}

Tensor *tensor_param(const char *name, int ndim, const int *shape)
{
    Tensor *t = tensor_new(MEM_PARAM, ndim, shape);
    t->requires_grad = true;
    t->is_param = true;
    tensor_set_name(t, name);
    return t;
}

Tensor *tensor_view(Tensor *t, int ndim, const int *shape)
{
    Tensor *v = tensor_header(ndim, shape);
    if (v->size != t->size) {
        char a[64], b[64];
        tensor_shape_str(t, a, sizeof a);
        tensor_shape_str(v, b, sizeof b);
        free(v);
        tensor_fatal("cannot view %s as %s: sizes differ", a, b);
    }
    v->cat = t->cat;
    v->data = t->data;
    v->requires_grad = t->requires_grad;
    return v;
}

void tensor_free(Tensor *t)
{
    if (!t)
        return;
    if (t->owns_data)
        mem_free(t->data);
    mem_free(t->grad);
    free(t);
}

void tensor_fill(Tensor *t, float value)
{
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = value;
}

void tensor_copy_data(Tensor *dst, const Tensor *src)
{
    if (dst->size != src->size)
        tensor_fatal("tensor_copy_data: %zu elements into %zu", src->size, dst->size);
    memcpy(dst->data, src->data, src->size * sizeof(float));
}

float *tensor_grad(Tensor *t)
{
    if (!t->grad)
        t->grad = mem_calloc(t->is_param ? MEM_GRAD : MEM_TEMP, t->size * sizeof(float));
    return t->grad;
}

void tensor_zero_grad(Tensor *t)
{
    if (t->grad)
        memset(t->grad, 0, t->size * sizeof(float));
}

void tensor_free_grad(Tensor *t)
{
    mem_free(t->grad);
    t->grad = NULL;
}

void tensor_set_name(Tensor *t, const char *name)
{
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
}

bool tensor_same_shape(const Tensor *a, const Tensor *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

size_t tensor_rows(const Tensor *t) { return t->size / (size_t)t->shape[t->ndim - 1]; }

int tensor_last_dim(const Tensor *t) { return t->shape[t->ndim - 1]; }

const char *tensor_shape_str(const Tensor *t, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < t->ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, i ? ", %d" : "%d", t->shape[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

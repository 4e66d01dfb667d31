#include "autograd/tensor.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/parallel.h"

/* The name the library's own messages start with: the program's, once it has said it. */
static const char *program = "tapegrad";

void tensor_set_program(const char *name)
{
    if (name && *name)
        program = name;
}

const char *tensor_program(void) { return program; }

void tensor_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", program);
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
    t->scale = 1.0f;
    t->grad_dtype = DTYPE_F32;
    t->grad_scale = 1.0f;
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

Tensor *tensor_clone(MemCategory cat, const Tensor *src)
{
    if (src->dtype == DTYPE_F32) {
        Tensor *t = tensor_new(cat, src->ndim, src->shape);
        memcpy(t->data, src->data, src->size * sizeof(float));
        return t;
    }
    /* Packed: the codes and the scale, byte for byte; no fp32 copy on the way. */
    Tensor *t = tensor_header(src->ndim, src->shape);
    size_t bytes = fmt_packed_bytes(tensor_dtype_format(src->dtype), src->size);
    t->cat = cat;
    t->packed = mem_alloc(cat, bytes);
    memcpy(t->packed, src->packed, bytes);
    t->dtype = src->dtype;
    t->scale = src->scale;
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
    v->requires_grad = t->requires_grad;
    v->dtype = t->dtype;
    v->scale = t->scale;
    v->packed = t->packed;
    /* A packed view decodes its own scratch copy when it is used. */
    v->data = t->dtype == DTYPE_F32 ? t->data : NULL;
    return v;
}

void tensor_free(Tensor *t)
{
    if (!t)
        return;
    if (t->owns_data)
        mem_free(t->dtype == DTYPE_F32 ? (void *)t->data : t->packed);
    if (t->dtype != DTYPE_F32 && !t->borrows_data)
        mem_free(t->data);      /* a scratch copy still unpacked */
    tensor_free_grad(t);
    free(t);
}

/* ---- packed storage --------------------------------------------------------------------------
 * Encoding and decoding run in chunks, in parallel; each chunk scales through a small buffer so
 * that fp8's per-tensor scale costs no tensor-sized copy. */
enum { PACK_CHUNK = 4096 };

Format tensor_dtype_format(Dtype d)
{
    static const Format formats[DTYPE_COUNT] = {
        [DTYPE_F32] = FMT_FP32, [DTYPE_BF16] = FMT_BF16, [DTYPE_F16] = FMT_FP16,
        [DTYPE_E4M3] = FMT_E4M3, [DTYPE_E5M2] = FMT_E5M2,
    };
    if ((int)d < 0 || d >= DTYPE_COUNT)
        tensor_fatal("unknown dtype %d", (int)d);
    return formats[d];
}

const char *tensor_dtype_name(Dtype d) { return fmt_name(tensor_dtype_format(d)); }

/* fp8 saturates (an out-of-range value becomes +-max, as fp8 training recipes do); bf16 and
 * fp16 overflow to infinity, which is what loss scaling watches for. */
static Rounding pack_rounding(Format f)
{
    return (Rounding){ .mode = FMT_ROUND_NEAREST_EVEN,
                       .saturate = f == FMT_E4M3 || f == FMT_E5M2 };
}

size_t tensor_bytes(const Tensor *t)
{
    if (!t->owns_data)
        return 0;
    return fmt_packed_bytes(tensor_dtype_format(t->dtype), t->size);
}

static void encode(Format f, const float *src, void *dst, size_t n, float scale)
{
    size_t elem = fmt_packed_bytes(f, 1);
    long chunks = (long)((n + PACK_CHUNK - 1) / PACK_CHUNK);
    #pragma omp parallel for schedule(static) if (chunks > 1 && par_worth(4.0 * n))
    for (long c = 0; c < chunks; c++) {
        size_t i0 = (size_t)c * PACK_CHUNK, m = n - i0 < PACK_CHUNK ? n - i0 : PACK_CHUNK;
        const float *x = src + i0;
        float buf[PACK_CHUNK];
        if (scale != 1.0f) {
            for (size_t i = 0; i < m; i++)
                buf[i] = x[i] * scale;
            x = buf;
        }
        fmt_encode_array(f, x, (char *)dst + i0 * elem, m, pack_rounding(f), 0);
    }
}

static void decode(Format f, const void *src, float *dst, size_t n, float scale)
{
    size_t elem = fmt_packed_bytes(f, 1);
    long chunks = (long)((n + PACK_CHUNK - 1) / PACK_CHUNK);
    #pragma omp parallel for schedule(static) if (chunks > 1 && par_worth(4.0 * n))
    for (long c = 0; c < chunks; c++) {
        size_t i0 = (size_t)c * PACK_CHUNK, m = n - i0 < PACK_CHUNK ? n - i0 : PACK_CHUNK;
        fmt_decode_array(f, (const char *)src + i0 * elem, dst + i0, m);
        if (scale != 1.0f)
            for (size_t i = i0; i < i0 + m; i++)
                dst[i] /= scale;
    }
}

void tensor_pack(Tensor *t, Dtype d, float scale)
{
    if (t->dtype != DTYPE_F32 || !t->owns_data || d == DTYPE_F32)
        tensor_fatal("tensor_pack: %s needs an fp32 tensor that owns its data",
                     tensor_dtype_name(d));
    if (!(scale > 0.0f) || !isfinite(scale))
        tensor_fatal("tensor_pack: scale %g", (double)scale);
    Format f = tensor_dtype_format(d);
    void *packed = mem_alloc(t->cat, fmt_packed_bytes(f, t->size));
    encode(f, t->data, packed, t->size, scale);
    mem_free(t->data);
    t->data = NULL;
    t->packed = packed;
    t->dtype = d;
    t->scale = scale;
}

float *tensor_unpack(Tensor *t)
{
    if (t->dtype == DTYPE_F32 || t->data)
        return t->data;
    t->data = mem_alloc(MEM_TEMP, t->size * sizeof(float));
    decode(tensor_dtype_format(t->dtype), t->packed, t->data, t->size, t->scale);
    return t->data;
}

void tensor_unpack_range(const Tensor *t, size_t first, size_t n, float *dst)
{
    if (first > t->size || n > t->size - first)
        tensor_fatal("tensor_unpack_range: [%zu, %zu) of %zu elements", first, first + n,
                     t->size);
    if (t->data) {
        memcpy(dst, t->data + first, n * sizeof *dst);
        return;
    }
    Format f = tensor_dtype_format(t->dtype);
    decode(f, (const char *)t->packed + first * fmt_packed_bytes(f, 1), dst, n, t->scale);
}

void tensor_release(Tensor *t)
{
    if (t->dtype == DTYPE_F32 || t->borrows_data)
        return;
    mem_free(t->data);
    t->data = NULL;
}

void tensor_borrow_data(Tensor *t, float *values)
{
    if (t->dtype == DTYPE_F32)
        tensor_fatal("tensor_borrow_data: %s is fp32 and holds its own values", t->name);
    if (!t->borrows_data)
        mem_free(t->data);
    t->data = values;
    t->borrows_data = values != NULL;
}

void tensor_store(Tensor *t, const float *src)
{
    if (t->dtype == DTYPE_F32) {
        if (t->data != src)
            memcpy(t->data, src, t->size * sizeof(float));
        return;
    }
    encode(tensor_dtype_format(t->dtype), src, t->packed, t->size, t->scale);
}

void tensor_round_values(const float *x, float *y, size_t n, Format f, float scale)
{
    if (f == FMT_FP32) {
        if (x != y)
            memcpy(y, x, n * sizeof *y);
        return;
    }
    long chunks = (long)((n + PACK_CHUNK - 1) / PACK_CHUNK);
    #pragma omp parallel for schedule(static) if (chunks > 1 && par_worth(4.0 * n))
    for (long c = 0; c < chunks; c++) {
        size_t i0 = (size_t)c * PACK_CHUNK, m = n - i0 < PACK_CHUNK ? n - i0 : PACK_CHUNK;
        const float *src = x + i0;
        float *dst = y + i0;
        if (scale != 1.0f) {
            for (size_t i = 0; i < m; i++)
                dst[i] = src[i] * scale;
            src = dst;
        }
        fmt_round_array(f, src, dst, m, pack_rounding(f), 0);
        if (scale != 1.0f)
            for (size_t i = 0; i < m; i++)
                dst[i] /= scale;
    }
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

/* Decodes a packed gradient into dst and applies its pending factors, in order. */
static void decode_grad(const Tensor *t, float *dst)
{
    decode(tensor_dtype_format(t->grad_dtype), t->grad_packed, dst, t->size, t->grad_scale);
    for (int k = 0; k < t->n_grad_factors; k++)
        for (size_t i = 0; i < t->size; i++)
            dst[i] *= t->grad_factor[k];
}

float *tensor_grad(Tensor *t)
{
    if (t->grad)
        return t->grad;
    if (t->grad_dtype == DTYPE_F32) {
        t->grad = mem_calloc(t->is_param ? MEM_GRAD : MEM_TEMP, t->size * sizeof(float));
    } else if (!t->grad_packed) {
        t->grad = mem_calloc(MEM_TEMP, t->size * sizeof(float));
    } else {
        t->grad = mem_alloc(MEM_TEMP, t->size * sizeof(float));
        decode_grad(t, t->grad);
    }
    return t->grad;
}

float *tensor_grad_begin(Tensor *t, bool *fresh)
{
    *fresh = !t->grad && t->grad_dtype == DTYPE_F32;
    if (*fresh)
        t->grad = mem_alloc(t->is_param ? MEM_GRAD : MEM_TEMP, t->size * sizeof(float));
    return tensor_grad(t);
}

void tensor_zero_grad(Tensor *t)
{
    if (t->grad_dtype != DTYPE_F32) {
        /* The working copy would be stale; a code of all zero bits is 0 in every format. */
        mem_free(t->grad);
        t->grad = NULL;
        if (t->grad_packed)
            memset(t->grad_packed, 0, fmt_packed_bytes(tensor_dtype_format(t->grad_dtype),
                                                       t->size));
        t->grad_scale = 1.0f;
        t->n_grad_factors = 0;
        return;
    }
    if (t->grad)
        memset(t->grad, 0, t->size * sizeof(float));
}

void tensor_free_grad(Tensor *t)
{
    mem_free(t->grad);
    t->grad = NULL;
    mem_free(t->grad_packed);
    t->grad_packed = NULL;
    t->grad_scale = 1.0f;
    t->n_grad_factors = 0;
}

void tensor_set_grad_dtype(Tensor *t, Dtype d)
{
    if (tensor_has_grad(t))
        tensor_fatal("tensor_set_grad_dtype: %s has a gradient already", t->name);
    (void)tensor_dtype_format(d);       /* checks d */
    t->grad_dtype = d;
}

bool tensor_has_grad(const Tensor *t) { return t->grad || t->grad_packed; }

const float *tensor_grad_read(const Tensor *t, float **scratch)
{
    *scratch = NULL;
    if (t->grad || !t->grad_packed)
        return t->grad;
    *scratch = mem_alloc(MEM_TEMP, t->size * sizeof(float));
    decode_grad(t, *scratch);
    return *scratch;
}

void tensor_grad_scale(Tensor *t, float factor)
{
    if (t->grad) {
        float *g = t->grad;
        long n = (long)t->size;
        #pragma omp parallel for schedule(static) if (par_worth((double)n))
        for (long j = 0; j < n; j++)
            g[j] *= factor;
        return;
    }
    if (!t->grad_packed)
        return;
    if (t->n_grad_factors == TENSOR_MAX_GRAD_FACTORS)
        tensor_fatal("tensor_grad_scale: %s has %d factors pending already", t->name,
                     TENSOR_MAX_GRAD_FACTORS);
    t->grad_factor[t->n_grad_factors++] = factor;
}

void tensor_grad_pack(Tensor *t, float scale)
{
    if (t->grad_dtype == DTYPE_F32 || !t->grad)
        return;
    if (!(scale > 0.0f) || !isfinite(scale))
        tensor_fatal("tensor_grad_pack: scale %g", (double)scale);
    Format f = tensor_dtype_format(t->grad_dtype);
    if (!t->grad_packed)
        t->grad_packed = mem_alloc(MEM_GRAD, fmt_packed_bytes(f, t->size));
    encode(f, t->grad, t->grad_packed, t->size, scale);
    t->grad_scale = scale;
    /* The working copy had them applied: they are in the stored values now. */
    t->n_grad_factors = 0;
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

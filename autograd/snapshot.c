/* Snapshots: the dtype table, the helpers the reader shares (snapshot_internal.h), and the
 * writer. The reader is in snapshot_read.c. */
#include "autograd/snapshot_internal.h"

#include "autograd/outfile.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct {
    const char *name;
    size_t      size;
} dtype_info[SNAPSHOT_NDTYPES] = {
    [SNAPSHOT_F32] = { "F32", 4 }, [SNAPSHOT_BF16] = { "BF16", 2 }, [SNAPSHOT_F16] = { "F16", 2 },
    [SNAPSHOT_U8] = { "U8", 1 },   [SNAPSHOT_I32] = { "I32", 4 },   [SNAPSHOT_I64] = { "I64", 8 },
};

/* The writer's view of a tensor: its header entry plus where its bytes are. */
typedef struct {
    SnapshotEntry entry;
    const void   *data;
} WriterEntry;

struct SnapshotWriter {
    WriterEntry  *entries;
    int           n_entries, cap_entries;
    SnapshotMeta *meta;
    int           n_meta, cap_meta;
    uint64_t      data_bytes;
    bool          failed;         /* an add failed: snapshot_write reports first_error */
    SnapshotError first_error;
};

/* Shared with the reader --------------------------------------------------------------------- */

const char *snapshot_dtype_name(SnapshotDtype dtype)
{
    return (unsigned)dtype < SNAPSHOT_NDTYPES ? dtype_info[dtype].name : "?";
}

size_t snapshot_dtype_size(SnapshotDtype dtype)
{
    return (unsigned)dtype < SNAPSHOT_NDTYPES ? dtype_info[dtype].size : 0;
}

bool snapshot_dtype_parse(const char *name, SnapshotDtype *out)
{
    for (int d = 0; d < SNAPSHOT_NDTYPES; d++)
        if (strcmp(name, dtype_info[d].name) == 0) {
            *out = (SnapshotDtype)d;
            return true;
        }
    return false;
}

bool snapshot_fail(SnapshotError *err, const char *path, const char *fmt, ...)
{
    if (!err)
        return false;
    size_t len = sizeof err->message, used = 0;
    if (path) {
        int n = snprintf(err->message, len, "%s: ", path);
        used = n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message + used, len - used, fmt, ap);
    va_end(ap);
    return false;
}

bool snapshot_utf8_valid(const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i], cp, min;
        size_t len;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
        else return false;
        if (n - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

bool snapshot_tensor_bytes(SnapshotDtype dtype, int ndim, const int64_t *shape, uint64_t *bytes)
{
    uint64_t n = snapshot_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        uint64_t d = (uint64_t)shape[i];
        if (d != 0 && n > SNAPSHOT_MAX_JSON_INT / d)
            return false;
        n *= d;
    }
    *bytes = n;
    return n <= SNAPSHOT_MAX_JSON_INT;
}

const char *snapshot_shape_str(int ndim, const int64_t *shape, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, i ? ", %" PRId64 : "%" PRId64, shape[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

/* Room for one more element in a growing array. */
static bool grow(void **array, int *cap, int count, size_t elem)
{
    if (count < *cap)
        return true;
    int new_cap = *cap ? 2 * *cap : 16;
    void *p = realloc(*array, (size_t)new_cap * elem);
    if (!p)
        return false;
    *array = p;
    *cap = new_cap;
    return true;
}

void snapshot_free_meta(SnapshotMeta *meta, int n)
{
    for (int i = 0; i < n; i++) {
        free(meta[i].key);
        free(meta[i].value);
    }
    free(meta);
}

/* Writing ------------------------------------------------------------------------------------ */

SnapshotWriter *snapshot_writer_new(void) { return calloc(1, sizeof(SnapshotWriter)); }

void snapshot_writer_free(SnapshotWriter *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->n_entries; i++)
        free((char *)w->entries[i].entry.name);   /* the writer's own copy */
    free(w->entries);
    snapshot_free_meta(w->meta, w->n_meta);
    free(w);
}

/* Reports an add error to the caller and keeps the first one for snapshot_write. */
__attribute__((format(printf, 3, 4)))
static bool writer_fail(SnapshotWriter *w, SnapshotError *err, const char *fmt, ...)
{
    SnapshotError e;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    if (!w->failed) {
        w->failed = true;
        w->first_error = e;
    }
    if (err)
        *err = e;
    return false;
}

static bool check_name(SnapshotWriter *w, const char *what, const char *name, SnapshotError *err)
{
    if (!name || !*name)
        return writer_fail(w, err, "a %s needs a non-empty name", what);
    if (!snapshot_utf8_valid(name, strlen(name)))
        return writer_fail(w, err, "%s name '%s' is not valid UTF-8", what, name);
    return true;
}

/* A tensor the writer can take: its byte count in *bytes. */
static bool check_tensor(SnapshotWriter *w, const char *name, SnapshotDtype dtype, int ndim,
                         const int64_t *shape, const void *data, uint64_t *bytes,
                         SnapshotError *err)
{
    if (!check_name(w, "tensor", name, err))
        return false;
    if (strcmp(name, SNAPSHOT_METADATA_KEY) == 0)
        return writer_fail(w, err, "'%s' is reserved for metadata, not a tensor name", name);
    for (int i = 0; i < w->n_entries; i++)
        if (strcmp(w->entries[i].entry.name, name) == 0)
            return writer_fail(w, err, "tensor '%s' added twice", name);
    if ((unsigned)dtype >= SNAPSHOT_NDTYPES)
        return writer_fail(w, err, "tensor '%s' has invalid dtype %d", name, (int)dtype);
    if (ndim < 0 || ndim > SNAPSHOT_MAX_DIMS)
        return writer_fail(w, err, "tensor '%s' has %d dimensions (0 to %d allowed)", name,
                           ndim, SNAPSHOT_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return writer_fail(w, err, "tensor '%s' has dimension %d of size %" PRId64, name, i,
                               shape[i]);
    if (!snapshot_tensor_bytes(dtype, ndim, shape, bytes) ||
        w->data_bytes + *bytes > SNAPSHOT_MAX_JSON_INT)
        return writer_fail(w, err, "tensor '%s' makes the snapshot larger than 2^53 bytes", name);
    if (*bytes && !data)
        return writer_fail(w, err, "tensor '%s' has no data", name);
    return true;
}

bool snapshot_add(SnapshotWriter *w, const char *name, SnapshotDtype dtype, int ndim,
                  const int64_t *shape, const void *data, SnapshotError *err)
{
    uint64_t bytes = 0;
    if (!check_tensor(w, name, dtype, ndim, shape, data, &bytes, err))
        return false;
    char *copy = strdup(name);
    if (!copy || !grow((void **)&w->entries, &w->cap_entries, w->n_entries, sizeof *w->entries)) {
        free(copy);
        return writer_fail(w, err, "out of memory adding tensor '%s'", name);
    }
    WriterEntry *we = &w->entries[w->n_entries++];
    *we = (WriterEntry){ .entry = { .name = copy, .dtype = dtype, .ndim = ndim,
                                    .begin = w->data_bytes, .end = w->data_bytes + bytes },
                         .data = data };
    if (ndim > 0)
        memcpy(we->entry.shape, shape, (size_t)ndim * sizeof *shape);
    w->data_bytes += bytes;
    return true;
}

bool snapshot_tensor_layout(const Tensor *t, SnapshotDtype *dtype, int64_t *shape)
{
    for (int i = 0; i < t->ndim; i++)
        shape[i] = t->shape[i];
    /* Each tensor dtype needs its safetensors name here; -Wswitch points at a new one. */
    switch (t->dtype) {
    case DTYPE_F32: *dtype = SNAPSHOT_F32; return true;
    case DTYPE_BF16: *dtype = SNAPSHOT_BF16; return true;
    case DTYPE_F16: *dtype = SNAPSHOT_F16; return true;
    /* safetensors has fp8 dtypes but no per-tensor scale: such a tensor is not stored. */
    case DTYPE_E4M3: case DTYPE_E5M2: case DTYPE_COUNT: break;
    }
    return false;
}

bool snapshot_add_tensor(SnapshotWriter *w, const char *name, const Tensor *t,
                         SnapshotError *err)
{
    if (!name)
        name = t->name;
    SnapshotDtype dtype;
    int64_t shape[TENSOR_MAX_DIMS];
    if (!snapshot_tensor_layout(t, &dtype, shape))
        return writer_fail(w, err, "tensor '%s' has a dtype snapshots do not store", name);
    const void *data = t->dtype == DTYPE_F32 ? (const void *)t->data : t->packed;
    return snapshot_add(w, name, dtype, t->ndim, shape, data, err);
}

bool snapshot_add_meta(SnapshotWriter *w, const char *key, const char *value,
                       SnapshotError *err)
{
    if (!check_name(w, "metadata", key, err))
        return false;
    if (!value || !snapshot_utf8_valid(value, strlen(value)))
        return writer_fail(w, err, "metadata '%s' needs a UTF-8 string value", key);
    for (int i = 0; i < w->n_meta; i++)
        if (strcmp(w->meta[i].key, key) == 0)
            return writer_fail(w, err, "metadata '%s' added twice", key);
    SnapshotMeta m = { strdup(key), strdup(value) };
    if (!m.key || !m.value || !grow((void **)&w->meta, &w->cap_meta, w->n_meta, sizeof m)) {
        free(m.key);
        free(m.value);
        return writer_fail(w, err, "out of memory adding metadata '%s'", key);
    }
    w->meta[w->n_meta++] = m;
    return true;
}

bool snapshot_add_meta_u64(SnapshotWriter *w, const char *key, uint64_t value,
                           SnapshotError *err)
{
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, value);
    return snapshot_add_meta(w, key, text, err);
}

bool snapshot_add_meta_f64(SnapshotWriter *w, const char *key, double value,
                           SnapshotError *err)
{
    char text[32];
    snprintf(text, sizeof text, "%.17g", value);   /* 17 digits: reads back to the same double */
    return snapshot_add_meta(w, key, text, err);
}

bool snapshot_rng_key(char *key, size_t len, const char *prefix, const char *field)
{
    int n = snprintf(key, len, "%s.%s", prefix ? prefix : "", field);
    return n > 0 && (size_t)n < len;
}

bool snapshot_add_rng(SnapshotWriter *w, const char *prefix, const Rng *rng, SnapshotError *err)
{
    char key_state[256], key_inc[256];
    if (!snapshot_rng_key(key_state, sizeof key_state, prefix, "state") ||
        !snapshot_rng_key(key_inc, sizeof key_inc, prefix, "inc"))
        return writer_fail(w, err, "rng prefix '%.64s...' is too long", prefix);
    return snapshot_add_meta_u64(w, key_state, rng->state, err) &&
           snapshot_add_meta_u64(w, key_inc, rng->inc, err);
}

/* An array of integers, written as raw JSON text: cJSON's own number printing goes through a
 * double and may choose exponent form ("1e+15"), which no safetensors reader accepts. */
static bool add_int_array(cJSON *obj, const char *key, const uint64_t *v, int n)
{
    cJSON *arr = cJSON_AddArrayToObject(obj, key);
    for (int i = 0; arr && i < n; i++) {
        char text[24];
        snprintf(text, sizeof text, "%" PRIu64, v[i]);
        if (!cJSON_AddItemToArray(arr, cJSON_CreateRaw(text)))
            return false;
    }
    return arr != NULL;
}

static bool add_entry_json(cJSON *root, const SnapshotEntry *e)
{
    uint64_t shape[SNAPSHOT_MAX_DIMS], offsets[2] = { e->begin, e->end };
    for (int i = 0; i < e->ndim; i++)
        shape[i] = (uint64_t)e->shape[i];
    cJSON *obj = cJSON_AddObjectToObject(root, e->name);
    return obj && cJSON_AddStringToObject(obj, "dtype", snapshot_dtype_name(e->dtype)) &&
           add_int_array(obj, "shape", shape, e->ndim) &&
           add_int_array(obj, "data_offsets", offsets, 2);
}

/* The header text, padded with spaces to a multiple of 8 bytes; NULL when out of memory. */
static char *build_header(const SnapshotWriter *w, size_t *len)
{
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    if (ok && w->n_meta) {
        cJSON *meta = cJSON_AddObjectToObject(root, SNAPSHOT_METADATA_KEY);
        ok = meta != NULL;
        for (int i = 0; ok && i < w->n_meta; i++)
            ok = cJSON_AddStringToObject(meta, w->meta[i].key, w->meta[i].value) != NULL;
    }
    for (int i = 0; ok && i < w->n_entries; i++)
        ok = add_entry_json(root, &w->entries[i].entry);
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return NULL;
    size_t n = strlen(text), padded = (n + 7) & ~(size_t)7;
    char *out = realloc(text, padded + 1);
    if (!out) {
        free(text);
        return NULL;
    }
    memset(out + n, ' ', padded - n);
    out[padded] = '\0';
    *len = padded;
    return out;
}

static int write_body(int fd, const SnapshotWriter *w, const char *header, size_t header_len)
{
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)header_len >> (8 * i));
    int e = outfile_write_all(fd, len8, sizeof len8);
    if (!e)
        e = outfile_write_all(fd, header, header_len);
    for (int i = 0; !e && i < w->n_entries; i++) {
        const SnapshotEntry *en = &w->entries[i].entry;
        e = outfile_write_all(fd, w->entries[i].data, (size_t)(en->end - en->begin));
    }
    return e;
}

bool snapshot_write(const SnapshotWriter *w, const char *path, SnapshotError *err)
{
    if (w->failed)
        return snapshot_fail(err, path, "%s", w->first_error.message);
    size_t header_len = 0;
    char *header = build_header(w, &header_len);
    if (!header)
        return snapshot_fail(err, path, "out of memory building the header");
    /* Whole or not at all: a temporary file beside path, renamed over it (autograd/outfile.h) */
    OutFile out;
    char why[SNAPSHOT_ERROR_LEN];
    bool ok = outfile_open(&out, path, why, sizeof why);
    if (ok) {
        int e = write_body(out.fd, w, header, header_len);
        if (e) {
            snprintf(why, sizeof why, "%s: writing failed: %s", path, strerror(e));
            outfile_abort(&out);
            ok = false;
        } else {
            ok = outfile_commit(&out, why, sizeof why);
        }
    }
    free(header);
    return ok || snapshot_fail(err, NULL, "%s", why);   /* why names the path */
}

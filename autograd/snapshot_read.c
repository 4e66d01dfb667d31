/* Snapshots: opening and validating a file, then reading tensors and metadata from it. */
#include "autograd/snapshot_internal.h"

#include <cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct SnapshotReader {
    char          *path;
    FILE          *file;
    uint64_t       data_start;    /* 8 + header length: where the data buffer begins */
    uint64_t       data_bytes;
    SnapshotEntry *entries;       /* sorted by offset */
    SnapshotEntry **by_name;      /* sorted by name, for lookups */
    int            n_entries;
    SnapshotMeta  *meta;
    int            n_meta;
};

static int cmp_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first string of names[0..n) that occurs twice (sorts names), or NULL. */
static const char *first_duplicate(const char **names, int n)
{
    if (n > 1)
        qsort(names, (size_t)n, sizeof *names, cmp_strings);
    for (int i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            return names[i];
    return NULL;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = (uint64_t)v;
    return true;
}

/* Reading: validation ------------------------------------------------------------------------ */

void snapshot_close(SnapshotReader *r)
{
    if (!r)
        return;
    if (r->file)
        fclose(r->file);
    for (int i = 0; i < r->n_entries; i++)
        free((char *)r->entries[i].name);   /* the reader's own copy */
    free(r->entries);
    free(r->by_name);
    snapshot_free_meta(r->meta, r->n_meta);
    free(r->path);
    free(r);
}

static bool open_file(SnapshotReader *r, uint64_t *size, SnapshotError *err)
{
    r->file = fopen(r->path, "rb");
    if (!r->file)
        return snapshot_fail(err, r->path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fileno(r->file), &st) != 0)
        return snapshot_fail(err, r->path, "cannot stat: %s", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return snapshot_fail(err, r->path, "not a regular file");
    *size = (uint64_t)st.st_size;
    return true;
}

/* Reads the header length and text (NUL-terminated, caller frees), checking them against the
 * file's size before allocating anything. */
static bool read_header(SnapshotReader *r, uint64_t size, char **text, uint64_t *len,
                        SnapshotError *err)
{
    unsigned char len8[8];
    if (size < sizeof len8)
        return snapshot_fail(err, r->path, "truncated: %" PRIu64 " bytes, too short for the "
                             "8-byte header length", size);
    if (fread(len8, 1, sizeof len8, r->file) != sizeof len8)
        return snapshot_fail(err, r->path, "cannot read the header length");
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)len8[i] << (8 * i);
    if (n > SNAPSHOT_MAX_HEADER)
        return snapshot_fail(err, r->path, "header length %" PRIu64 " is over the limit of %"
                             PRIu64 " bytes: corrupt length field or not a snapshot", n,
                             SNAPSHOT_MAX_HEADER);
    if (n > size - 8)
        return snapshot_fail(err, r->path, "truncated: the header length is %" PRIu64
                             " bytes, %" PRIu64 " bytes follow it", n, size - 8);
    if (n < 2)
        return snapshot_fail(err, r->path, "header of %" PRIu64 " bytes is too short for a "
                             "JSON object", n);
    *text = malloc((size_t)n + 1);
    if (!*text)
        return snapshot_fail(err, r->path, "out of memory for a header of %" PRIu64 " bytes",
                             n);
    if (fread(*text, 1, (size_t)n, r->file) != n)
        return snapshot_fail(err, r->path, "cannot read the header");
    (*text)[n] = '\0';
    *len = n;
    r->data_start = 8 + n;
    r->data_bytes = size - 8 - n;
    return true;
}

/* A JSON number that is an integer in [0, 2^53]. */
static bool json_uint(const cJSON *item, uint64_t *out)
{
    if (!cJSON_IsNumber(item))
        return false;
    double v = item->valuedouble;
    if (!(v >= 0.0 && v <= (double)SNAPSHOT_MAX_JSON_INT) || v != (double)(uint64_t)v)
        return false;
    *out = (uint64_t)v;
    return true;
}

/* The three fields of a tensor entry, each exactly once, and nothing else. */
static bool entry_fields(const char *path, const cJSON *obj, const cJSON *f[3],
                         SnapshotError *err)
{
    static const char *const names[3] = { "dtype", "shape", "data_offsets" };
    f[0] = f[1] = f[2] = NULL;
    for (const cJSON *c = obj->child; c; c = c->next) {
        int k = 0;
        while (k < 3 && strcmp(c->string, names[k]) != 0)
            k++;
        if (k == 3)
            return snapshot_fail(err, path, "tensor '%s' has an unexpected field '%s'",
                                 obj->string, c->string);
        if (f[k])
            return snapshot_fail(err, path, "tensor '%s' has field '%s' twice", obj->string,
                                 names[k]);
        f[k] = c;
    }
    for (int k = 0; k < 3; k++)
        if (!f[k])
            return snapshot_fail(err, path, "tensor '%s' has no '%s'", obj->string, names[k]);
    return true;
}

static bool parse_entry(SnapshotReader *r, const cJSON *obj, SnapshotEntry *e, SnapshotError *err)
{
    const char *name = obj->string;
    const cJSON *f[3];
    if (!cJSON_IsObject(obj))
        return snapshot_fail(err, r->path, "tensor '%s' is not a JSON object", name);
    if (!entry_fields(r->path, obj, f, err))
        return false;
    if (!cJSON_IsString(f[0]) || !snapshot_dtype_parse(f[0]->valuestring, &e->dtype))
        return snapshot_fail(err, r->path, "tensor '%s' has unknown dtype %s", name,
                             cJSON_IsString(f[0]) ? f[0]->valuestring : "(not a string)");
    int ndim = cJSON_GetArraySize(f[1]);
    if (!cJSON_IsArray(f[1]) || ndim > SNAPSHOT_MAX_DIMS)
        return snapshot_fail(err, r->path, "tensor '%s': shape is not a list of at most %d "
                             "sizes", name, SNAPSHOT_MAX_DIMS);
    e->ndim = 0;
    for (const cJSON *d = f[1]->child; d; d = d->next) {
        uint64_t v;
        if (!json_uint(d, &v))
            return snapshot_fail(err, r->path, "tensor '%s': shape holds something other "
                                 "than a size (a non-negative integer)", name);
        e->shape[e->ndim++] = (int64_t)v;
    }
    const cJSON *b = cJSON_GetArrayItem(f[2], 0), *en = cJSON_GetArrayItem(f[2], 1);
    if (!cJSON_IsArray(f[2]) || cJSON_GetArraySize(f[2]) != 2 || !json_uint(b, &e->begin) ||
        !json_uint(en, &e->end) || e->begin > e->end)
        return snapshot_fail(err, r->path, "tensor '%s': data_offsets is not a pair [begin, "
                             "end] of byte offsets with begin <= end", name);
    e->name = strdup(name);
    return e->name ? true : snapshot_fail(err, r->path, "out of memory");
}

static bool parse_meta(SnapshotReader *r, const cJSON *obj, SnapshotError *err)
{
    if (!cJSON_IsObject(obj))
        return snapshot_fail(err, r->path, "%s is not a JSON object", SNAPSHOT_METADATA_KEY);
    int n = cJSON_GetArraySize(obj);
    r->meta = calloc((size_t)n + 1, sizeof *r->meta);
    const char **keys = calloc((size_t)n + 1, sizeof *keys);
    bool ok = r->meta && keys ? true : snapshot_fail(err, r->path, "out of memory");
    for (const cJSON *c = obj->child; ok && c; c = c->next) {
        if (!cJSON_IsString(c)) {
            ok = snapshot_fail(err, r->path, "metadata '%s' is not a string", c->string);
            break;
        }
        SnapshotMeta *m = &r->meta[r->n_meta++];
        m->key = strdup(c->string);
        m->value = strdup(c->valuestring);
        keys[r->n_meta - 1] = c->string;
        ok = m->key && m->value ? true : snapshot_fail(err, r->path, "out of memory");
    }
    const char *dup = ok ? first_duplicate(keys, r->n_meta) : NULL;
    if (dup)
        ok = snapshot_fail(err, r->path, "metadata '%s' appears twice", dup);
    free(keys);
    return ok;
}

/* Where the JSON text escapes a NUL character ("\u0000"), or NULL: a name or a value holding
 * one would read as a shorter C string ("add\u0000x" as "add"), so a file could say one thing
 * and be taken for another. Backslashes appear only inside strings, where each escapes the
 * next character. */
static const char *escaped_nul(const char *text, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (text[i] != '\\')
            continue;
        if (text[i + 1] == 'u' && i + 5 < len && strncmp(text + i + 2, "0000", 4) == 0)
            return text + i;
        i++;    /* the escaped character */
    }
    return NULL;
}

/* The JSON object of the header: tensors and metadata, each key once. */
static bool parse_header(SnapshotReader *r, const char *text, uint64_t len, SnapshotError *err)
{
    if (text[0] != '{')
        return snapshot_fail(err, r->path, "header does not start with '{': not a snapshot");
    if (memchr(text, '\0', (size_t)len))
        return snapshot_fail(err, r->path, "header contains a NUL byte");
    if (!snapshot_utf8_valid(text, (size_t)len))
        return snapshot_fail(err, r->path, "header is not valid UTF-8");
    const char *nul = escaped_nul(text, (size_t)len);
    if (nul) {
        const char *from = nul - text > 48 ? nul - 48 : text;
        return snapshot_fail(err, r->path, "header escapes a NUL character (\\u0000) after "
                             "'%.*s': no name or value may hold one", (int)(nul - from), from);
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, (size_t)len, &end, false);
    if (!root)
        return snapshot_fail(err, r->path, "header is not valid JSON (error near byte %td of %"
                             PRIu64 ")", end ? end - text : 0, len);
    size_t rest = (size_t)(text + len - end);
    if (strspn(end, " \t\r\n") != rest) {
        cJSON_Delete(root);
        return snapshot_fail(err, r->path, "header has bytes other than padding after its "
                             "JSON object");
    }
    int n = cJSON_GetArraySize(root);
    r->entries = calloc((size_t)n + 1, sizeof *r->entries);
    bool ok = r->entries ? true : snapshot_fail(err, r->path, "out of memory");
    bool seen_meta = false;
    for (const cJSON *c = root->child; ok && c; c = c->next) {
        if (strcmp(c->string, SNAPSHOT_METADATA_KEY) != 0)
            ok = parse_entry(r, c, &r->entries[r->n_entries++], err);
        else if (seen_meta)
            ok = snapshot_fail(err, r->path, "%s appears twice", SNAPSHOT_METADATA_KEY);
        else
            ok = seen_meta = parse_meta(r, c, err);
    }
    cJSON_Delete(root);
    return ok;
}

static int cmp_by_name(const void *a, const void *b)
{
    return strcmp((*(SnapshotEntry *const *)a)->name, (*(SnapshotEntry *const *)b)->name);
}

static int cmp_by_offset(const void *a, const void *b)
{
    const SnapshotEntry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Each tensor's byte range has the size its dtype and shape need and lies in the data buffer. */
static bool check_entries(const SnapshotReader *r, SnapshotError *err)
{
    for (int i = 0; i < r->n_entries; i++) {
        const SnapshotEntry *e = &r->entries[i];
        uint64_t bytes = 0, span = e->end - e->begin;
        char shape[128];
        if (!snapshot_tensor_bytes(e->dtype, e->ndim, e->shape, &bytes) || bytes != span)
            return snapshot_fail(err, r->path, "tensor '%s' is %s %s, %" PRIu64 " bytes, but "
                                 "its data_offsets [%" PRIu64 ", %" PRIu64 "] span %" PRIu64,
                                 e->name, snapshot_dtype_name(e->dtype),
                                 snapshot_shape_str(e->ndim, e->shape, shape, sizeof shape),
                                 bytes, e->begin, e->end, span);
        if (e->end > r->data_bytes)
            return snapshot_fail(err, r->path, "truncated or corrupt: tensor '%s' has "
                                 "data_offsets [%" PRIu64 ", %" PRIu64 "] but the data buffer "
                                 "holds %" PRIu64 " bytes", e->name, e->begin, e->end,
                                 r->data_bytes);
    }
    return true;
}

/* Sorts the entries by offset and builds the lookup table by name, refusing a name that
 * occurs twice. */
static bool index_entries(SnapshotReader *r, SnapshotError *err)
{
    qsort(r->entries, (size_t)r->n_entries, sizeof *r->entries, cmp_by_offset);
    r->by_name = malloc(((size_t)r->n_entries + 1) * sizeof *r->by_name);
    if (!r->by_name)
        return snapshot_fail(err, r->path, "out of memory");
    for (int i = 0; i < r->n_entries; i++)
        r->by_name[i] = &r->entries[i];
    qsort(r->by_name, (size_t)r->n_entries, sizeof *r->by_name, cmp_by_name);
    for (int i = 1; i < r->n_entries; i++)
        if (strcmp(r->by_name[i - 1]->name, r->by_name[i]->name) == 0)
            return snapshot_fail(err, r->path, "tensor '%s' appears twice in the header",
                                 r->by_name[i]->name);
    return true;
}

/* The tensors, in offset order, tile the data buffer: each begins where the previous ends and
 * the last ends with the file. */
static bool check_tiling(const SnapshotReader *r, SnapshotError *err)
{
    uint64_t covered = 0;
    for (int i = 0; i < r->n_entries; i++) {
        const SnapshotEntry *e = &r->entries[i], *prev = i ? &r->entries[i - 1] : NULL;
        if (e->begin < covered)
            return snapshot_fail(err, r->path, "tensors '%s' and '%s' overlap: data_offsets [%"
                                 PRIu64 ", %" PRIu64 "] and [%" PRIu64 ", %" PRIu64 "]",
                                 prev->name, e->name, prev->begin, prev->end, e->begin, e->end);
        if (e->begin > covered)
            return snapshot_fail(err, r->path, "gap in the data buffer: bytes [%" PRIu64 ", %"
                                 PRIu64 ") before tensor '%s' belong to no tensor", covered,
                                 e->begin, e->name);
        covered = e->end;
    }
    if (covered != r->data_bytes)
        return snapshot_fail(err, r->path, "the data buffer holds %" PRIu64 " bytes but the "
                             "tensors cover only %" PRIu64 ": the rest belongs to no tensor",
                             r->data_bytes, covered);
    return true;
}

SnapshotReader *snapshot_open(const char *path, SnapshotError *err)
{
    SnapshotReader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        snapshot_fail(err, path, "out of memory");
        return NULL;
    }
    char *header = NULL;
    uint64_t size = 0, header_len = 0;
    bool ok = open_file(r, &size, err) && read_header(r, size, &header, &header_len, err) &&
              parse_header(r, header, header_len, err) && check_entries(r, err) &&
              index_entries(r, err) && check_tiling(r, err);
    free(header);
    if (!ok) {
        snapshot_close(r);
        return NULL;
    }
    return r;
}

/* Reading: lookups and data ------------------------------------------------------------------ */

int snapshot_count(const SnapshotReader *r) { return r->n_entries; }

const SnapshotEntry *snapshot_entry(const SnapshotReader *r, int index)
{
    return index >= 0 && index < r->n_entries ? &r->entries[index] : NULL;
}

static int cmp_name_key(const void *key, const void *elem)
{
    return strcmp(key, (*(SnapshotEntry *const *)elem)->name);
}

const SnapshotEntry *snapshot_find(const SnapshotReader *r, const char *name)
{
    SnapshotEntry *const *hit = r->n_entries ? bsearch(name, r->by_name, (size_t)r->n_entries,
                                                       sizeof *r->by_name, cmp_name_key) : NULL;
    return hit ? *hit : NULL;
}

static bool same_shape(const SnapshotEntry *e, int ndim, const int64_t *shape)
{
    if (e->ndim != ndim)
        return false;
    for (int i = 0; i < ndim; i++)
        if (e->shape[i] != shape[i])
            return false;
    return true;
}

bool snapshot_read(SnapshotReader *r, const char *name, SnapshotDtype dtype, int ndim,
                   const int64_t *shape, void *dst, SnapshotError *err)
{
    const SnapshotEntry *e = snapshot_find(r, name);
    if (!e)
        return snapshot_fail(err, r->path, "missing tensor '%s': not in the file", name);
    if (e->dtype != dtype)
        return snapshot_fail(err, r->path, "dtype of '%s' is %s in the file, %s expected",
                             name, snapshot_dtype_name(e->dtype), snapshot_dtype_name(dtype));
    if (!same_shape(e, ndim, shape)) {
        char have[128], want[128];
        return snapshot_fail(err, r->path, "shape of '%s' is %s in the file, %s expected",
                             name, snapshot_shape_str(e->ndim, e->shape, have, sizeof have),
                             snapshot_shape_str(ndim, shape, want, sizeof want));
    }
    size_t bytes = (size_t)(e->end - e->begin);
    if (bytes == 0)
        return true;
    if (fseeko(r->file, (off_t)(r->data_start + e->begin), SEEK_SET) != 0 ||
        fread(dst, 1, bytes, r->file) != bytes)
        return snapshot_fail(err, r->path, "cannot read tensor '%s': the file was changed or "
                             "cut after it was opened, or a read error occurred", name);
    return true;
}

bool snapshot_read_tensor(SnapshotReader *r, const char *name, Tensor *t, SnapshotError *err)
{
    if (!name)
        name = t->name;
    SnapshotDtype dtype;
    int64_t shape[TENSOR_MAX_DIMS];
    if (!snapshot_tensor_layout(t, &dtype, shape))
        return snapshot_fail(err, r->path, "tensor '%s' has a dtype snapshots do not store",
                             name);
    return snapshot_read(r, name, dtype, t->ndim, shape, t->data, err);
}

bool snapshot_check_names(const SnapshotReader *r, const char *const *names, int n,
                          SnapshotError *err)
{
    for (int i = 0; i < n; i++)
        if (!snapshot_find(r, names[i]))
            return snapshot_fail(err, r->path, "missing tensor '%s': expected, but not in the "
                                 "file", names[i]);
    for (int i = 0; i < r->n_entries; i++) {
        int k = 0;
        while (k < n && strcmp(names[k], r->entries[i].name) != 0)
            k++;
        if (k == n)
            return snapshot_fail(err, r->path, "unknown tensor '%s': in the file, but not "
                                 "expected", r->entries[i].name);
    }
    return true;
}

/* Reading: metadata -------------------------------------------------------------------------- */

int snapshot_meta_count(const SnapshotReader *r) { return r->n_meta; }

const char *snapshot_meta_key(const SnapshotReader *r, int index)
{
    return index >= 0 && index < r->n_meta ? r->meta[index].key : NULL;
}

const char *snapshot_meta(const SnapshotReader *r, const char *key)
{
    for (int i = 0; i < r->n_meta; i++)
        if (strcmp(r->meta[i].key, key) == 0)
            return r->meta[i].value;
    return NULL;
}

/* The value of key, or NULL with "no metadata" in err. */
static const char *meta_value(const SnapshotReader *r, const char *key, SnapshotError *err)
{
    const char *v = snapshot_meta(r, key);
    if (!v)
        snapshot_fail(err, r->path, "missing metadata '%s'", key);
    return v;
}

bool snapshot_meta_u64(const SnapshotReader *r, const char *key, uint64_t *out,
                       SnapshotError *err)
{
    const char *v = meta_value(r, key, err);
    if (!v)
        return false;
    if (!parse_u64(v, out))
        return snapshot_fail(err, r->path, "metadata '%s' is '%s', not an unsigned 64-bit "
                             "integer", key, v);
    return true;
}

bool snapshot_meta_f64(const SnapshotReader *r, const char *key, double *out,
                       SnapshotError *err)
{
    const char *v = meta_value(r, key, err);
    if (!v)
        return false;
    char *end;
    *out = strtod(v, &end);
    if (end == v || *end)
        return snapshot_fail(err, r->path, "metadata '%s' is '%s', not a number", key, v);
    return true;
}

bool snapshot_read_rng(const SnapshotReader *r, const char *prefix, Rng *out,
                       SnapshotError *err)
{
    char key_state[256], key_inc[256];
    Rng rng;
    if (!snapshot_rng_key(key_state, sizeof key_state, prefix, "state") ||
        !snapshot_rng_key(key_inc, sizeof key_inc, prefix, "inc"))
        return snapshot_fail(err, r->path, "rng prefix '%.64s...' is too long", prefix);
    if (!snapshot_meta_u64(r, key_state, &rng.state, err) ||
        !snapshot_meta_u64(r, key_inc, &rng.inc, err))
        return false;
    if (!(rng.inc & 1u))
        return snapshot_fail(err, r->path, "metadata '%s' is even: not a PCG stream increment",
                             key_inc);
    *out = rng;
    return true;
}

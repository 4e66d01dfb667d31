#include "autograd/schema.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/snapshot_internal.h"

enum { KEY_LEN = 128, VALUE_LEN = 256 };

static void *field(const SchemaRow *r, void *s) { return (char *)s + r->offset; }
static const void *cfield(const SchemaRow *r, const void *s)
{
    return (const char *)s + r->offset;
}
static bool has_range(const SchemaRow *r) { return r->lo != 0.0 || r->hi != 0.0; }
static bool applies(const SchemaRow *r, const void *s) { return !r->applies || r->applies(s); }

const char *schema_reader_value(const void *reader, const char *key)
{
    return snapshot_meta(reader, key);
}

const char *schema_key(const SchemaRow *r, const char *prefix, char *buf, size_t len)
{
    int n = prefix ? snprintf(buf, len, "%s.%s", prefix, r->key)
                   : snprintf(buf, len, "%s", r->key);
    if (n < 0 || (size_t)n >= len)      /* the tables' own keys are short */
        tensor_fatal("schema_key: '%s.%s' is longer than %zu", prefix ? prefix : "", r->key,
                     len - 1);
    return buf;
}

/* A SUB row's share of its schema's rows: [*from, *to). */
static void sub_rows(const SchemaRow *r, int *from, int *to)
{
    *from = 0;
    while (r->first && *from < r->sub->n && strcmp(r->sub->rows[*from].key, r->first) != 0)
        (*from)++;
    if (*from == r->sub->n)     /* a table's own mistake, found at its first use */
        tensor_fatal("schema %s has no row '%s'", r->sub->name, r->first);
    *to = r->count && *from + r->count < r->sub->n ? *from + r->count : r->sub->n;
}

static const SchemaRow *find_in(const Schema *s, int from, int to, const char *key)
{
    for (int i = from; i < to; i++) {
        const SchemaRow *r = &s->rows[i];
        size_t n = strlen(r->key);
        const SchemaRow *inner = NULL;
        int a, b;
        if (r->type == SCHEMA_SUB && strncmp(key, r->key, n) == 0 && key[n] == '.') {
            sub_rows(r, &a, &b);
            inner = find_in(r->sub, a, b, key + n + 1);
        } else if (r->type != SCHEMA_SUB && strcmp(r->key, key) == 0) {
            inner = r;
        }
        if (inner)
            return inner;
    }
    return NULL;
}

const SchemaRow *schema_find(const Schema *s, const char *key)
{
    return find_in(s, 0, s->n, key);
}

static bool each_in(const Schema *sc, int from, int to, const char *prefix, const void *s,
                    SchemaLeafFn fn, void *ctx)
{
    char key[KEY_LEN];
    for (int i = from; i < to; i++) {
        const SchemaRow *r = &sc->rows[i];
        schema_key(r, prefix, key, sizeof key);
        int a, b;
        if (r->type != SCHEMA_SUB) {
            if (!fn(r, key, s, ctx))
                return false;
        } else if (applies(r, s)) {
            sub_rows(r, &a, &b);
            if (!each_in(r->sub, a, b, key, cfield(r, s), fn, ctx))
                return false;
        }
    }
    return true;
}

bool schema_each(const Schema *sc, const char *prefix, const void *s, SchemaLeafFn fn,
                 void *ctx)
{
    return each_in(sc, 0, sc->n, prefix, s, fn, ctx);
}

/* Writing ------------------------------------------------------------------------------------- */

void schema_format(const SchemaRow *r, const void *s, char *buf, size_t len)
{
    const void *f = cfield(r, s);
    const char *name;
    switch (r->type) {
    case SCHEMA_DOUBLE: snprintf(buf, len, "%.17g", *(const double *)f); break;
    case SCHEMA_FLOAT: snprintf(buf, len, "%.17g", (double)*(const float *)f); break;
    case SCHEMA_U64: snprintf(buf, len, "%" PRIu64, *(const uint64_t *)f); break;
    case SCHEMA_LONG: snprintf(buf, len, "%ld", *(const long *)f); break;
    case SCHEMA_INT: snprintf(buf, len, "%d", *(const int *)f); break;
    case SCHEMA_BOOL: snprintf(buf, len, "%s", *(const bool *)f ? "true" : "false"); break;
    case SCHEMA_CHOICE:
        name = r->name(*(const int *)f);
        snprintf(buf, len, "%s", name ? name : "?");
        break;
    case SCHEMA_CUSTOM: r->format(f, buf, len); break;
    case SCHEMA_STRING:
        name = *(const char *const *)f;
        snprintf(buf, len, "%s", name ? name : "");
        break;
    case SCHEMA_BYTES: snprintf(buf, len, "%zu", *(const size_t *)f); break;
    case SCHEMA_SUB: snprintf(buf, len, "%s", r->sub->name); break;    /* not a value */
    }
}

typedef struct {
    SnapshotWriter *w;
    SnapshotError  *err;
    bool            ok;
} WriteCtx;

static bool write_leaf(const SchemaRow *r, const char *key, const void *s, void *ctx)
{
    WriteCtx *c = ctx;
    char value[VALUE_LEN];
    if (r->kept && applies(r, s)) {
        schema_format(r, s, value, sizeof value);
        c->ok &= snapshot_add_meta(c->w, key, value, c->err);
    }
    return true;
}

bool schema_write(const Schema *sc, const char *prefix, const void *s, SnapshotWriter *w,
                  SnapshotError *err)
{
    WriteCtx c = { w, err, true };
    schema_each(sc, prefix, s, write_leaf, &c);
    return c.ok;
}

/* Two structs of one schema walked together: a leaf of a, and the same field of b. */
typedef struct {
    const char      *a;
    char            *b;
    const SchemaRow *differs;
} PairCtx;

static void *other(const PairCtx *c, const SchemaRow *r, const void *s)
{
    return c->b + ((const char *)s - c->a) + r->offset;
}

static bool differs_leaf(const SchemaRow *r, const char *key, const void *s, void *ctx)
{
    (void)key;
    PairCtx *c = ctx;
    char x[VALUE_LEN], y[VALUE_LEN];
    if (!r->kept || !applies(r, s))
        return true;
    schema_format(r, s, x, sizeof x);
    schema_format(r, (char *)other(c, r, s) - r->offset, y, sizeof y);
    if (strcmp(x, y) == 0)
        return true;
    c->differs = r;
    return false;
}

const SchemaRow *schema_differs(const Schema *sc, const void *a, const void *b)
{
    PairCtx c = { .a = a, .b = (char *)b };
    schema_each(sc, NULL, a, differs_leaf, &c);
    return c.differs;
}

/* Checking ------------------------------------------------------------------------------------ */

/* An integer field's bounds: its range's, within what the type holds. */
static void integer_bounds(const SchemaRow *r, uint64_t *lo, uint64_t *hi)
{
    *lo = 0;
    *hi = r->type == SCHEMA_LONG    ? (uint64_t)LONG_MAX
          : r->type == SCHEMA_INT   ? (uint64_t)INT_MAX
          : r->type == SCHEMA_BYTES ? (uint64_t)SIZE_MAX
                                    : UINT64_MAX;
    if (has_range(r)) {
        *lo = (uint64_t)r->lo;
        if ((uint64_t)r->hi < *hi)      /* exact: the bounds are whole numbers */
            *hi = (uint64_t)r->hi;
    }
}

static bool integer_in_range(const SchemaRow *r, const char *key, uint64_t v, char *why,
                             size_t len)
{
    uint64_t lo, hi;
    integer_bounds(r, &lo, &hi);
    if (v >= lo && v <= hi)
        return true;
    if (r->message == SCHEMA_MSG_COUNT)
        snprintf(why, len, "'%s' is %" PRIu64 ", not in %" PRIu64 "..%" PRIu64, key, v, lo, hi);
    else
        snprintf(why, len, "'%s' = %" PRIu64 " is out of range [%" PRIu64 ", %" PRIu64 "]", key,
                 v, lo, hi);
    return false;
}

/* A NaN is in no range. */
static bool double_in_range(const SchemaRow *r, const char *key, double v, char *why,
                            size_t len)
{
    if (!has_range(r) || (v >= r->lo && v <= r->hi))
        return true;
    snprintf(why, len, "'%s' = %.17g is out of range [%g, %g]", key, v, r->lo, r->hi);
    return false;
}

static bool positive_float(const char *key, double v, char *why, size_t len)
{
    if (v > 0.0 && v <= FLT_MAX && (double)(float)v == v)
        return true;
    snprintf(why, len, "'%s' = %g is not a positive float", key, v);
    return false;
}

/* A number row's field is 0. */
static bool is_zero(const SchemaRow *r, const void *f)
{
    switch (r->type) {
    case SCHEMA_DOUBLE: return *(const double *)f == 0.0;
    case SCHEMA_FLOAT: return *(const float *)f == 0.0f;
    case SCHEMA_U64: return *(const uint64_t *)f == 0;
    case SCHEMA_LONG: return *(const long *)f == 0;
    case SCHEMA_INT: return *(const int *)f == 0;
    case SCHEMA_BYTES: return *(const size_t *)f == 0;
    default: return false;
    }
}

/* The index of text among a STRING row's names, or -1. */
static int name_index(const SchemaRow *r, const char *text)
{
    for (int i = 0; text && r->name(i); i++)
        if (strcmp(text, r->name(i)) == 0)
            return i;
    return -1;
}
static bool is_name(const SchemaRow *r, const char *text) { return name_index(r, text) >= 0; }

/* The checks of one row on a value already in the struct. */
static bool check_row(const SchemaRow *r, const char *key, const void *s, char *why,
                      size_t len)
{
    const void *f = cfield(r, s);
    bool ok = true;
    if (r->zero_unset && is_zero(r, f))
        return !r->check || r->check(r, s, why, len);
    switch (r->type) {
    case SCHEMA_DOUBLE: ok = double_in_range(r, key, *(const double *)f, why, len); break;
    case SCHEMA_FLOAT:
        ok = positive_float(key, *(const float *)f, why, len) &&
             double_in_range(r, key, *(const float *)f, why, len);
        break;
    case SCHEMA_U64: ok = integer_in_range(r, key, *(const uint64_t *)f, why, len); break;
    case SCHEMA_BYTES: ok = integer_in_range(r, key, *(const size_t *)f, why, len); break;
    case SCHEMA_LONG: case SCHEMA_INT: {
        long v = r->type == SCHEMA_LONG ? *(const long *)f : *(const int *)f;
        if (v < 0) {
            snprintf(why, len, "'%s' = %ld is negative", key, v);
            ok = false;
        } else {
            ok = integer_in_range(r, key, (uint64_t)v, why, len);
        }
        break;
    }
    case SCHEMA_CHOICE:
        if (!r->name(*(const int *)f)) {
            snprintf(why, len, "'%s' %d is not one this version knows", key, *(const int *)f);
            ok = false;
        }
        break;
    case SCHEMA_STRING:
        if (r->name && !is_name(r, *(const char *const *)f)) {
            const char *v = *(const char *const *)f;
            snprintf(why, len, "'%s' '%s' is not one this version knows", key, v ? v : "");
            ok = false;
        }
        break;
    case SCHEMA_BOOL: case SCHEMA_CUSTOM: case SCHEMA_SUB: break;
    }
    return ok && (!r->check || r->check(r, s, why, len));
}

typedef struct {
    char  *why;
    size_t len;
} CheckCtx;

static bool check_leaf(const SchemaRow *r, const char *key, const void *s, void *ctx)
{
    CheckCtx *c = ctx;
    return !r->kept || !applies(r, s) || check_row(r, key, s, c->why, c->len);
}

bool schema_check(const Schema *sc, const char *prefix, const void *s, char *why, size_t len)
{
    CheckCtx c = { why, len };
    return schema_each(sc, prefix, s, check_leaf, &c);
}

/* Reading ------------------------------------------------------------------------------------- */

/* The whole of text as a decimal uint64 (no sign, no space). */
static bool parse_u64(const char *text, uint64_t *out)
{
    if (*text < '0' || *text > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end)
        return false;
    *out = (uint64_t)v;
    return true;
}

/* A number in decimal, as "%.17g" writes one: strtod would also take hex ("0x10"), which no
 * snapshot holds. (inf and nan parse, and then fail their key's range with its message.) */
static bool decimal_number(const char *text)
{
    text += *text == '+' || *text == '-';
    return !(text[0] == '0' && (text[1] == 'x' || text[1] == 'X'));
}

/* The names of a choice, "a, b, c", into buf. */
static const char *choice_list(const SchemaRow *r, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; r->name(i) && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", r->name(i));
    return buf;
}

/* text into the row's field, as the type spells it; the range is check_row's. */
static bool parse_value(const SchemaRow *r, const char *key, const char *text, void *s,
                        const char *path, SnapshotError *err)
{
    void *f = field(r, s);
    char *end, list[VALUE_LEN];
    double x;
    uint64_t u;
    switch (r->type) {
    case SCHEMA_DOUBLE: case SCHEMA_FLOAT:
        x = strtod(text, &end);
        if (end == text || *end || !decimal_number(text))
            return snapshot_fail(err, path, "metadata '%s' is '%s', not a decimal number", key,
                                 text);
        if (r->type == SCHEMA_FLOAT) {      /* checked here: the float would lose what is wrong */
            if (!positive_float(key, x, list, sizeof list))
                return snapshot_fail(err, path, "metadata %s", list);
            *(float *)f = (float)x;
        } else {
            *(double *)f = x;
        }
        return true;
    case SCHEMA_U64: case SCHEMA_LONG: case SCHEMA_INT: case SCHEMA_BYTES:
        if (!parse_u64(text, &u))
            return snapshot_fail(err, path, "metadata '%s' is '%s', not an unsigned 64-bit "
                                 "integer", key, text);
        /* before it is cut to the type */
        if (!(r->zero_unset && u == 0) && !integer_in_range(r, key, u, list, sizeof list))
            return snapshot_fail(err, path, "metadata %s", list);
        if (r->type == SCHEMA_U64)
            *(uint64_t *)f = u;
        else if (r->type == SCHEMA_BYTES)
            *(size_t *)f = (size_t)u;       /* within SIZE_MAX: integer_bounds */
        else if (r->type == SCHEMA_LONG)
            *(long *)f = (long)u;
        else
            *(int *)f = (int)u;
        return true;
    case SCHEMA_BOOL:
        if (strcmp(text, "true") != 0 && strcmp(text, "false") != 0)
            return snapshot_fail(err, path, "metadata '%s' is '%s', not true or false", key,
                                 text);
        *(bool *)f = text[0] == 't';
        return true;
    case SCHEMA_STRING: case SCHEMA_CHOICE: {
        /* a string is the text itself, or the name's own (schema.h: never a copy) */
        if (r->type == SCHEMA_STRING && !r->name) {
            *(const char **)f = text;
            return true;
        }
        int i = name_index(r, text);
        if (i >= 0 && r->type == SCHEMA_STRING)
            *(const char **)f = r->name(i);
        else if (i >= 0)
            *(int *)f = i;
        if (i >= 0)
            return true;
        return snapshot_fail(err, path, "metadata '%s' is '%s', which this version does not "
                             "know (%s)", key, text, choice_list(r, list, sizeof list));
    }
    case SCHEMA_CUSTOM:
        if (!r->parse(text, f, list, sizeof list))
            return snapshot_fail(err, path, "metadata '%s' is '%s', %s", key, text, list);
        return true;
    case SCHEMA_SUB: break;     /* schema_each walks its rows instead */
    }
    return false;
}

typedef struct {
    SchemaLookup   lookup;
    const void    *src;
    const char    *path;
    SnapshotError *err;
} ReadCtx;

/* The struct is the caller's to fill: the walk's pointers to it are not const. */
static bool read_leaf(const SchemaRow *r, const char *key, const void *s, void *ctx)
{
    ReadCtx *c = ctx;
    char why[VALUE_LEN];
    if (!r->kept || !applies(r, s))
        return true;
    const char *text = c->lookup(c->src, key);
    if (!text)
        text = r->before;       /* a file saved before the key existed */
    if (!text)
        return snapshot_fail(c->err, c->path, "missing metadata '%s'", key);
    if (!parse_value(r, key, text, (void *)s, c->path, c->err))
        return false;
    if (!check_row(r, key, s, why, sizeof why))
        return snapshot_fail(c->err, c->path, "metadata %s", why);
    return true;
}

bool schema_read(const Schema *sc, const char *prefix, SchemaLookup lookup, const void *src,
                 const char *path, void *s, SnapshotError *err)
{
    ReadCtx c = { lookup, src, path, err };
    return schema_each(sc, prefix, s, read_leaf, &c);
}

bool schema_parse(const SchemaRow *r, const char *text, void *s, char *why, size_t len)
{
    SnapshotError err;
    if (!parse_value(r, r->key, text, s, NULL, &err)) {
        snprintf(why, len, "%s", err.message);
        return false;
    }
    return check_row(r, r->key, s, why, len);
}

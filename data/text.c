#include "data/text.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tensor.h"

/* rng_below draws 32-bit offsets; 2 GiB keeps every offset well inside that range. */
static const size_t MAX_BYTES = (size_t)1 << 31;

struct TextData {
    unsigned char *ids;           /* the file, each byte replaced by its id */
    size_t         n, n_train;    /* bytes in all, in the training part */
    int            T;
    int            vocab;
    unsigned char  byte_of[256];  /* id -> byte */
    int            id_of[256];    /* byte -> id, -1 when absent */
};

static TextData *fail(TextData *d, char *err, size_t errlen, const char *fmt, const char *path,
                      const char *why)
{
    if (err && errlen)
        snprintf(err, errlen, fmt, path, why);
    text_free(d);
    return NULL;
}

/* The whole file into d->ids (still raw bytes), or an errno-style reason. */
static const char *read_all(const char *path, TextData *d)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return strerror(errno);
    size_t cap = 1 << 16;
    int read_errno = 0;
    d->ids = malloc(cap);
    while (d->ids) {
        errno = 0;
        d->n += fread(d->ids + d->n, 1, cap - d->n, f);
        read_errno = errno;
        if (d->n < cap || d->n >= MAX_BYTES)
            break;
        unsigned char *grown = realloc(d->ids, cap * 2);
        if (!grown)
            break;
        d->ids = grown;
        cap *= 2;
    }
    bool bad = ferror(f) != 0;
    fclose(f);
    if (!d->ids || (d->n == cap && d->n < MAX_BYTES))
        return "out of memory";
    if (bad)
        return read_errno ? strerror(read_errno) : "read error";
    return NULL;
}

/* Sorted distinct bytes become ids 0, 1, ...; then the text is rewritten as ids in place. */
static void build_vocab(TextData *d)
{
    bool present[256] = { false };
    for (size_t i = 0; i < d->n; i++)
        present[d->ids[i]] = true;
    d->vocab = 0;
    for (int c = 0; c < 256; c++) {
        d->id_of[c] = present[c] ? d->vocab : -1;
        if (present[c])
            d->byte_of[d->vocab++] = (unsigned char)c;
    }
    for (size_t i = 0; i < d->n; i++)
        d->ids[i] = (unsigned char)d->id_of[d->ids[i]];
}

TextData *text_open(const char *path, int T, char *err, size_t errlen)
{
    if (T < 1)
        tensor_fatal("text_open: row length %d", T);
    TextData *d = calloc(1, sizeof *d);
    if (!d)
        tensor_fatal("out of memory for text data");
    d->T = T;
    const char *why = read_all(path, d);
    if (why)
        return fail(d, err, errlen, "%s: %s", path, why);
    if (d->n == 0)
        return fail(d, err, errlen, "%s: %s", path, "the file is empty");
    if (d->n >= MAX_BYTES)
        return fail(d, err, errlen, "%s: %s", path, "the file is too large (2 GiB or more)");
    size_t need = 10 * ((size_t)T + 1);
    if (d->n < need) {
        char msg[160];
        snprintf(msg, sizeof msg, "the file has %zu bytes; windows of %d bytes need at least %zu"
                 " (one window in the last 10%%, which validates)", d->n, T + 1, need);
        return fail(d, err, errlen, "%s: %s", path, msg);
    }
    d->n_train = d->n - d->n / 10;
    build_vocab(d);
    return d;
}

void text_free(TextData *d)
{
    if (!d)
        return;
    free(d->ids);
    free(d);
}

int text_vocab_size(const TextData *d) { return d->vocab; }
int text_seq_len(const TextData *d) { return d->T; }
size_t text_train_len(const TextData *d) { return d->n_train; }
size_t text_val_len(const TextData *d) { return d->n - d->n_train; }

static void put_window(const TextData *d, size_t start, int *tokens, int *targets)
{
    for (int i = 0; i < d->T; i++) {
        tokens[i] = d->ids[start + (size_t)i];
        targets[i] = d->ids[start + (size_t)i + 1];
    }
}

void text_train_batch(const TextData *d, Rng *rng, int B, int *tokens, int *targets)
{
    /* Starts 0 .. n_train - T - 1: the window's last byte is still training text. */
    uint32_t starts = (uint32_t)(d->n_train - (size_t)d->T);
    for (int b = 0; b < B; b++) {
        size_t start = rng_below(rng, starts);
        put_window(d, start, tokens + (size_t)b * d->T, targets + (size_t)b * d->T);
    }
}

int text_val_count(const TextData *d) { return (int)((text_val_len(d) - 1) / (size_t)d->T); }

int text_val_batch(const TextData *d, int first, int B, int *tokens, int *targets)
{
    int real = 0, count = text_val_count(d);
    for (int b = 0; b < B; b++) {
        int *tok = tokens + (size_t)b * d->T, *tgt = targets + (size_t)b * d->T;
        int w = first + b;
        if (w >= 0 && w < count) {
            put_window(d, d->n_train + (size_t)w * (size_t)d->T, tok, tgt);
            real++;
            continue;
        }
        for (int i = 0; i < d->T; i++) {
            tok[i] = 0;
            tgt[i] = -1;
        }
    }
    return real;
}

int text_token(const TextData *d, unsigned char c) { return d->id_of[c]; }

unsigned char text_char(const TextData *d, int id)
{
    return id >= 0 && id < d->vocab ? d->byte_of[id] : '?';
}

const char *text_decode(const TextData *d, const int *tokens, int n, char *buf, size_t len)
{
    if (len == 0)
        return buf;
    size_t k = 0;
    for (int i = 0; i < n && k + 1 < len; i++)
        buf[k++] = (char)text_char(d, tokens[i]);
    buf[k] = '\0';
    return buf;
}

#include "nn/gpt_snapshot.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char FORMAT_TAG[] = "tapegrad-model-1";
enum { KEY_LEN = 96 };

bool gpt_snapshot_fail(SnapshotError *err, const char *path, const char *fmt, ...)
{
    if (!err)
        return false;
    int n = snprintf(err->message, sizeof err->message, "%s: ", path);
    if (n < 0 || (size_t)n >= sizeof err->message)
        return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message + n, sizeof err->message - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

/* The integer fields of a config, in the order files and messages list them. */
typedef struct {
    const char *key, *label;
    size_t      offset;
    int         max;            /* a file's value at most this (nn/gpt.h) */
} IntField;

static const IntField int_fields[] = {
    { "vocab_size", "vocab_size (V)", offsetof(GptConfig, vocab_size), GPT_MAX_VOCAB },
    { "max_seq", "max_seq (T)", offsetof(GptConfig, max_seq), GPT_MAX_SEQ },
    { "n_layer", "n_layer (L)", offsetof(GptConfig, n_layer), GPT_MAX_LAYERS },
    { "n_head", "n_head (H)", offsetof(GptConfig, n_head), GPT_MAX_WIDTH },
    { "n_embd", "n_embd (C)", offsetof(GptConfig, n_embd), GPT_MAX_WIDTH },
};
enum { N_INT_FIELDS = sizeof int_fields / sizeof int_fields[0] };

static int *int_field(GptConfig *cfg, int i) { return (int *)((char *)cfg + int_fields[i].offset); }

static int int_value(const GptConfig *cfg, int i)
{
    return *(const int *)((const char *)cfg + int_fields[i].offset);
}

static const char *key(char buf[KEY_LEN], const char *prefix, const char *name)
{
    snprintf(buf, KEY_LEN, "%s.%s", prefix, name);
    return buf;
}

bool gpt_snapshot_add_config(SnapshotWriter *w, const char *prefix, const GptConfig *cfg,
                             SnapshotError *err)
{
    char k[KEY_LEN];
    bool ok = true;
    for (int i = 0; i < N_INT_FIELDS; i++)
        ok &= snapshot_add_meta_u64(w, key(k, prefix, int_fields[i].key),
                                    (uint64_t)int_value(cfg, i), err);
    ok &= snapshot_add_meta(w, key(k, prefix, "tied"), cfg->tied ? "true" : "false", err);
    ok &= snapshot_add_meta(w, key(k, prefix, "fused_qkv"), cfg->fused_qkv ? "true" : "false",
                            err);
    return ok;
}

static bool meta_bool(const SnapshotReader *r, const char *path, const char *k, bool *out,
                      SnapshotError *err)
{
    const char *v = snapshot_meta(r, k);
    if (!v)
        return gpt_snapshot_fail(err, path, "missing metadata '%s'", k);
    if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
        return gpt_snapshot_fail(err, path, "metadata '%s' is '%s', not true or false", k, v);
    *out = v[0] == 't';
    return true;
}

bool gpt_snapshot_read_config(const SnapshotReader *r, const char *path, const char *prefix,
                              GptConfig *cfg, SnapshotError *err)
{
    GptConfig c = { 0 };
    char k[KEY_LEN];
    for (int i = 0; i < N_INT_FIELDS; i++) {
        uint64_t v;
        if (!snapshot_meta_u64(r, key(k, prefix, int_fields[i].key), &v, err))
            return false;
        if (v < 1 || v > (uint64_t)int_fields[i].max)
            return gpt_snapshot_fail(err, path, "metadata '%s' is %" PRIu64 ", not in 1..%d", k,
                                     v, int_fields[i].max);
        *int_field(&c, i) = (int)v;
    }
    if (!meta_bool(r, path, key(k, prefix, "tied"), &c.tied, err) ||
        !meta_bool(r, path, key(k, prefix, "fused_qkv"), &c.fused_qkv, err))
        return false;
    char why[160];
    if (!gpt_config_check(&c, why, sizeof why))
        return gpt_snapshot_fail(err, path, "the model it describes is invalid: %s", why);
    *cfg = c;
    return true;
}

const char *gpt_config_describe(const GptConfig *cfg, char *buf, size_t len)
{
    snprintf(buf, len, "V=%d T=%d L=%d H=%d C=%d, %s head, %s q/k/v", cfg->vocab_size,
             cfg->max_seq, cfg->n_layer, cfg->n_head, cfg->n_embd,
             cfg->tied ? "tied" : "untied", cfg->fused_qkv ? "fused" : "separate");
    return buf;
}

const char *gpt_config_diff(const GptConfig *a, const GptConfig *b, char *buf, size_t len)
{
    for (int i = 0; i < N_INT_FIELDS; i++) {
        if (int_value(a, i) != int_value(b, i)) {
            snprintf(buf, len, "%s %d against %d", int_fields[i].label, int_value(a, i),
                     int_value(b, i));
            return buf;
        }
    }
    if (a->tied != b->tied)
        snprintf(buf, len, "a %s head against a %s one", a->tied ? "tied" : "untied",
                 b->tied ? "tied" : "untied");
    else if (a->fused_qkv != b->fused_qkv)
        snprintf(buf, len, "%s q/k/v against %s", a->fused_qkv ? "fused" : "separate",
                 b->fused_qkv ? "fused" : "separate");
    else
        return NULL;
    return buf;
}

/* Every parameter of the model holds fp32 data (it is not a QLoRA base). */
static bool has_fp32_weights(const Gpt *model, const char *path, SnapshotError *err)
{
    int n;
    Tensor *const *params = gpt_params(model, &n);
    for (int i = 0; i < n; i++)
        if (!params[i]->data)
            return gpt_snapshot_fail(err, path, "'%s' holds no fp32 data: the model's base is "
                                     "quantized (QLoRA)", params[i]->name);
    return true;
}

bool gpt_snapshot_save(const Gpt *model, const char *path, SnapshotError *err)
{
    if (!has_fp32_weights(model, path, err))
        return false;
    int n;
    Tensor *const *params = gpt_params(model, &n);
    SnapshotWriter *w = snapshot_writer_new();
    if (!w)
        return gpt_snapshot_fail(err, path, "out of memory for a snapshot writer");
    /* The writer remembers the first failed add and snapshot_write reports it. */
    for (int i = 0; i < n; i++)
        snapshot_add_tensor(w, NULL, params[i], err);
    snapshot_add_meta(w, "format", FORMAT_TAG, err);
    gpt_snapshot_add_config(w, "model", &model->cfg, err);
    bool ok = snapshot_write(w, path, err);
    snapshot_writer_free(w);
    return ok;
}

bool gpt_snapshot_check_finite(const char *path, const char *name, const float *values,
                               size_t n, SnapshotError *err)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(values[i]))
            return gpt_snapshot_fail(err, path, "tensor '%s' holds %g at element %zu: the "
                                     "weights must be finite numbers", name, values[i], i);
    return true;
}

/* Every parameter must be present (a missing one is named before any byte is read); the file
 * may hold more (a training snapshot's optimizer state). */
static bool read_weights(SnapshotReader *r, const char *path, Gpt *m, SnapshotError *err)
{
    int n;
    Tensor *const *params = gpt_params(m, &n);
    for (int i = 0; i < n; i++)
        if (!snapshot_find(r, params[i]->name))
            return gpt_snapshot_fail(err, path, "missing tensor '%s'", params[i]->name);
    for (int i = 0; i < n; i++)
        if (!snapshot_read_tensor(r, NULL, params[i], err) ||
            !gpt_snapshot_check_finite(path, params[i]->name, params[i]->data, params[i]->size,
                                       err))
            return false;
    return true;
}

Gpt *gpt_snapshot_load(const char *path, SnapshotError *err)
{
    SnapshotReader *r = snapshot_open(path, err);
    if (!r)
        return NULL;
    GptConfig cfg;
    Gpt *m = NULL;
    if (gpt_snapshot_read_config(r, path, "model", &cfg, err)) {
        m = gpt_new(&cfg, 0);
        if (!read_weights(r, path, m, err)) {
            gpt_free(m);
            m = NULL;
        }
    }
    snapshot_close(r);
    return m;
}

/* Through a model of its own first, so that a failure half way leaves the caller's intact. */
bool gpt_snapshot_read_weights(Gpt *model, const char *path, SnapshotError *err)
{
    if (!has_fp32_weights(model, path, err))
        return false;
    Gpt *m = gpt_snapshot_load(path, err);
    if (!m)
        return false;
    char diff[160], have[160], want[160];
    bool ok = !gpt_config_diff(&m->cfg, &model->cfg, diff, sizeof diff);
    if (!ok) {
        gpt_snapshot_fail(err, path, "the file holds another model: %s (file: %s; model: %s)",
                          diff, gpt_config_describe(&m->cfg, have, sizeof have),
                          gpt_config_describe(&model->cfg, want, sizeof want));
    } else {
        int n;
        Tensor *const *src = gpt_params(m, &n), *const *dst = gpt_params(model, &n);
        for (int i = 0; i < n; i++)
            tensor_copy_data(dst[i], src[i]);
    }
    gpt_free(m);
    return ok;
}

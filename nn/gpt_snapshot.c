#include "nn/gpt_snapshot.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char FORMAT_TAG[] = "tapegrad-model-1";

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

/* GptConfig's settings, in the order files and messages list them. A snapshot keeps every
 * one: a model cannot be read back into another shape. The counts are refused past the largest
 * model a file may describe (nn/gpt.h), before anything is built. */
#define GPT_FIELD(f) offsetof(GptConfig, f)
static const SchemaRow GPT_ROWS[] = {
    { .key = "vocab_size", .label = "vocab_size (V)", .type = SCHEMA_INT,
      .offset = GPT_FIELD(vocab_size), .lo = 1, .hi = GPT_MAX_VOCAB, .message = SCHEMA_MSG_COUNT,
      .def = "65", .kept = true, .help = "V: token ids are in [0, V)" },
    { .key = "max_seq", .label = "max_seq (T)", .type = SCHEMA_INT,
      .offset = GPT_FIELD(max_seq), .lo = 1, .hi = GPT_MAX_SEQ, .message = SCHEMA_MSG_COUNT,
      .def = "64", .kept = true, .help = "T: the longest sequence, the rows of wpe" },
    { .key = "n_layer", .label = "n_layer (L)", .type = SCHEMA_INT,
      .offset = GPT_FIELD(n_layer), .lo = 1, .hi = GPT_MAX_LAYERS, .message = SCHEMA_MSG_COUNT,
      .def = "4", .kept = true, .help = "L: transformer blocks" },
    { .key = "n_head", .label = "n_head (H)", .type = SCHEMA_INT,
      .offset = GPT_FIELD(n_head), .lo = 1, .hi = GPT_MAX_WIDTH, .message = SCHEMA_MSG_COUNT,
      .def = "4", .kept = true, .help = "H: attention heads", .agrees = "n_embd" },
    { .key = "n_embd", .label = "n_embd (C)", .type = SCHEMA_INT,
      .offset = GPT_FIELD(n_embd), .lo = 1, .hi = GPT_MAX_WIDTH, .message = SCHEMA_MSG_COUNT,
      .def = "128", .kept = true, .help = "C: width of the residual stream, a multiple of H",
      .agrees = "n_head" },
    { .key = "tied", .type = SCHEMA_BOOL, .offset = GPT_FIELD(tied), .def = "true",
      .kept = true, .help = "the head shares the token embedding" },
    { .key = "fused_qkv", .type = SCHEMA_BOOL, .offset = GPT_FIELD(fused_qkv), .def = "true",
      .kept = true, .help = "one [C, 3C] input projection instead of q, k, v" },
};
#undef GPT_FIELD
const Schema GPT_SCHEMA = { .name = "GptConfig", .rows = GPT_ROWS,
                            .n = sizeof GPT_ROWS / sizeof GPT_ROWS[0] };

bool gpt_snapshot_add_config(SnapshotWriter *w, const char *prefix, const GptConfig *cfg,
                             SnapshotError *err)
{
    return schema_write(&GPT_SCHEMA, prefix, cfg, w, err);
}

bool gpt_snapshot_read_config(const SnapshotReader *r, const char *path, const char *prefix,
                              GptConfig *cfg, SnapshotError *err)
{
    GptConfig c = { 0 };
    if (!schema_read(&GPT_SCHEMA, prefix, schema_reader_value, r, path, &c, err))
        return false;
    char why[160];
    if (!gpt_config_check(&c, why, sizeof why))      /* the rules across keys: C a multiple of H */
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
    for (int i = 0; i < GPT_SCHEMA.n; i++) {
        const SchemaRow *r = &GPT_SCHEMA.rows[i];
        if (r->type != SCHEMA_INT)
            continue;
        int x = *(const int *)((const char *)a + r->offset);
        int y = *(const int *)((const char *)b + r->offset);
        if (x != y) {
            snprintf(buf, len, "%s %d against %d", r->label, x, y);
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

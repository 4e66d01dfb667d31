#include "nn/lora_snapshot.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gpt_snapshot.h"

static const char FORMAT_TAG[] = "tapegrad-lora-1";

/* An adapter as F32 whatever its dtype. A packed one's fp32 values are its data when it has
 * some (the optimizer's masters, exposed), else its packed values decoded into a scratch copy
 * that the caller releases once the file is written; *decoded says which. */
static void add_adapter(SnapshotWriter *w, Tensor *t, bool *decoded, SnapshotError *err)
{
    *decoded = t->dtype != DTYPE_F32 && !t->data;
    if (t->dtype == DTYPE_F32) {
        snapshot_add_tensor(w, NULL, t, err);
        return;
    }
    int64_t shape[TENSOR_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++)
        shape[d] = t->shape[d];
    snapshot_add(w, t->name, SNAPSHOT_F32, t->ndim, shape, tensor_unpack(t), err);
}

/* LoraConfig's settings, in the order files list them. */
static void format_targets(const void *field, char *buf, size_t len)
{
    lora_targets_str(*(const unsigned *)field, buf, len);
}
static bool parse_targets(const char *text, void *field, char *why, size_t len)
{
    return lora_targets_parse(text, field, why, len);
}

#define LORA_FIELD(f) offsetof(LoraConfig, f)
static const SchemaRow LORA_ROWS[] = {
    { .key = "rank", .type = SCHEMA_INT, .offset = LORA_FIELD(rank), .lo = 1, .hi = INT_MAX,
      .def = "8", .kept = true, .help = "r: the adapters' rank" },
    { .key = "alpha", .type = SCHEMA_FLOAT, .offset = LORA_FIELD(alpha), .lo = LORA_ALPHA_MIN,
      .hi = LORA_ALPHA_MAX, .def = "16", .kept = true,
      .help = "the adapters' output is scaled by alpha / r" },
    { .key = "targets", .type = SCHEMA_CUSTOM, .offset = LORA_FIELD(targets), .def = "q,v",
      .kept = true, .format = format_targets, .parse = parse_targets,
      .agrees = "base.fused_qkv", .help = "the Linears adapted: q, k, v, o, mlp, or all" },
    { .key = "qlora", .type = SCHEMA_BOOL, .offset = LORA_FIELD(qlora), .def = "false",
      .kept = true, .help = "the frozen base's block weights stored as NF4" },
};
#undef LORA_FIELD
const Schema LORA_SCHEMA = { .name = "LoraConfig", .rows = LORA_ROWS,
                             .n = sizeof LORA_ROWS / sizeof LORA_ROWS[0] };

bool lora_snapshot_add_config(SnapshotWriter *w, const LoraConfig *cfg, SnapshotError *err)
{
    return schema_write(&LORA_SCHEMA, "lora", cfg, w, err);
}

bool lora_snapshot_save(const GptLora *lora, const char *path, SnapshotError *err)
{
    SnapshotWriter *w = snapshot_writer_new();
    if (!w)
        return gpt_snapshot_fail(err, path, "out of memory for a snapshot writer");
    int n;
    Tensor *const *params = gpt_lora_params(lora, &n);
    bool *decoded = calloc((size_t)n, sizeof *decoded);
    if (!decoded)
        tensor_fatal("out of memory saving %d adapter tensors", n);
    /* The writer remembers the first failed add and snapshot_write reports it. */
    for (int i = 0; i < n; i++)
        add_adapter(w, params[i], &decoded[i], err);
    snapshot_add_meta(w, "format", FORMAT_TAG, err);
    lora_snapshot_add_config(w, &lora->cfg, err);
    gpt_snapshot_add_config(w, "base", &lora->model->cfg, err);
    bool ok = snapshot_write(w, path, err);
    snapshot_writer_free(w);
    for (int i = 0; i < n; i++)
        if (decoded[i])
            tensor_release(params[i]);
    free(decoded);
    return ok;
}

bool lora_snapshot_config(const SnapshotReader *r, const char *path, LoraConfig *cfg,
                          GptConfig *base, SnapshotError *err)
{
    const char *tag = snapshot_meta(r, "format");
    if (!tag || strcmp(tag, FORMAT_TAG) != 0)
        return gpt_snapshot_fail(err, path, "not a LoRA adapter: metadata 'format' is %s%s%s, "
                                 "expected '%s'", tag ? "'" : "absent", tag ? tag : "",
                                 tag ? "'" : "", FORMAT_TAG);
    return gpt_snapshot_read_config(r, path, "base", base, err) &&
           lora_snapshot_read_config(r, path, base, cfg, err);
}

bool lora_snapshot_read_config(const SnapshotReader *r, const char *path,
                               const GptConfig *base, LoraConfig *cfg, SnapshotError *err)
{
    LoraConfig c = lora_config_default();
    char why[200];
    if (!schema_read(&LORA_SCHEMA, "lora", schema_reader_value, r, path, &c, err))
        return false;
    if (!lora_config_check(&c, base, why, sizeof why))     /* the targets against the base */
        return gpt_snapshot_fail(err, path, "%s", why);
    *cfg = c;
    return true;
}

/* Names first (a missing or unknown tensor is the clearer message), then each tensor, whose
 * exact shape snapshot_read_tensor checks before it copies a byte. */
static bool read_adapters(SnapshotReader *r, const char *path, GptLora *lora,
                          SnapshotError *err)
{
    int n;
    Tensor *const *params = gpt_lora_params(lora, &n);
    const char **names = malloc((size_t)n * sizeof *names);
    if (!names)
        tensor_fatal("out of memory for %d tensor names", n);
    for (int i = 0; i < n; i++)
        names[i] = params[i]->name;
    bool ok = snapshot_check_names(r, names, n, err);
    for (int i = 0; ok && i < n; i++)
        ok = snapshot_read_tensor(r, NULL, params[i], err) &&
             (!params[i]->data || gpt_snapshot_check_finite(path, params[i]->name,
                                                            params[i]->data, params[i]->size,
                                                            err));
    free(names);
    return ok;
}

/* The adapters are made on the fp32 base and filled; only a complete load quantizes it, so a
 * failure can restore the base exactly. */
GptLora *lora_snapshot_load(Gpt *model, const char *path, SnapshotError *err)
{
    SnapshotReader *r = snapshot_open(path, err);
    if (!r)
        return NULL;
    LoraConfig cfg;
    GptConfig base;
    GptLora *lora = NULL;
    char diff[160], want[160], have[160];
    if (!lora_snapshot_config(r, path, &cfg, &base, err)) {
        /* the message is in err */
    } else if (gpt_config_diff(&base, &model->cfg, diff, sizeof diff)) {
        gpt_snapshot_fail(err, path, "the adapter was trained on another base: %s (adapter's "
                          "base: %s; this base: %s)", diff,
                          gpt_config_describe(&base, want, sizeof want),
                          gpt_config_describe(&model->cfg, have, sizeof have));
    } else {
        bool qlora = cfg.qlora;
        cfg.qlora = false;
        lora = gpt_lora_new(model, &cfg, 0);
        if (!read_adapters(r, path, lora, err)) {
            gpt_lora_free(lora);
            lora = NULL;
        } else if (qlora) {
            gpt_lora_quantize_base(lora);
        }
    }
    snapshot_close(r);
    return lora;
}

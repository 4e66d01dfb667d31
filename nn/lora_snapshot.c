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

bool lora_snapshot_add_config(SnapshotWriter *w, const LoraConfig *cfg, SnapshotError *err)
{
    char targets[64];
    bool ok = snapshot_add_meta_u64(w, "lora.rank", (uint64_t)cfg->rank, err);
    ok &= snapshot_add_meta_f64(w, "lora.alpha", (double)cfg->alpha, err);
    ok &= snapshot_add_meta(w, "lora.targets", lora_targets_str(cfg->targets, targets,
                                                                sizeof targets), err);
    ok &= snapshot_add_meta(w, "lora.qlora", cfg->qlora ? "true" : "false", err);
    return ok;
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
    uint64_t rank;
    double alpha;
    if (!snapshot_meta_u64(r, "lora.rank", &rank, err) ||
        !snapshot_meta_f64(r, "lora.alpha", &alpha, err))
        return false;
    if (rank < 1 || rank > INT_MAX)
        return gpt_snapshot_fail(err, path, "metadata 'lora.rank' is %" PRIu64 ", not a rank",
                                 rank);
    if (!(alpha >= LORA_ALPHA_MIN && alpha <= LORA_ALPHA_MAX))
        return gpt_snapshot_fail(err, path, "metadata 'lora.alpha' = %g is out of range [%g, %g]",
                                 alpha, LORA_ALPHA_MIN, LORA_ALPHA_MAX);
    c.rank = (int)rank;
    c.alpha = (float)alpha;
    const char *targets = snapshot_meta(r, "lora.targets"), *qlora = snapshot_meta(r, "lora.qlora");
    char why[200];
    if (!targets || !qlora)
        return gpt_snapshot_fail(err, path, "missing metadata '%s'",
                                 targets ? "lora.qlora" : "lora.targets");
    if (!lora_targets_parse(targets, &c.targets, why, sizeof why))
        return gpt_snapshot_fail(err, path, "metadata 'lora.targets': %s", why);
    if (strcmp(qlora, "true") != 0 && strcmp(qlora, "false") != 0)
        return gpt_snapshot_fail(err, path, "metadata 'lora.qlora' is '%s', not true or false",
                                 qlora);
    c.qlora = qlora[0] == 't';
    if (!lora_config_check(&c, base, why, sizeof why))
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

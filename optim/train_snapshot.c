#include "optim/train_snapshot.h"

#include "nn/gpt_snapshot.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char FORMAT_TAG[] = "tapegrad-train-1";
static const char *const decay_rule_names[] = { "matrices", "all", "none" };
enum { N_DECAY_RULES = 3, KEY_LEN = TENSOR_NAME_LEN + 64 };

/* Saving ------------------------------------------------------------------------------------ */

/* Optimizer buffers (8-bit codes, factored statistics) are 1-D tensors of their own type. */
static SnapshotDtype buffer_dtype(const OptimBuffer *b)
{
    return b->type == OPTIM_BUF_U8 ? SNAPSHOT_U8 : SNAPSHOT_F32;
}

static void add_tensors(SnapshotWriter *w, const Trainer *t, SnapshotError *err)
{
    int n;
    Tensor *const *params = gpt_params(t->model, &n);
    for (int i = 0; i < n; i++)
        snapshot_add_tensor(w, NULL, params[i], err);
    char name[KEY_LEN];
    for (int i = 0; i < optim_state_count(t->optim); i++)
        snapshot_add_tensor(w, optim_state_name(t->optim, i, name, sizeof name),
                            optim_state_tensor(t->optim, i), err);
    for (int i = 0; i < optim_buffer_count(t->optim); i++) {
        const OptimBuffer *b = optim_buffer(t->optim, i);
        snapshot_add(w, b->name, buffer_dtype(b), 1, (int64_t[]){ (int64_t)b->count }, b->data,
                     err);
    }
}

static void add_bool(SnapshotWriter *w, const char *key, bool v, SnapshotError *err)
{
    snapshot_add_meta(w, key, v ? "true" : "false", err);
}

static void add_optim_config(SnapshotWriter *w, const TrainerConfig *c, SnapshotError *err)
{
    snapshot_add_meta(w, "optim.kind", trainer_optimizer_name(c->optimizer), err);
    OptimDecayRule rule;
    double wd;
    if (c->optimizer == TRAIN_ADAMW || c->optimizer == TRAIN_ADAM8BIT) {
        snapshot_add_meta_f64(w, "optim.beta1", c->adamw.beta1, err);
        snapshot_add_meta_f64(w, "optim.beta2", c->adamw.beta2, err);
        snapshot_add_meta_f64(w, "optim.eps", c->adamw.eps, err);
        rule = c->adamw.decay_rule;
        wd = c->adamw.weight_decay;
    } else if (c->optimizer == TRAIN_ADAFACTOR) {
        const AdafactorConfig *a = &c->adafactor;
        snapshot_add_meta_f64(w, "optim.beta1", a->beta1, err);
        snapshot_add_meta_f64(w, "optim.decay_exponent", a->decay_exponent, err);
        snapshot_add_meta_f64(w, "optim.eps1", a->eps1, err);
        snapshot_add_meta_f64(w, "optim.eps2", a->eps2, err);
        snapshot_add_meta_f64(w, "optim.clip_threshold", a->clip_threshold, err);
        add_bool(w, "optim.relative_step", a->relative_step, err);
        add_bool(w, "optim.scale_parameter", a->scale_parameter, err);
        add_bool(w, "optim.factored", a->factored, err);
        rule = a->decay_rule;
        wd = a->weight_decay;
    } else {
        snapshot_add_meta_f64(w, "optim.momentum", c->sgd.momentum, err);
        add_bool(w, "optim.nesterov", c->sgd.nesterov, err);
        rule = c->sgd.decay_rule;
        wd = c->sgd.weight_decay;
    }
    snapshot_add_meta_f64(w, "optim.weight_decay", wd, err);
    snapshot_add_meta(w, "optim.decay_rule", decay_rule_names[rule], err);
}

bool train_snapshot_save(const Trainer *t, const char *path, const char *const *keys,
                         const char *const *values, int n, SnapshotError *err)
{
    SnapshotWriter *w = snapshot_writer_new();
    if (!w)
        return gpt_snapshot_fail(err, path, "out of memory for a snapshot writer");
    /* The writer remembers the first failed add and snapshot_write reports it. */
    add_tensors(w, t, err);
    snapshot_add_meta(w, "format", FORMAT_TAG, err);
    gpt_snapshot_add_config(w, "model", &t->cfg.model, err);
    snapshot_add_meta_u64(w, "train.seed", t->cfg.seed, err);
    snapshot_add_meta_f64(w, "train.clip", t->cfg.clip, err);
    snapshot_add_meta_u64(w, "train.step", (uint64_t)t->step, err);
    snapshot_add_rng(w, "train.data_rng", &t->data_rng, err);
    add_optim_config(w, &t->cfg, err);
    snapshot_add_meta_u64(w, "optim.step", (uint64_t)t->optim->step, err);
    for (int i = 0; i < n; i++)
        snapshot_add_meta(w, keys[i], values[i], err);
    bool ok = snapshot_write(w, path, err);
    snapshot_writer_free(w);
    return ok;
}

/* Loading: the config ---------------------------------------------------------------------- */

/* Metadata readers: each names the key and the offending value when it fails. */
static bool meta_bool(const SnapshotReader *r, const char *path, const char *key, bool *out,
                      SnapshotError *err)
{
    const char *v = snapshot_meta(r, key);
    if (!v)
        return gpt_snapshot_fail(err, path, "missing metadata '%s'", key);
    if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
        return gpt_snapshot_fail(err, path, "metadata '%s' is '%s', not true or false", key, v);
    *out = v[0] == 't';
    return true;
}

/* A value from names[0..n) by its index in *out. */
static bool meta_choice(const SnapshotReader *r, const char *path, const char *key,
                        const char *const *names, int n, int *out, SnapshotError *err)
{
    const char *v = snapshot_meta(r, key);
    if (!v)
        return gpt_snapshot_fail(err, path, "missing metadata '%s'", key);
    for (int i = 0; i < n; i++) {
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return true;
        }
    }
    return gpt_snapshot_fail(err, path, "metadata '%s' is '%s', which this version does not know",
                             key, v);
}

static bool read_optim_config(const SnapshotReader *r, const char *path, TrainerConfig *c,
                              SnapshotError *err)
{
    const char *kind = snapshot_meta(r, "optim.kind");
    if (!kind)
        return gpt_snapshot_fail(err, path, "missing metadata 'optim.kind'");
    if (!trainer_optimizer_parse(kind, &c->optimizer))
        return gpt_snapshot_fail(err, path, "metadata 'optim.kind' is '%s', not adamw, sgd, "
                                 "adam8bit or adafactor", kind);
    int rule = 0;
    double wd;
    if (!snapshot_meta_f64(r, "optim.weight_decay", &wd, err) ||
        !meta_choice(r, path, "optim.decay_rule", decay_rule_names, N_DECAY_RULES, &rule, err))
        return false;
    if (c->optimizer == TRAIN_ADAFACTOR) {
        AdafactorConfig *a = &c->adafactor;
        a->weight_decay = wd;
        a->decay_rule = (OptimDecayRule)rule;
        return snapshot_meta_f64(r, "optim.beta1", &a->beta1, err) &&
               snapshot_meta_f64(r, "optim.decay_exponent", &a->decay_exponent, err) &&
               snapshot_meta_f64(r, "optim.eps1", &a->eps1, err) &&
               snapshot_meta_f64(r, "optim.eps2", &a->eps2, err) &&
               snapshot_meta_f64(r, "optim.clip_threshold", &a->clip_threshold, err) &&
               meta_bool(r, path, "optim.relative_step", &a->relative_step, err) &&
               meta_bool(r, path, "optim.scale_parameter", &a->scale_parameter, err) &&
               meta_bool(r, path, "optim.factored", &a->factored, err);
    }
    if (c->optimizer == TRAIN_ADAMW || c->optimizer == TRAIN_ADAM8BIT) {
        c->adamw = (AdamWConfig){ .weight_decay = wd, .decay_rule = (OptimDecayRule)rule };
        return snapshot_meta_f64(r, "optim.beta1", &c->adamw.beta1, err) &&
               snapshot_meta_f64(r, "optim.beta2", &c->adamw.beta2, err) &&
               snapshot_meta_f64(r, "optim.eps", &c->adamw.eps, err);
    }
    c->sgd = (SgdConfig){ .weight_decay = wd, .decay_rule = (OptimDecayRule)rule };
    return snapshot_meta_f64(r, "optim.momentum", &c->sgd.momentum, err) &&
           meta_bool(r, path, "optim.nesterov", &c->sgd.nesterov, err);
}

bool train_snapshot_config(const SnapshotReader *r, const char *path, TrainerConfig *cfg,
                           SnapshotError *err)
{
    const char *tag = snapshot_meta(r, "format");
    if (!tag || strcmp(tag, FORMAT_TAG) != 0)
        return gpt_snapshot_fail(err, path, "not a training snapshot: metadata 'format' is "
                                 "%s%s%s, expected '%s'", tag ? "'" : "absent", tag ? tag : "",
                                 tag ? "'" : "", FORMAT_TAG);
    TrainerConfig c = trainer_config_default();
    uint64_t seed;
    if (!gpt_snapshot_read_config(r, path, "model", &c.model, err) ||
        !snapshot_meta_u64(r, "train.seed", &seed, err) ||
        !snapshot_meta_f64(r, "train.clip", &c.clip, err) ||
        !read_optim_config(r, path, &c, err))
        return false;
    c.seed = seed;
    *cfg = c;
    return true;
}

/* Loading: the state ------------------------------------------------------------------------ */

/* Every tensor name the trainer expects, in save order (parameters, state tensors, buffers):
 * *n names in a malloc'ed block. */
static char (*expected_names(const Trainer *t, int *n))[KEY_LEN]
{
    int n_params;
    Tensor *const *params = gpt_params(t->model, &n_params);
    int n_state = optim_state_count(t->optim), n_bufs = optim_buffer_count(t->optim);
    int total = n_params + n_state + n_bufs;
    char (*names)[KEY_LEN] = malloc((size_t)total * sizeof *names);
    if (!names)
        tensor_fatal("out of memory for %d tensor names", total);
    for (int i = 0; i < n_params; i++)
        snprintf(names[i], KEY_LEN, "%s", params[i]->name);
    for (int i = 0; i < n_state; i++)
        optim_state_name(t->optim, i, names[n_params + i], KEY_LEN);
    for (int i = 0; i < n_bufs; i++)
        snprintf(names[n_params + n_state + i], KEY_LEN, "%s", optim_buffer(t->optim, i)->name);
    *n = total;
    return names;
}

static Tensor *tensor_at(const Trainer *t, int i)
{
    int n_params;
    Tensor *const *params = gpt_params(t->model, &n_params);
    return i < n_params ? params[i] : optim_state_tensor(t->optim, i - n_params);
}

/* Names first (a missing or unknown tensor is the clearer message), then each tensor, whose
 * dtype and exact shape snapshot_read_tensor checks before it copies a byte. */
static bool read_tensors(SnapshotReader *r, Trainer *t, SnapshotError *err)
{
    int n;
    char (*names)[KEY_LEN] = expected_names(t, &n);
    const char **list = malloc((size_t)n * sizeof *list);
    if (!list)
        tensor_fatal("out of memory for %d tensor names", n);
    for (int i = 0; i < n; i++)
        list[i] = names[i];
    bool ok = snapshot_check_names(r, list, n, err);
    int n_tensors = n - optim_buffer_count(t->optim);
    for (int i = 0; ok && i < n_tensors; i++)
        ok = snapshot_read_tensor(r, names[i], tensor_at(t, i), err);
    for (int i = n_tensors; ok && i < n; i++) {
        OptimBuffer *b = optim_buffer(t->optim, i - n_tensors);
        ok = snapshot_read(r, b->name, buffer_dtype(b), 1, (int64_t[]){ (int64_t)b->count },
                           b->data, err);
    }
    free(list);
    free(names);
    return ok;
}

static bool read_counters(const SnapshotReader *r, const char *path, Trainer *t,
                          SnapshotError *err)
{
    uint64_t step, optim_step;
    if (!snapshot_meta_u64(r, "train.step", &step, err) ||
        !snapshot_meta_u64(r, "optim.step", &optim_step, err) ||
        !snapshot_read_rng(r, "train.data_rng", &t->data_rng, err))
        return false;
    if (step > LONG_MAX || optim_step > step)
        return gpt_snapshot_fail(err, path, "metadata 'optim.step' = %" PRIu64 " and "
                                 "'train.step' = %" PRIu64 " are inconsistent (updates cannot "
                                 "outnumber steps)", optim_step, step);
    t->step = (long)step;
    t->optim->step = (long)optim_step;
    return true;
}

Trainer *train_snapshot_load(SnapshotReader *r, const char *path, SnapshotError *err)
{
    TrainerConfig cfg;
    if (!train_snapshot_config(r, path, &cfg, err))
        return NULL;
    Trainer *t = trainer_new(&cfg);
    if (!read_tensors(r, t, err) || !read_counters(r, path, t, err)) {
        trainer_free(t);
        return NULL;
    }
    return t;
}

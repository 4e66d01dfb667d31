#include "optim/train_snapshot.h"

#include "optim/offload.h"

#include "nn/gpt_snapshot.h"
#include "nn/lora_snapshot.h"
#include "optim/offload.h"
#include "optim/snapshot_keys.h"

#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char FORMAT_TAG[] = "tapegrad-train-1";
static const char HISTORY[] = "precision.amax_history";
enum { KEY_LEN = TENSOR_NAME_LEN + 64 };
/* A bound on a loaded amax history, so that a corrupt count cannot allocate gigabytes: far
 * more stored activations times window steps than any model here has. */
#define HISTORY_MAX_VALUES ((uint64_t)1 << 26)

/* Saving ------------------------------------------------------------------------------------ */

/* Optimizer buffers (8-bit codes, factored statistics) are 1-D tensors of their own type. */
static SnapshotDtype buffer_dtype(const OptimBuffer *b)
{
    return b->type == OPTIM_BUF_U8 ? SNAPSHOT_U8 : SNAPSHOT_F32;
}

/* The fp32 master weights of p (optim/optim.h), or NULL when it has none. */
static float *master_of(const Optim *o, const Tensor *p)
{
    for (int i = 0; o->masters && i < o->n; i++)
        if (o->params[i] == p)
            return o->masters[i];
    return NULL;
}

/* A master is saved as its parameter, not as a buffer of its own: the same values once. */
static bool is_master(const Optim *o, const OptimBuffer *b)
{
    for (int i = 0; o->masters && i < o->n; i++)
        if (o->masters[i] == b->data)
            return true;
    return false;
}

/* What the optimizer trains, and a snapshot stores as parameters: the model's, or a LoRA run's
 * adapters (its base is not in the file: the program rebuilds it, train_snapshot_restore). */
static Tensor *const *trained_params(const Trainer *t, int *n)
{
    return t->lora ? gpt_lora_params(t->lora, n) : gpt_params(t->model, n);
}

static void tensor_shape64(const Tensor *t, int64_t *shape)
{
    for (int d = 0; d < t->ndim; d++)
        shape[d] = t->shape[d];
}

/* A parameter with a master is stored as the master, fp32, so the file reads as an fp32 model
 * anywhere (numpy, PyTorch, gpt_snapshot) and a resumed run starts from the exact masters. */
static void add_param(SnapshotWriter *w, const Trainer *t, const Tensor *p, SnapshotError *err)
{
    const float *master = master_of(t->optim, p);
    if (!master) {
        snapshot_add_tensor(w, NULL, p, err);
        return;
    }
    int64_t shape[TENSOR_MAX_DIMS];
    tensor_shape64(p, shape);
    snapshot_add(w, p->name, SNAPSHOT_F32, p->ndim, shape, master, err);
}

static void add_tensors(SnapshotWriter *w, const Trainer *t, SnapshotError *err)
{
    int n;
    Tensor *const *params = trained_params(t, &n);
    for (int i = 0; i < n; i++)
        add_param(w, t, params[i], err);
    char name[KEY_LEN];
    for (int i = 0; i < optim_state_count(t->optim); i++)
        snapshot_add_tensor(w, optim_state_name(t->optim, i, name, sizeof name),
                            optim_state_tensor(t->optim, i), err);
    for (int i = 0; i < optim_buffer_count(t->optim); i++) {
        const OptimBuffer *b = optim_buffer(t->optim, i);
        if (!is_master(t->optim, b))
            snapshot_add(w, b->name, buffer_dtype(b), 1, (int64_t[]){ (int64_t)b->count },
                         b->data, err);
    }
    const Tape *tape = t->tape;
    if (t->cfg.policy.fp8_scaling == POLICY_FP8_DELAYED && tape->history_slots > 0)
        snapshot_add(w, HISTORY, SNAPSHOT_F32, 2,
                     (int64_t[]){ tape->history_slots, policy_fp8_window(&t->cfg.policy) },
                     tape->amax_history, err);
}

/* The counters as a snapshot keeps them (optim/snapshot_keys.h), and back into the trainer. The
 * amax history is the tape's own state: its rows and its count of recorded steps, the one place
 * a snapshot reaches into the tape. */
static TrainerCounters counters_of(const Trainer *t)
{
    const LossScaler *s = &t->scaler;
    return (TrainerCounters){ .step = t->step, .optim_step = t->optim->step, .scale = s->scale,
                              .growth_tracker = s->growth_tracker, .checks = s->checks,
                              .skipped = s->skipped,
                              .delayed = t->cfg.policy.fp8_scaling == POLICY_FP8_DELAYED,
                              .history_slots = t->tape->history_slots,
                              .history_steps = t->tape->history_steps };
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
    schema_write(&TRAINER_SCHEMA, NULL, &t->cfg, w, err);
    TrainerCounters counters = counters_of(t);
    schema_write(&TRAINER_COUNTER_SCHEMA, NULL, &counters, w, err);
    snapshot_add_rng(w, "train.data_rng", &t->data_rng, err);
    if (t->lora)
        lora_snapshot_add_config(w, &t->lora->cfg, err);
    for (int i = 0; i < n; i++)
        snapshot_add_meta(w, keys[i], values[i], err);
    bool ok = snapshot_write(w, path, err);
    snapshot_writer_free(w);
    return ok;
}

/* Loading: the config ---------------------------------------------------------------------- */

/* A snapshot names its precision preset and then every field of the policy (so the file says
 * what it ran without the reader knowing the presets). The two must say the same thing: a field
 * that differs from its preset's (precision.param = e4m3 under an fp32 policy) is a file edited
 * or damaged, and loading either reading would change the numbers silently. The fp8 scaling
 * and its window are the run's own choice on top of the preset, but delayed scaling needs fp8
 * activations (nothing else keeps an amax history). */
static bool policy_agrees(const PrecisionPolicy *p, const char *path, SnapshotError *err)
{
    PrecisionPolicy preset;
    if (!policy_preset(p->name, &preset))       /* read by its preset row: cannot happen */
        return gpt_snapshot_fail(err, path, "metadata 'precision.policy' is '%s', not %s",
                                 p->name, policy_preset_names());
    const struct { const char *key, *mine, *theirs; } dtypes[] = {
        { "precision.param", tensor_dtype_name(p->param), tensor_dtype_name(preset.param) },
        { "precision.act", tensor_dtype_name(p->act), tensor_dtype_name(preset.act) },
        { "precision.grad", tensor_dtype_name(p->grad), tensor_dtype_name(preset.grad) },
        { "precision.compute", fmt_name(p->compute), fmt_name(preset.compute) },
        { "precision.grad_compute", fmt_name(p->grad_compute), fmt_name(preset.grad_compute) },
        { "precision.accumulate_low", p->accumulate_low ? "true" : "false",
          preset.accumulate_low ? "true" : "false" },
    };
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].mine, dtypes[i].theirs) != 0)
            return gpt_snapshot_fail(err, path, "metadata '%s' = %s contradicts "
                                     "'precision.policy' = %s, whose %s is %s", dtypes[i].key,
                                     dtypes[i].mine, p->name, dtypes[i].key + 10,
                                     dtypes[i].theirs);
    if (p->fp8_scaling == POLICY_FP8_DELAYED && !policy_is_scaled(tensor_dtype_format(p->act)))
        return gpt_snapshot_fail(err, path, "metadata 'precision.fp8_scaling' = delayed "
                                 "contradicts 'precision.policy' = %s: delayed scaling needs "
                                 "fp8 activations", p->name);
    return true;
}

bool train_snapshot_config(const SnapshotReader *r, const char *path, TrainerConfig *cfg,
                           SnapshotError *err)
{
    const char *tag = snapshot_meta(r, "format");
    if (!tag || strcmp(tag, FORMAT_TAG) != 0)
        return gpt_snapshot_fail(err, path, "not a training snapshot: metadata 'format' is "
                                 "%s%s%s, expected '%s'", tag ? "'" : "absent", tag ? tag : "",
                                 tag ? "'" : "", FORMAT_TAG);
    SnapshotKeyView meta;
    snapshot_keys_migrate(&meta, r, path);
    TrainerConfig c = trainer_config_default();
    if (!gpt_snapshot_read_config(r, path, "model", &c.model, err) ||
        !schema_read(&TRAINER_SCHEMA, NULL, snapshot_keys_value, &meta, path, &c, err))
        return false;
    char why[256];
    if (!trainer_config_check(&c, why, sizeof why))    /* the rules across keys */
        return gpt_snapshot_fail(err, path, "metadata %s", why);
    if (!policy_agrees(&c.policy, path, err))
        return false;
    *cfg = c;
    return true;
}

/* Loading: the state ------------------------------------------------------------------------ */

/* The counters, read with their keys' checks and then against each other and the trainer. */
static bool read_counters(SnapshotReader *r, const char *path, const Trainer *t,
                          TrainerCounters *c, SnapshotError *err)
{
    SnapshotKeyView meta;
    snapshot_keys_migrate(&meta, r, path);
    *c = (TrainerCounters){ .delayed = t->cfg.policy.fp8_scaling == POLICY_FP8_DELAYED };
    if (!schema_read(&TRAINER_COUNTER_SCHEMA, NULL, snapshot_keys_value, &meta, path, c, err))
        return false;
    if (c->optim_step > c->step)
        return gpt_snapshot_fail(err, path, "metadata 'optim.step' = %ld and 'train.step' = %ld "
                                 "are inconsistent (updates cannot outnumber steps)",
                                 c->optim_step, c->step);
    if (c->growth_tracker >= t->cfg.loss_scale.growth_interval || c->skipped > c->checks ||
        c->checks > c->step)
        return gpt_snapshot_fail(err, path, "the loss scaler's counters are inconsistent "
                                 "(growth_tracker %ld, checks %ld, skipped %ld, %ld steps)",
                                 c->growth_tracker, c->checks, c->skipped, c->step);
    /* The scale a mode can hold: none multiplies by 1, static by its initial scale, dynamic
     * by any positive float (checked by its key). */
    const LossScaleConfig *ls = &t->cfg.loss_scale;
    double want = ls->mode == LOSS_SCALE_NONE ? 1.0 : (double)(float)ls->init_scale;
    if (ls->mode != LOSS_SCALE_DYNAMIC && (double)c->scale != want)
        return gpt_snapshot_fail(err, path, "metadata 'loss_scale.scale' = %.17g contradicts "
                                 "'loss_scale.mode' = %s, whose scale is always %.17g",
                                 (double)c->scale, LOSS_SCALE_MODE_NAMES[ls->mode], want);
    /* The amax history: a row per stored activation, filled one column per recorded step; a
     * step records at most one column, so there are no more recorded steps than steps, and
     * rows exist only once a step has been recorded. */
    if (c->delayed && (c->history_steps > c->step || c->history_steps > INT_MAX))
        return gpt_snapshot_fail(err, path, "metadata 'precision.amax_history_steps' = %ld "
                                 "contradicts 'train.step' = %ld (a step records the history "
                                 "once at most)", c->history_steps, c->step);
    if (c->delayed && c->history_slots > 0 && c->history_steps == 0)
        return gpt_snapshot_fail(err, path, "metadata 'precision.amax_history_steps' = %ld "
                                 "contradicts 'precision.amax_history_slots' = %ld (rows exist "
                                 "once a step has been recorded)", c->history_steps,
                                 c->history_slots);
    if ((uint64_t)c->history_slots > HISTORY_MAX_VALUES / policy_fp8_window(&t->cfg.policy))
        return gpt_snapshot_fail(err, path, "metadata 'precision.amax_history_slots' = %ld is "
                                 "more stored activations than a tape holds", c->history_slots);
    return true;
}

/* Every tensor name the trainer expects, in save order (parameters, state tensors, buffers,
 * the amax history when with_history): *n names in a malloc'ed block. */
static char (*expected_names(const Trainer *t, bool with_history, int *n))[KEY_LEN]
{
    int n_params;
    Tensor *const *params = trained_params(t, &n_params);
    int n_state = optim_state_count(t->optim), n_bufs = optim_buffer_count(t->optim);
    int total = n_params + n_state + n_bufs + 1;
    char (*names)[KEY_LEN] = malloc((size_t)total * sizeof *names);
    if (!names)
        tensor_fatal("out of memory for %d tensor names", total);
    for (int i = 0; i < n_params; i++)
        snprintf(names[i], KEY_LEN, "%s", params[i]->name);
    for (int i = 0; i < n_state; i++)
        optim_state_name(t->optim, i, names[n_params + i], KEY_LEN);
    int k = n_params + n_state;
    for (int i = 0; i < n_bufs; i++)
        if (!is_master(t->optim, optim_buffer(t->optim, i)))
            snprintf(names[k++], KEY_LEN, "%s", optim_buffer(t->optim, i)->name);
    if (with_history)
        snprintf(names[k++], KEY_LEN, "%s", HISTORY);
    *n = k;
    return names;
}

/* Into the master when the parameter has one (its packed copy is refreshed after every tensor
 * has been read). */
static bool read_param(SnapshotReader *r, const char *path, const Trainer *t, Tensor *p,
                       SnapshotError *err)
{
    float *master = master_of(t->optim, p);
    if (!master)
        return snapshot_read_tensor(r, NULL, p, err) &&
               (!p->data || gpt_snapshot_check_finite(path, p->name, p->data, p->size, err));
    int64_t shape[TENSOR_MAX_DIMS];
    tensor_shape64(p, shape);
    return snapshot_read(r, p->name, SNAPSHOT_F32, p->ndim, shape, master, err) &&
           gpt_snapshot_check_finite(path, p->name, master, p->size, err);
}

/* Names first (a missing or unknown tensor is the clearer message), then each tensor, whose
 * dtype and exact shape snapshot_read checks before it copies a byte. The amax history is
 * read by read_amax_history. */
static bool read_tensors(SnapshotReader *r, const char *path, Trainer *t, long history_slots,
                         SnapshotError *err)
{
    int n;
    char (*names)[KEY_LEN] = expected_names(t, history_slots > 0, &n);
    const char **list = malloc((size_t)n * sizeof *list);
    if (!list)
        tensor_fatal("out of memory for %d tensor names", n);
    for (int i = 0; i < n; i++)
        list[i] = names[i];
    bool ok = snapshot_check_names(r, list, n, err);
    int n_params;
    Tensor *const *params = trained_params(t, &n_params);
    for (int i = 0; ok && i < n_params; i++)
        ok = read_param(r, path, t, params[i], err);
    for (int i = 0; ok && i < optim_state_count(t->optim); i++)
        ok = snapshot_read_tensor(r, names[n_params + i], optim_state_tensor(t->optim, i), err);
    for (int i = 0; ok && i < optim_buffer_count(t->optim); i++) {
        OptimBuffer *b = optim_buffer(t->optim, i);
        if (!is_master(t->optim, b))
            ok = snapshot_read(r, b->name, buffer_dtype(b), 1,
                               (int64_t[]){ (int64_t)b->count }, b->data, err);
    }
    if (ok) {
        optim_pack_masters(t->optim);
        optim_offload_resync(t->optim);     /* the fp32 parameters were read on the device */
    }
    free(list);
    free(names);
    return ok;
}

/* Into the trainer's fresh tape, which takes ownership of the buffer (it grows and frees it
 * with realloc and free). */
static bool read_amax_history(SnapshotReader *r, const char *path, Trainer *t,
                              const TrainerCounters *c, SnapshotError *err)
{
    if (!c->delayed)
        return true;
    int w = policy_fp8_window(&t->cfg.policy);
    float *h = NULL;
    if (c->history_slots > 0) {
        h = malloc((size_t)c->history_slots * (size_t)w * sizeof *h);
        if (!h)
            tensor_fatal("out of memory for an amax history of %ld x %d", c->history_slots, w);
        if (!snapshot_read(r, HISTORY, SNAPSHOT_F32, 2, (int64_t[]){ c->history_slots, w }, h,
                           err)) {
            free(h);
            return false;
        }
        /* An amax is a largest magnitude: finite and >= 0 (0 for a column not yet filled). A
         * NaN or an inf would become every later scale of its activation. */
        for (size_t i = 0; i < (size_t)c->history_slots * (size_t)w; i++)
            if (!(h[i] >= 0.0f && h[i] <= FLT_MAX)) {
                float bad = h[i];
                free(h);
                return gpt_snapshot_fail(err, path, "tensor '%s' holds %g at row %zu, column "
                                         "%zu: an amax is a finite magnitude >= 0", HISTORY,
                                         (double)bad, i / (size_t)w, i % (size_t)w);
            }
    }
    Tape *tape = t->tape;
    free(tape->amax_history);
    tape->amax_history = h;
    tape->history_slots = (int)c->history_slots;
    tape->history_steps = c->history_steps;
    return true;
}

static bool read_state(SnapshotReader *r, const char *path, Trainer *t, SnapshotError *err)
{
    TrainerCounters c;
    if (!read_counters(r, path, t, &c, err) || !read_tensors(r, path, t, c.history_slots, err) ||
        !snapshot_read_rng(r, "train.data_rng", &t->data_rng, err) ||
        !read_amax_history(r, path, t, &c, err))
        return false;
    t->step = c.step;
    t->optim->step = c.optim_step;
    t->scaler.scale = c.scale;
    t->scaler.growth_tracker = c.growth_tracker;
    t->scaler.checks = c.checks;
    t->scaler.skipped = c.skipped;
    return true;
}

Trainer *train_snapshot_load(SnapshotReader *r, const char *path, SnapshotError *err)
{
    TrainerConfig cfg;
    if (!train_snapshot_config(r, path, &cfg, err))
        return NULL;
    if (snapshot_meta(r, "lora.rank"))
        return gpt_snapshot_fail(err, path, "a LoRA run's snapshot holds its adapters, not its "
                                 "base: rebuild the run, then train_snapshot_restore"), NULL;
    Trainer *t = trainer_new(&cfg);
    if (!read_state(r, path, t, err)) {
        trainer_free(t);
        return NULL;
    }
    return t;
}

bool train_snapshot_lora(const SnapshotReader *r, const char *path, const GptConfig *base,
                         LoraConfig *cfg, bool *has, SnapshotError *err)
{
    *has = snapshot_meta(r, "lora.rank") != NULL;
    return !*has || lora_snapshot_read_config(r, path, base, cfg, err);
}

bool train_snapshot_restore(Trainer *t, SnapshotReader *r, const char *path, SnapshotError *err)
{
    LoraConfig lc;
    bool has;
    if (!train_snapshot_lora(r, path, &t->cfg.model, &lc, &has, err))
        return false;
    const LoraConfig *mine = t->lora ? &t->lora->cfg : NULL;
    if (has != (mine != NULL) || (has && schema_differs(&LORA_SCHEMA, &lc, mine)))
        return gpt_snapshot_fail(err, path, "its LoRA settings are not the trainer's");
    return read_state(r, path, t, err);
}

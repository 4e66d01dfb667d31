#include "optim/train_snapshot.h"

#include "nn/gpt_snapshot.h"
#include "nn/lora_snapshot.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char FORMAT_TAG[] = "tapegrad-train-1";
static const char *const decay_rule_names[] = { "matrices", "all", "none" };
static const char HISTORY[] = "precision.amax_history";
enum { N_DECAY_RULES = 3, KEY_LEN = TENSOR_NAME_LEN + 64 };
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
        if (c->optimizer == TRAIN_ADAM8BIT)
            snapshot_add_meta(w, "optim.rounding", adam8bit_rounding_name(c->adam8bit_rounding),
                              err);
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

static const char *const fp8_scaling_names[] = { "current", "delayed" };
enum { N_FP8_SCALINGS = 2 };

static void add_precision(SnapshotWriter *w, const PrecisionPolicy *p, SnapshotError *err)
{
    snapshot_add_meta(w, "precision.policy", p->name, err);
    snapshot_add_meta(w, "precision.param", tensor_dtype_name(p->param), err);
    snapshot_add_meta(w, "precision.act", tensor_dtype_name(p->act), err);
    snapshot_add_meta(w, "precision.grad", tensor_dtype_name(p->grad), err);
    snapshot_add_meta(w, "precision.compute", fmt_name(p->compute), err);
    snapshot_add_meta(w, "precision.grad_compute", fmt_name(p->grad_compute), err);
    add_bool(w, "precision.accumulate_low", p->accumulate_low, err);
    snapshot_add_meta(w, "precision.fp8_scaling", fp8_scaling_names[p->fp8_scaling], err);
    snapshot_add_meta_u64(w, "precision.fp8_window", (uint64_t)p->fp8_window, err);
}

/* The config and the state: the scale is a float, exact in "%.17g". */
static void add_loss_scale(SnapshotWriter *w, const LossScaler *s, SnapshotError *err)
{
    snapshot_add_meta(w, "loss_scale.mode", LOSS_SCALE_MODE_NAMES[s->cfg.mode], err);
    snapshot_add_meta_f64(w, "loss_scale.init_scale", s->cfg.init_scale, err);
    snapshot_add_meta_f64(w, "loss_scale.growth_factor", s->cfg.growth_factor, err);
    snapshot_add_meta_f64(w, "loss_scale.backoff_factor", s->cfg.backoff_factor, err);
    snapshot_add_meta_u64(w, "loss_scale.growth_interval", (uint64_t)s->cfg.growth_interval,
                          err);
    snapshot_add_meta_f64(w, "loss_scale.scale", s->scale, err);
    snapshot_add_meta_u64(w, "loss_scale.growth_tracker", (uint64_t)s->growth_tracker, err);
    snapshot_add_meta_u64(w, "loss_scale.checks", (uint64_t)s->checks, err);
    snapshot_add_meta_u64(w, "loss_scale.skipped", (uint64_t)s->skipped, err);
}

/* The tape's history and its step count (which column the next step writes), so that a
 * resumed run scales every stored activation as the uninterrupted one would. */
static void add_amax_history(SnapshotWriter *w, const Trainer *t, SnapshotError *err)
{
    const Tape *tape = t->tape;
    if (t->cfg.policy.fp8_scaling != POLICY_FP8_DELAYED)
        return;
    snapshot_add_meta_u64(w, "precision.amax_history_slots", (uint64_t)tape->history_slots,
                          err);
    snapshot_add_meta_u64(w, "precision.amax_history_steps", (uint64_t)tape->history_steps, err);
    if (tape->history_slots > 0)
        snapshot_add(w, HISTORY, SNAPSHOT_F32, 2,
                     (int64_t[]){ tape->history_slots, policy_fp8_window(&t->cfg.policy) },
                     tape->amax_history, err);
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
    add_precision(w, &t->cfg.policy, err);
    add_loss_scale(w, &t->scaler, err);
    add_amax_history(w, t, err);
    if (t->lora)
        lora_snapshot_add_config(w, &t->lora->cfg, err);
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

/* Older layouts ------------------------------------------------------------------------------ */

/* The one place that knows the format's history: the parts a snapshot was saved before, each
 * recognised by its first key, which the readers then take as the run that saved it had them. */
typedef struct {
    bool precision;     /* no "precision." keys: saved before mixed precision; it trained fp32 */
    bool loss_scale;    /* no "loss_scale." keys: saved before loss scaling; none, scale 1 */
    bool rounding;      /* no optim.rounding: saved before 8-bit Adam's choice; nearest */
    bool amax_history;  /* no history keys: current scaling, no step yet, or saved before the
                         * history was kept; a fresh history */
} Predates;

static Predates predates(const SnapshotReader *r)
{
    return (Predates){
        .precision = !snapshot_meta(r, "precision.policy"),
        .loss_scale = !snapshot_meta(r, "loss_scale.mode"),
        .rounding = !snapshot_meta(r, "optim.rounding"),
        .amax_history = !snapshot_meta(r, "precision.amax_history_slots"),
    };
}

/* 8-bit Adam's rounding (nearest in a snapshot that predates the choice). */
static bool read_rounding(const SnapshotReader *r, const char *path, TrainerConfig *c,
                          SnapshotError *err)
{
    int rounding = ADAM8BIT_ROUND_NEAREST;
    if (!predates(r).rounding &&
        !meta_choice(r, path, "optim.rounding", ADAM8BIT_ROUNDING_NAMES, ADAM8BIT_ROUND_COUNT,
                     &rounding, err))
        return false;
    c->adam8bit_rounding = (Adam8bitRounding)rounding;
    return true;
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
               snapshot_meta_f64(r, "optim.eps", &c->adamw.eps, err) &&
               (c->optimizer != TRAIN_ADAM8BIT || read_rounding(r, path, c, err));
    }
    c->sgd = (SgdConfig){ .weight_decay = wd, .decay_rule = (OptimDecayRule)rule };
    return snapshot_meta_f64(r, "optim.momentum", &c->sgd.momentum, err) &&
           meta_bool(r, path, "optim.nesterov", &c->sgd.nesterov, err);
}

static bool read_precision(const SnapshotReader *r, const char *path, PrecisionPolicy *p,
                           SnapshotError *err)
{
    if (predates(r).precision)
        return true;        /* the default policy, fp32 */
    const char *name = snapshot_meta(r, "precision.policy");
    if (!policy_preset(name, p))
        return gpt_snapshot_fail(err, path, "metadata 'precision.policy' is '%s', not %s", name,
                                 policy_preset_names());
    const char *dtypes[DTYPE_COUNT], *formats[FMT_COUNT];
    for (int d = 0; d < DTYPE_COUNT; d++)
        dtypes[d] = tensor_dtype_name((Dtype)d);
    for (int f = 0; f < FMT_COUNT; f++)
        formats[f] = fmt_name((Format)f);
    int param = 0, act = 0, grad = 0, compute = 0, grad_compute = 0, fp8_scaling = 0;
    uint64_t window;
    if (!meta_choice(r, path, "precision.param", dtypes, DTYPE_COUNT, &param, err) ||
        !meta_choice(r, path, "precision.act", dtypes, DTYPE_COUNT, &act, err) ||
        !meta_choice(r, path, "precision.grad", dtypes, DTYPE_COUNT, &grad, err) ||
        !meta_choice(r, path, "precision.compute", formats, FMT_COUNT, &compute, err) ||
        !meta_choice(r, path, "precision.grad_compute", formats, FMT_COUNT, &grad_compute,
                     err) ||
        !meta_bool(r, path, "precision.accumulate_low", &p->accumulate_low, err) ||
        !meta_choice(r, path, "precision.fp8_scaling", fp8_scaling_names, N_FP8_SCALINGS,
                     &fp8_scaling, err) ||
        !snapshot_meta_u64(r, "precision.fp8_window", &window, err))
        return false;
    if (window > 1u << 20)
        return gpt_snapshot_fail(err, path, "metadata 'precision.fp8_window' = %" PRIu64
                                 " is not a window of steps (at most %u)", window, 1u << 20);
    p->param = (Dtype)param;
    p->act = (Dtype)act;
    p->grad = (Dtype)grad;
    p->compute = (Format)compute;
    p->grad_compute = (Format)grad_compute;
    p->fp8_scaling = (PolicyFp8Scaling)fp8_scaling;
    p->fp8_window = (int)window;
    return true;
}

static bool read_loss_scale_config(const SnapshotReader *r, const char *path,
                                   LossScaleConfig *c, SnapshotError *err)
{
    if (predates(r).loss_scale)
        return true;        /* the default, none */
    int mode = 0;
    uint64_t interval;
    if (!meta_choice(r, path, "loss_scale.mode", LOSS_SCALE_MODE_NAMES, 3, &mode, err) ||
        !snapshot_meta_f64(r, "loss_scale.init_scale", &c->init_scale, err) ||
        !snapshot_meta_f64(r, "loss_scale.growth_factor", &c->growth_factor, err) ||
        !snapshot_meta_f64(r, "loss_scale.backoff_factor", &c->backoff_factor, err) ||
        !snapshot_meta_u64(r, "loss_scale.growth_interval", &interval, err))
        return false;
    if (interval < 1 || interval > LOSS_SCALE_MAX_INTERVAL)
        return gpt_snapshot_fail(err, path, "metadata 'loss_scale.growth_interval' = %" PRIu64
                                 " is out of range [1, %ld]", interval,
                                 (long)LOSS_SCALE_MAX_INTERVAL);
    c->mode = (LossScaleMode)mode;
    c->growth_interval = (long)interval;
    /* Every factor is checked as the dynamic mode (and a --scale-* flag) checks it, whatever
     * the mode: a file holds no value that is wrong but unused. One key at a time, so that the
     * message names it. */
    static const char *const keys[] = { "loss_scale.init_scale", "loss_scale.growth_factor",
                                        "loss_scale.backoff_factor" };
    const double values[] = { c->init_scale, c->growth_factor, c->backoff_factor };
    for (int i = 0; i < 3; i++) {
        LossScaleConfig one = loss_scale_defaults();
        one.mode = LOSS_SCALE_DYNAMIC;
        double *field[] = { &one.init_scale, &one.growth_factor, &one.backoff_factor };
        *field[i] = values[i];
        char why[160];
        if (!loss_scale_check(&one, why, sizeof why))
            return gpt_snapshot_fail(err, path, "metadata '%s' = %g: %s", keys[i], values[i],
                                     why);
    }
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
    TrainerConfig c = trainer_config_default();
    uint64_t seed;
    if (!gpt_snapshot_read_config(r, path, "model", &c.model, err) ||
        !snapshot_meta_u64(r, "train.seed", &seed, err) ||
        !snapshot_meta_f64(r, "train.clip", &c.clip, err) ||
        !read_optim_config(r, path, &c, err) ||
        !read_precision(r, path, &c.policy, err) ||
        !read_loss_scale_config(r, path, &c.loss_scale, err))
        return false;
    c.seed = seed;
    char why[256];
    if (!trainer_config_check(&c, why, sizeof why))    /* what a flag would have refused */
        return gpt_snapshot_fail(err, path, "metadata %s", why);
    *cfg = c;
    return true;
}

/* Loading: the state ------------------------------------------------------------------------ */

/* The rows of amax history a delayed-scaling snapshot says it holds: 0 for none. */
static bool history_slots(const SnapshotReader *r, const char *path, const Trainer *t,
                          uint64_t *slots, SnapshotError *err)
{
    *slots = 0;
    if (t->cfg.policy.fp8_scaling != POLICY_FP8_DELAYED || predates(r).amax_history)
        return true;
    if (!snapshot_meta_u64(r, "precision.amax_history_slots", slots, err))
        return false;
    if (*slots > HISTORY_MAX_VALUES / (uint64_t)policy_fp8_window(&t->cfg.policy))
        return gpt_snapshot_fail(err, path, "metadata 'precision.amax_history_slots' = %"
                                 PRIu64 " is more stored activations than a tape holds",
                                 *slots);
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
static bool read_tensors(SnapshotReader *r, const char *path, Trainer *t, SnapshotError *err)
{
    uint64_t slots;
    if (!history_slots(r, path, t, &slots, err))
        return false;
    int n;
    char (*names)[KEY_LEN] = expected_names(t, slots > 0, &n);
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
    if (ok)
        optim_pack_masters(t->optim);
    free(list);
    free(names);
    return ok;
}

/* The scaler's state. */
static bool read_scaler(const SnapshotReader *r, const char *path, Trainer *t,
                        SnapshotError *err)
{
    if (predates(r).loss_scale)
        return true;
    LossScaler *s = &t->scaler;
    double scale;
    uint64_t tracker, checks, skipped;
    if (!snapshot_meta_f64(r, "loss_scale.scale", &scale, err) ||
        !snapshot_meta_u64(r, "loss_scale.growth_tracker", &tracker, err) ||
        !snapshot_meta_u64(r, "loss_scale.checks", &checks, err) ||
        !snapshot_meta_u64(r, "loss_scale.skipped", &skipped, err))
        return false;
    if (!(scale > 0.0) || (double)(float)scale != scale)
        return gpt_snapshot_fail(err, path, "metadata 'loss_scale.scale' = %g is not a "
                                 "positive float", scale);
    if (tracker >= (uint64_t)s->cfg.growth_interval || skipped > checks ||
        checks > (uint64_t)t->step)
        return gpt_snapshot_fail(err, path, "the loss scaler's counters are inconsistent "
                                 "(growth_tracker %" PRIu64 ", checks %" PRIu64 ", skipped %"
                                 PRIu64 ", %ld steps)", tracker, checks, skipped, t->step);
    s->scale = (float)scale;
    s->growth_tracker = (long)tracker;
    s->checks = (long)checks;
    s->skipped = (long)skipped;
    return true;
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
    return read_scaler(r, path, t, err);
}

/* Into the trainer's fresh tape, which takes ownership of the buffer (it grows and frees it
 * with realloc and free). */
static bool read_amax_history(SnapshotReader *r, const char *path, Trainer *t,
                              SnapshotError *err)
{
    uint64_t slots, steps;
    if (!history_slots(r, path, t, &slots, err))
        return false;
    if (predates(r).amax_history)
        return true;
    if (!snapshot_meta_u64(r, "precision.amax_history_steps", &steps, err))
        return false;
    if (steps > LONG_MAX)
        return gpt_snapshot_fail(err, path, "metadata 'precision.amax_history_steps' = %"
                                 PRIu64 " is not a step count", steps);
    int w = policy_fp8_window(&t->cfg.policy);
    float *h = NULL;
    if (slots > 0) {
        h = malloc((size_t)slots * (size_t)w * sizeof *h);
        if (!h)
            tensor_fatal("out of memory for an amax history of %" PRIu64 " x %d", slots, w);
        if (!snapshot_read(r, HISTORY, SNAPSHOT_F32, 2, (int64_t[]){ (int64_t)slots, w }, h,
                           err)) {
            free(h);
            return false;
        }
    }
    Tape *tape = t->tape;
    free(tape->amax_history);
    tape->amax_history = h;
    tape->history_slots = (int)slots;
    tape->history_steps = (long)steps;
    return true;
}

static bool read_state(SnapshotReader *r, const char *path, Trainer *t, SnapshotError *err)
{
    return read_tensors(r, path, t, err) && read_counters(r, path, t, err) &&
           read_amax_history(r, path, t, err);
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
    if (has != (mine != NULL) || (has && (lc.rank != mine->rank || lc.alpha != mine->alpha ||
                                          lc.targets != mine->targets ||
                                          lc.qlora != mine->qlora)))
        return gpt_snapshot_fail(err, path, "its LoRA settings are not the trainer's");
    return read_state(r, path, t, err);
}

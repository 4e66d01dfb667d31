#include "optim/snapshot_keys.h"

#include <float.h>
#include <stdio.h>
#include <string.h>

#include "autograd/checkpoint.h"
#include "nn/gpt_snapshot.h"

/* Names of the enums kept by name: the i-th, NULL past the last. */
static const char *name_in(const char *const *names, int n, int i)
{
    return i >= 0 && i < n ? names[i] : NULL;
}
static const char *optimizer_name(int i)
{
    return name_in(TRAIN_OPTIMIZER_NAMES, TRAIN_ADAFACTOR + 1, i);
}
static const char *rounding_name(int i)
{
    return name_in(ADAM8BIT_ROUNDING_NAMES, ADAM8BIT_ROUND_COUNT, i);
}
static const char *decay_rule_name(int i)
{
    static const char *const names[] = { "matrices", "all", "none" };
    return name_in(names, 3, i);
}
static const char *dtype_name(int i)
{
    return i >= 0 && i < DTYPE_COUNT ? tensor_dtype_name((Dtype)i) : NULL;
}
static const char *format_name(int i)
{
    return i >= 0 && i < FMT_COUNT ? fmt_name((Format)i) : NULL;
}
static const char *fp8_scaling_name(int i)
{
    static const char *const names[] = { "current", "delayed" };
    return name_in(names, 2, i);
}
static const char *loss_scale_mode_name(int i)
{
    return name_in(LOSS_SCALE_MODE_NAMES, LOSS_SCALE_DYNAMIC + 1, i);
}
static const char *offload_name(int i)
{
    return name_in(TRAIN_OFFLOAD_NAMES, TRAIN_OFFLOAD_OPTIMIZER + 1, i);
}

/* A PrecisionPolicy by its preset's name: the rows after it refine it. */
static void format_preset(const void *field, char *buf, size_t len)
{
    snprintf(buf, len, "%s", ((const PrecisionPolicy *)field)->name);
}
static bool parse_preset(const char *text, void *field, char *why, size_t len)
{
    if (policy_preset(text, field))
        return true;
    snprintf(why, len, "not %s", policy_preset_names());
    return false;
}

/* The checkpointing strategy as --checkpoint takes it ("sqrt", "every:2"). */
static void format_checkpoint(const void *field, char *buf, size_t len)
{
    ckpt_name(*(const CkptStrategy *)field, buf, len);
}
static bool parse_checkpoint(const char *text, void *field, char *why, size_t len)
{
    return ckpt_parse(text, field, why, len);
}

/* The tables ---------------------------------------------------------------------------------- */

static bool is_adam(const void *s)
{
    TrainOptimizer o = ((const TrainerConfig *)s)->optimizer;
    return o == TRAIN_ADAMW || o == TRAIN_ADAM8BIT;
}
static bool is_adam8bit(const void *s)
{
    return ((const TrainerConfig *)s)->optimizer == TRAIN_ADAM8BIT;
}
static bool is_adafactor(const void *s)
{
    return ((const TrainerConfig *)s)->optimizer == TRAIN_ADAFACTOR;
}
static bool is_sgd(const void *s) { return ((const TrainerConfig *)s)->optimizer == TRAIN_SGD; }
static bool is_delayed(const void *s) { return ((const TrainerCounters *)s)->delayed; }

/* Nesterov's look-ahead is a multiple of the momentum: without momentum SGD refuses it. */
static bool nesterov_has_momentum(const SchemaRow *r, const void *s, char *why, size_t len)
{
    (void)r;
    const SgdConfig *c = &((const TrainerConfig *)s)->sgd;
    if (!c->nesterov || c->momentum > 0.0)
        return true;
    snprintf(why, len, "'optim.nesterov' is true with 'optim.momentum' = %g: Nesterov momentum "
             "needs momentum > 0", c->momentum);
    return false;
}

/* A loss scaling factor as the dynamic mode (and its --scale-* flag) checks it, whatever the
 * mode: a file holds no value that is wrong but unused. */
static bool loss_factor_valid(const SchemaRow *r, const void *s, char *why, size_t len)
{
    const LossScaleConfig *c = &((const TrainerConfig *)s)->loss_scale;
    LossScaleConfig one = loss_scale_defaults();
    one.mode = LOSS_SCALE_DYNAMIC;
    size_t at = r->offset - offsetof(TrainerConfig, loss_scale);
    double v = *(const double *)((const char *)c + at);
    *(double *)((char *)&one + at) = v;
    char sub[160];
    if (loss_scale_check(&one, sub, sizeof sub))
        return true;
    snprintf(why, len, "'%s' = %g: %s", r->key, v, sub);
    return false;
}

#define CFG(f) offsetof(TrainerConfig, f)
/* Bounds a run can use: the betas short of 1 by at least what a float tells apart at that
 * length of memory, eps and the factored statistics' epsilons normal floats (the updates round
 * them to float), the seed within a long (the program keeps it as one). Each is inside what
 * the library itself requires (AdamW's betas in [0, 1), ...), so a config that passes never
 * makes trainer_new abort. */
#define BETA1 .lo = 0.0, .hi = 0.9999
#define WEIGHT_DECAY .lo = 0.0, .hi = 10.0
#define TINY_EPS .lo = 1e-30, .hi = 1.0

/* In the order they are written; a row's applies reads only rows above it. The model's keys
 * (model.*) are GPT_SCHEMA's, written before these. */
static const SchemaRow TRAINER_ROWS[] = {
    { .key = "train.seed", .type = SCHEMA_U64, .offset = CFG(seed),
      .lo = 0.0, .hi = 4611686018427387904.0 /* 2^62 */, .def = "1", .kept = true,
      .help = "initial weights, data order and 8-bit Adam's stochastic rounding" },
    { .key = "train.clip", .type = SCHEMA_DOUBLE, .offset = CFG(clip), .lo = 0.0, .hi = 1e6,
      .def = "1", .kept = true, .help = "largest global gradient norm, 0 = no clipping" },
    { .key = "optim.kind", .type = SCHEMA_CHOICE, .offset = CFG(optimizer),
      .name = optimizer_name, .def = "adamw", .kept = true,
      .help = "adamw, sgd, adam8bit or adafactor" },
    /* AdamW, and 8-bit Adam with AdamW's hyperparameters */
    { .key = "optim.beta1", .type = SCHEMA_DOUBLE, .offset = CFG(adamw.beta1), BETA1,
      .applies = is_adam, .def = "0.9", .kept = true, .help = "adamw's first moment decay" },
    { .key = "optim.beta2", .type = SCHEMA_DOUBLE, .offset = CFG(adamw.beta2), .lo = 0.0,
      .hi = 0.99999, .applies = is_adam, .def = "0.999", .kept = true,
      .help = "adamw's second moment decay" },
    { .key = "optim.eps", .type = SCHEMA_DOUBLE, .offset = CFG(adamw.eps), .lo = 1e-30,
      .hi = 1.0, .applies = is_adam, .def = "1e-08", .kept = true,
      .help = "adamw's denominator floor" },
    { .key = "optim.rounding", .type = SCHEMA_CHOICE, .offset = CFG(adam8bit_rounding),
      .name = rounding_name, .applies = is_adam8bit, .def = "nearest", .kept = true,
      .help = "adam8bit's moments re-encoded to the nearest level or stochastically" },
    /* Adafactor */
    { .key = "optim.beta1", .type = SCHEMA_DOUBLE, .offset = CFG(adafactor.beta1), BETA1,
      .applies = is_adafactor, .def = "0", .kept = true,
      .help = "adafactor's first moment decay, 0 = none" },
    { .key = "optim.decay_exponent", .type = SCHEMA_DOUBLE,
      .offset = CFG(adafactor.decay_exponent), .lo = 1e-6, .hi = 1.0, .applies = is_adafactor,
      .def = "0.8", .kept = true, .help = "adafactor's second moment decay 1 - t^-c" },
    { .key = "optim.eps1", .type = SCHEMA_DOUBLE, .offset = CFG(adafactor.eps1), TINY_EPS,
      .applies = is_adafactor, .def = "1e-30", .kept = true,
      .help = "adafactor's floor of the squared gradient" },
    { .key = "optim.eps2", .type = SCHEMA_DOUBLE, .offset = CFG(adafactor.eps2), TINY_EPS,
      .applies = is_adafactor, .def = "0.001", .kept = true,
      .help = "adafactor's floor of the parameter scale" },
    { .key = "optim.clip_threshold", .type = SCHEMA_DOUBLE,
      .offset = CFG(adafactor.clip_threshold), .lo = 1e-6, .hi = 1e6, .applies = is_adafactor,
      .def = "1", .kept = true, .help = "adafactor's update clipping" },
    { .key = "optim.relative_step", .type = SCHEMA_BOOL, .offset = CFG(adafactor.relative_step),
      .applies = is_adafactor, .def = "false", .kept = true,
      .help = "adafactor's own step size instead of the lr" },
    { .key = "optim.scale_parameter", .type = SCHEMA_BOOL,
      .offset = CFG(adafactor.scale_parameter), .applies = is_adafactor, .def = "false",
      .kept = true, .help = "adafactor's step scaled by the parameter's RMS" },
    { .key = "optim.factored", .type = SCHEMA_BOOL, .offset = CFG(adafactor.factored),
      .applies = is_adafactor, .def = "true", .kept = true,
      .help = "adafactor's second moment factored into rows and columns" },
    /* SGD */
    { .key = "optim.momentum", .type = SCHEMA_DOUBLE, .offset = CFG(sgd.momentum), .lo = 0.0,
      .hi = 0.999, .applies = is_sgd, .def = "0.9", .kept = true, .help = "sgd momentum" },
    { .key = "optim.nesterov", .type = SCHEMA_BOOL, .offset = CFG(sgd.nesterov),
      .applies = is_sgd, .check = nesterov_has_momentum, .def = "false", .kept = true,
      .agrees = "optim.momentum", .help = "sgd with Nesterov's look-ahead" },
    /* weight decay, which each optimizer keeps in its own config */
    { .key = "optim.weight_decay", .type = SCHEMA_DOUBLE, .offset = CFG(adamw.weight_decay),
      WEIGHT_DECAY, .applies = is_adam, .def = "0.01", .kept = true,
      .help = "adamw's decoupled weight decay" },
    { .key = "optim.weight_decay", .type = SCHEMA_DOUBLE,
      .offset = CFG(adafactor.weight_decay), WEIGHT_DECAY, .applies = is_adafactor,
      .def = "0", .kept = true, .help = "adafactor's decoupled weight decay" },
    { .key = "optim.weight_decay", .type = SCHEMA_DOUBLE, .offset = CFG(sgd.weight_decay),
      WEIGHT_DECAY, .applies = is_sgd, .def = "0", .kept = true, .help = "sgd's L2 penalty" },
    { .key = "optim.decay_rule", .type = SCHEMA_CHOICE, .offset = CFG(adamw.decay_rule),
      .name = decay_rule_name, .applies = is_adam, .def = "matrices", .kept = true,
      .help = "which tensors decay: matrices, all or none" },
    { .key = "optim.decay_rule", .type = SCHEMA_CHOICE, .offset = CFG(adafactor.decay_rule),
      .name = decay_rule_name, .applies = is_adafactor, .def = "matrices", .kept = true,
      .help = "which tensors decay: matrices, all or none" },
    { .key = "optim.decay_rule", .type = SCHEMA_CHOICE, .offset = CFG(sgd.decay_rule),
      .name = decay_rule_name, .applies = is_sgd, .def = "matrices", .kept = true,
      .help = "which tensors decay: matrices, all or none" },
    /* the precision policy: the preset it started from, then every field of it, which must
     * agree with the preset (train_snapshot.c's policy_agrees) */
    { .key = "precision.policy", .type = SCHEMA_CUSTOM, .offset = CFG(policy),
      .size = sizeof(PrecisionPolicy), .format = format_preset, .parse = parse_preset,
      .def = "fp32", .kept = true, .help = "the precision preset the run started from" },
    { .key = "precision.param", .type = SCHEMA_CHOICE, .offset = CFG(policy.param),
      .name = dtype_name, .def = "fp32", .kept = true, .agrees = "precision.policy",
      .help = "the dtype parameters are stored in" },
    { .key = "precision.act", .type = SCHEMA_CHOICE, .offset = CFG(policy.act),
      .name = dtype_name, .def = "fp32", .kept = true, .agrees = "precision.policy",
      .help = "the dtype activations are stored in" },
    { .key = "precision.grad", .type = SCHEMA_CHOICE, .offset = CFG(policy.grad),
      .name = dtype_name, .def = "fp32", .kept = true, .agrees = "precision.policy",
      .help = "the dtype gradients are stored in" },
    { .key = "precision.compute", .type = SCHEMA_CHOICE, .offset = CFG(policy.compute),
      .name = format_name, .def = "fp32", .kept = true, .agrees = "precision.policy",
      .help = "what a forward product rounds its inputs to" },
    { .key = "precision.grad_compute", .type = SCHEMA_CHOICE, .offset = CFG(policy.grad_compute),
      .name = format_name, .def = "fp32", .kept = true, .agrees = "precision.policy",
      .help = "what a backward product rounds its inputs to" },
    { .key = "precision.accumulate_low", .type = SCHEMA_BOOL,
      .offset = CFG(policy.accumulate_low), .def = "false", .kept = true,
      .agrees = "precision.policy", .help = "sums rounded to the compute format" },
    { .key = "precision.fp8_scaling", .type = SCHEMA_CHOICE, .offset = CFG(policy.fp8_scaling),
      .name = fp8_scaling_name, .def = "current", .kept = true,
      .agrees = "precision.policy (delayed needs fp8 activations)",
      .help = "an fp8 tensor's scale from its own amax or the last steps'" },
    { .key = "precision.fp8_window", .type = SCHEMA_INT, .offset = CFG(policy.fp8_window),
      .lo = 0.0, .hi = POLICY_FP8_MAX_WINDOW, .def = "0", .kept = true,
      .help = "delayed scaling's window of steps, 0 = the preset's" },
    /* the loss scaler's config */
    { .key = "loss_scale.mode", .type = SCHEMA_CHOICE, .offset = CFG(loss_scale.mode),
      .name = loss_scale_mode_name, .def = "none", .kept = true,
      .help = "none, static or dynamic" },
    { .key = "loss_scale.init_scale", .type = SCHEMA_DOUBLE, .offset = CFG(loss_scale.init_scale),
      .check = loss_factor_valid, .def = "65536", .kept = true,
      .help = "the scale S a run starts from" },
    { .key = "loss_scale.growth_factor", .type = SCHEMA_DOUBLE,
      .offset = CFG(loss_scale.growth_factor), .check = loss_factor_valid, .def = "2",
      .kept = true, .help = "dynamic: S is multiplied by it when it grows (> 1)" },
    { .key = "loss_scale.backoff_factor", .type = SCHEMA_DOUBLE,
      .offset = CFG(loss_scale.backoff_factor), .check = loss_factor_valid, .def = "0.5",
      .kept = true, .help = "dynamic: S is multiplied by it on an inf/NaN gradient" },
    { .key = "loss_scale.growth_interval", .type = SCHEMA_LONG,
      .offset = CFG(loss_scale.growth_interval), .lo = 1.0,
      .hi = (double)LOSS_SCALE_MAX_INTERVAL, .def = "2000", .kept = true,
      .help = "dynamic: clean steps in a row before S grows" },
    /* Run-only: memory, time and traffic, the same bits; a resumed run keeps its own. */
    { .key = "run.checkpoint", .type = SCHEMA_CUSTOM, .offset = CFG(checkpoint),
      .size = sizeof(CkptStrategy), .format = format_checkpoint, .parse = parse_checkpoint,
      .def = "none", .help = "gradient checkpointing over the blocks" },
    { .key = "run.offload", .type = SCHEMA_CHOICE, .offset = CFG(offload), .name = offload_name,
      .def = "none", .help = "the optimizer's masters, state and update on the host" },
};
#undef BETA1
#undef WEIGHT_DECAY
#undef TINY_EPS
const Schema TRAINER_SCHEMA = { .name = "TrainerConfig", .rows = TRAINER_ROWS,
                                .n = sizeof TRAINER_ROWS / sizeof TRAINER_ROWS[0] };

#define COUNT(f) offsetof(TrainerCounters, f)

/* Each is checked against the others where the trainer is at hand (train_snapshot.c). */
static const SchemaRow COUNTER_ROWS[] = {
    { .key = "train.step", .type = SCHEMA_LONG, .offset = COUNT(step), .kept = true,
      .help = "training steps so far" },
    { .key = "optim.step", .type = SCHEMA_LONG, .offset = COUNT(optim_step), .kept = true,
      .agrees = "train.step", .help = "updates so far (skipped steps update nothing)" },
    { .key = "loss_scale.scale", .type = SCHEMA_FLOAT, .offset = COUNT(scale), .kept = true,
      .agrees = "loss_scale.mode", .help = "the loss scale S now" },
    { .key = "loss_scale.growth_tracker", .type = SCHEMA_LONG, .offset = COUNT(growth_tracker),
      .kept = true, .agrees = "loss_scale.growth_interval",
      .help = "clean steps since S last changed" },
    { .key = "loss_scale.checks", .type = SCHEMA_LONG, .offset = COUNT(checks), .kept = true,
      .agrees = "train.step", .help = "steps whose gradients were checked for inf/NaN" },
    { .key = "loss_scale.skipped", .type = SCHEMA_LONG, .offset = COUNT(skipped), .kept = true,
      .agrees = "loss_scale.checks", .help = "steps skipped for an inf/NaN gradient" },
    /* the tape's amax history: its rows (0 before the first step) and its count of recorded
     * steps, whose remainder by the window is the column the next step writes */
    { .key = "precision.amax_history_slots", .type = SCHEMA_LONG, .offset = COUNT(history_slots),
      .applies = is_delayed, .kept = true, .help = "rows of the fp8 amax history" },
    { .key = "precision.amax_history_steps", .type = SCHEMA_LONG, .offset = COUNT(history_steps),
      .applies = is_delayed, .kept = true, .agrees = "train.step",
      .help = "steps the fp8 amax history has recorded" },
};
const Schema TRAINER_COUNTER_SCHEMA = { .name = "TrainerCounters", .rows = COUNTER_ROWS,
                                        .n = sizeof COUNTER_ROWS / sizeof COUNTER_ROWS[0] };

/* Older layouts ------------------------------------------------------------------------------- */

/* What a run saved before each change had. */
static void fp32_throughout(TrainerConfig *c, TrainerCounters *s)
{
    (void)s;
    policy_preset("fp32", &c->policy);
}
static void no_loss_scaling(TrainerConfig *c, TrainerCounters *s)
{
    c->loss_scale = loss_scale_defaults();      /* mode none */
    *s = (TrainerCounters){ .scale = 1.0f };    /* S = 1, nothing checked or skipped */
}
static void fresh_amax_history(TrainerConfig *c, TrainerCounters *s)
{
    (void)c;
    s->history_slots = s->history_steps = 0;
}
static void nearest_rounding(TrainerConfig *c, TrainerCounters *s)
{
    (void)s;
    c->adam8bit_rounding = ADAM8BIT_ROUND_NEAREST;
}

/* The history of "tapegrad-train-1", one line per change that added keys: the commit it came
 * in, the key whose absence marks a file saved before it, the keys it added (by prefix), and
 * the values a run saved before it had. The first layout (68a4683) had the model., train. and
 * optim. keys of AdamW and SGD; f28e304 added 8-bit Adam and Adafactor, whose keys are new
 * only in their own files. */
static const struct {
    const char *commit, *marker, *prefix;
    void      (*before)(TrainerConfig *c, TrainerCounters *s);
} CHANGES[] = {
    /* mixed precision: every run before it trained in fp32 */
    { "616fbbc", "precision.policy", "precision.", fp32_throughout },
    /* loss scaling: none before it */
    { "616fbbc", "loss_scale.mode", "loss_scale.", no_loss_scaling },
    /* fp8 delayed scaling's amax history kept (a file without delayed scaling never has it):
     * a run resumed from a file before it starts a fresh history */
    { "d41c5fc", "precision.amax_history_slots", "precision.amax_history_",
      fresh_amax_history },
    /* 8-bit Adam's rounding became a choice: it was round-to-nearest */
    { "30ad977", "optim.rounding", "optim.rounding", nearest_rounding },
};

/* Keys that changed their name, with the commit that renamed them: a file saved before it holds
 * the old key, whose value the new one takes. */
static const struct {
    const char *commit, *old_key, *new_key;
} RENAMES[] = {
    /* the amax history's column counter: it counted the tape's resets, which were the
     * training steps in every file that kept a history (evaluations put theirs back) */
    { "4504ada", "precision.amax_history_resets", "precision.amax_history_steps" },
};

static void add_value(SnapshotKeyView *v, const char *key, const char *value)
{
    if (v->n_added == SNAPSHOT_KEYS_MAX_ADDED)     /* the tables above are larger than it */
        tensor_fatal("snapshot_keys_migrate: more than %d keys", SNAPSHOT_KEYS_MAX_ADDED);
    v->added[v->n_added].key = key;
    snprintf(v->added[v->n_added].value, sizeof v->added[0].value, "%s", value);
    v->n_added++;
}

/* The rows of sc whose key starts with prefix, from s, for each one v lacks. */
static void add_prefixed(SnapshotKeyView *v, const Schema *sc, const void *s, const char *prefix)
{
    char value[64];
    for (int i = 0; i < sc->n; i++) {
        const char *key = sc->rows[i].key;
        if (!sc->rows[i].kept || strncmp(key, prefix, strlen(prefix)) != 0 ||
            snapshot_keys_value(v, key))
            continue;
        schema_format(&sc->rows[i], s, value, sizeof value);
        add_value(v, key, value);
    }
}

void snapshot_keys_migrate(SnapshotKeyView *v, const SnapshotReader *r, const char *path)
{
    *v = (SnapshotKeyView){ .r = r, .path = path };
    for (size_t i = 0; i < sizeof RENAMES / sizeof RENAMES[0]; i++) {
        const char *old = snapshot_meta(r, RENAMES[i].old_key);
        if (old && !snapshot_meta(r, RENAMES[i].new_key))
            add_value(v, RENAMES[i].new_key, old);
    }
    for (size_t i = 0; i < sizeof CHANGES / sizeof CHANGES[0]; i++) {
        if (snapshot_meta(r, CHANGES[i].marker))
            continue;
        TrainerConfig c = trainer_config_default();
        TrainerCounters s = { 0 };
        CHANGES[i].before(&c, &s);
        add_prefixed(v, &TRAINER_SCHEMA, &c, CHANGES[i].prefix);
        add_prefixed(v, &TRAINER_COUNTER_SCHEMA, &s, CHANGES[i].prefix);
    }
}

const char *snapshot_keys_value(const void *view, const char *key)
{
    const SnapshotKeyView *v = view;
    const char *value = snapshot_meta(v->r, key);
    for (int i = 0; !value && i < v->n_added; i++)
        if (strcmp(v->added[i].key, key) == 0)
            value = v->added[i].value;
    return value;
}

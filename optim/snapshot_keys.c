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
static const char *offload_name(int i)
{
    return name_in(TRAIN_OFFLOAD_NAMES, TRAIN_OFFLOAD_OPTIMIZER + 1, i);
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

#define CFG(f) offsetof(TrainerConfig, f)
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
    /* Each optimizer's config, as the first layout ordered the keys: the moments of AdamW
     * (and 8-bit Adam, with AdamW's hyperparameters), 8-bit Adam's rounding, Adafactor's, SGD's;
     * then each one's weight decay, then each one's decay rule. */
    { .key = "optim", .type = SCHEMA_SUB, .offset = CFG(adamw), .sub = &ADAMW_SCHEMA,
      .count = 3, .applies = is_adam, .kept = true, .help = "AdamWConfig's betas and eps" },
    { .key = "optim.rounding", .type = SCHEMA_CHOICE, .offset = CFG(adam8bit_rounding),
      .name = rounding_name, .applies = is_adam8bit, .def = "nearest", .kept = true,
      .help = "adam8bit's moments re-encoded to the nearest level or stochastically" },
    { .key = "optim", .type = SCHEMA_SUB, .offset = CFG(adafactor), .sub = &ADAFACTOR_SCHEMA,
      .count = 8, .applies = is_adafactor, .kept = true,
      .help = "AdafactorConfig's moments, epsilons, clipping and modes" },
    { .key = "optim", .type = SCHEMA_SUB, .offset = CFG(sgd), .sub = &SGD_SCHEMA, .count = 2,
      .applies = is_sgd, .kept = true, .help = "SgdConfig's momentum and Nesterov" },
    { .key = "optim", .type = SCHEMA_SUB, .offset = CFG(adamw), .sub = &ADAMW_SCHEMA,
      .first = "weight_decay", .count = 1, .applies = is_adam, .kept = true,
      .help = "AdamWConfig's weight decay" },
    { .key = "optim", .type = SCHEMA_SUB, .offset = CFG(adafactor), .sub = &ADAFACTOR_SCHEMA,
      .first = "weight_decay", .count = 1, .applies = is_adafactor, .kept = true,
      .help = "AdafactorConfig's weight decay" },
    { .key = "optim", .type = SCHEMA_SUB, .offset = CFG(sgd), .sub = &SGD_SCHEMA,
      .first = "weight_decay", .count = 1, .applies = is_sgd, .kept = true,
      .help = "SgdConfig's weight decay" },
    { .key = "optim", .type = SCHEMA_SUB, .offset = CFG(adamw), .sub = &ADAMW_SCHEMA,
      .first = "decay_rule", .applies = is_adam, .kept = true, .help = "AdamWConfig's decay rule" },
    { .key = "optim", .type = SCHEMA_SUB, .offset = CFG(adafactor), .sub = &ADAFACTOR_SCHEMA,
      .first = "decay_rule", .applies = is_adafactor, .kept = true,
      .help = "AdafactorConfig's decay rule" },
    { .key = "optim", .type = SCHEMA_SUB, .offset = CFG(sgd), .sub = &SGD_SCHEMA,
      .first = "decay_rule", .applies = is_sgd, .kept = true, .help = "SgdConfig's decay rule" },
    /* the precision policy (autograd/policy.h) and the loss scaler's config */
    { .key = "precision", .type = SCHEMA_SUB, .offset = CFG(policy), .sub = &POLICY_SCHEMA,
      .kept = true, .help = "the precision policy: PrecisionPolicy's rows" },
    { .key = "loss_scale", .type = SCHEMA_SUB, .offset = CFG(loss_scale),
      .sub = &LOSS_SCALE_SCHEMA, .kept = true,
      .help = "the loss scaler's config: LossScaleConfig's rows" },
    /* Run-only: memory, time and traffic, the same bits; a resumed run keeps its own. */
    { .key = "run", .type = SCHEMA_SUB, .offset = CFG(local), .sub = &TRAINER_LOCAL_SCHEMA,
      .help = "checkpointing and offload: TrainerLocal's rows" },
};
const Schema TRAINER_SCHEMA = { .name = "TrainerConfig", .rows = TRAINER_ROWS,
                                .n = sizeof TRAINER_ROWS / sizeof TRAINER_ROWS[0] };

#define LOCAL(f) offsetof(TrainerLocal, f)

/* No row is kept: a snapshot written with any of these values is the same bytes. */
static const SchemaRow TRAINER_LOCAL_ROWS[] = {
    { .key = "checkpoint", .type = SCHEMA_CUSTOM, .offset = LOCAL(checkpoint),
      .size = sizeof(CkptStrategy), .format = format_checkpoint, .parse = parse_checkpoint,
      .def = "none", .help = "gradient checkpointing over the blocks" },
    { .key = "offload", .type = SCHEMA_CHOICE, .offset = LOCAL(offload), .name = offload_name,
      .def = "none", .help = "the optimizer's masters, state and update on the host" },
};
const Schema TRAINER_LOCAL_SCHEMA = {
    .name = "TrainerLocal", .rows = TRAINER_LOCAL_ROWS,
    .n = sizeof TRAINER_LOCAL_ROWS / sizeof TRAINER_LOCAL_ROWS[0] };

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

/* Keys whose value a file saved before them holds under another key, with the commit that
 * made them: a renamed key, or one split off another, whose value the new one takes. */
static const struct {
    const char *commit, *old_key, *new_key;
} RENAMES[] = {
    /* the amax history's column counter: it counted the tape's resets, which were the
     * training steps in every file that kept a history (evaluations put theirs back) */
    { "4504ada", "precision.amax_history_resets", "precision.amax_history_steps" },
    /* a text's rows (run/settings.c): the model's T in every file before it; since, a LoRA
     * run on a base of a longer T keeps its own */
    { "after 0fd7315", "model.max_seq", "run.seq" },
};

static void add_value(SnapshotKeyView *v, const char *key, const char *value)
{
    if (v->n_added == SNAPSHOT_KEYS_MAX_ADDED)     /* the tables above are larger than it */
        tensor_fatal("snapshot_keys_migrate: more than %d keys", SNAPSHOT_KEYS_MAX_ADDED);
    snprintf(v->added[v->n_added].key, sizeof v->added[0].key, "%s", key);
    snprintf(v->added[v->n_added].value, sizeof v->added[0].value, "%s", value);
    v->n_added++;
}

/* The kept rows of sc whose key starts with prefix, from s, for each one v lacks. */
typedef struct {
    SnapshotKeyView *v;
    const char      *prefix;
} AddCtx;

static bool add_leaf(const SchemaRow *r, const char *key, const void *s, void *ctx)
{
    AddCtx *c = ctx;
    char value[64];
    if (r->kept && strncmp(key, c->prefix, strlen(c->prefix)) == 0 &&
        !snapshot_keys_value(c->v, key)) {
        schema_format(r, s, value, sizeof value);
        add_value(c->v, key, value);
    }
    return true;
}

static void add_prefixed(SnapshotKeyView *v, const Schema *sc, const void *s, const char *prefix)
{
    AddCtx c = { v, prefix };
    schema_each(sc, NULL, s, add_leaf, &c);
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

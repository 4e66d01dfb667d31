#include "optim/snapshot_keys.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static const char *key_of(const SnapshotKey *k) { return k->key ? k->key : k->range->key; }
static void *field(const SnapshotKey *k, void *s) { return (char *)s + k->offset; }
static const void *cfield(const SnapshotKey *k, const void *s)
{
    return (const char *)s + k->offset;
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
static bool nesterov_has_momentum(const SnapshotKey *k, const void *s, char *why, size_t len)
{
    (void)k;
    const SgdConfig *c = &((const TrainerConfig *)s)->sgd;
    if (!c->nesterov || c->momentum > 0.0)
        return true;
    snprintf(why, len, "'optim.nesterov' is true with 'optim.momentum' = %g: Nesterov momentum "
             "needs momentum > 0", c->momentum);
    return false;
}

/* A loss scaling factor as the dynamic mode (and its --scale-* flag) checks it, whatever the
 * mode: a file holds no value that is wrong but unused. */
static bool loss_factor_valid(const SnapshotKey *k, const void *s, char *why, size_t len)
{
    const LossScaleConfig *c = &((const TrainerConfig *)s)->loss_scale;
    LossScaleConfig one = loss_scale_defaults();
    one.mode = LOSS_SCALE_DYNAMIC;
    size_t at = k->offset - offsetof(TrainerConfig, loss_scale);
    double v = *(const double *)((const char *)c + at);
    *(double *)((char *)&one + at) = v;
    char sub[160];
    if (loss_scale_check(&one, sub, sizeof sub))
        return true;
    snprintf(why, len, "'%s' = %g: %s", key_of(k), v, sub);
    return false;
}

#define CFG(f) offsetof(TrainerConfig, f)
#define RANGE(id) (&TRAIN_RANGES[TRAIN_RANGE_##id])

/* In the order they are written; a row's applies reads only rows above it. */
const SnapshotKey TRAINER_CONFIG_KEYS[] = {
    { .type = KEY_U64, .offset = CFG(seed), .range = RANGE(SEED) },
    { .type = KEY_DOUBLE, .offset = CFG(clip), .range = RANGE(CLIP) },
    { .key = "optim.kind", .type = KEY_CHOICE, .offset = CFG(optimizer), .name = optimizer_name },
    /* AdamW, and 8-bit Adam with AdamW's hyperparameters */
    { .type = KEY_DOUBLE, .offset = CFG(adamw.beta1), .range = RANGE(BETA1), .applies = is_adam },
    { .type = KEY_DOUBLE, .offset = CFG(adamw.beta2), .range = RANGE(BETA2), .applies = is_adam },
    { .type = KEY_DOUBLE, .offset = CFG(adamw.eps), .range = RANGE(EPS), .applies = is_adam },
    { .key = "optim.rounding", .type = KEY_CHOICE, .offset = CFG(adam8bit_rounding),
      .name = rounding_name, .applies = is_adam8bit },
    /* Adafactor */
    { .type = KEY_DOUBLE, .offset = CFG(adafactor.beta1), .range = RANGE(BETA1),
      .applies = is_adafactor },
    { .type = KEY_DOUBLE, .offset = CFG(adafactor.decay_exponent),
      .range = RANGE(DECAY_EXPONENT), .applies = is_adafactor },
    { .type = KEY_DOUBLE, .offset = CFG(adafactor.eps1), .range = RANGE(EPS1),
      .applies = is_adafactor },
    { .type = KEY_DOUBLE, .offset = CFG(adafactor.eps2), .range = RANGE(EPS2),
      .applies = is_adafactor },
    { .type = KEY_DOUBLE, .offset = CFG(adafactor.clip_threshold),
      .range = RANGE(CLIP_THRESHOLD), .applies = is_adafactor },
    { .key = "optim.relative_step", .type = KEY_BOOL, .offset = CFG(adafactor.relative_step),
      .applies = is_adafactor },
    { .key = "optim.scale_parameter", .type = KEY_BOOL, .offset = CFG(adafactor.scale_parameter),
      .applies = is_adafactor },
    { .key = "optim.factored", .type = KEY_BOOL, .offset = CFG(adafactor.factored),
      .applies = is_adafactor },
    /* SGD */
    { .type = KEY_DOUBLE, .offset = CFG(sgd.momentum), .range = RANGE(MOMENTUM),
      .applies = is_sgd },
    { .key = "optim.nesterov", .type = KEY_BOOL, .offset = CFG(sgd.nesterov), .applies = is_sgd,
      .check = nesterov_has_momentum },
    /* weight decay, which each optimizer keeps in its own config */
    { .type = KEY_DOUBLE, .offset = CFG(adamw.weight_decay), .range = RANGE(WEIGHT_DECAY),
      .applies = is_adam },
    { .type = KEY_DOUBLE, .offset = CFG(adafactor.weight_decay), .range = RANGE(WEIGHT_DECAY),
      .applies = is_adafactor },
    { .type = KEY_DOUBLE, .offset = CFG(sgd.weight_decay), .range = RANGE(WEIGHT_DECAY),
      .applies = is_sgd },
    { .key = "optim.decay_rule", .type = KEY_CHOICE, .offset = CFG(adamw.decay_rule),
      .name = decay_rule_name, .applies = is_adam },
    { .key = "optim.decay_rule", .type = KEY_CHOICE, .offset = CFG(adafactor.decay_rule),
      .name = decay_rule_name, .applies = is_adafactor },
    { .key = "optim.decay_rule", .type = KEY_CHOICE, .offset = CFG(sgd.decay_rule),
      .name = decay_rule_name, .applies = is_sgd },
    /* the precision policy: the preset it started from, then every field of it */
    { .key = "precision.policy", .type = KEY_PRESET, .offset = CFG(policy) },
    { .key = "precision.param", .type = KEY_CHOICE, .offset = CFG(policy.param),
      .name = dtype_name },
    { .key = "precision.act", .type = KEY_CHOICE, .offset = CFG(policy.act), .name = dtype_name },
    { .key = "precision.grad", .type = KEY_CHOICE, .offset = CFG(policy.grad), .name = dtype_name },
    { .key = "precision.compute", .type = KEY_CHOICE, .offset = CFG(policy.compute),
      .name = format_name },
    { .key = "precision.grad_compute", .type = KEY_CHOICE, .offset = CFG(policy.grad_compute),
      .name = format_name },
    { .key = "precision.accumulate_low", .type = KEY_BOOL, .offset = CFG(policy.accumulate_low) },
    { .key = "precision.fp8_scaling", .type = KEY_CHOICE, .offset = CFG(policy.fp8_scaling),
      .name = fp8_scaling_name },
    { .type = KEY_INT, .offset = CFG(policy.fp8_window), .range = RANGE(FP8_WINDOW) },
    /* the loss scaler's config */
    { .key = "loss_scale.mode", .type = KEY_CHOICE, .offset = CFG(loss_scale.mode),
      .name = loss_scale_mode_name },
    { .key = "loss_scale.init_scale", .type = KEY_DOUBLE, .offset = CFG(loss_scale.init_scale),
      .check = loss_factor_valid },
    { .key = "loss_scale.growth_factor", .type = KEY_DOUBLE,
      .offset = CFG(loss_scale.growth_factor), .check = loss_factor_valid },
    { .key = "loss_scale.backoff_factor", .type = KEY_DOUBLE,
      .offset = CFG(loss_scale.backoff_factor), .check = loss_factor_valid },
    { .type = KEY_LONG, .offset = CFG(loss_scale.growth_interval),
      .range = RANGE(GROWTH_INTERVAL) },
};
const int N_TRAINER_CONFIG_KEYS = sizeof TRAINER_CONFIG_KEYS / sizeof TRAINER_CONFIG_KEYS[0];

#define COUNT(f) offsetof(TrainerCounters, f)

/* Each is checked against the others where the trainer is at hand (train_snapshot.c). */
const SnapshotKey TRAINER_COUNTER_KEYS[] = {
    { .key = "train.step", .type = KEY_LONG, .offset = COUNT(step) },
    { .key = "optim.step", .type = KEY_LONG, .offset = COUNT(optim_step) },
    { .key = "loss_scale.scale", .type = KEY_FLOAT, .offset = COUNT(scale) },
    { .key = "loss_scale.growth_tracker", .type = KEY_LONG, .offset = COUNT(growth_tracker) },
    { .key = "loss_scale.checks", .type = KEY_LONG, .offset = COUNT(checks) },
    { .key = "loss_scale.skipped", .type = KEY_LONG, .offset = COUNT(skipped) },
    /* the tape's amax history: its rows (0 before the first step) and its count of recorded
     * steps, whose remainder by the window is the column the next step writes */
    { .key = "precision.amax_history_slots", .type = KEY_LONG, .offset = COUNT(history_slots),
      .applies = is_delayed },
    { .key = "precision.amax_history_steps", .type = KEY_LONG, .offset = COUNT(history_steps),
      .applies = is_delayed },
};
const int N_TRAINER_COUNTER_KEYS = sizeof TRAINER_COUNTER_KEYS / sizeof TRAINER_COUNTER_KEYS[0];

/* Writing ------------------------------------------------------------------------------------- */

/* The field as the file keeps it. */
static void format_value(const SnapshotKey *k, const void *s, char *buf, size_t len)
{
    const void *f = cfield(k, s);
    const char *name;
    switch (k->type) {
    case KEY_DOUBLE: snprintf(buf, len, "%.17g", *(const double *)f); break;
    case KEY_FLOAT: snprintf(buf, len, "%.17g", (double)*(const float *)f); break;
    case KEY_U64: snprintf(buf, len, "%" PRIu64, *(const uint64_t *)f); break;
    case KEY_LONG: snprintf(buf, len, "%ld", *(const long *)f); break;
    case KEY_INT: snprintf(buf, len, "%d", *(const int *)f); break;
    case KEY_BOOL: snprintf(buf, len, "%s", *(const bool *)f ? "true" : "false"); break;
    case KEY_CHOICE:
        name = k->name(*(const int *)f);
        snprintf(buf, len, "%s", name ? name : "?");
        break;
    case KEY_PRESET: snprintf(buf, len, "%s", ((const PrecisionPolicy *)f)->name); break;
    }
}

void snapshot_keys_write(const SnapshotKey *t, int n, const void *s, SnapshotWriter *w,
                         SnapshotError *err)
{
    char value[64];
    for (int i = 0; i < n; i++)
        if (!t[i].applies || t[i].applies(s)) {
            format_value(&t[i], s, value, sizeof value);
            snapshot_add_meta(w, key_of(&t[i]), value, err);
        }
}

/* Checking ------------------------------------------------------------------------------------ */

/* An integer field's bounds: its range's, within what the type holds. */
static void integer_bounds(const SnapshotKey *k, uint64_t *lo, uint64_t *hi)
{
    *lo = 0;
    *hi = k->type == KEY_LONG ? (uint64_t)LONG_MAX : k->type == KEY_INT ? (uint64_t)INT_MAX
                                                                       : UINT64_MAX;
    if (k->range) {
        *lo = (uint64_t)k->range->lo;
        if ((uint64_t)k->range->hi < *hi)       /* exact: the bounds are whole numbers */
            *hi = (uint64_t)k->range->hi;
    }
}

static bool integer_in_range(const SnapshotKey *k, uint64_t v, char *why, size_t len)
{
    uint64_t lo, hi;
    integer_bounds(k, &lo, &hi);
    if (v >= lo && v <= hi)
        return true;
    snprintf(why, len, "'%s' = %" PRIu64 " is out of range [%" PRIu64 ", %" PRIu64 "]",
             key_of(k), v, lo, hi);
    return false;
}

/* A NaN is in no range. */
static bool double_in_range(const SnapshotKey *k, double v, char *why, size_t len)
{
    if (!k->range || (v >= k->range->lo && v <= k->range->hi))
        return true;
    snprintf(why, len, "'%s' = %.17g is out of range [%g, %g]", key_of(k), v, k->range->lo,
             k->range->hi);
    return false;
}

static bool positive_float(const SnapshotKey *k, double v, char *why, size_t len)
{
    if (v > 0.0 && v <= FLT_MAX && (double)(float)v == v)
        return true;
    snprintf(why, len, "'%s' = %g is not a positive float", key_of(k), v);
    return false;
}

/* The checks of one row on a value already in the struct. */
static bool check_row(const SnapshotKey *k, const void *s, char *why, size_t len)
{
    const void *f = cfield(k, s);
    bool ok = true;
    switch (k->type) {
    case KEY_DOUBLE: ok = double_in_range(k, *(const double *)f, why, len); break;
    case KEY_FLOAT: ok = positive_float(k, *(const float *)f, why, len); break;
    case KEY_U64: ok = integer_in_range(k, *(const uint64_t *)f, why, len); break;
    case KEY_LONG: case KEY_INT: {
        long v = k->type == KEY_LONG ? *(const long *)f : *(const int *)f;
        if (v < 0) {
            snprintf(why, len, "'%s' = %ld is negative", key_of(k), v);
            ok = false;
        } else {
            ok = integer_in_range(k, (uint64_t)v, why, len);
        }
        break;
    }
    case KEY_CHOICE:
        if (!k->name(*(const int *)f)) {
            snprintf(why, len, "'%s' %d is not one this version knows", key_of(k),
                     *(const int *)f);
            ok = false;
        }
        break;
    case KEY_BOOL: case KEY_PRESET: break;
    }
    return ok && (!k->check || k->check(k, s, why, len));
}

bool snapshot_keys_check(const SnapshotKey *t, int n, const void *s, char *why, size_t len)
{
    for (int i = 0; i < n; i++)
        if ((!t[i].applies || t[i].applies(s)) && !check_row(&t[i], s, why, len))
            return false;
    return true;
}

/* Reading ------------------------------------------------------------------------------------- */

/* The whole of text as a decimal uint64 (no sign, no space). */
static bool parse_u64(const char *text, uint64_t *out)
{
    if (*text < '0' || *text > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end)
        return false;
    *out = (uint64_t)v;
    return true;
}

/* The names of a choice, "a, b, c", into buf. */
/* A number in decimal, as "%.17g" writes one: strtod would also take hex ("0x10"), which no
 * snapshot holds. (inf and nan parse, and then fail their key's range with its message.) */
static bool decimal_number(const char *text)
{
    text += *text == '+' || *text == '-';
    return !(text[0] == '0' && (text[1] == 'x' || text[1] == 'X'));
}

static const char *choice_list(const SnapshotKey *k, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; k->name(i) && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", k->name(i));
    return buf;
}

/* text into the row's field, as the type spells it; the range is check_row's. */
static bool parse_value(const SnapshotKey *k, const char *text, void *s, const char *path,
                        SnapshotError *err)
{
    void *f = field(k, s);
    const char *key = key_of(k);
    char *end, list[256];
    double x;
    uint64_t u;
    switch (k->type) {
    case KEY_DOUBLE: case KEY_FLOAT:
        x = strtod(text, &end);
        if (end == text || *end || !decimal_number(text))
            return gpt_snapshot_fail(err, path, "metadata '%s' is '%s', not a decimal number",
                                     key, text);
        if (k->type == KEY_FLOAT) {     /* checked here: the float would lose what is wrong */
            if (!positive_float(k, x, list, sizeof list))
                return gpt_snapshot_fail(err, path, "metadata %s", list);
            *(float *)f = (float)x;
        } else {
            *(double *)f = x;
        }
        return true;
    case KEY_U64: case KEY_LONG: case KEY_INT:
        if (!parse_u64(text, &u))
            return gpt_snapshot_fail(err, path, "metadata '%s' is '%s', not an unsigned 64-bit "
                                     "integer", key, text);
        if (!integer_in_range(k, u, list, sizeof list))   /* before it is cut to the type */
            return gpt_snapshot_fail(err, path, "metadata %s", list);
        if (k->type == KEY_U64)
            *(uint64_t *)f = u;
        else if (k->type == KEY_LONG)
            *(long *)f = (long)u;
        else
            *(int *)f = (int)u;
        return true;
    case KEY_BOOL:
        if (strcmp(text, "true") != 0 && strcmp(text, "false") != 0)
            return gpt_snapshot_fail(err, path, "metadata '%s' is '%s', not true or false", key,
                                     text);
        *(bool *)f = text[0] == 't';
        return true;
    case KEY_CHOICE:
        for (int i = 0; k->name(i); i++)
            if (strcmp(text, k->name(i)) == 0) {
                *(int *)f = i;
                return true;
            }
        return gpt_snapshot_fail(err, path, "metadata '%s' is '%s', which this version does not "
                                 "know (%s)", key, text, choice_list(k, list, sizeof list));
    case KEY_PRESET:
        if (!policy_preset(text, (PrecisionPolicy *)f))
            return gpt_snapshot_fail(err, path, "metadata '%s' is '%s', not %s", key, text,
                                     policy_preset_names());
        return true;
    }
    return false;
}

bool snapshot_keys_read(const SnapshotKey *t, int n, const SnapshotKeyView *v, void *s,
                        SnapshotError *err)
{
    char why[256];
    for (int i = 0; i < n; i++) {
        const SnapshotKey *k = &t[i];
        if (k->applies && !k->applies(s))
            continue;
        const char *text = snapshot_keys_value(v, key_of(k));
        if (!text)
            return gpt_snapshot_fail(err, v->path, "missing metadata '%s'", key_of(k));
        if (!parse_value(k, text, s, v->path, err))
            return false;
        if (!check_row(k, s, why, sizeof why))
            return gpt_snapshot_fail(err, v->path, "metadata %s", why);
    }
    return true;
}

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

/* The rows of t whose key starts with prefix, from s, for each one v lacks. */
static void add_prefixed(SnapshotKeyView *v, const SnapshotKey *t, int n, const void *s,
                         const char *prefix)
{
    char value[64];
    for (int i = 0; i < n; i++) {
        const char *key = key_of(&t[i]);
        if (strncmp(key, prefix, strlen(prefix)) != 0 || snapshot_keys_value(v, key))
            continue;
        format_value(&t[i], s, value, sizeof value);
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
        add_prefixed(v, TRAINER_CONFIG_KEYS, N_TRAINER_CONFIG_KEYS, &c, CHANGES[i].prefix);
        add_prefixed(v, TRAINER_COUNTER_KEYS, N_TRAINER_COUNTER_KEYS, &s, CHANGES[i].prefix);
    }
}

const char *snapshot_keys_value(const SnapshotKeyView *v, const char *key)
{
    const char *value = snapshot_meta(v->r, key);
    for (int i = 0; !value && i < v->n_added; i++)
        if (strcmp(v->added[i].key, key) == 0)
            value = v->added[i].value;
    return value;
}

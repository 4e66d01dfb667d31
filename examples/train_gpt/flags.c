/* train_gpt's command line: parsing and agreeing with a snapshot given by --load, both from the
 * settings table (settings.c), and the checks of flags together. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/snapshot.h"
#include "examples/common/cli.h"
#include "examples/common/settings.h"
#include "examples/train_gpt/train_gpt.h"
#include "optim/schedule.h"

const char *options_flag_name(Flag f)
{
    const Setting *s = settings_find(TRAIN_GPT_SETTINGS, TRAIN_GPT_N_SETTINGS, f);
    return s ? s->name : "?";
}

bool options_given(const Options *o, Flag f) { return o->given[f - FLAG_TASK]; }

static void check_schedule(const Options *o)
{
    if (o->decay != SCHED_DECAY_WSD &&
        (options_given(o, FLAG_COOLDOWN) || options_given(o, FLAG_COOLDOWN_SHAPE)))
        cli_usage_error("--cooldown and --cooldown-shape apply to --decay wsd");
    if (options_given(o, FLAG_WARMUP_FRACTION) && o->warmup_type != SCHED_WARMUP_CONSTANT)
        cli_usage_error("--warmup-fraction applies to --warmup-type constant");
    SchedConfig c = options_schedule(o);
    long W = c.warmup == SCHED_WARMUP_NONE ? 0 : c.warmup_steps;
    if (o->decay != SCHED_DECAY_CONSTANT && o->steps > 0 && W + c.cooldown_steps >= o->steps)
        cli_usage_error("--warmup %ld%s leave%s no step of --steps %ld to decay over", W,
                        o->decay == SCHED_DECAY_WSD ? " and the cooldown" : "",
                        o->decay == SCHED_DECAY_WSD ? "" : "s", o->steps);
    char err[160];
    if (!sched_check(&c, err, sizeof err))
        cli_usage_error("the schedule: %s", err);
}

/* Products of flags, checked before any is formed: the rows a step draws, and its tokens once
 * --seq is known (a task's row length is known only once the data is open: train_gpt checks
 * again then). Every count of rows or tokens is an int. */
void options_check_products(const Options *o)
{
    cli_product(INT_MAX, "rows per step", 2, (const char *[]){ "--batch", "--accum" },
                (long[]){ o->batch, o->accum });
    if (o->seq > 0)
        cli_product(INT_MAX, "tokens per step", 3,
                    (const char *[]){ "--batch", "--accum", "--seq" },
                    (long[]){ o->batch, o->accum, o->seq });
}

/* Combinations no single value shows wrong. */
static void check_combinations(const Options *o)
{
    options_check_products(o);
    if (o->data && options_given(o, FLAG_TASK))
        cli_usage_error("--task and --data exclude each other: train on a task or on a text");
    if (o->data && (options_given(o, FLAG_TASK_SIZE) || o->msd_first))
        cli_usage_error("--%s applies to a task, not to --data",
                        options_given(o, FLAG_TASK_SIZE) ? "task-size" : "msd-first");
    if (o->msd_first && o->task && strcmp(o->task, "add") != 0 && strcmp(o->task, "sub") != 0)
        cli_usage_error("--msd-first applies to add and sub, not to %s", o->task);
    if (o->optimizer != TRAIN_SGD && options_given(o, FLAG_MOMENTUM))
        cli_usage_error("--momentum applies to --optimizer sgd, not %s",
                        trainer_optimizer_name(o->optimizer));
    bool adam = o->optimizer == TRAIN_ADAMW || o->optimizer == TRAIN_ADAM8BIT;
    if (!adam && (options_given(o, FLAG_BETA1) || options_given(o, FLAG_BETA2)))
        cli_usage_error("--beta1 and --beta2 apply to --optimizer adamw and adam8bit, not %s",
                        trainer_optimizer_name(o->optimizer));
    if (o->optimizer != TRAIN_ADAM8BIT && options_given(o, FLAG_ADAM8BIT_ROUNDING))
        cli_usage_error("--adam8bit-rounding applies to --optimizer adam8bit, not %s",
                        trainer_optimizer_name(o->optimizer));
    if ((options_given(o, FLAG_TEMPERATURE) || options_given(o, FLAG_SAMPLE_SEED)) &&
        (!o->data || o->sample == 0))
        cli_usage_error("--%s applies to a text sample: --data with --sample N (a task's "
                        "samples are greedy answers)",
                        options_given(o, FLAG_TEMPERATURE) ? "temperature" : "sample-seed");
    check_schedule(o);
    if (o->embd % o->heads != 0)
        cli_usage_error("--embd %d is not a multiple of --heads %d: each head gets C/H "
                        "channels", o->embd, o->heads);
    if (o->plot_path && !o->log_path)
        cli_usage_error("--plot needs --log: the figure is drawn from the log");
    precision_check_options(o);
    parallel_check_options(o);
    precision_check_scaling(o);
    /* Files written must not be one another or an input; --save over --load is fine (the
     * snapshot is replaced atomically, once the run is done). */
    const char *names[] = { "log", "plot", "save", "load", "data" };
    const char *paths[] = { o->log_path, o->plot_path, o->save_path, o->load_path, o->data };
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 5; j++)
            if (paths[i] && paths[j] && strcmp(paths[i], paths[j]) == 0 && !(i == 2 && j == 3))
                cli_usage_error("--%s and --%s name the same file '%s'", names[i], names[j],
                                paths[i]);
}


Options options_parse(int argc, char **argv)
{
    Options o = { 0 };
    o.loss_scale = loss_scale_defaults();   /* the --scale-* factors' defaults */
    settings_defaults(TRAIN_GPT_SETTINGS, TRAIN_GPT_N_SETTINGS, &o);
    settings_parse(TRAIN_GPT_SETTINGS, TRAIN_GPT_N_SETTINGS, &o, o.given, FLAG_TASK, options_usage,
                   argc, argv);
    if (o.data)
        o.task = NULL;
    lora_check_options(&o);
    pipeline_check_options(&o);
    /* A short run (--steps 20 to try things) still gets a decay: the default warmup shrinks to
     * a tenth of the steps. An explicit --warmup is taken as given. */
    if (!options_given(&o, FLAG_WARMUP) && !o.load_path && o.warmup > o.steps / 10)
        o.warmup = o.steps / 10;
    if (!o.load_path)
        check_combinations(&o);   /* with --load, once the snapshot's settings are in */
    return o;
}

/* Agreeing with a snapshot ------------------------------------------------------------------ */

static const char *snapshot_path;

void options_disagree(Flag f, const char *mine, const char *saved)
{
    cli_usage_error("--%s %s does not match the snapshot %s, which has %s",
                    options_flag_name(f), mine, snapshot_path, saved);
}

double options_take_double(const Options *o, Flag f, double mine, double saved)
{
    char a[32], b[32];
    snprintf(a, sizeof a, "%.17g", mine);
    snprintf(b, sizeof b, "%.17g", saved);
    if (options_given(o, f) && mine != saved)
        options_disagree(f, a, b);
    return saved;
}

/* The one place that knows the snapshot format's history: the keys an older train_gpt did not
 * write, with the value the run that wrote it had. */
static const struct {
    const char *key, *value;
} BEFORE_THE_KEY[] = {
    /* before accumulation and the schedules: batches of one, gradual warmup, then constant */
    { "schedule.accum", "1" }, { "schedule.lr_rule", "none" }, { "schedule.base_batch", "0" },
    { "schedule.warmup_type", "gradual" }, { "schedule.warmup_fraction", "0.1" },
    { "schedule.decay", "constant" }, { "schedule.cooldown", "0" },
    { "schedule.cooldown_shape", "linear" },
    /* before --attention was kept: standard */
    { "run.attention", "standard" },
    /* before 8-bit Adam's rounding was a choice: nearest */
    { "optim.rounding", "nearest" },
};

/* A key's value in the snapshot, or in the snapshot's own version when it predates the key;
 * a key missing otherwise means the file was not made by train_gpt. */
static const char *saved_value(const SnapshotReader *r, const char *key)
{
    const char *v = snapshot_meta(r, key);
    for (size_t i = 0; !v && i < sizeof BEFORE_THE_KEY / sizeof BEFORE_THE_KEY[0]; i++)
        if (strcmp(BEFORE_THE_KEY[i].key, key) == 0)
            v = BEFORE_THE_KEY[i].value;
    if (!v)
        cli_die(1, "%s: missing metadata '%s' (was it saved by train_gpt?)", snapshot_path, key);
    return v;
}

/* A task or a text: the flags of the other kind are refused by name. */
static void merge_data_kind(Options *o, const SnapshotReader *r)
{
    bool text = strcmp(saved_value(r, "data.kind"), "text") == 0;
    if (text && options_given(o, FLAG_TASK))
        options_disagree(FLAG_TASK, o->task, "text data");
    if (text && (options_given(o, FLAG_TASK_SIZE) || o->msd_first))
        cli_usage_error("--%s applies to a task; the snapshot %s was trained on text",
                        options_given(o, FLAG_TASK_SIZE) ? "task-size" : "msd-first",
                        snapshot_path);
    if (!text && o->data)
        options_disagree(FLAG_DATA, o->data, "a task");
    if (text) {
        if (!o->data)
            o->data = "";      /* the saved path follows (data.path) */
        o->task = NULL;
    } else if (!o->task) {
        o->task = task_names[0];
    }
}

/* For switches kept by the trainer as their opposites (model.tied, model.fused_qkv). */
static bool take_switch(const Options *o, Flag f, bool saved)
{
    if (options_given(o, f) && !saved)
        cli_usage_error("--%s was given, but the snapshot %s was trained without it",
                        options_flag_name(f), snapshot_path);
    return saved;
}

void options_merge_snapshot(Options *o, const TrainerConfig *s, const SnapshotReader *r,
                            const char *path)
{
    snapshot_path = path;
    merge_data_kind(o, r);
    for (int i = 0; i < TRAIN_GPT_N_SETTINGS; i++) {
        const Setting *st = &TRAIN_GPT_SETTINGS[i];
        if (!st->name || !settings_key(st) || st->merge == SETTING_FREE ||
            (st->applies && !st->applies(o)))
            continue;
        settings_merge(st, o, options_given(o, st->id), saved_value(r, settings_key(st)),
                       path);
    }
    o->untied = take_switch(o, FLAG_UNTIED, !s->model.tied);
    o->separate_qkv = take_switch(o, FLAG_SEPARATE_QKV, !s->model.fused_qkv);
    precision_merge_snapshot(o, s);
    lora_merge_snapshot(o, r, path, &s->model);
    check_combinations(o);
}

/* From options to a trainer, and back into a snapshot --------------------------------------- */

TrainerConfig options_trainer_config(const Options *o, int V)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = V, .max_seq = o->seq, .n_layer = o->layers,
                           .n_head = o->heads, .n_embd = o->embd, .tied = !o->untied,
                           .fused_qkv = !o->separate_qkv };
    c.seed = (uint64_t)o->seed;
    c.optimizer = o->optimizer;
    c.adamw.beta1 = o->beta1;
    c.adamw.beta2 = o->beta2;
    c.adamw.weight_decay = o->weight_decay;
    c.adam8bit_rounding = o->adam8bit_rounding;
    c.sgd.momentum = o->momentum;
    c.sgd.weight_decay = o->weight_decay;
    c.adafactor.weight_decay = o->weight_decay;
    c.clip = o->clip;
    c.checkpoint = o->checkpoint;
    c.policy = precision_policy(o);
    c.loss_scale = o->loss_scale;
    return c;
}

void options_snapshot_meta(const Options *o, SettingsMeta *m)
{
    m->n = 0;
    settings_meta_put(m, "data.kind", o->data ? "text" : "task");
    settings_write(TRAIN_GPT_SETTINGS, TRAIN_GPT_N_SETTINGS, o, m);
    if (o->lora_rank > 0) {     /* the base a resumed LoRA run reads again (lora.c) */
        char hash[32];
        snprintf(hash, sizeof hash, "%016llx", (unsigned long long)lora_base_hash(o));
        settings_meta_put(m, "lora.base", o->load_base_path ? o->load_base_path : "");
        settings_meta_put(m, "lora.base_fnv1a", hash);
    }
}

/* optim/schedule.h from the flags. S is --steps for a decaying schedule; a constant one only
 * needs S to cover the warmup, so a resumed run may extend --steps without changing the rate of
 * any step (a cosine or wsd curve is defined by --steps, and stretches with it instead). */
SchedConfig options_schedule(const Options *o)
{
    SchedConfig c = sched_defaults();
    c.base_lr = o->lr;
    c.batch = o->batch;
    c.accum = o->accum;
    c.base_batch = o->base_batch > 0 ? o->base_batch : o->batch * o->accum;
    c.rule = o->lr_rule;
    c.warmup = o->warmup > 0 ? o->warmup_type : SCHED_WARMUP_NONE;
    c.warmup_steps = o->warmup;
    c.warmup_fraction = o->warmup_fraction;
    c.decay = o->decay;
    c.cooldown = o->cooldown_shape;
    if (o->decay == SCHED_DECAY_WSD)
        c.cooldown_steps = o->cooldown > 0 ? o->cooldown : (o->steps >= 5 ? o->steps / 5 : 1);
    long needed = (c.warmup == SCHED_WARMUP_NONE ? 0 : o->warmup) + c.cooldown_steps;
    c.total_steps = o->decay == SCHED_DECAY_CONSTANT ? 1 : o->steps;
    if (c.total_steps < needed)
        c.total_steps = needed;
    if (c.total_steps < 1)
        c.total_steps = 1;
    return c;
}

double options_lr(const Options *o, long step)
{
    SchedConfig c = options_schedule(o);
    return sched_lr(&c, step - 1);
}

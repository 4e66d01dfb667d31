/* A run's command line (run/options.h): parsing and agreeing with a snapshot given by --load,
 * both from the settings table (run/options_table.c), and the checks of flags together. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/snapshot.h"
#include "cli/cli.h"
#include "cli/settings.h"
#include "optim/schedule.h"
#include "optim/snapshot_keys.h"
#include "run/options.h"

bool run_options_given(const RunOptions *o, RunFlag f) { return o->given[f - RUN_FLAG_TASK]; }

static void check_schedule(const RunOptions *o)
{
    SchedConfig c = run_schedule(&o->run.sched, &o->run.kept, o->run.ranks);
    long W = c.warmup == SCHED_WARMUP_NONE ? 0 : c.warmup_steps;
    long S = o->run.kept.steps;
    if (c.decay != SCHED_DECAY_CONSTANT && S > 0 && W + c.cooldown_steps >= S)
        cli_usage_error("--warmup %ld%s leave%s no step of --steps %ld to decay over", W,
                        c.decay == SCHED_DECAY_WSD ? " and the cooldown" : "",
                        c.decay == SCHED_DECAY_WSD ? "" : "s", o->run.kept.steps);
    char err[160];
    if (!sched_check(&c, err, sizeof err))
        cli_usage_error("the schedule: %s", err);
}

/* Products of flags, checked before any is formed: the rows a step draws, and its tokens once
 * --seq is known (a task's row length is known only once the data is open: train_gpt checks
 * again then). Every count of rows or tokens is an int. */
void run_options_check_products(const RunOptions *o)
{
    /* under ddp and ZeRO every rank draws the global batch: the ranks count too */
    long ranks = o->run.ranks > 1 ? o->run.ranks : 1;
    long rows = (long)o->run.kept.accum * ranks;     /* both at most 2^16, 2^20 */
    const char *accum = ranks > 1 ? "--accum x ranks" : "--accum";
    cli_product(INT_MAX, "rows per step", 2, (const char *[]){ "--batch", accum },
                (long[]){ o->run.kept.batch, rows });
    if (o->run.kept.seq > 0)
        cli_product(INT_MAX, "tokens per step", 3, (const char *[]){ "--batch", accum, "--seq" },
                    (long[]){ o->run.kept.batch, rows, o->run.kept.seq });
}

/* Combinations no single value shows wrong: first what each flag needs (the table's needs,
 * run/options_table.c), then the rest. */
static void check_combinations(const RunOptions *o)
{
    settings_check_needs(RUN_OPTIONS_TABLE, RUN_OPTIONS_N, o, o->given, RUN_FLAG_TASK,
                         false);
    run_options_check_products(o);
    const DataConfig *data = &o->run.kept.data;
    if (data->msd_first && data->task && strcmp(data->task, "add") != 0 &&
        strcmp(data->task, "sub") != 0)
        cli_usage_error("--msd-first applies to add and sub, not to %s", data->task);
    check_schedule(o);
    if (o->run.cfg.model.n_embd % o->run.cfg.model.n_head != 0)
        cli_usage_error("--embd %d is not a multiple of --heads %d: each head gets C/H "
                        "channels", o->run.cfg.model.n_embd, o->run.cfg.model.n_head);
    run_options_check_precision(o);
    run_ranks_check(&o->run.local, &o->run.cfg, &o->run.lora);
    /* Files written must not be one another or an input; --save over --load is fine (the
     * snapshot is replaced atomically, once the run is done). */
    const char *names[] = { "log", "plot", "save", "load", "data" };
    const char *paths[] = { o->run.local.log_path, o->run.local.plot_path, o->run.local.save_path,
                            o->run.local.load_path, data->path };
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 5; j++)
            if (paths[i] && paths[j] && strcmp(paths[i], paths[j]) == 0 && !(i == 2 && j == 3))
                cli_usage_error("--%s and --%s name the same file '%s'", names[i], names[j],
                                paths[i]);
}

/* Adapters on q, k or v need separate projections: a fresh model gets them without being asked
 * (the two layouts compute the same function); a base must have been trained with them. */
static void check_lora(RunOptions *o)
{
    /* Which flags need --lora, or are the snapshot's with --load or the base's with
     * --load-base: the rows' needs (run/options_table.c). */
    if (o->run.local.save_adapter_path && o->run.local.load_base_path &&
        strcmp(o->run.local.save_adapter_path, o->run.local.load_base_path) == 0)
        cli_usage_error("--save-adapter and --load-base name the same file '%s'",
                        o->run.local.load_base_path);
    unsigned qkv = LORA_TARGET_Q | LORA_TARGET_K | LORA_TARGET_V;
    if (o->run.lora.rank > 0 && (o->run.lora.targets & qkv) && !o->run.local.load_base_path)
        o->run.cfg.model.fused_qkv = false;
}

/* run/'s failures look like the program's own: a usage error or a plain one. */
static void on_failure(int code, const char *message)
{
    if (code == 2)
        cli_usage_error("%s", message);
    cli_die(code, "%s", message);
}

/* --parallel pipeline:S: its flags checked after every flag is read (they set accum to the
 * micro-batch count; the pipeline is run/ranks_pipeline.c's, its logs run/logs.c's). */
static void check_pipeline(RunOptions *o)
{
    if (!run_parallel_pipeline(&o->run.local.parallel))    /* the pipeline flags need it */
        return;
    if (run_options_given(o, RUN_FLAG_ACCUM))
        cli_usage_error("--parallel pipeline accumulates its --micro-batches; leave --accum out");
    if (o->run.lora.rank > 0 || o->run.local.load_base_path)
        cli_usage_error("--parallel pipeline: --lora, --qlora and --load-base are not built (the "
                        "adapters and their base would be cut over the stages)");
    if (o->run.local.plot_path)
        cli_usage_error("--parallel pipeline draws no --plot (see examples/pipeline_parallel)");
    if (o->run.local.parallel.dist.micro_batches < 1)
        o->run.local.parallel.dist.micro_batches = 1;
    /* the schedule's effective batch is batch x m */
    o->run.kept.accum = o->run.local.parallel.dist.micro_batches;
}

/* --load: the snapshot's accumulation (merged into accum) is the pipeline's micro-batch count, so
 * that it goes on with the same batches; a --micro-batches that differs is refused, as --accum
 * would be. A LoRA run's snapshot is refused like --lora. */
static void check_pipeline_loaded(RunOptions *o, const char *path)
{
    if (!run_parallel_pipeline(&o->run.local.parallel))
        return;
    if (o->run.lora.rank > 0)
        cli_usage_error("--parallel pipeline: --load %s is a LoRA run's snapshot; LoRA is not "
                        "built under a pipeline", path);
    int *m = &o->run.local.parallel.dist.micro_batches;
    if (run_options_given(o, RUN_FLAG_MICRO_BATCHES) && *m != o->run.kept.accum)
        cli_usage_error("--micro-batches %d does not match the snapshot %s, which accumulates %d "
                        "micro-batches a step (leave --micro-batches out to continue it)",
                        o->run.local.parallel.dist.micro_batches, path, o->run.kept.accum);
    o->run.local.parallel.dist.micro_batches = o->run.kept.accum;
}

RunOptions run_options_parse(int argc, char **argv, void (*usage)(void))
{
    run_on_failure(on_failure);
    RunOptions o = { .run.cfg = trainer_config_default(), .run.ranks = 1,  /* what no flag sets */
                     .run.local.parallel.dist.plan = { .kind = DIST_RUN_NONE, .sched = PIPE_GPIPE,
                                                       .replicas = 1 } };
    settings_defaults(RUN_OPTIONS_TABLE, RUN_OPTIONS_N, &o);
    settings_parse(RUN_OPTIONS_TABLE, RUN_OPTIONS_N, &o, o.given, RUN_FLAG_TASK, usage, argc,
                   argv);
    if (o.run.kept.data.path)
        o.run.kept.data.task = NULL;
    o.run.cfg.sgd.weight_decay = o.run.cfg.adafactor.weight_decay = o.run.cfg.adamw.weight_decay;
    o.run.cfg.policy = run_options_policy(&o);
    settings_check_needs(RUN_OPTIONS_TABLE, RUN_OPTIONS_N, &o, o.given, RUN_FLAG_TASK, true);
    check_lora(&o);
    check_pipeline(&o);
    /* A short run (--steps 20 to try things) still gets a decay: the default warmup shrinks to
     * a tenth of the steps. An explicit --warmup is taken as given. */
    if (!run_options_given(&o, RUN_FLAG_WARMUP) && !o.run.local.load_path &&
        o.run.sched.warmup_steps > o.run.kept.steps / 10)
        o.run.sched.warmup_steps = o.run.kept.steps / 10;
    if (!o.run.local.load_path)
        check_combinations(&o);   /* with --load, once the snapshot's settings are in */
    return o;
}

/* Agreeing with a snapshot ------------------------------------------------------------------ */

/* Keys in today's layout: the library's migrated (optim/snapshot_keys.h). */
static const char *migrated_value(const void *view, const char *key)
{
    return snapshot_keys_value(view, key);
}

/* One kept row of a schema (its key without prefix) read from the snapshot into s with its
 * checks, "PATH: metadata 'KEY' ..." in err otherwise: a view of that row alone, since the
 * merge needs each where it decides (schema_read walks a whole table). */
static bool read_row(const Schema *sc, const char *prefix, const char *key,
                     const SettingsSaved *saved, void *s, SnapshotError *err)
{
    const SchemaRow *r = schema_find(sc, key);
    if (!r)     /* the program's own mistake, found at its first --load */
        cli_die(1, "%s has no setting '%s'", sc->name, key);
    Schema one = { .name = sc->name, .rows = r, .n = 1 };
    return schema_read(&one, prefix, saved->value, saved->source, saved->path, s, err);
}

/* A task or a text (DATA_SCHEMA's data.kind): the flags of the other kind are refused by name. */
static void merge_data_kind(RunOptions *o, const SettingsSaved *saved)
{
    settings_saved_value(saved, "data.kind", NULL);     /* missing: names the program */
    DataConfig theirs = data_config_default();
    SnapshotError err;
    if (!read_row(&DATA_SCHEMA, "data", "kind", saved, &theirs, &err))
        cli_die(1, "%s", err.message);
    bool text = theirs.path != NULL;
    if (text && run_options_given(o, RUN_FLAG_TASK))
        cli_usage_error("--task %s does not match the snapshot %s, which has text data",
                        o->run.kept.data.task,
                        saved->path);
    if (text && (run_options_given(o, RUN_FLAG_TASK_SIZE) || o->run.kept.data.msd_first))
        cli_usage_error("--%s applies to a task; the snapshot %s was trained on text",
                        run_options_given(o, RUN_FLAG_TASK_SIZE) ? "task-size" : "msd-first",
                        saved->path);
    if (!text && o->run.kept.data.path)
        cli_usage_error("--data %s does not match the snapshot %s, which has a task",
                        o->run.kept.data.path,
                        saved->path);
    if (text) {
        if (!o->run.kept.data.path)
            o->run.kept.data.path = "";      /* the saved path follows (data.path) */
        o->run.kept.data.task = NULL;
    } else if (!o->run.kept.data.task) {
        o->run.kept.data.task = task_names[0];
    }
}

/* The saving run's rank count (its record's run.ranks: RUN_RECORD_SCHEMA, which a resumed run
 * compares with its own and does not take) against this run's: the --accum to run with on
 * another count (run_ranks_regroup), 0 on the same. */
static int merge_ranks(RunOptions *o, const SettingsSaved *saved)
{
    RunRecord rec = { 0 };
    SnapshotError err;
    if (!read_row(&RUN_RECORD_SCHEMA, NULL, "run.ranks", saved, &rec, &err))
        cli_die(1, "%s", err.message);
    long n = rec.ranks;
    int mine = run_ranks_data_count(&o->run.local.parallel);
    RunKept kept = o->run.kept;
    if (n == mine || !read_row(&RUN_KEPT_SCHEMA, NULL, "schedule.accum", saved, &kept, &err))
        return 0;       /* the same ranks, or a bad accum the merge names */
    /* a pipeline's --micro-batches is its --accum (check_pipeline) */
    bool pipe = run_parallel_pipeline(&o->run.local.parallel) != NULL;
    bool given = run_options_given(o, RUN_FLAG_ACCUM) || (pipe && run_options_given(o, RUN_FLAG_MICRO_BATCHES));
    int want = run_ranks_regroup(saved->path, n, kept.accum, mine, given ? o->run.kept.accum : 0,
                                 pipe ? "--micro-batches" : "--accum");
    o->given[RUN_FLAG_ACCUM - RUN_FLAG_TASK] = false;      /* the snapshot's K merges, then ours */
    return want;
}

/* The kept rows merged (settings_merge_all); the custom ones, the precision flags, compared as
 * they would be typed, formatted from the config the library read (saved). Then the config is
 * the snapshot's, but for its run-only settings (TrainerLocal: checkpointing, offload, which
 * no snapshot keeps), which stay the flags'. */
void run_options_merge_snapshot(RunOptions *o, const TrainerConfig *saved, const SnapshotReader *r,
                            const char *path)
{
    SnapshotKeyView v;
    snapshot_keys_migrate(&v, r, path);
    RunOptions theirs = *o;
    theirs.run.cfg = *saved;
    theirs.fp8_scaling = saved->policy.fp8_scaling;
    theirs.fp8_window = saved->policy.fp8_window;
    SettingsSaved snapshot = { .path = path, .maker = "train_gpt", .value = migrated_value,
                               .source = &v, .theirs = &theirs };
    merge_data_kind(o, &snapshot);
    bool accum_given = run_options_given(o, RUN_FLAG_ACCUM);
    int accum = merge_ranks(o, &snapshot);
    settings_merge_all(RUN_OPTIONS_TABLE, RUN_OPTIONS_N, o, o->given, RUN_FLAG_TASK,
                       &snapshot);
    if (accum) {
        o->run.kept.accum = accum;
        o->given[RUN_FLAG_ACCUM - RUN_FLAG_TASK] = accum_given;
    }
    TrainerLocal local = o->run.cfg.local;
    o->run.cfg = *saved;
    o->run.cfg.local = local;
    run_lora_merge_snapshot(&o->run.lora, &o->run.local, r, path, &saved->model);
    check_pipeline_loaded(o, path);
    check_combinations(o);
}

/* From options into a snapshot ------------------------------------------------------------- */

void run_options_snapshot_meta(const RunOptions *o, SettingsMeta *m)
{
    m->n = 0;
    settings_meta_put(m, "data.kind", o->run.kept.data.path ? "text" : "task");
    settings_write(RUN_OPTIONS_TABLE, RUN_OPTIONS_N, o, m);
    /* the base a resumed LoRA run reads again (run/lora.c) */
    RunRecord rec = { .ranks = o->run.ranks, .lora = o->run.lora.rank > 0,
                      .lora_base = o->run.local.load_base_path };
    if (rec.lora)
        rec.lora_base_fnv1a = run_lora_base_hash(rec.lora_base);
    settings_meta_put_schema(m, &RUN_RECORD_SCHEMA, &rec);
}

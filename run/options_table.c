/* A run's settings as flags, train_gpt's command line (run/options.h): one table
 * (cli/settings.h) from which come the flags, --help, the checks of each value, the snapshot's
 * data, schedule and run keys, the merge with a snapshot given by --load (run/options.c) and
 * what each flag needs to be given (its needs: the optimizer it applies to, --lora, no --load,
 * ...). A new flag is a row here, its field in the run's settings (run/run.h: RunKept if a
 * snapshot keeps it, RunLocal if not, or a library's config there: cfg, sched, lora) and its
 * RunFlag (run/options.h). */
#include <float.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/settings.h"
#include "nn/gpt_lora.h"
#include "optim/adam8bit.h"
#include "run/options.h"

static const RunOptions *opt(const void *o) { return o; }
static bool is_task(const void *o) { return !opt(o)->run.kept.data.path; }
static bool is_text(const void *o) { return opt(o)->run.kept.data.path != NULL; }
static bool is_sgd(const void *o) { return opt(o)->run.cfg.optimizer == TRAIN_SGD; }
static bool is_adam8bit(const void *o) { return opt(o)->run.cfg.optimizer == TRAIN_ADAM8BIT; }
static bool is_adam(const void *o)
{
    return opt(o)->run.cfg.optimizer == TRAIN_ADAMW || is_adam8bit(o);
}
static bool is_dynamic(const void *o)
{
    return opt(o)->run.cfg.loss_scale.mode == LOSS_SCALE_DYNAMIC;
}
static bool is_fp8(const void *o)
{
    return policy_is_scaled(tensor_dtype_format(opt(o)->run.cfg.policy.act));
}
static bool is_wsd(const void *o) { return opt(o)->run.sched.decay == SCHED_DECAY_WSD; }
static bool is_decaying(const void *o) { return opt(o)->run.sched.decay != SCHED_DECAY_CONSTANT; }
static bool is_constant_warmup(const void *o)
{
    return opt(o)->run.sched.warmup == SCHED_WARMUP_CONSTANT;
}
static bool is_text_sample(const void *o)
{
    return opt(o)->run.kept.data.path && opt(o)->run.local.sample > 0;
}
static bool has_log(const void *o) { return opt(o)->run.local.log_path != NULL; }
static bool is_ddp(const void *o) { return run_parallel_ddp(&opt(o)->run.local.parallel); }
static bool is_pipeline(const void *o)
{
    return run_parallel_pipeline(&opt(o)->run.local.parallel) != NULL;
}
static bool is_data_parallel(const void *o)
{
    return is_ddp(o) || run_parallel_zero(&opt(o)->run.local.parallel) > 0;
}
/* --offload optimizer: --parallel zero1-3 and the pipeline make optimizers of their own, which
 * stay on the device. */
static bool offload_allowed(const void *o)
{
    const RunParallel *par = &opt(o)->run.local.parallel;
    return opt(o)->run.cfg.local.offload == TRAIN_OFFLOAD_NONE ||
           (run_parallel_zero(par) == 0 && !run_parallel_pipeline(par));
}
/* With --load the snapshot says whether the run has adapters (lora_merge_snapshot). */
static bool has_lora(const void *o)
{
    return opt(o)->run.lora.rank > 0 || opt(o)->run.local.load_path;
}
static bool no_load(const void *o) { return !opt(o)->run.local.load_path; }
static bool no_base(const void *o) { return !opt(o)->run.local.load_base_path; }

/* What flags need (settings_check_needs): the early ones look at nothing --load takes from a
 * snapshot and are checked before it is read, the others once the snapshot's settings are in
 * (run_options_parse, check_combinations). */
static const SettingNeed TASK = {
    .holds = is_task,
    .refusal = "--%s and --data exclude each other: train on a task or on a text" };
static const SettingNeed A_TASK = {
    .holds = is_task, .refusal = "--%s applies to a task, not to --data" };
static const SettingNeed SGD = {
    .holds = is_sgd, .refusal = "--%s applies to --optimizer sgd, not %s",
    .value_id = RUN_FLAG_OPTIMIZER };
static const SettingNeed ADAM = {
    .holds = is_adam, .refusal = "--%s applies to --optimizer adamw and adam8bit, not %s",
    .value_id = RUN_FLAG_OPTIMIZER };
static const SettingNeed ADAM8BIT = {
    .holds = is_adam8bit, .refusal = "--%s applies to --optimizer adam8bit, not %s",
    .value_id = RUN_FLAG_OPTIMIZER };
static const SettingNeed DYNAMIC = {
    .holds = is_dynamic, .refusal = "--%s applies to --loss-scale dynamic, not %s: only a "
                                    "dynamic scale grows and backs off",
    .value_id = RUN_FLAG_LOSS_SCALE };
static const SettingNeed FP8 = {
    .holds = is_fp8, .refusal = "--%s applies to --precision fp8, not %s: no other preset "
                                "stores a tensor in fp8",
    .value_id = RUN_FLAG_PRECISION };
static const SettingNeed WSD = {
    .holds = is_wsd, .refusal = "--cooldown and --cooldown-shape apply to --decay wsd" };
static const SettingNeed DECAYING = {
    .holds = is_decaying, .refusal = "--%s applies to --decay cosine and wsd, not %s",
    .value_id = RUN_FLAG_DECAY };
static const SettingNeed CONSTANT_WARMUP = {
    .holds = is_constant_warmup, .refusal = "--%s applies to --warmup-type constant" };
static const SettingNeed TEXT_SAMPLE = {
    .holds = is_text_sample, .refusal = "--%s applies to a text sample: --data with --sample N "
                                        "(a task's samples are greedy answers)" };
static const SettingNeed LOG = {
    .holds = has_log, .refusal = "--%s needs --log: the figure is drawn from the log" };
static const SettingNeed DDP = { .holds = is_ddp, .refusal = "--%s applies to --parallel ddp" };
static const SettingNeed DATA_PARALLEL = {
    .holds = is_data_parallel, .refusal = "--%s applies to --parallel ddp, zero1, zero2, zero3" };
static const SettingNeed PIPELINE = {
    .holds = is_pipeline, .early = true,
    .refusal = "--micro-batches, --stages and --pipe-events need --parallel pipeline:..." };
static const SettingNeed LORA = {
    .holds = has_lora, .early = true, .refusal = "--%s needs --lora R (R >= 1)" };
static const SettingNeed NO_LOAD = {
    .holds = no_load, .early = true, .value_id = RUN_FLAG_LOAD,
    .refusal = "--%s: --load takes the LoRA settings and the base from the snapshot %s (leave "
               "out --lora, --lora-alpha, --lora-targets, --qlora and --load-base)" };
static const SettingNeed OFFLOAD = {
    .holds = offload_allowed, .early = true,
    .refusal = "--%s optimizer: --parallel zero1, zero2, zero3 and pipeline:S make optimizers "
               "of their own, on the device; offload runs with --parallel none or ddp" };
static const SettingNeed NO_BASE = {
    .holds = no_base, .early = true, .value_id = RUN_FLAG_LOAD_BASE,
    .refusal = "--%s: the model comes from --load-base %s (leave out --layers, --heads, "
               "--embd, --untied and --separate-qkv)" };

/* The --scale-* factors as the dynamic mode checks them, whatever the mode. */
static bool scale_factors_valid(const void *o, char *why, size_t len)
{
    LossScaleConfig c = ((const RunOptions *)o)->run.cfg.loss_scale;
    c.mode = LOSS_SCALE_DYNAMIC;
    return loss_scale_check(&c, why, len);
}

static void set_parallel(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    char why[256];
    if (!run_parallel_parse(&((RunOptions *)opts)->run.local.parallel, arg, why, sizeof why))
        cli_usage_error("%s '%s': %s", flag, arg, why);
}

static void set_checkpoint(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    char err[200];
    if (!ckpt_parse(arg, &((RunOptions *)opts)->run.cfg.local.checkpoint, err, sizeof err))
        cli_usage_error("%s: %s", flag, err);
}

static void set_lora_targets(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    char err[256];
    if (!lora_targets_parse(arg, &((RunOptions *)opts)->run.lora.targets, err, sizeof err))
        cli_usage_error("%s: %s", flag, err);
}

#define FIELD(f) offsetof(RunOptions, run.f)
#define KEPT(f) offsetof(RunOptions, run.kept.f)         /* run/run.h: a snapshot keeps them */
#define DATA(f) offsetof(RunOptions, run.kept.data.f)    /* data/dataset.h */
#define LOCAL(f) offsetof(RunOptions, run.local.f)       /* run/run.h: this run's alone */
#define PAR(f) offsetof(RunOptions, run.local.parallel.f)
#define DIST(f) offsetof(RunOptions, run.local.parallel.dist.f)   /* dist/run.h */
#define CFG(f) (offsetof(RunOptions, run.cfg) + offsetof(TrainerConfig, f))   /* optim/train.h */
#define SCHED(f) (offsetof(RunOptions, run.sched) + offsetof(SchedConfig, f))  /* optim/schedule.h */


/* Defaults: the demo. `train_gpt` with no flags learns 3-digit addition in under a minute on
 * two idle cores, a few minutes on a busy machine (docs/gpt.md has the measured numbers).
 * A key marks a setting the snapshot keeps (data, schedule and run keys written here; model,
 * train, optim, precision and loss_scale keys by optim/train_snapshot.h, library_key; a row
 * with a schema is the library's setting of that key, whose range it takes from the schema's
 * row: GPT_SCHEMA in nn/gpt.h, TRAINER_SCHEMA in optim/train.h, DATA_SCHEMA in data/dataset.h,
 * RUN_KEPT_SCHEMA in run/run.h; a row of RUN_LOCAL_SCHEMA or RUN_PARALLEL_SCHEMA, run/run.h,
 * takes its range from a run-only row and has no snapshot key); its
 * value is read back with the flag's checks, and with --load a flag given must agree with it
 * (merge). A key of this table's own that older snapshots lack has the value they had in
 * .before (the library's old layouts are optim/snapshot_keys.c's). */
const Setting RUN_OPTIONS_TABLE[] = {
    { .heading = "Data (one of):" },
    { .name = "task", .id = RUN_FLAG_TASK, .type = SETTING_STRING, .offset = DATA(task),
      .def = "add", .arg = "NAME", .key = "data.task",
      .schema = &DATA_SCHEMA,
      .applies = is_task, .needs = { &TASK }, .help = "add, sub, reverse or sort" },
    { .name = "task-size", .id = RUN_FLAG_TASK_SIZE, .type = SETTING_INT, .offset = DATA(task_size),
      .schema = &DATA_SCHEMA, .arg = "N", .key = "data.task_size", .applies = is_task,
      .needs = { &A_TASK }, .help = "digits or letters of a task (default: add, sub 3; others 5)" },
    { .name = "msd-first", .id = RUN_FLAG_MSD_FIRST, .type = SETTING_SWITCH, .offset = DATA(msd_first),
      .schema = &DATA_SCHEMA, .key = "data.msd_first", .applies = is_task, .needs = { &A_TASK },
      .help = "add, sub: answer most significant digit first (harder; the\n"
              "default writes it backwards, see data/tasks.h)" },
    { .name = "data", .id = RUN_FLAG_DATA, .type = SETTING_STRING, .offset = DATA(path),
      .schema = &DATA_SCHEMA, .arg = "PATH", .key = "data.path", .applies = is_text,
      .help = "a text file: a character-level language model" },

    { .heading = "Run:" },
    { .name = "steps", .id = RUN_FLAG_STEPS, .type = SETTING_LONG, .offset = KEPT(steps),
      .schema = &RUN_KEPT_SCHEMA, .def = "2000", .arg = "N", .key = "train.step",
      .library_key = true, .merge = SETTING_ONWARD,
      .help = "train until step N (with --load, default the snapshot's\n"
              "step: evaluate and sample only)" },
    { .name = "batch", .id = RUN_FLAG_BATCH, .type = SETTING_INT, .offset = KEPT(batch),
      .schema = &RUN_KEPT_SCHEMA, .def = "64", .arg = "N", .key = "schedule.batch",
      .help = "rows per micro-batch" },
    { .name = "accum", .id = RUN_FLAG_ACCUM, .type = SETTING_INT, .offset = KEPT(accum),
      .schema = &RUN_KEPT_SCHEMA, .def = "1", .arg = "K", .key = "schedule.accum",
      .help = "micro-batches per update: gradients accumulated over K\n"
              "batches of --batch rows, each loss divided by K; memory is\n"
              "that of one micro-batch" },
    /* The rows' length, kept for a text (run.seq), not taken from the model's T: a LoRA run's
     * T is its base's, longer than its rows when the base learned longer ones (a text's --seq
     * 64 under 32, or add's 12 tokens under sub's 11: a task's rows are the task's own). */
    { .name = "seq", .id = RUN_FLAG_SEQ, .type = SETTING_INT, .offset = KEPT(seq),
      .schema = &RUN_KEPT_SCHEMA, .arg = "N", .key = "run.seq", .applies = is_text,
      .help = "tokens per row = the model's T (default: a task's row length,\n"
              "which is the only value a task allows; 64 for text)" },
    { .name = "seed", .id = RUN_FLAG_SEED, .type = SETTING_LONG, .offset = CFG(seed),   /* a u64 */
      .schema = &TRAINER_SCHEMA, .key = "train.seed", .def = "1", .arg = "N",
      .help = "weights and data" },
    { .name = "threads", .id = RUN_FLAG_THREADS, .type = SETTING_INT, .offset = LOCAL(threads),
      .schema = &RUN_LOCAL_SCHEMA, .key = "threads", .def = "0", .arg = "N",
      .help = "threads, 0 = one per core" },
    { .name = "kernels", .id = RUN_FLAG_KERNELS, .type = SETTING_CUSTOM,
      .set = settings_set_kernels, .arg = "K", .help = SETTINGS_KERNELS_HELP },
    { .name = "mem-budget", .id = RUN_FLAG_MEM_BUDGET, .type = SETTING_BYTES,
      .offset = LOCAL(mem_budget), .schema = &RUN_LOCAL_SCHEMA, .key = "mem_budget", .arg = "SIZE",
      .help = "the most tracked memory (every category) the run may hold,\n"
              "e.g. 64MiB: an allocation beyond it ends the run with the\n"
              "category and the bytes (default: no limit; fit_largest)" },
    { .name = "offload", .id = RUN_FLAG_OFFLOAD, .type = SETTING_CHOICE,
      .offset = CFG(local.offload), .def = "none", .arg = "W",
      .needs = { &OFFLOAD },
      .schema = &TRAINER_SCHEMA, .key = "run.offload",
      .help = "none, or optimizer: fp32 masters and optimizer state on\n"
              "the host, outside --mem-budget, the update there; the\n"
              "report counts the bytes each way (docs/memory.md)" },
    { .name = "checkpoint", .id = RUN_FLAG_CHECKPOINT, .type = SETTING_CUSTOM,
      .set = set_checkpoint, .def = "none", .arg = "S", .schema = &TRAINER_SCHEMA,
      .key = "run.checkpoint",
      .help = "gradient checkpointing over the blocks: none, memory-poor,\n"
              "sqrt, every:K or budget:S; less activation memory for more\n"
              "block forwards, same gradients\n(docs/checkpointing.md)" },
    /* Kept by a snapshot: tiled and standard differ in the last bits (run/settings.c). */
    { .name = "attention", .id = RUN_FLAG_ATTENTION, .type = SETTING_CHOICE,
      .offset = KEPT(attention), .def = "standard", .arg = "A",
      .schema = &RUN_KEPT_SCHEMA, .key = "run.attention",
      .help = "standard (keeps the [T, T] probabilities) or tiled (keeps\n"
              "a statistic per row, recomputes; docs/attention_memory.md;\n"
              "kept in a snapshot)" },

    { .heading = "Mixed precision (docs/mixed_precision.md):" },
    /* Custom rows, kept by the library's keys and compared as they would be typed. */
    { .name = "precision", .id = RUN_FLAG_PRECISION, .type = SETTING_CUSTOM,
      .set = run_options_set_precision, .format = run_options_format_precision, .def = "fp32", .arg = "P",
      .key = "precision.policy", .schema = &TRAINER_SCHEMA,
      .help = "fp32, tf32 (matmul inputs in tf32), bf16, fp16 (parameters,\n"
              "activations and gradients in 16 bits, fp32 master weights\n"
              "in the optimizer) or fp8 (e4m3 activations, e5m2 gradients,\n"
              "bf16 parameters)" },
    { .name = "fp8-scaling", .id = RUN_FLAG_FP8_SCALING, .type = SETTING_CUSTOM,
      .set = run_options_set_precision, .format = run_options_format_precision, .arg = "S",
      .key = "precision.fp8_scaling", .library_key = true, .needs = { &FP8 },
      .help = "fp8: an activation's scale from its own amax (current) or\n"
              "from the largest amax at its place in the last W steps\n"
              "(delayed[:W], W = 16) (default current)" },
    { .name = "loss-scale", .id = RUN_FLAG_LOSS_SCALE, .type = SETTING_CUSTOM,
      .set = run_options_set_precision, .format = run_options_format_precision, .arg = "S",
      .key = "loss_scale.mode", .library_key = true,
      .help = "none, static:S (backward seeded with S, gradients divided by\n"
              "S before clipping) or dynamic[:INIT] (S from INIT = 65536,\n"
              "shrunk on an inf/NaN gradient, grown after clean steps);\n"
              "a step with an inf/NaN gradient is always skipped\n"
              "(default none)" },
    /* The dynamic scaler's factors, each checked with the others as the dynamic mode will. */
    { .name = "scale-growth-interval", .id = RUN_FLAG_SCALE_GROWTH_INTERVAL, .type = SETTING_LONG,
      .offset = CFG(loss_scale.growth_interval), .arg = "N",
      .schema = &TRAINER_SCHEMA, .key = "loss_scale.growth_interval", .applies = is_dynamic,
      .needs = { &DYNAMIC }, .check = scale_factors_valid,
      .help = "dynamic: clean steps in a row before S grows\n(default 2000)" },
    { .name = "scale-growth-factor", .id = RUN_FLAG_SCALE_GROWTH_FACTOR, .type = SETTING_DOUBLE,
      .offset = CFG(loss_scale.growth_factor), .arg = "X",
      .schema = &TRAINER_SCHEMA, .key = "loss_scale.growth_factor", .applies = is_dynamic,
      .needs = { &DYNAMIC }, .check = scale_factors_valid,
      .help = "dynamic: S is multiplied by X > 1 when it grows\n(default 2)" },
    { .name = "scale-backoff-factor", .id = RUN_FLAG_SCALE_BACKOFF_FACTOR, .type = SETTING_DOUBLE,
      .offset = CFG(loss_scale.backoff_factor), .arg = "X",
      .schema = &TRAINER_SCHEMA, .key = "loss_scale.backoff_factor", .applies = is_dynamic,
      .needs = { &DYNAMIC }, .check = scale_factors_valid,
      .help = "dynamic: S is multiplied by X in (0, 1) on an inf/NaN\n"
              "gradient (default 0.5)" },

    { .heading = "Parallel (under scripts/mpirun; docs/distributed.md, docs/pipeline.md):" },
    { .name = "parallel", .id = RUN_FLAG_PARALLEL, .type = SETTING_CUSTOM, .set = set_parallel,
      .schema = &RUN_PARALLEL_SCHEMA, .key = "text", .arg = "P",
      .help = "none, ddp, zero1, zero2, zero3, or pipeline:S (next part);\n"
              "ddp: each rank trains on --batch rows of a global batch of\n"
              "ranks x --batch, gradients all-reduced in rank order (the\n"
              "bits of one process adding the same micro-batch gradients\n"
              "in order); zero1/2/3: the same numbers with the optimizer\n"
              "state (1), + gradients (2), + weights (3, FSDP) sharded\n"
              "over the ranks; --accum K: K micro-batches per rank\n"
              "(default none)" },
    { .name = "bucket-kb", .id = RUN_FLAG_BUCKET_KB, .type = SETTING_INT, .offset = DIST(bucket_kb),
      .schema = &RUN_PARALLEL_SCHEMA, .key = "bucket_kb", .def = "256", .arg = "N",
      .needs = { &DDP },
      .help = "ddp: gradients sent in buckets of N KiB, each started while\n"
              "backward still runs; 0 = one bucket after backward\n"
              "(PyTorch's 25 MB scaled to these models)" },
    { .name = "grad-wire", .id = RUN_FLAG_GRAD_WIRE, .type = SETTING_STRING,
      .offset = PAR(grad_wire), .def = "auto", .arg = "W",
      .schema = &RUN_PARALLEL_SCHEMA, .key = "grad_wire",
      .needs = { &DATA_PARALLEL },
      .help = "ddp, zero: what the gradients travel as: fp32, bf16 or e5m2\n"
              "(with a scale per message); the sums stay fp32 (dist/wire.h);\n"
              "auto: bf16 under --precision bf16, e5m2 under fp8, else fp32" },
    { .heading = "Pipeline parallelism (docs/pipeline.md; under scripts/mpirun -np P):\n"
                 "  --parallel pipeline:S  split the blocks over the ranks and run schedule S:\n"
                 "                      naive, gpipe, 1f1b, or pipedream (asynchronous 1F1B,\n"
                 "                      an update per micro-batch, weight stashing; --untied);\n"
                 "  --parallel pipeline:S,dpD  D data-parallel replicas of the pipeline (ranks =\n"
                 "                      D x stages), each stage's gradients summed over them;\n"
                 "  --parallel pipeline:S,dpD,zero1  the same, each stage's optimizer state and\n"
                 "                      masters sharded over its D replicas (ZeRO-1)" },
    { .name = "micro-batches", .id = RUN_FLAG_MICRO_BATCHES, .type = SETTING_INT,
      .offset = DIST(micro_batches), .schema = &RUN_PARALLEL_SCHEMA, .key = "micro_batches",
      .arg = "M", .needs = { &PIPELINE },
      .help = "micro-batches of --batch rows per step (default 1)" },
    { .name = "stages", .id = RUN_FLAG_STAGES, .type = SETTING_STRING, .offset = DIST(stages),
      .schema = &RUN_PARALLEL_SCHEMA, .key = "stages", .arg = "LIST", .needs = { &PIPELINE },
      .help = "blocks per stage, one count per rank (default: even)" },
    { .name = "pipe-events", .id = RUN_FLAG_PIPE_EVENTS, .type = SETTING_STRING,
      .offset = PAR(pipe_events), .schema = &RUN_PARALLEL_SCHEMA, .key = "pipe_events",
      .arg = "FILE", .needs = { &PIPELINE },
      .help = "TSV, every forward and backward of every stage and step" },

    { .heading = "Model:" },
    /* --load-base takes the model from the base; --untied and --separate-qkv clear the
     * model's tied and fused_qkv (the keys keep those). */
    { .name = "layers", .id = RUN_FLAG_LAYERS, .type = SETTING_INT, .offset = CFG(model.n_layer),
      .schema = &GPT_SCHEMA, .key = "model.n_layer", .def = "2", .arg = "N",
      .needs = { &NO_BASE }, .help = "transformer blocks" },
    { .name = "heads", .id = RUN_FLAG_HEADS, .type = SETTING_INT, .offset = CFG(model.n_head),
      .schema = &GPT_SCHEMA, .key = "model.n_head", .def = "4", .arg = "N",
      .needs = { &NO_BASE }, .help = "attention heads; must divide --embd" },
    { .name = "embd", .id = RUN_FLAG_EMBD, .type = SETTING_INT, .offset = CFG(model.n_embd),
      .schema = &GPT_SCHEMA, .key = "model.n_embd", .def = "128", .arg = "N",
      .needs = { &NO_BASE }, .help = "width C of the residual stream" },
    { .name = "untied", .id = RUN_FLAG_UNTIED, .type = SETTING_SWITCH, .offset = CFG(model.tied),
      .negated = true, .schema = &GPT_SCHEMA, .key = "model.tied", .needs = { &NO_BASE },
      .help = "a separate output head instead of the token embedding" },
    { .name = "separate-qkv", .id = RUN_FLAG_SEPARATE_QKV, .type = SETTING_SWITCH,
      .offset = CFG(model.fused_qkv), .negated = true, .schema = &GPT_SCHEMA,
      .key = "model.fused_qkv", .needs = { &NO_BASE },
      .help = "three q, k, v projections instead of one fused" },

    { .heading = "Optimizer:" },
    { .name = "optimizer", .id = RUN_FLAG_OPTIMIZER, .type = SETTING_CHOICE, .offset = CFG(optimizer),
      .def = "adamw", .arg = "NAME", .key = "optim.kind",
      .schema = &TRAINER_SCHEMA,
      .help = "adamw, sgd, adam8bit (adamw with 8-bit moments) or adafactor\n"
              "(factored second moment, absolute --lr)" },
    { .name = "lr", .id = RUN_FLAG_LR, .type = SETTING_DOUBLE, .offset = SCHED(base_lr),
      .schema = &SCHED_SCHEMA, .key = "schedule.lr", .def = "0.001", .arg = "X",
      .help = "base learning rate, right for --base-batch" },
    { .heading = "Schedule (docs/batch_and_lr.md; the log's lr column shows the result):" },
    { .name = "lr-rule", .id = RUN_FLAG_LR_RULE, .type = SETTING_CHOICE, .offset = SCHED(rule),
      .def = "none", .arg = "R", .key = "schedule.lr_rule",
      .schema = &SCHED_SCHEMA,
      .help = "none, linear or sqrt: scale --lr by the effective batch\n"
              "(batch x accum) over --base-batch" },
    { .name = "base-batch", .id = RUN_FLAG_BASE_BATCH, .type = SETTING_INT,
      .offset = SCHED(base_batch), .schema = &SCHED_SCHEMA, .key = "schedule.base_batch",
      .arg = "N",
      .help = "the batch --lr is meant for (default: the effective batch)" },
    { .name = "warmup-type", .id = RUN_FLAG_WARMUP_TYPE, .type = SETTING_CHOICE,
      .offset = SCHED(warmup), .def = "gradual",
      .arg = "W", .key = "schedule.warmup_type", .schema = &SCHED_SCHEMA,
      .help = "none, constant (a fixed --warmup-fraction of the peak) or\n"
              "gradual (a linear ramp to the peak)" },
    { .name = "warmup", .id = RUN_FLAG_WARMUP, .type = SETTING_LONG, .offset = SCHED(warmup_steps),
      .schema = &SCHED_SCHEMA, .key = "schedule.warmup", .def = "100", .arg = "N",
      .help = "warmup steps (without the flag at most --steps / 10)" },
    { .name = "warmup-fraction", .id = RUN_FLAG_WARMUP_FRACTION, .type = SETTING_DOUBLE,
      .offset = SCHED(warmup_fraction), .schema = &SCHED_SCHEMA,
      .key = "schedule.warmup_fraction", .def = "0.1", .arg = "X", .needs = { &CONSTANT_WARMUP },
      .help = "constant warmup's rate, as a fraction of the peak" },
    { .name = "decay", .id = RUN_FLAG_DECAY, .type = SETTING_CHOICE, .offset = SCHED(decay),
      .def = "cosine", .arg = "D", .key = "schedule.decay",
      .schema = &SCHED_SCHEMA,
      .help = "after warmup: constant, cosine (to --final-fraction of the\n"
              "peak at --steps) or wsd (constant, then a cooldown to it)" },
    { .name = "cooldown", .id = RUN_FLAG_COOLDOWN, .type = SETTING_LONG,
      .offset = SCHED(cooldown_steps), .schema = &SCHED_SCHEMA, .key = "schedule.cooldown",
      .arg = "N", .needs = { &WSD },
      .help = "wsd: cooldown steps at the end (default: --steps / 5)" },
    { .name = "cooldown-shape", .id = RUN_FLAG_COOLDOWN_SHAPE, .type = SETTING_CHOICE,
      .offset = SCHED(cooldown), .def = "linear",
      .arg = "S", .key = "schedule.cooldown_shape", .schema = &SCHED_SCHEMA, .needs = { &WSD },
      .help = "wsd: linear or 1-sqrt" },
    { .name = "final-fraction", .id = RUN_FLAG_FINAL_FRACTION, .type = SETTING_DOUBLE,
      .offset = SCHED(final_fraction), .schema = &SCHED_SCHEMA,
      .key = "schedule.final_fraction", .def = "0", .arg = "X", .applies = is_decaying,
      .needs = { &DECAYING },
      .help = "cosine, wsd: decay to X times the peak rate, not to 0\n"
              "(Chinchilla decays to 0.1)" },
    { .name = "weight-decay", .id = RUN_FLAG_WEIGHT_DECAY, .type = SETTING_DOUBLE,
      .offset = CFG(adamw.weight_decay), .schema = &TRAINER_SCHEMA, .key = "optim.weight_decay",
      .def = "0.1", .arg = "X", .help = "decoupled for adamw, L2 for sgd; matrices only" },
    { .name = "beta1", .id = RUN_FLAG_BETA1, .type = SETTING_DOUBLE, .offset = CFG(adamw.beta1),
      .schema = &TRAINER_SCHEMA, .key = "optim.beta1", .def = "0.9", .arg = "X",
      .applies = is_adam, .needs = { &ADAM }, .help = "adamw's first moment" },
    { .name = "beta2", .id = RUN_FLAG_BETA2, .type = SETTING_DOUBLE, .offset = CFG(adamw.beta2),
      .schema = &TRAINER_SCHEMA, .key = "optim.beta2", .def = "0.99", .arg = "X",
      .applies = is_adam, .needs = { &ADAM }, .help = "adamw's second moment" },
    { .name = "adam8bit-rounding", .id = RUN_FLAG_ADAM8BIT_ROUNDING, .type = SETTING_CHOICE,
      .offset = CFG(adam8bit_rounding), .def = "nearest",
      .arg = "R", .key = "optim.rounding", .schema = &TRAINER_SCHEMA, .applies = is_adam8bit,
      .needs = { &ADAM8BIT },
      .help = "adam8bit's moments re-encoded to the nearest level or to\n"
              "a neighbour at random (stochastic)\n(docs/memory.md)" },
    { .name = "momentum", .id = RUN_FLAG_MOMENTUM, .type = SETTING_DOUBLE, .offset = CFG(sgd.momentum),
      .schema = &TRAINER_SCHEMA, .key = "optim.momentum", .def = "0.9", .arg = "X",
      .applies = is_sgd, .needs = { &SGD }, .help = "sgd momentum" },
    { .name = "clip", .id = RUN_FLAG_CLIP, .type = SETTING_DOUBLE, .offset = CFG(clip),
      .schema = &TRAINER_SCHEMA, .key = "train.clip", .def = "1", .arg = "X",
      .help = "largest global gradient norm, 0 = off" },

    { .heading = "Fine-tuning (docs/lora.md):" },
    /* With --load the snapshot's (lora_merge_snapshot takes its LoRA settings whole, so the
     * rows that are LORA_SCHEMA's are not merged one by one: SETTING_FREE). */
    { .name = "load-base", .id = RUN_FLAG_LOAD_BASE, .type = SETTING_STRING,
      .offset = LOCAL(load_base_path), .schema = &RUN_LOCAL_SCHEMA, .key = "load_base",
      .arg = "FILE", .needs = { &NO_LOAD },
      .help = "start from this model (a --save snapshot or a base file);\n"
              "without --lora every parameter is fine-tuned" },
    { .name = "lora", .id = RUN_FLAG_LORA, .type = SETTING_INT, .offset = FIELD(lora.rank),
      .lo = 0, .hi = 1 << 14, .arg = "R", .needs = { &NO_LOAD },
      .help = "freeze the model, train rank-R adapters (default 0: off)" },
    { .name = "lora-alpha", .id = RUN_FLAG_LORA_ALPHA, .type = SETTING_FLOAT,
      .offset = FIELD(lora.alpha), .schema = &LORA_SCHEMA, .key = "lora.alpha",
      .merge = SETTING_FREE, .def = "16", .arg = "X", .needs = { &NO_LOAD, &LORA },
      .help = "the adapters are scaled by X / R" },
    { .name = "lora-targets", .id = RUN_FLAG_LORA_TARGETS, .type = SETTING_CUSTOM,
      .set = set_lora_targets, .def = "q,v", .arg = "L", .needs = { &NO_LOAD, &LORA },
      .help = "among q, k, v, o, mlp, or all (q, k, v need\n"
              "separate projections, switched on for a fresh model)" },
    { .name = "qlora", .id = RUN_FLAG_QLORA, .type = SETTING_SWITCH, .offset = FIELD(lora.qlora),
      .schema = &LORA_SCHEMA, .key = "lora.qlora", .merge = SETTING_FREE,
      .needs = { &NO_LOAD, &LORA }, .help = "keep the frozen weights as NF4 (4.127 bits each)" },
    { .name = "save-adapter", .id = RUN_FLAG_SAVE_ADAPTER, .type = SETTING_STRING,
      .offset = LOCAL(save_adapter_path), .schema = &RUN_LOCAL_SCHEMA, .key = "save_adapter",
      .arg = "FILE", .needs = { &LORA },
      .help = "the adapters alone at the end (loads on top of the base)" },

    { .heading = "Evaluation and output (each output FILE is written whole or not at all; a\n"
                 "symlink is followed, a character device such as /dev/null written through; a\n"
                 "FIFO, a socket or a folder is refused before training):" },
    { .name = "eval-every", .id = RUN_FLAG_EVAL_EVERY, .type = SETTING_LONG,
      .offset = LOCAL(eval_every), .schema = &RUN_LOCAL_SCHEMA, .key = "eval_every", .def = "250",
      .arg = "N",
      .help = "validation loss and accuracy every N steps, 0 = only at the\nend" },
    { .name = "eval-examples", .id = RUN_FLAG_EVAL_EXAMPLES, .type = SETTING_INT,
      .offset = LOCAL(eval_examples), .schema = &RUN_LOCAL_SCHEMA, .key = "eval_examples",
      .def = "1000", .arg = "N",
      .help = "validation rows used (or all there are)" },
    { .name = "log", .id = RUN_FLAG_LOG, .type = SETTING_STRING, .offset = LOCAL(log_path),
      .schema = &RUN_LOCAL_SCHEMA, .key = "log", .arg = "FILE",
      .help = "TSV, one row per step (columns in docs/gpt.md)" },
    { .name = "plot", .id = RUN_FLAG_PLOT, .type = SETTING_STRING, .offset = LOCAL(plot_path),
      .schema = &RUN_LOCAL_SCHEMA, .key = "plot", .arg = "FILE", .needs = { &LOG },
      .help = "loss and accuracy PNG from the log, drawn by gnuplot (needs\n"
              "--log; script examples/train_gpt/loss.gp)" },
    { .name = "save", .id = RUN_FLAG_SAVE, .type = SETTING_STRING, .offset = LOCAL(save_path),
      .schema = &RUN_LOCAL_SCHEMA, .key = "save", .arg = "FILE",
      .help = "snapshot of the training state at the end (safetensors)" },
    { .name = "load", .id = RUN_FLAG_LOAD, .type = SETTING_STRING, .offset = LOCAL(load_path),
      .schema = &RUN_LOCAL_SCHEMA, .key = "load", .arg = "FILE",
      .help = "resume from a snapshot: its model, optimizer, data, schedule\n"
              "and attention settings are used; flags given must agree" },
    { .name = "sample", .id = RUN_FLAG_SAMPLE, .type = SETTING_INT, .offset = LOCAL(sample),
      .schema = &RUN_LOCAL_SCHEMA, .key = "sample", .arg = "N",
      .help = "after training: N validation prompts with the model's greedy\n"
              "answers (task), or N generated characters (text)" },
    { .name = "temperature", .id = RUN_FLAG_TEMPERATURE, .type = SETTING_DOUBLE,
      .offset = LOCAL(temperature), .schema = &RUN_LOCAL_SCHEMA, .key = "temperature",
      .def = "1", .arg = "X",
      .needs = { &TEXT_SAMPLE },
      .help = "text samples: each character drawn from softmax(logits / X),\n"
              "0 = greedy (the likeliest), 0 to 100" },
    { .name = "sample-seed", .id = RUN_FLAG_SAMPLE_SEED, .type = SETTING_LONG,
      .offset = LOCAL(sample_seed), .schema = &RUN_LOCAL_SCHEMA, .key = "sample_seed",
      .arg = "N",
      .needs = { &TEXT_SAMPLE }, .help = "text samples: the generator's seed (default: --seed)" },
    { .heading = "  -h, --help          this text" },
};
const int RUN_OPTIONS_N = sizeof RUN_OPTIONS_TABLE / sizeof RUN_OPTIONS_TABLE[0];

#undef FIELD
#undef KEPT
#undef DATA
#undef LOCAL
#undef PAR
#undef DIST
#undef CFG
#undef SCHED

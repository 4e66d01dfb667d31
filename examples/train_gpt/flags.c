/* train_gpt's command line: parsing, the checks that need no data, and agreeing with a
 * snapshot given by --load. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/snapshot.h"
#include "examples/common/cli.h"
#include "examples/train_gpt/train_gpt.h"
#include "optim/schedule.h"

/* Defaults: the demo. `train_gpt` with no flags learns 3-digit addition in under a minute on
 * two idle cores, a few minutes on a busy machine (docs/gpt.md has the measured numbers). */
static const Options DEFAULTS = {
    .task = "add", .steps = 2000, .batch = 64, .accum = 1, .seed = 1,
    .layers = 2, .heads = 4, .embd = 128,
    .optimizer = TRAIN_ADAMW, .lr = 1e-3, .lr_rule = SCHED_RULE_NONE,
    .warmup_type = SCHED_WARMUP_GRADUAL, .warmup = 100, .warmup_fraction = 0.1,
    .decay = SCHED_DECAY_COSINE, .cooldown_shape = SCHED_COOLDOWN_LINEAR, .momentum = 0.9,
    .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.99, .clip = 1.0,
    .eval_every = 250, .eval_examples = 1000, .temperature = 1.0,
    .bucket_kb = PARALLEL_DEFAULT_BUCKET_KB,
    .lora_alpha = 16.0, .lora_targets = LORA_TARGET_Q | LORA_TARGET_V,
    .precision = "fp32",    /* loss_scale: loss_scale_defaults(), set in options_parse */
};
/* The flags a snapshot's data and schedule metadata repeat: one range for the flag and for the
 * key (options_merge_snapshot), so a file passes exactly the checks the flag does. The trainer's
 * own numbers (--beta1, --clip, ...) take TRAIN_RANGES (optim/train.h), the model's nn/gpt.h's
 * maxima, which train_snapshot_config holds a file's values to. */
static const struct {
    Flag        flag;
    const char *key;
    double      lo, hi;
} RANGES[] = {
    { FLAG_TASK_SIZE, "data.task_size", 1, TASK_MAX_SIZE },
    { FLAG_STEPS, "train.step", 0, 1000000000 },
    { FLAG_LR, "schedule.lr", 1e-12, 10.0 },
    { FLAG_WARMUP, "schedule.warmup", 0, 1000000000 },
    { FLAG_BATCH, "schedule.batch", 1, 1 << 16 },
    { FLAG_ACCUM, "schedule.accum", 1, 1 << 16 },
    { FLAG_BASE_BATCH, "schedule.base_batch", 1, 1 << 30 },
    { FLAG_WARMUP_FRACTION, "schedule.warmup_fraction", 0.0, 1.0 },
    { FLAG_COOLDOWN, "schedule.cooldown", 1, 1000000000 },
};

static int range_of(Flag f)
{
    for (int i = 0; i < (int)(sizeof RANGES / sizeof RANGES[0]); i++)
        if (RANGES[i].flag == f)
            return i;
    return -1;      /* not reached: every caller names a flag of the table */
}

static long range_long(Flag f, const char *flag, const char *arg)
{
    int i = range_of(f);
    return cli_long(flag, arg, (long)RANGES[i].lo, (long)RANGES[i].hi);
}

static double range_double(Flag f, const char *flag, const char *arg)
{
    int i = range_of(f);
    return cli_double(flag, arg, RANGES[i].lo, RANGES[i].hi);
}

static double train_range(TrainRangeId id, const char *flag, const char *arg)
{
    return cli_double(flag, arg, TRAIN_RANGES[id].lo, TRAIN_RANGES[id].hi);
}

/* --attention's choices, and the values of the snapshot key run.attention. */
static const char *const ATTENTION_NAMES[] = { "standard", "tiled", NULL };

static const struct option LONG_OPTIONS[] = {
    { "task", required_argument, NULL, FLAG_TASK },
    { "task-size", required_argument, NULL, FLAG_TASK_SIZE },
    { "msd-first", no_argument, NULL, FLAG_MSD_FIRST },
    { "data", required_argument, NULL, FLAG_DATA },
    { "steps", required_argument, NULL, FLAG_STEPS },
    { "batch", required_argument, NULL, FLAG_BATCH },
    { "seq", required_argument, NULL, FLAG_SEQ },
    { "layers", required_argument, NULL, FLAG_LAYERS },
    { "heads", required_argument, NULL, FLAG_HEADS },
    { "embd", required_argument, NULL, FLAG_EMBD },
    { "untied", no_argument, NULL, FLAG_UNTIED },
    { "separate-qkv", no_argument, NULL, FLAG_SEPARATE_QKV },
    { "lr", required_argument, NULL, FLAG_LR },
    { "warmup", required_argument, NULL, FLAG_WARMUP },
    { "optimizer", required_argument, NULL, FLAG_OPTIMIZER },
    { "momentum", required_argument, NULL, FLAG_MOMENTUM },
    { "weight-decay", required_argument, NULL, FLAG_WEIGHT_DECAY },
    { "beta1", required_argument, NULL, FLAG_BETA1 },
    { "beta2", required_argument, NULL, FLAG_BETA2 },
    { "adam8bit-rounding", required_argument, NULL, FLAG_ADAM8BIT_ROUNDING },
    { "parallel", required_argument, NULL, FLAG_PARALLEL },
    { "micro-batches", required_argument, NULL, FLAG_MICRO_BATCHES },
    { "stages", required_argument, NULL, FLAG_STAGES },
    { "pipe-events", required_argument, NULL, FLAG_PIPE_EVENTS },
    { "clip", required_argument, NULL, FLAG_CLIP },
    { "seed", required_argument, NULL, FLAG_SEED },
    { "threads", required_argument, NULL, FLAG_THREADS },
    { "eval-every", required_argument, NULL, FLAG_EVAL_EVERY },
    { "eval-examples", required_argument, NULL, FLAG_EVAL_EXAMPLES },
    { "log", required_argument, NULL, FLAG_LOG },
    { "plot", required_argument, NULL, FLAG_PLOT },
    { "save", required_argument, NULL, FLAG_SAVE },
    { "load", required_argument, NULL, FLAG_LOAD },
    { "sample", required_argument, NULL, FLAG_SAMPLE },
    { "temperature", required_argument, NULL, FLAG_TEMPERATURE },
    { "sample-seed", required_argument, NULL, FLAG_SAMPLE_SEED },
    { "mem-budget", required_argument, NULL, FLAG_MEM_BUDGET },
    { "accum", required_argument, NULL, FLAG_ACCUM },
    { "bucket-kb", required_argument, NULL, FLAG_BUCKET_KB },
    { "lr-rule", required_argument, NULL, FLAG_LR_RULE },
    { "base-batch", required_argument, NULL, FLAG_BASE_BATCH },
    { "warmup-type", required_argument, NULL, FLAG_WARMUP_TYPE },
    { "warmup-fraction", required_argument, NULL, FLAG_WARMUP_FRACTION },
    { "decay", required_argument, NULL, FLAG_DECAY },
    { "cooldown", required_argument, NULL, FLAG_COOLDOWN },
    { "cooldown-shape", required_argument, NULL, FLAG_COOLDOWN_SHAPE },
    { "checkpoint", required_argument, NULL, FLAG_CHECKPOINT },
    { "attention", required_argument, NULL, FLAG_ATTENTION },
    { "lora", required_argument, NULL, FLAG_LORA },
    { "lora-alpha", required_argument, NULL, FLAG_LORA_ALPHA },
    { "lora-targets", required_argument, NULL, FLAG_LORA_TARGETS },
    { "qlora", no_argument, NULL, FLAG_QLORA },
    { "load-base", required_argument, NULL, FLAG_LOAD_BASE },
    { "save-adapter", required_argument, NULL, FLAG_SAVE_ADAPTER },
    { "precision", required_argument, NULL, FLAG_PRECISION },
    { "loss-scale", required_argument, NULL, FLAG_LOSS_SCALE },
    { "scale-growth-interval", required_argument, NULL, FLAG_SCALE_GROWTH_INTERVAL },
    { "scale-growth-factor", required_argument, NULL, FLAG_SCALE_GROWTH_FACTOR },
    { "scale-backoff-factor", required_argument, NULL, FLAG_SCALE_BACKOFF_FACTOR },
    { "fp8-scaling", required_argument, NULL, FLAG_FP8_SCALING },
    { "help", no_argument, NULL, 'h' },
    { 0, 0, 0, 0 },
};

static void usage(void)
{
    const Options d = DEFAULTS;
    printf("Usage: train_gpt [OPTION]...\n"
           "Train a small GPT on a built-in task or a text file; print the loss, the validation\n"
           "loss and exact-match accuracy, the speed and the memory used per category.\n\n"
           "Data (one of):\n"
           "  --task NAME         add, sub, reverse or sort (default %s)\n"
           "  --task-size N       digits or letters of a task (default: add, sub 3; others 5)\n"
           "  --msd-first         add, sub: answer most significant digit first (harder; the\n"
           "                      default writes it backwards, see examples/common/tasks.h)\n"
           "  --data PATH         a text file: a character-level language model\n"
           "Run:\n"
           "  --steps N           train until step N (default %ld; with --load, the snapshot's\n"
           "                      step: evaluate and sample only)\n"
           "  --batch N           rows per micro-batch (default %d)\n"
           "  --accum K           micro-batches per update: gradients accumulated over K\n"
           "                      batches of --batch rows, each loss divided by K; memory is\n"
           "                      that of one micro-batch (default 1)\n"
           "  --seq N             tokens per row = the model's T (default: a task's row length,\n"
           "                      which is the only value a task allows; %d for text)\n"
           "  --seed N            weights and data (default %ld)\n"
           "  --threads N         threads, 0 = one per core (default 0)\n"
           "  --mem-budget SIZE   the most tracked memory (every category) the run may hold,\n"
           "                      e.g. 64MiB: an allocation beyond it ends the run with the\n"
           "                      category and the bytes (default: no limit; fit_largest)\n"
           "  --checkpoint S      gradient checkpointing over the blocks: none, memory-poor,\n"
           "                      sqrt, every:K or budget:S; less activation memory for more\n"
           "                      block forwards, same gradients (docs/checkpointing.md;\n"
           "                      default none)\n"
           "  --attention A       standard (keeps the [T, T] probabilities) or tiled (keeps\n"
           "                      a statistic per row, recomputes; docs/attention_memory.md;\n"
           "                      default standard)\n",
           d.task, d.steps, d.batch, TEXT_DEFAULT_SEQ, d.seed);
    precision_usage();
    parallel_usage();
    pipeline_usage();
    printf("Model:\n"
           "  --layers N          transformer blocks (default %d)\n"
           "  --heads N           attention heads; must divide --embd (default %d)\n"
           "  --embd N            width C of the residual stream (default %d)\n"
           "  --untied            a separate output head instead of the token embedding\n"
           "  --separate-qkv      three q, k, v projections instead of one fused\n"
           "Optimizer:\n"
           "  --optimizer NAME    adamw, sgd, adam8bit (adamw with 8-bit moments) or adafactor\n"
           "                      (factored second moment, absolute --lr) (default adamw)\n"
           "  --lr X              base learning rate, right for --base-batch (default %g)\n"
           "Schedule (docs/batch_and_lr.md; the log's lr column shows the result):\n"
           "  --lr-rule R         none, linear or sqrt: scale --lr by the effective batch\n"
           "                      (batch x accum) over --base-batch (default none)\n"
           "  --base-batch N      the batch --lr is meant for (default: the effective batch)\n"
           "  --warmup-type W     none, constant (a fixed --warmup-fraction of the peak) or\n"
           "                      gradual (a linear ramp to the peak) (default gradual)\n"
           "  --warmup N          warmup steps (default %ld, at most --steps / 10)\n"
           "  --warmup-fraction X constant warmup's rate, as a fraction of the peak (0.1)\n"
           "  --decay D           after warmup: constant, cosine (to 0 at --steps) or wsd\n"
           "                      (constant, then a cooldown to 0) (default cosine)\n"
           "  --cooldown N        wsd: cooldown steps at the end (default: --steps / 5)\n"
           "  --cooldown-shape S  wsd: linear or 1-sqrt (default linear)\n"
           "  --weight-decay X    decoupled for adamw, L2 for sgd; matrices only (default %g)\n"
           "  --beta1 X, --beta2 X  adamw moments (default %g, %g)\n"
           "  --adam8bit-rounding R  adam8bit's moments re-encoded to the nearest level or to\n"
           "                      a neighbour at random (stochastic) (docs/memory.md;\n"
           "                      default nearest)\n"
           "  --momentum X        sgd momentum (default %g)\n"
           "  --clip X            largest global gradient norm, 0 = off (default %g)\n"
           "Fine-tuning (docs/lora.md):\n"
           "  --load-base FILE    start from this model (a --save snapshot or a base file);\n"
           "                      without --lora every parameter is fine-tuned\n"
           "  --lora R            freeze the model, train rank-R adapters (default 0: off)\n"
           "  --lora-alpha X      the adapters are scaled by X / R (default 16)\n"
           "  --lora-targets L    among q, k, v, o, mlp, or all (default q,v; q, k, v need\n"
           "                      separate projections, switched on for a fresh model)\n"
           "  --qlora             keep the frozen weights as NF4 (4.127 bits each)\n"
           "  --save-adapter FILE the adapters alone at the end (loads on top of the base)\n"
           "Evaluation and output:\n"
           "  --eval-every N      validation loss and accuracy every N steps, 0 = only at the\n"
           "                      end (default %ld)\n"
           "  --eval-examples N   validation rows used (default %d, or all there are)\n"
           "  --log FILE          TSV, one row per step (columns in docs/gpt.md)\n"
           "  --plot FILE         loss and accuracy PNG from the log, drawn by gnuplot (needs\n"
           "                      --log; script examples/train_gpt/loss.gp)\n"
           "  --save FILE         snapshot of the training state at the end (safetensors)\n"
           "  --load FILE         resume from a snapshot: its model, optimizer, data and\n"
           "                      schedule settings are used; flags given must agree with them\n"
           "  --sample N          after training: N validation prompts with the model's greedy\n"
           "                      answers (task), or N generated characters (text)\n"
           "  --temperature X     text samples: each character drawn from softmax(logits / X),\n"
           "                      0 = greedy (the likeliest), 0 to 100 (default %g)\n"
           "  --sample-seed N     text samples: the generator's seed (default: --seed)\n"
           "  -h, --help          this text\n",
           d.layers, d.heads, d.embd, d.lr, d.warmup, d.weight_decay, d.beta1, d.beta2,
           d.momentum, d.clip, d.eval_every, d.eval_examples, d.temperature);
}

const char *options_flag_name(Flag f)
{
    for (const struct option *opt = LONG_OPTIONS; opt->name; opt++)
        if (opt->val == (int)f)
            return opt->name;
    return "?";
}

bool options_given(const Options *o, Flag f) { return o->given[f - FLAG_TASK]; }

static void set_value(Options *o, Flag f, const char *arg)
{
    char flag[40];
    snprintf(flag, sizeof flag, "--%s", options_flag_name(f));
    switch (f) {
    case FLAG_TASK: o->task = task_names[cli_choice(flag, arg, task_names)]; break;
    case FLAG_TASK_SIZE: o->task_size = (int)range_long(f, flag, arg); break;
    case FLAG_MSD_FIRST: o->msd_first = true; break;
    case FLAG_DATA: o->data = arg; break;
    case FLAG_STEPS: o->steps = range_long(f, flag, arg); break;
    case FLAG_BATCH: o->batch = (int)range_long(f, flag, arg); break;
    case FLAG_SEQ: o->seq = (int)cli_long(flag, arg, 1, GPT_MAX_SEQ); break;
    case FLAG_LAYERS: o->layers = (int)cli_long(flag, arg, 1, GPT_MAX_LAYERS); break;
    case FLAG_HEADS: o->heads = (int)cli_long(flag, arg, 1, GPT_MAX_WIDTH); break;
    case FLAG_EMBD: o->embd = (int)cli_long(flag, arg, 1, GPT_MAX_WIDTH); break;
    case FLAG_UNTIED: o->untied = true; break;
    case FLAG_SEPARATE_QKV: o->separate_qkv = true; break;
    case FLAG_LR: o->lr = range_double(f, flag, arg); break;
    case FLAG_WARMUP: o->warmup = range_long(f, flag, arg); break;
    case FLAG_OPTIMIZER:
        o->optimizer = (TrainOptimizer)cli_choice(flag, arg, TRAIN_OPTIMIZER_NAMES);
        break;
    case FLAG_MOMENTUM: o->momentum = train_range(TRAIN_RANGE_MOMENTUM, flag, arg); break;
    case FLAG_WEIGHT_DECAY:
        o->weight_decay = train_range(TRAIN_RANGE_WEIGHT_DECAY, flag, arg);
        break;
    case FLAG_BETA1: o->beta1 = train_range(TRAIN_RANGE_BETA1, flag, arg); break;
    case FLAG_BETA2: o->beta2 = train_range(TRAIN_RANGE_BETA2, flag, arg); break;
    case FLAG_ADAM8BIT_ROUNDING:
        o->adam8bit_rounding = (Adam8bitRounding)cli_choice(flag, arg, ADAM8BIT_ROUNDING_NAMES);
        break;
    case FLAG_PARALLEL:                     /* one flag, two kinds of parallelism */
        if (strncmp(arg, "pipeline:", 9) == 0)
            pipeline_set_option(o, f, flag, arg);
        else
            parallel_set_option(o, f, flag, arg);
        break;
    case FLAG_MICRO_BATCHES: case FLAG_STAGES: case FLAG_PIPE_EVENTS:
        pipeline_set_option(o, f, flag, arg);
        break;
    case FLAG_CLIP: o->clip = train_range(TRAIN_RANGE_CLIP, flag, arg); break;
    case FLAG_SEED:
        o->seed = cli_long(flag, arg, 0, (long)TRAIN_RANGES[TRAIN_RANGE_SEED].hi);
        break;
    case FLAG_THREADS: o->threads = (int)cli_long(flag, arg, 0, 1024); break;
    case FLAG_EVAL_EVERY: o->eval_every = cli_long(flag, arg, 0, 1000000000L); break;
    case FLAG_EVAL_EXAMPLES: o->eval_examples = (int)cli_long(flag, arg, 1, 1 << 24); break;
    case FLAG_LOG: o->log_path = arg; break;
    case FLAG_PLOT: o->plot_path = arg; break;
    case FLAG_SAVE: o->save_path = arg; break;
    case FLAG_LOAD: o->load_path = arg; break;
    case FLAG_SAMPLE: o->sample = (int)cli_long(flag, arg, 0, 1 << 20); break;
    case FLAG_TEMPERATURE: o->temperature = cli_double(flag, arg, 0.0, 100.0); break;
    case FLAG_SAMPLE_SEED: o->sample_seed = cli_long(flag, arg, 0, (1L << 62)); break;
    case FLAG_MEM_BUDGET: o->mem_budget = cli_bytes(flag, arg, 1, (size_t)1 << 50); break;
    case FLAG_ACCUM: o->accum = (int)range_long(f, flag, arg); break;
    case FLAG_LR_RULE: o->lr_rule = (SchedRule)cli_choice(flag, arg, SCHED_RULE_NAMES); break;
    case FLAG_BASE_BATCH: o->base_batch = (int)range_long(f, flag, arg); break;
    case FLAG_WARMUP_TYPE:
        o->warmup_type = (SchedWarmup)cli_choice(flag, arg, SCHED_WARMUP_NAMES);
        break;
    case FLAG_WARMUP_FRACTION: o->warmup_fraction = range_double(f, flag, arg); break;
    case FLAG_DECAY: o->decay = (SchedDecay)cli_choice(flag, arg, SCHED_DECAY_NAMES); break;
    case FLAG_COOLDOWN: o->cooldown = range_long(f, flag, arg); break;
    case FLAG_COOLDOWN_SHAPE:
        o->cooldown_shape = (SchedCooldown)cli_choice(flag, arg, SCHED_COOLDOWN_NAMES);
        break;
    case FLAG_CHECKPOINT: {
        char err[200];
        if (!ckpt_parse(arg, &o->checkpoint, err, sizeof err))
            cli_usage_error("%s: %s", flag, err);
        break;
    }
    case FLAG_ATTENTION:
        o->tiled_attention = cli_choice(flag, arg, ATTENTION_NAMES) == 1;
        break;
    case FLAG_PRECISION: case FLAG_LOSS_SCALE: case FLAG_SCALE_GROWTH_INTERVAL:
    case FLAG_SCALE_GROWTH_FACTOR: case FLAG_SCALE_BACKOFF_FACTOR: case FLAG_FP8_SCALING:
        precision_set_option(o, f, flag, arg);
        break;
    case FLAG_LORA: case FLAG_LORA_ALPHA: case FLAG_LORA_TARGETS: case FLAG_QLORA:
    case FLAG_LOAD_BASE: case FLAG_SAVE_ADAPTER:
        lora_set_option(o, f, flag, arg);
        break;
    case FLAG_BUCKET_KB: parallel_set_option(o, f, flag, arg); break;
    case FLAG_END: break;
    }
}

/* The schedule flags together: what optim/schedule.h refuses, said in flag names. */
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
    Options o = DEFAULTS;
    o.loss_scale = loss_scale_defaults();
    o.adam8bit_rounding = adam8bit_defaults().rounding;
    opterr = 0;     /* our own messages: one line naming the option */
    int c;
    while ((c = getopt_long(argc, argv, ":h", LONG_OPTIONS, NULL)) != -1) {
        if (c == 'h') {
            usage();
            exit(0);
        }
        if (c == ':')
            cli_usage_error("option '%s' needs a value", argv[optind - 1]);
        if (c == '?')
            cli_usage_error("unknown option '%s'", argv[optind - 1]);
        o.given[c - FLAG_TASK] = true;
        set_value(&o, (Flag)c, optarg);
    }
    if (optind < argc)
        cli_usage_error("unexpected argument '%s'", argv[optind]);
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

/* The saved value, after checking that an explicit flag agrees with it. */
static long take_long(const Options *o, Flag f, long mine, long saved)
{
    char a[32], b[32];
    snprintf(a, sizeof a, "%ld", mine);
    snprintf(b, sizeof b, "%ld", saved);
    if (options_given(o, f) && mine != saved)
        options_disagree(f, a, b);
    return saved;
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

/* For switches (flags without a value): given means on. */
static bool take_switch(const Options *o, Flag f, bool saved)
{
    if (options_given(o, f) && !saved)
        cli_usage_error("--%s was given, but the snapshot %s was trained without it",
                        options_flag_name(f), snapshot_path);
    return saved;
}

/* Program metadata: present and well-formed, or the snapshot was not made by train_gpt. */
static const char *meta(const SnapshotReader *r, const char *key)
{
    const char *v = snapshot_meta(r, key);
    if (!v)
        cli_die(1, "%s: missing metadata '%s' (was it saved by train_gpt?)", snapshot_path, key);
    return v;
}

/* A data or schedule value: a number within its flag's range (RANGES), or 0 when zero_ok (a
 * flag that was not given), or the run stops with the key, the value and the range. */
static double meta_in_range(const SnapshotReader *r, Flag f, bool integer, bool zero_ok)
{
    int i = range_of(f);
    const char *key = RANGES[i].key, *v = meta(r, key);
    char *end;
    errno = 0;
    double x = integer ? (double)strtoll(v, &end, 10) : strtod(v, &end);
    if (end == v || *end || errno == ERANGE)
        cli_die(1, "%s: metadata '%s' is '%s', not %s", snapshot_path, key, v,
                integer ? "an integer" : "a number");
    if (!(x >= RANGES[i].lo && x <= RANGES[i].hi) && !(zero_ok && x == 0.0))
        cli_die(1, "%s: metadata '%s' = %s is out of range [%g, %g], the range of --%s",
                snapshot_path, key, v, RANGES[i].lo, RANGES[i].hi, options_flag_name(f));
    return x;
}

/* A switch saved as 0 or 1. */
static bool meta_switch(const SnapshotReader *r, const char *key)
{
    const char *v = meta(r, key);
    if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
        cli_die(1, "%s: metadata '%s' is '%s', not 0 or 1", snapshot_path, key, v);
    return v[0] == '1';
}

static void merge_data(Options *o, const SnapshotReader *r)
{
    const char *kind = meta(r, "data.kind");
    if (strcmp(kind, "text") == 0) {
        const char *path = meta(r, "data.path");
        if (options_given(o, FLAG_TASK))
            options_disagree(FLAG_TASK, o->task, "text data");
        if (options_given(o, FLAG_TASK_SIZE) || o->msd_first)
            cli_usage_error("--%s applies to a task; the snapshot %s was trained on text",
                            options_given(o, FLAG_TASK_SIZE) ? "task-size" : "msd-first",
                            snapshot_path);
        if (o->data && strcmp(o->data, path) != 0)
            options_disagree(FLAG_DATA, o->data, path);
        o->data = path;
        o->task = NULL;
        return;
    }
    const char *task = meta(r, "data.task");
    if (o->data)
        options_disagree(FLAG_DATA, o->data, "a task");
    if (options_given(o, FLAG_TASK) && strcmp(o->task, task) != 0)
        options_disagree(FLAG_TASK, o->task, task);
    o->task = task;
    o->msd_first = take_switch(o, FLAG_MSD_FIRST, meta_switch(r, "data.msd_first"));
    o->task_size = (int)take_long(o, FLAG_TASK_SIZE, o->task_size,
                                  (long)meta_in_range(r, FLAG_TASK_SIZE, true, false));
}

/* An enum setting saved by name. */
static int take_choice(const Options *o, Flag f, int mine, const char *saved,
                       const char *const *names)
{
    int i = 0;
    while (names[i] && strcmp(names[i], saved) != 0)
        i++;
    if (!names[i])
        cli_die(1, "%s: --%s '%s' in the snapshot is not one this version knows", snapshot_path,
                options_flag_name(f), saved);
    if (options_given(o, f) && mine != i)
        options_disagree(f, names[mine], saved);
    return i;
}

/* The settings added with accumulation and the schedules; a snapshot saved before them had the
 * old behaviour (gradual warmup, then constant), which it keeps. */
static void merge_schedule(Options *o, const SnapshotReader *r)
{
    if (!snapshot_meta(r, "schedule.accum")) {
        o->decay = SCHED_DECAY_CONSTANT;
        return;
    }
    o->accum = (int)take_long(o, FLAG_ACCUM, o->accum,
                              (long)meta_in_range(r, FLAG_ACCUM, true, false));
    o->lr_rule = (SchedRule)take_choice(o, FLAG_LR_RULE, o->lr_rule,
                                        meta(r, "schedule.lr_rule"), SCHED_RULE_NAMES);
    o->base_batch = (int)take_long(o, FLAG_BASE_BATCH, o->base_batch,
                                   (long)meta_in_range(r, FLAG_BASE_BATCH, true, true));
    o->warmup_type = (SchedWarmup)take_choice(o, FLAG_WARMUP_TYPE, o->warmup_type,
                                              meta(r, "schedule.warmup_type"),
                                              SCHED_WARMUP_NAMES);
    o->warmup_fraction = options_take_double(o, FLAG_WARMUP_FRACTION, o->warmup_fraction,
                                     meta_in_range(r, FLAG_WARMUP_FRACTION, false, false));
    o->decay = (SchedDecay)take_choice(o, FLAG_DECAY, o->decay, meta(r, "schedule.decay"),
                                       SCHED_DECAY_NAMES);
    o->cooldown = take_long(o, FLAG_COOLDOWN, o->cooldown,
                            (long)meta_in_range(r, FLAG_COOLDOWN, true, true));
    o->cooldown_shape = (SchedCooldown)take_choice(o, FLAG_COOLDOWN_SHAPE, o->cooldown_shape,
                                                   meta(r, "schedule.cooldown_shape"),
                                                   SCHED_COOLDOWN_NAMES);
}

/* Tiled attention sums a row's exponentials in another order than standard attention does, so
 * in fp32 the two differ in the last bits: a run resumes with the attention it was trained
 * with. A snapshot saved before run.attention existed was trained with standard attention. */
static void merge_attention(Options *o, const SnapshotReader *r)
{
    const char *saved = snapshot_meta(r, "run.attention");
    o->tiled_attention = take_choice(o, FLAG_ATTENTION, o->tiled_attention,
                                     saved ? saved : "standard", ATTENTION_NAMES) == 1;
}

void options_merge_snapshot(Options *o, const TrainerConfig *s, const SnapshotReader *r,
                            const char *path, long saved_step)
{
    snapshot_path = path;
    merge_data(o, r);
    const GptConfig *m = &s->model;
    o->seq = take_long(o, FLAG_SEQ, o->seq, m->max_seq);
    o->layers = take_long(o, FLAG_LAYERS, o->layers, m->n_layer);
    o->heads = take_long(o, FLAG_HEADS, o->heads, m->n_head);
    o->embd = take_long(o, FLAG_EMBD, o->embd, m->n_embd);
    o->untied = take_switch(o, FLAG_UNTIED, !m->tied);
    o->separate_qkv = take_switch(o, FLAG_SEPARATE_QKV, !m->fused_qkv);
    o->seed = take_long(o, FLAG_SEED, o->seed, (long)s->seed);
    o->clip = options_take_double(o, FLAG_CLIP, o->clip, s->clip);
    if (options_given(o, FLAG_OPTIMIZER) && o->optimizer != s->optimizer)
        options_disagree(FLAG_OPTIMIZER, trainer_optimizer_name(o->optimizer),
                 trainer_optimizer_name(s->optimizer));
    o->optimizer = s->optimizer;
    if (s->optimizer == TRAIN_ADAMW || s->optimizer == TRAIN_ADAM8BIT) {
        o->beta1 = options_take_double(o, FLAG_BETA1, o->beta1, s->adamw.beta1);
        o->beta2 = options_take_double(o, FLAG_BETA2, o->beta2, s->adamw.beta2);
        o->weight_decay = options_take_double(o, FLAG_WEIGHT_DECAY, o->weight_decay,
                                      s->adamw.weight_decay);
        o->adam8bit_rounding = (Adam8bitRounding)take_choice(o, FLAG_ADAM8BIT_ROUNDING,
            o->adam8bit_rounding, adam8bit_rounding_name(s->adam8bit_rounding),
            ADAM8BIT_ROUNDING_NAMES);
    } else if (s->optimizer == TRAIN_ADAFACTOR) {
        o->weight_decay = options_take_double(o, FLAG_WEIGHT_DECAY, o->weight_decay,
                                      s->adafactor.weight_decay);
    } else {
        o->momentum = options_take_double(o, FLAG_MOMENTUM, o->momentum, s->sgd.momentum);
        o->weight_decay = options_take_double(o, FLAG_WEIGHT_DECAY, o->weight_decay,
                                      s->sgd.weight_decay);
    }
    precision_merge_snapshot(o, s);
    o->lr = options_take_double(o, FLAG_LR, o->lr, meta_in_range(r, FLAG_LR, false, false));
    o->warmup = take_long(o, FLAG_WARMUP, o->warmup,
                          (long)meta_in_range(r, FLAG_WARMUP, true, false));
    o->batch = take_long(o, FLAG_BATCH, o->batch,
                         (long)meta_in_range(r, FLAG_BATCH, true, false));
    merge_schedule(o, r);
    merge_attention(o, r);
    int steps = range_of(FLAG_STEPS);
    if (saved_step < RANGES[steps].lo || saved_step > RANGES[steps].hi)
        cli_die(1, "%s: metadata 'train.step' = %ld is out of range [0, %.0f], the range of "
                "--steps", path, saved_step, RANGES[steps].hi);
    if (!options_given(o, FLAG_STEPS))
        o->steps = saved_step;
    else if (o->steps < saved_step)
        cli_usage_error("--steps %ld is before the snapshot's step %ld (--steps counts from "
                        "the start of the first run)", o->steps, saved_step);
    lora_merge_snapshot(o, r, path, m);
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

__attribute__((format(printf, 5, 6)))
static void put(char keys[][OPTIONS_META_KEY], char values[][OPTIONS_META_VALUE], int *n,
                const char *key, const char *fmt, ...)
{
    snprintf(keys[*n], OPTIONS_META_KEY, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(values[*n], OPTIONS_META_VALUE, fmt, ap);
    va_end(ap);
    (*n)++;
}

int options_snapshot_meta(const Options *o, char keys[][OPTIONS_META_KEY],
                          char values[][OPTIONS_META_VALUE])
{
    int n = 0;
    if (o->data) {
        put(keys, values, &n, "data.kind", "text");
        put(keys, values, &n, "data.path", "%s", o->data);
    } else {
        put(keys, values, &n, "data.kind", "task");
        put(keys, values, &n, "data.task", "%s", o->task);
        put(keys, values, &n, "data.task_size", "%d", o->task_size);
        put(keys, values, &n, "data.msd_first", "%d", o->msd_first ? 1 : 0);
    }
    put(keys, values, &n, "schedule.lr", "%.17g", o->lr);
    put(keys, values, &n, "schedule.warmup", "%ld", o->warmup);
    put(keys, values, &n, "schedule.batch", "%d", o->batch);
    put(keys, values, &n, "schedule.accum", "%d", o->accum);
    put(keys, values, &n, "schedule.lr_rule", "%s", SCHED_RULE_NAMES[o->lr_rule]);
    put(keys, values, &n, "schedule.base_batch", "%d", o->base_batch);
    put(keys, values, &n, "schedule.warmup_type", "%s", SCHED_WARMUP_NAMES[o->warmup_type]);
    put(keys, values, &n, "schedule.warmup_fraction", "%.17g", o->warmup_fraction);
    put(keys, values, &n, "schedule.decay", "%s", SCHED_DECAY_NAMES[o->decay]);
    put(keys, values, &n, "schedule.cooldown", "%ld", o->cooldown);
    put(keys, values, &n, "schedule.cooldown_shape", "%s",
        SCHED_COOLDOWN_NAMES[o->cooldown_shape]);
    put(keys, values, &n, "run.attention", "%s", ATTENTION_NAMES[o->tiled_attention ? 1 : 0]);
    if (o->lora_rank > 0) {     /* the base a resumed LoRA run reads again (lora.c) */
        put(keys, values, &n, "lora.base", "%s", o->load_base_path ? o->load_base_path : "");
        put(keys, values, &n, "lora.base_fnv1a", "%016llx",
            (unsigned long long)lora_base_hash(o));
    }
    return n;
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

/* lora_finetune: parameter-efficient fine-tuning, measured. A tiny GPT is pretrained on one task
 * (3-digit addition by default) and then fine-tuned on another (subtraction) in several ways:
 * every parameter (full fine-tuning), LoRA at ranks 1, 2, 4, 8 and 16 on the attention query
 * and value projections and both MLP weights, and QLoRA at rank 8 (the same adapters on a base
 * stored as NF4). The MLP is adapted too because q and v alone sit on an edge: on seed 2 they
 * stop on the borrows' plateau (44% of sub against full fine-tuning's 100%); with the MLP seeds
 * 1-5 solve sub (docs/lora.md), as Dettmers et al. (2023) found adapting every linear layer
 * matters more than the rank.
 *
 * For each run the table has the parameters trained, the peak bytes of each memory category
 * while training (param, grad, optim, act, temp: measured by the allocator), the frozen base's
 * bytes, the time of the fastest step, and the greedy exact-match accuracy on the new task and on
 * the old one (how much of the pretraining was forgotten).
 *
 * The pretrained base is kept in --cache-dir under a name made of its settings, so a second run
 * (another rank, another learning rate) starts from the same base without pretraining again;
 * --base loads any other base (a file of nn/gpt_snapshot.h, or a train_gpt --save snapshot).
 * docs/lora.md explains the method and the numbers. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "analysis/finetune_base.h"
#include "autograd/parallel.h"
#include "cli/settings.h"
#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "examples/common/tsv.h"
#include "nn/gpt_lora.h"
#include "nn/gpt_snapshot.h"

typedef struct {
    const char      *task;          /* the fine-tuning task; base.task is the pretraining's */
    FinetuneBaseSpec base;          /* its pretrain.seed and eval_examples: ft's */
    FinetuneConfig   ft;
    FinetuneRuns     runs;
    int              threads;
    const char      *base_path;     /* a base to load instead of pretraining, or NULL */
    const char      *cache_dir;     /* where a pretrained base is kept between runs */
    const char      *log_path, *plot_path;
} Options;

static unsigned parse_methods(const char *list)
{
    static const char *const names[] = { "full", "lora", "qlora", "none", NULL };
    char items[4][CLI_ITEM_LEN];
    unsigned bits = 0;
    int n = cli_list("--methods", list, items, 4);
    for (int i = 0; i < n; i++) {
        int m = cli_choice("--methods", items[i], names);
        if (m == 3 && n > 1)
            cli_usage_error("--methods '%s': none (the base only) goes alone", list);
        bits |= m == 3 ? 0u : 1u << m;
    }
    return bits;
}

enum {
    FLAG_PRETRAIN_TASK = 256, FLAG_TASK, FLAG_LAYERS, FLAG_HEADS, FLAG_EMBD, FLAG_PRETRAIN_STEPS,
    FLAG_PRETRAIN_BATCH, FLAG_BASE, FLAG_CACHE_DIR, FLAG_STEPS, FLAG_BATCH, FLAG_LR_PRETRAIN,
    FLAG_LR_FULL, FLAG_LR_LORA, FLAG_LORA_ALPHA, FLAG_LORA_TARGETS, FLAG_RANKS, FLAG_QLORA_RANK,
    FLAG_METHODS, FLAG_PRETRAIN_DECAY, FLAG_PRETRAIN_EVAL_EVERY, FLAG_SEED, FLAG_THREADS,
    FLAG_KERNELS, FLAG_EVAL_EXAMPLES, FLAG_LOG, FLAG_PLOT,
};

/* The values that are more than a number or a name: lists. */
static void set_value(void *opts, int id, const char *flag, const char *arg)
{
    Options *o = opts;
    char err[256];
    switch (id) {
    case FLAG_LORA_TARGETS:
        if (!lora_targets_parse(arg, &o->ft.targets, err, sizeof err))
            cli_usage_error("%s: %s", flag, err);
        break;
    case FLAG_RANKS:
        o->runs.n_ranks = cli_int_list(flag, arg, o->runs.ranks, FINETUNE_MAX_RANKS, 1, 4096);
        break;
    case FLAG_METHODS: o->runs.methods = parse_methods(arg); break;
    }
}

/* Indexed like SchedDecay. */
static const char *const decay_names[] = { "constant", "cosine", NULL };

#define FIELD(f) offsetof(Options, f)
static const Setting SETTINGS[] = {
    { .heading = "Tasks and model:" },
    { .name = "pretrain-task", .id = FLAG_PRETRAIN_TASK, .type = SETTING_STRING,
      .offset = FIELD(base.task), .choices = task_names, .def = "add", .arg = "NAME",
      .help = "the base's task" },
    { .name = "task", .id = FLAG_TASK, .type = SETTING_STRING, .offset = FIELD(task),
      .choices = task_names, .def = "sub", .arg = "NAME", .help = "the fine-tuning task" },
    { .name = "layers", .id = FLAG_LAYERS, .type = SETTING_INT, .offset = FIELD(base.layers),
      .lo = 1, .hi = 64, .def = "2", .arg = "N", .help = "the base model's blocks" },
    { .name = "heads", .id = FLAG_HEADS, .type = SETTING_INT, .offset = FIELD(base.heads),
      .lo = 1, .hi = 64, .def = "8", .arg = "N", .help = "the base model's heads" },
    { .name = "embd", .id = FLAG_EMBD, .type = SETTING_INT, .offset = FIELD(base.embd),
      .lo = 1, .hi = 4096, .def = "144", .arg = "N", .help = "the base model's width" },
    { .name = "pretrain-steps", .id = FLAG_PRETRAIN_STEPS, .type = SETTING_LONG,
      .offset = FIELD(base.pretrain.steps), .lo = 1, .hi = (double)(1L << 30), .def = "4000",
      .arg = "N", .help = "steps of pretraining" },
    { .name = "pretrain-batch", .id = FLAG_PRETRAIN_BATCH, .type = SETTING_INT,
      .offset = FIELD(base.pretrain.batch), .lo = 1, .hi = 1 << 16, .def = "64", .arg = "N",
      .help = "rows per pretraining step" },
    { .name = "base", .id = FLAG_BASE, .type = SETTING_STRING, .offset = FIELD(base_path),
      .arg = "FILE", .help = "load this base instead of pretraining one" },
    { .name = "cache-dir", .id = FLAG_CACHE_DIR, .type = SETTING_FOLDER,
      .offset = FIELD(cache_dir), .def = "build/lora_finetune", .arg = "DIR",
      .help = "where the pretrained base is kept" },
    { .heading = "Fine-tuning:" },
    { .name = "steps", .id = FLAG_STEPS, .type = SETTING_LONG, .offset = FIELD(ft.steps),
      .lo = 1, .hi = (double)(1L << 30), .def = "2000", .arg = "N",
      .help = "steps of every fine-tuning run" },
    { .name = "batch", .id = FLAG_BATCH, .type = SETTING_INT, .offset = FIELD(ft.batch),
      .lo = 1, .hi = 1 << 16, .def = "64", .arg = "N", .help = "rows per step" },
    { .name = "lr-pretrain", .id = FLAG_LR_PRETRAIN, .type = SETTING_DOUBLE,
      .offset = FIELD(base.pretrain.lr), .lo = 0.0, .hi = 10.0, .def = "1e-3", .arg = "X",
      .help = "pretraining's learning rate" },
    { .name = "pretrain-decay", .id = FLAG_PRETRAIN_DECAY, .type = SETTING_CHOICE,
      .offset = FIELD(base.pretrain.decay), .choices = decay_names, .def = "cosine", .arg = "NAME",
      .help = "pretraining's decay after the warmup: constant\nor cosine to 0" },
    { .name = "pretrain-eval-every", .id = FLAG_PRETRAIN_EVAL_EVERY, .type = SETTING_LONG,
      .offset = FIELD(base.pretrain.eval_every), .lo = 0, .hi = (double)(1L << 30), .def = "0",
      .arg = "N", .help = "every N pretraining steps, print the base's\nvalidation loss "
      "and exact match; 0: off" },
    { .name = "lr-full", .id = FLAG_LR_FULL, .type = SETTING_DOUBLE, .offset = FIELD(ft.lr_full),
      .lo = 0.0, .hi = 10.0, .def = "5e-4", .arg = "X",
      .help = "full fine-tuning's learning rate" },
    { .name = "lr-lora", .id = FLAG_LR_LORA, .type = SETTING_DOUBLE, .offset = FIELD(ft.lr_lora),
      .lo = 0.0, .hi = 10.0, .def = "1e-2", .arg = "X",
      .help = "LoRA's and QLoRA's learning rate" },
    { .name = "lora-alpha", .id = FLAG_LORA_ALPHA, .type = SETTING_DOUBLE,
      .offset = FIELD(ft.alpha), .lo = 1e-6, .hi = 1e6, .def = "16", .arg = "X",
      .help = "the adapters' scale is alpha / r" },
    { .name = "lora-targets", .id = FLAG_LORA_TARGETS, .type = SETTING_CUSTOM,
      .set = set_value, .def = "q,v,mlp", .arg = "LIST", .help = "among q, k, v, o, mlp" },
    { .name = "ranks", .id = FLAG_RANKS, .type = SETTING_CUSTOM, .set = set_value,
      .def = "1,2,4,8,16", .arg = "LIST", .help = "LoRA ranks" },
    { .name = "qlora-rank", .id = FLAG_QLORA_RANK, .type = SETTING_INT,
      .offset = FIELD(runs.qlora_rank), .lo = 1, .hi = 4096, .def = "8", .arg = "N",
      .help = "rank of the QLoRA run" },
    { .name = "methods", .id = FLAG_METHODS, .type = SETTING_CUSTOM, .set = set_value,
      .def = "full,lora,qlora", .arg = "LIST",
      .help = "among full, lora, qlora; none scores the base only" },
    { .heading = "Run and output:" },
    { .name = "seed", .id = FLAG_SEED, .type = SETTING_LONG, .offset = FIELD(ft.seed),
      .lo = 0, .hi = (double)(1L << 40), .def = "1", .arg = "N", .help = "weights and data" },
    { .name = "threads", .id = FLAG_THREADS, .type = SETTING_INT, .offset = FIELD(threads),
      .lo = 0, .hi = 1024, .def = "1", .arg = "N",
      .help = "0 = one per core (in the fast mode the thread count\n"
              "changes the order of sums, and the base's pretraining\nwith it)" },
    { .name = "kernels", .id = FLAG_KERNELS, .type = SETTING_CUSTOM,
      .set = settings_set_kernels, .arg = "K", .help = SETTINGS_KERNELS_HELP },
    { .name = "eval-examples", .id = FLAG_EVAL_EXAMPLES, .type = SETTING_INT,
      .offset = FIELD(ft.eval_examples), .lo = 1, .hi = 1 << 20, .def = "1000", .arg = "N",
      .help = "validation examples per accuracy" },
    { .name = "log", .id = FLAG_LOG, .type = SETTING_STRING, .offset = FIELD(log_path),
      .arg = "FILE", .help = "the table as TSV" },
    { .name = "plot", .id = FLAG_PLOT, .type = SETTING_STRING, .offset = FIELD(plot_path),
      .arg = "FILE", .help = "the figure (PNG, gnuplot; needs --log)" },
    { .heading = "  -h, --help          this text" },
};
#undef FIELD
enum { N_SETTINGS = sizeof SETTINGS / sizeof SETTINGS[0] };

static void usage(void)
{
    printf("Usage: lora_finetune [OPTION]...\n"
           "Pretrain a small GPT on one task, then fine-tune it on another with full\n"
           "fine-tuning, LoRA at several ranks and QLoRA; measure trainable parameters,\n"
           "memory per category, step time and accuracy on the new and the old task.\n\n");
    settings_usage(SETTINGS, N_SETTINGS);
    printf("\nExample (the figure of docs/lora.md; about 5 minutes on one core):\n"
           "  lora_finetune --log lora_finetune.tsv --plot lora_finetune.png\n");
}

static Options parse(int argc, char **argv)
{
    Options o = { 0 };
    settings_defaults(SETTINGS, N_SETTINGS, &o);
    settings_parse(SETTINGS, N_SETTINGS, &o, NULL, FLAG_PRETRAIN_TASK, usage, argc, argv);
    if (strcmp(o.task, o.base.task) == 0)
        cli_usage_error("--task and --pretrain-task are both '%s': fine-tuning needs a new task",
                        o.task);
    if (o.plot_path && !o.log_path)
        cli_usage_error("--plot needs --log (the figure is drawn from that TSV)");
    o.base.pretrain.seed = o.ft.seed;
    o.base.pretrain.eval_examples = o.ft.eval_examples;
    return o;
}

static Task *open_task(const char *name)
{
    char err[256];
    Task *t = task_new(&(TaskSpec){ .name = name }, err, sizeof err);
    if (!t)
        cli_die(1, "%s", err);
    return t;
}

/* Every loop draws its own progress line: pretraining, then one per run; the pretraining's
 * scores are printed as they come. */
static void watch_begin(void *ctx, long steps)
{
    progress_start(ctx, 0, steps, steps / 4);
}

static void watch_step(void *ctx, long step, double loss, long long tokens, const char *label)
{
    progress_update(ctx, step, loss, tokens, label);
}

static void watch_scores(void *ctx, const char *label, long step, double loss, double val_loss,
                         double exact)
{
    (void)ctx;
    printf("%s step %ld: loss %.4f, validation loss %.4f, exact match %.1f%%\n", label, step,
           loss, val_loss, 100.0 * exact);
    fflush(stdout);
}

static void watch_end(void *ctx)
{
    progress_finish(ctx);
}

static FinetuneWatch watch(Progress *p)
{
    return (FinetuneWatch){ .begin = watch_begin, .step = watch_step, .scores = watch_scores,
                            .end = watch_end, .ctx = p };
}

/* The adapters of every run requested must fit the base: the largest rank can be too large. */
static void check_adapters(const GptConfig *m, const Options *o, const char *where)
{
    char err[160];
    if (!finetune_runs_fit(&o->runs, &o->ft, m, err, sizeof err))
        cli_die(1, "%s: %s", where, err);
}

/* The base: --base, or the cached one for these settings, or a new one pretrained and cached
 * (analysis/finetune_base.h: what the cache's name holds, and why). */
static const char *base_file(const Options *o, const Task *old, const Task *task, char *path,
                             size_t len)
{
    if (o->base_path)
        return o->base_path;
    finetune_base_cache_path(&o->base, o->cache_dir, path, len);
    if (access(path, R_OK) == 0) {
        printf("base: %s (cached; delete it to pretrain again)\n", path);
        return path;
    }
    GptConfig cfg = finetune_base_config(&o->base, old, task);
    char err[1024];
    if (!gpt_config_check(&cfg, err, sizeof err))
        cli_usage_error("%s", err);
    check_adapters(&cfg, o, "the base to pretrain");  /* before, not after, the pretraining */
    printf("pretraining on %s: %ld steps (the base is cached in %s)\n", o->base.task,
           o->base.pretrain.steps, o->cache_dir);
    Progress progress;
    FinetuneWatch w = watch(&progress);
    if (!finetune_base_make(&o->base, &cfg, old, &w, o->cache_dir, path, err, sizeof err))
        cli_die(1, "%s", err);
    return path;
}

/* The base must cover the tasks: the vocabulary and the rows of both. */
static void check_base(const char *path, const Task *old, const Task *task, const Options *o)
{
    GptConfig m;
    char err[1024];
    if (!finetune_base_covers(path, old, task, &m, err, sizeof err))
        cli_die(1, "%s", err);
    check_adapters(&m, o, path);
    char desc[160];
    printf("base model: %s\n", gpt_config_describe(&m, desc, sizeof desc));
}

static void print_result(const FinetuneResult *r)
{
    char run[32];
    if (r->method == FINETUNE_BASE) {
        printf("%-10s %8s %7s %9s %9s %9s %9s %10s %7s %7.1f%% %7.1f%% %8.4f %8s\n", "base",
               "-", "-", "-", "-", "-", "-", "-", "-", 100.0 * r->acc_new, 100.0 * r->acc_old,
               r->loss_old, "-");
        return;
    }
    char off[16] = "       -";
    if (!isnan(r->acc_old_off))
        snprintf(off, sizeof off, "%7.1f%%", 100.0 * r->acc_old_off);
    printf("%-10s %8zu %6.2f%% %9zu %9zu %9zu %9zu %10zu %7.2f %7.1f%% %7.1f%% %8.4f %s\n",
           finetune_run_name(r->method, r->rank, run, sizeof run),
           r->trainable, 100.0 * (double)r->trainable / (double)r->params, r->peak[MEM_PARAM],
           r->peak[MEM_GRAD], r->peak[MEM_OPTIM], r->peak[MEM_ACT], r->frozen_bytes,
           r->ms_per_step, 100.0 * r->acc_new, 100.0 * r->acc_old, r->loss_old, off);
}

/* The targets, from the measured rows: LoRA at r = 8 against full fine-tuning, and the
 * QLoRA base against the same base in fp32. */
static void print_targets(const FinetuneResult *res, int n)
{
    FinetuneSummary s = finetune_summary(res, n);
    if (s.lora8)
        printf("LoRA r=8: trains %.2f%% of the parameters; grad + optim bytes %.2f%% of full "
               "fine-tuning's; accuracy on the new task %.1f%% of full fine-tuning's\n",
               s.lora8_trainable, 100.0 * s.lora8_states, s.lora8_accuracy);
    if (s.qlora)
        printf("QLoRA: the frozen base takes %zu bytes, %.4f of its %zu fp32 bytes\n",
               s.qlora_frozen, (double)s.qlora_frozen / (double)s.qlora_fp32, s.qlora_fp32);
}

/* The runs after the base's row in res[1..], each from a fresh copy of the base, and their log
 * rows: how many. */
static int run_all(const Options *o, const char *base, const Task *task, const Task *old,
                   TsvWriter *log, FinetuneResult *res)
{
    FinetuneMethod method[FINETUNE_MAX_RUNS];
    int rank[FINETUNE_MAX_RUNS], n = finetune_runs_order(&o->runs, method, rank);
    char err[512];
    for (int i = 0; i < n; i++) {
        Progress progress;
        FinetuneWatch w = watch(&progress);
        if (!finetune_run(base, method[i], rank[i], task, old, &o->ft, &w, &res[i], err,
                          sizeof err))
            cli_die(1, "%s", err);
        if (log && !finetune_write_row(log, &res[i]))
            cli_die(1, "write failed (disk full?)");
    }
    return n;
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    Options o = parse(argc, argv);
    par_set_threads(o.threads);
    Task *old = open_task(o.base.task), *task = open_task(o.task);
    char cached[1024];
    const char *base = base_file(&o, old, task, cached, sizeof cached);
    check_base(base, old, task, &o);

    TsvWriter *log = NULL;
    char err[512];
    if (o.log_path && !(log = tsv_open(o.log_path, FINETUNE_COLUMNS, err, sizeof err)))
        cli_die(1, "%s", err);
    FinetuneResult res[FINETUNE_MAX_RUNS + 1];
    if (!finetune_base(base, task, old, o.ft.eval_examples, &res[0], err, sizeof err))
        cli_die(1, "%s", err);
    /* The base's recipe (docs/lora.md, "The base's recipe"): with 4 heads some seeds stay on
     * the plateau where the sum's digits are learned and the carries are not (loss 0.46, about
     * 9% of add), for 3000 steps and more, at lr 1e-3 and at 2e-3; with 8 heads seeds 1-5 leave
     * it by step 1700 of 4000. bench/claims.sh checks 95% over seeds. */
    if (res[0].acc_old < 0.9)
        printf("note: the base solves only %.1f%% of %s, so the forgetting columns say little; "
               "pretrain longer (--pretrain-steps)\n", 100.0 * res[0].acc_old, o.base.task);
    if (log && !finetune_write_row(log, &res[0]))
        cli_die(1, "write failed (disk full?)");
    int n = 1 + run_all(&o, base, task, old, log, res + 1);
    printf("\nfine-tuned on %s, %ld steps each; peak bytes while training\n", o.task, o.ft.steps);
    char old_loss[32], old_off[32];
    snprintf(old_loss, sizeof old_loss, "%s loss", o.base.task);
    snprintf(old_off, sizeof old_off, "%s off", o.base.task);
    printf("%-10s %8s %7s %9s %9s %9s %9s %10s %7s %8s %8s %8s %8s\n", "run", "trained",
           "share", "param", "grad", "optim", "act", "frozen", "ms/step", o.task,
           o.base.task, old_loss, old_off);
    for (int i = 0; i < n; i++)
        print_result(&res[i]);
    print_targets(res, n);
    if (log && !tsv_close(log, err, sizeof err))
        cli_die(1, "%s", err);
    if (o.plot_path && plot_run(TAPEGRAD_SOURCE_DIR "/examples/lora_finetune/lora_finetune.gp",
                                o.log_path, o.plot_path) == PLOT_OK)
        printf("figure: %s\n", o.plot_path);
    task_free(old);
    task_free(task);
    return 0;
}

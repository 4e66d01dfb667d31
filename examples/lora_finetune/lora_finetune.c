/* lora_finetune: parameter-efficient fine-tuning, measured. A tiny GPT is pretrained on one task
 * (3-digit addition by default) and then fine-tuned on another (subtraction) in several ways:
 * every parameter (full fine-tuning), LoRA at ranks 1, 2, 4, 8 and 16 on the attention query
 * and value projections, and QLoRA at rank 8 (the same adapters on a base stored as NF4).
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
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autograd/parallel.h"
#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/tsv.h"
#include "examples/lora_finetune/lora_finetune.h"
#include "nn/gpt_lora.h"
#include "nn/gpt_snapshot.h"

static const char *const COLUMNS[] = {
    "run", "method", "rank", "params", "trainable", "trainable_pct", "peak_param", "peak_grad",
    "peak_optim", "peak_act", "peak_temp", "frozen_bytes", "frozen_ratio", "ms_per_step",
    "final_loss", "acc_new", "acc_old", "loss_old", NULL,
};

static void usage(void)
{
    printf("Usage: lora_finetune [OPTION]...\n"
           "Pretrain a small GPT on one task, then fine-tune it on another with full\n"
           "fine-tuning, LoRA at several ranks and QLoRA; measure trainable parameters,\n"
           "memory per category, step time and accuracy on the new and the old task.\n\n"
           "Tasks and model:\n"
           "  --pretrain-task NAME  the base's task (default add)\n"
           "  --task NAME           the fine-tuning task (default sub)\n"
           "  --layers N, --heads N, --embd N   the base model (default 2, 4, 144)\n"
           "  --pretrain-steps N    (default 1500)\n"
           "  --pretrain-batch N    rows per pretraining step (default 64)\n"
           "  --base FILE           load this base instead of pretraining one\n"
           "  --cache-dir DIR       where the pretrained base is kept (default\n"
           "                        build/lora_finetune)\n"
           "Fine-tuning:\n"
           "  --steps N             steps of every fine-tuning run (default 2000)\n"
           "  --batch N             rows per step (default 64)\n"
           "  --lr-pretrain X, --lr-full X, --lr-lora X   learning rates (default 1e-3,\n"
           "                        5e-4, 5e-3); LoRA and QLoRA use --lr-lora\n"
           "  --lora-alpha X        the adapters' scale is alpha / r (default 16)\n"
           "  --lora-targets LIST   among q, k, v, o, mlp (default q,v)\n"
           "  --ranks LIST          LoRA ranks (default 1,2,4,8,16)\n"
           "  --qlora-rank N        rank of the QLoRA run (default 8)\n"
           "  --methods LIST        among full, lora, qlora (default all three)\n"
           "Run and output:\n"
           "  --seed N              (default 1)\n"
           "  --threads N           0 = one per core (default 1: the thread count changes\n"
           "                        the order of sums, and the base's pretraining with it)\n"
           "  --eval-examples N     validation examples per accuracy (default 1000)\n"
           "  --log FILE            the table as TSV\n"
           "  --plot FILE           the figure (PNG, gnuplot; needs --log)\n"
           "  -h, --help            this text\n\n"
           "Example (the figure of docs/lora.md; about 5 minutes on one core):\n"
           "  lora_finetune --log lora_finetune.tsv --plot lora_finetune.png\n");
}

enum { ITEM_LEN = 16 };

/* The comma-separated items of a flag's value into items: their count, 1 to max. An empty or
 * overlong item, or more than max, is a usage error naming the flag. */
static int split_list(const char *flag, const char *list, char items[][ITEM_LEN], int max)
{
    int n = 0;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= ITEM_LEN || n == max)
            cli_usage_error("%s '%s': give 1 to %d items separated by commas", flag, list, max);
        memcpy(items[n], p, len);
        items[n++][len] = '\0';
        p += len;
        if (*p == '\0')
            return n;
    }
}

static int parse_ranks(const char *list, int *ranks)
{
    char items[MAX_RANKS][ITEM_LEN];
    int n = split_list("--ranks", list, items, MAX_RANKS);
    for (int i = 0; i < n; i++)
        ranks[i] = (int)cli_long("--ranks", items[i], 1, 4096);
    return n;
}

static unsigned parse_methods(const char *list)
{
    static const char *const names[] = { "full", "lora", "qlora", NULL };
    char items[3][ITEM_LEN];
    unsigned bits = 0;
    int n = split_list("--methods", list, items, 3);
    for (int i = 0; i < n; i++)
        bits |= 1u << cli_choice("--methods", items[i], names);
    return bits;
}

enum {
    OPT_PRETRAIN_TASK = 256, OPT_TASK, OPT_LAYERS, OPT_HEADS, OPT_EMBD, OPT_PRETRAIN_STEPS,
    OPT_PRETRAIN_BATCH, OPT_BASE, OPT_CACHE, OPT_STEPS, OPT_BATCH, OPT_LR_PRETRAIN, OPT_LR_FULL,
    OPT_LR_LORA, OPT_ALPHA, OPT_TARGETS, OPT_RANKS, OPT_QLORA_RANK, OPT_METHODS, OPT_SEED,
    OPT_THREADS, OPT_EVAL, OPT_LOG, OPT_PLOT,
};

static void parse_option(Options *o, int c, const char *arg)
{
    char err[256];
    switch (c) {
    case OPT_PRETRAIN_TASK: o->pretrain_task = task_names[cli_choice("--pretrain-task", arg,
                                                                     task_names)]; break;
    case OPT_TASK: o->task = task_names[cli_choice("--task", arg, task_names)]; break;
    case OPT_LAYERS: o->layers = (int)cli_long("--layers", arg, 1, 64); break;
    case OPT_HEADS: o->heads = (int)cli_long("--heads", arg, 1, 64); break;
    case OPT_EMBD: o->embd = (int)cli_long("--embd", arg, 1, 4096); break;
    case OPT_PRETRAIN_STEPS: o->pretrain_steps = cli_long("--pretrain-steps", arg, 1, 1L << 30);
        break;
    case OPT_PRETRAIN_BATCH:
        o->pretrain_batch = (int)cli_long("--pretrain-batch", arg, 1, 1 << 16);
        break;
    case OPT_BASE: o->base_path = arg; break;
    case OPT_CACHE: o->cache_dir = cli_folder("--cache-dir", arg); break;
    case OPT_STEPS: o->steps = cli_long("--steps", arg, 1, 1L << 30); break;
    case OPT_BATCH: o->batch = (int)cli_long("--batch", arg, 1, 1 << 16); break;
    case OPT_LR_PRETRAIN: o->lr_pretrain = cli_double("--lr-pretrain", arg, 0.0, 10.0); break;
    case OPT_LR_FULL: o->lr_full = cli_double("--lr-full", arg, 0.0, 10.0); break;
    case OPT_LR_LORA: o->lr_lora = cli_double("--lr-lora", arg, 0.0, 10.0); break;
    case OPT_ALPHA: o->alpha = (float)cli_double("--lora-alpha", arg, 1e-6, 1e6); break;
    case OPT_TARGETS:
        if (!lora_targets_parse(arg, &o->targets, err, sizeof err))
            cli_usage_error("--lora-targets: %s", err);
        break;
    case OPT_RANKS: o->n_ranks = parse_ranks(arg, o->ranks); break;
    case OPT_QLORA_RANK: o->qlora_rank = (int)cli_long("--qlora-rank", arg, 1, 4096); break;
    case OPT_METHODS: o->methods = parse_methods(arg); break;
    case OPT_SEED: o->seed = cli_long("--seed", arg, 0, 1L << 40); break;
    case OPT_THREADS: o->threads = (int)cli_long("--threads", arg, 0, 1024); break;
    case OPT_EVAL: o->eval_examples = (int)cli_long("--eval-examples", arg, 1, 1 << 20); break;
    case OPT_LOG: o->log_path = arg; break;
    case OPT_PLOT: o->plot_path = arg; break;
    }
}

static Options parse(int argc, char **argv)
{
    Options o = { .pretrain_task = "add", .task = "sub", .layers = 2, .heads = 4, .embd = 144,
                  .pretrain_steps = 1500, .steps = 2000, .batch = 64,
                  .pretrain_batch = 64, .lr_pretrain = 1e-3,
                  .lr_full = 5e-4, .lr_lora = 5e-3, .alpha = 16.0f,
                  .targets = LORA_TARGET_Q | LORA_TARGET_V, .ranks = { 1, 2, 4, 8, 16 },
                  .n_ranks = 5, .qlora_rank = 8, .methods = 7, .seed = 1, .threads = 1,
                  .eval_examples = 1000,
                  .cache_dir = "build/lora_finetune" };
    static const char *const long_names[] = {
        "pretrain-task", "task", "layers", "heads", "embd", "pretrain-steps", "pretrain-batch",
        "base",
        "cache-dir", "steps", "batch", "lr-pretrain", "lr-full", "lr-lora", "lora-alpha",
        "lora-targets", "ranks", "qlora-rank", "methods", "seed", "threads", "eval-examples",
        "log", "plot",
    };
    enum { N_LONG = sizeof long_names / sizeof long_names[0] };
    struct option options[N_LONG + 2];
    for (int i = 0; i < N_LONG; i++)
        options[i] = (struct option){ long_names[i], required_argument, NULL,
                                      OPT_PRETRAIN_TASK + i };
    options[N_LONG] = (struct option){ "help", no_argument, NULL, 'h' };
    options[N_LONG + 1] = (struct option){ 0, 0, 0, 0 };
    int c;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        if (c == 'h') {
            usage();
            exit(0);
        }
        if (c == ':')
            cli_usage_error("%s needs a value", argv[optind - 1]);
        if (c == '?')
            cli_usage_error("unknown option '%s'", argv[optind - 1]);
        parse_option(&o, c, optarg);
    }
    if (optind < argc)
        cli_usage_error("unexpected argument '%s'", argv[optind]);
    if (strcmp(o.task, o.pretrain_task) == 0)
        cli_usage_error("--task and --pretrain-task are both '%s': fine-tuning needs a new task",
                        o.task);
    if (o.plot_path && !o.log_path)
        cli_usage_error("--plot needs --log (the figure is drawn from that TSV)");
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

/* The adapters of every run requested must fit the base: the largest rank can be too large. */
static void check_adapters(const GptConfig *m, const Options *o, const char *where)
{
    LoraConfig lc = { .rank = o->qlora_rank, .alpha = o->alpha, .targets = o->targets };
    for (int i = 0; i < o->n_ranks; i++)
        lc.rank = o->ranks[i] > lc.rank ? o->ranks[i] : lc.rank;
    char err[160];
    bool adapters = o->methods & ((1u << METHOD_LORA) | (1u << METHOD_QLORA));
    if (adapters && !lora_config_check(&lc, m, err, sizeof err))
        cli_die(1, "%s: %s", where, err);
}

/* The base: --base, or the cached one for these settings, or a new one pretrained and cached.
 * The thread count is part of the name: it decides how sums are split, so two counts train
 * two different bases from the same seed. */
static const char *base_file(const Options *o, const Task *old, const Task *task, char *path,
                             size_t len)
{
    if (o->base_path)
        return o->base_path;
    snprintf(path, len,
             "%s/base-%s-L%d-H%d-C%d-steps%ld-lr%g-batch%d-seed%ld-threads%d.safetensors",
             o->cache_dir, o->pretrain_task, o->layers, o->heads, o->embd, o->pretrain_steps,
             o->lr_pretrain, o->pretrain_batch, o->seed, par_threads());
    if (access(path, R_OK) == 0) {
        printf("base: %s (cached; delete it to pretrain again)\n", path);
        return path;
    }
    int T = task_seq_len(old) > task_seq_len(task) ? task_seq_len(old) : task_seq_len(task);
    GptConfig cfg = { .vocab_size = TASK_VOCAB, .max_seq = T, .n_layer = o->layers,
                      .n_head = o->heads, .n_embd = o->embd, .tied = true, .fused_qkv = false };
    char err[256];
    if (!gpt_config_check(&cfg, err, sizeof err))
        cli_usage_error("%s", err);
    check_adapters(&cfg, o, "the base to pretrain");  /* before, not after, the pretraining */
    printf("pretraining on %s: %ld steps (the base is cached in %s)\n", o->pretrain_task,
           o->pretrain_steps, o->cache_dir);
    Gpt *m = gpt_new(&cfg, (uint64_t)o->seed);
    pretrain(m, old, o);
    mkdir(o->cache_dir, 0777);      /* an existing folder is fine; a real failure shows below */
    SnapshotError serr;
    if (!gpt_snapshot_save(m, path, &serr))
        cli_die(1, "%s", serr.message);
    gpt_free(m);
    return path;
}

/* The base must cover the tasks: the vocabulary and the rows of both. */
static void check_base(const char *path, const Task *old, const Task *task, const Options *o)
{
    SnapshotReader *r;
    SnapshotError err;
    GptConfig m;
    if (!(r = snapshot_open(path, &err)) ||
        !gpt_snapshot_read_config(r, path, "model", &m, &err))
        cli_die(1, "%s", err.message);
    snapshot_close(r);
    if (m.vocab_size < TASK_VOCAB || m.max_seq < task_seq_len(task) ||
        m.max_seq < task_seq_len(old))
        cli_die(1, "%s: V = %d, T = %d does not fit tasks %s and %s (V %d, rows of %d and %d)",
                path, m.vocab_size, m.max_seq, o->pretrain_task, o->task, TASK_VOCAB,
                task_seq_len(old), task_seq_len(task));
    check_adapters(&m, o, path);
    char desc[160];
    printf("base model: %s\n", gpt_config_describe(&m, desc, sizeof desc));
}

/* A number, or an empty cell where it does not apply (gnuplot and spreadsheets read it as
 * missing). */
static void log_num(TsvWriter *log, double v)
{
    if (isnan(v))
        tsv_str(log, "");
    else
        tsv_num(log, v);
}

static void log_result(TsvWriter *log, const Result *r, const char *run)
{
    tsv_str(log, run);
    tsv_str(log, method_name(r->method));
    tsv_int(log, r->rank);
    tsv_int(log, (long long)r->params);
    tsv_int(log, (long long)r->trainable);
    tsv_num(log, 100.0 * (double)r->trainable / (double)r->params);
    bool base = r->method == METHOD_BASE;
    for (int k = 0; k < MEM_NCAT; k++)
        log_num(log, base ? NAN : (double)r->peak[k]);
    log_num(log, base ? NAN : (double)r->frozen_bytes);
    log_num(log, base ? NAN : (double)r->frozen_bytes / (double)r->base_fp32_bytes);
    log_num(log, r->ms_per_step);
    log_num(log, r->final_loss);
    tsv_num(log, r->acc_new);
    tsv_num(log, r->acc_old);
    tsv_num(log, r->loss_old);
    if (!tsv_end_row(log))
        cli_die(1, "write failed (disk full?)");
}

static void print_result(const Result *r)
{
    char run[32];
    if (r->method == METHOD_BASE) {
        printf("%-10s %8s %7s %9s %9s %9s %9s %10s %7s %7.1f%% %7.1f%% %8.4f\n", "base", "-",
               "-", "-", "-", "-", "-", "-", "-", 100.0 * r->acc_new, 100.0 * r->acc_old,
               r->loss_old);
        return;
    }
    printf("%-10s %8zu %6.2f%% %9zu %9zu %9zu %9zu %10zu %7.2f %7.1f%% %7.1f%% %8.4f\n",
           run_name(r->method, r->rank, run, sizeof run),
           r->trainable, 100.0 * (double)r->trainable / (double)r->params, r->peak[MEM_PARAM],
           r->peak[MEM_GRAD], r->peak[MEM_OPTIM], r->peak[MEM_ACT], r->frozen_bytes,
           r->ms_per_step, 100.0 * r->acc_new, 100.0 * r->acc_old, r->loss_old);
}

/* The targets, from the measured rows: LoRA at r = 8 against full fine-tuning, and the
 * QLoRA base against the same base in fp32. */
static void print_targets(const Result *res, int n)
{
    const Result *full = NULL, *lora8 = NULL, *qlora = NULL;
    for (int i = 0; i < n; i++) {
        if (res[i].method == METHOD_FULL)
            full = &res[i];
        if (res[i].method == METHOD_LORA && res[i].rank == 8)
            lora8 = &res[i];
        if (res[i].method == METHOD_QLORA)
            qlora = &res[i];
    }
    if (full && lora8 && full->acc_new > 0.0) {
        double states = (double)(lora8->peak[MEM_GRAD] + lora8->peak[MEM_OPTIM]) /
                        (double)(full->peak[MEM_GRAD] + full->peak[MEM_OPTIM]);
        printf("LoRA r=8: trains %.2f%% of the parameters; grad + optim bytes %.2f%% of full "
               "fine-tuning's; accuracy on the new task %.1f%% of full fine-tuning's\n",
               100.0 * (double)lora8->trainable / (double)lora8->params, 100.0 * states,
               100.0 * lora8->acc_new / full->acc_new);
    }
    if (qlora)
        printf("QLoRA: the frozen base takes %zu bytes, %.4f of its %zu fp32 bytes\n",
               qlora->frozen_bytes, (double)qlora->frozen_bytes / (double)qlora->base_fp32_bytes,
               qlora->base_fp32_bytes);
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    Options o = parse(argc, argv);
    par_set_threads(o.threads);
    Task *old = open_task(o.pretrain_task), *task = open_task(o.task);
    char cached[1024];
    const char *base = base_file(&o, old, task, cached, sizeof cached);
    check_base(base, old, task, &o);

    TsvWriter *log = NULL;
    char err[512];
    if (o.log_path && !(log = tsv_open(o.log_path, COLUMNS, err, sizeof err)))
        cli_die(1, "%s", err);
    Result res[MAX_RANKS + 3];
    res[0] = base_result(base, task, old, &o);
    /* Pretraining on add is near its edge at these settings: the 1500 steps reach 97.3% at 1
     * thread, and below 10% at 2 (the model has not found the carries yet). */
    if (res[0].acc_old < 0.9)
        printf("note: the base solves only %.1f%% of %s, so the forgetting columns say little; "
               "pretrain longer (--pretrain-steps)\n", 100.0 * res[0].acc_old, o.pretrain_task);
    int n = 1;
    if (log)
        log_result(log, &res[0], "base");
    for (int i = -1; i <= o.n_ranks; i++) {
        Method method = i < 0 ? METHOD_FULL : i < o.n_ranks ? METHOD_LORA : METHOD_QLORA;
        int rank = i < 0 ? 0 : i < o.n_ranks ? o.ranks[i] : o.qlora_rank;
        if (!(o.methods & (1u << method)))
            continue;
        res[n] = finetune(base, method, rank, task, old, &o);
        char run[32];
        if (log)
            log_result(log, &res[n], run_name(method, rank, run, sizeof run));
        n++;
    }
    printf("\nfine-tuned on %s, %ld steps each; peak bytes while training\n", o.task, o.steps);
    char old_loss[32];
    snprintf(old_loss, sizeof old_loss, "%s loss", o.pretrain_task);
    printf("%-10s %8s %7s %9s %9s %9s %9s %10s %7s %8s %8s %8s\n", "run", "trained", "share",
           "param", "grad", "optim", "act", "frozen", "ms/step", o.task, o.pretrain_task,
           old_loss);
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

/* backprop_strategies: how much memory backprop needs, and what recomputation buys back.
 *
 * A chain of n MLP layers (analysis/mlp_chain.h: x_{j+1} = gelu(x_j W_j + b_j) at width W,
 * batch B) is run forward and backward with each checkpoint strategy of autograd/checkpoint.h.
 * For every run the program measures the peak of the act category (mem_reset_peaks, then
 * mem_peak minus what was in use before), counts the segment forward evaluations (every run of
 * a layer's forward, recorded or not), times it, and checks its gradients against vanilla's bit
 * for bit.
 *
 *   the sweep      every --strategies entry for n = --n-from, ... --n-to: TSV --log, and two
 *                  figures, peak activation memory against n and forward evaluations against n
 *   the frontier   at n = --frontier-n: vanilla, memory-poor, sqrt, every:K for each --intervals
 *                  K and budget:S for each --budgets S: TSV --frontier-log and a figure of
 *                  memory against recompute, with the Pareto frontier drawn through the points
 *   --picture N    instead of both: which f nodes are held at each step of the backward pass
 *                  over N layers (the lecture's purple nodes), one line per step
 *
 * docs/checkpointing.md shows the figures and explains the numbers. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/ckpt_frontier.h"
#include "autograd/checkpoint.h"
#include "autograd/parallel.h"
#include "cli/settings.h"
#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/tsv.h"

enum { MAX_LIST = 64, NAME_LEN = CKPT_ROW_NAME };

typedef struct {
    int          n_from, n_to, n_step, width, batch, reps, threads, frontier_n, picture;
    long         seed;
    CkptStrategy strategies[MAX_LIST];
    int          n_strategies;
    int          budgets[MAX_LIST], n_budgets;
    int          intervals[MAX_LIST], n_intervals;
    const char  *strategies_text, *budgets_text, *intervals_text;    /* the flags' lists */
    const char  *log_path, *frontier_path, *memory_plot, *forwards_plot, *frontier_plot;
} Options;

enum { FLAG_N_FROM = 256, FLAG_N_TO, FLAG_N_STEP, FLAG_WIDTH, FLAG_BATCH, FLAG_STRATEGIES,
       FLAG_FRONTIER_N, FLAG_BUDGETS, FLAG_INTERVALS, FLAG_REPS, FLAG_SEED, FLAG_THREADS,
       FLAG_KERNELS,
       FLAG_PICTURE, FLAG_LOG, FLAG_FRONTIER_LOG, FLAG_PLOT_MEMORY, FLAG_PLOT_FORWARDS,
       FLAG_PLOT_FRONTIER };

/* The lists are kept as text by the table and split once every flag is read (parse). */
#define FIELD(f) offsetof(Options, f)
static const Setting SETTINGS[] = {
    { .name = "n-from", .id = FLAG_N_FROM, .type = SETTING_INT, .offset = FIELD(n_from),
      .lo = 1, .hi = 1024, .def = "4", .arg = "N", .help = "shortest chain of the sweep" },
    { .name = "n-to", .id = FLAG_N_TO, .type = SETTING_INT, .offset = FIELD(n_to),
      .lo = 1, .hi = 1024, .def = "64", .arg = "N", .help = "longest chain of the sweep" },
    { .name = "n-step", .id = FLAG_N_STEP, .type = SETTING_INT, .offset = FIELD(n_step),
      .lo = 1, .hi = 1024, .def = "4", .arg = "N", .help = "step between chain lengths" },
    { .name = "width", .id = FLAG_WIDTH, .type = SETTING_INT, .offset = FIELD(width),
      .lo = 1, .hi = 1 << 14, .def = "256", .arg = "W", .help = "layer width" },
    { .name = "batch", .id = FLAG_BATCH, .type = SETTING_INT, .offset = FIELD(batch),
      .lo = 1, .hi = 1 << 16, .def = "32", .arg = "B", .help = "rows per batch" },
    { .name = "strategies", .id = FLAG_STRATEGIES, .type = SETTING_STRING,
      .offset = FIELD(strategies_text),
      .def = "vanilla,memory-poor,sqrt,every:4,budget:2,budget:4,budget:8", .arg = "LIST",
      .help = "comma-separated strategies for the sweep and the picture:\n"
              "vanilla, memory-poor, sqrt, every:K, budget:S" },
    { .name = "frontier-n", .id = FLAG_FRONTIER_N, .type = SETTING_INT,
      .offset = FIELD(frontier_n), .lo = 0, .hi = 1024, .def = "64", .arg = "N",
      .help = "chain length of the memory-vs-recompute frontier; 0 skips it" },
    { .name = "budgets", .id = FLAG_BUDGETS, .type = SETTING_STRING,
      .offset = FIELD(budgets_text), .def = "1,2,3,4,5,6,8,10,12,16,24,32,48,64", .arg = "LIST",
      .help = "slots S of the budget:S points on the frontier" },
    { .name = "intervals", .id = FLAG_INTERVALS, .type = SETTING_STRING,
      .offset = FIELD(intervals_text), .def = "1,2,4,8,16,32,64", .arg = "LIST",
      .help = "intervals K of the every:K points on the frontier" },
    { .name = "reps", .id = FLAG_REPS, .type = SETTING_INT, .offset = FIELD(reps),
      .lo = 1, .hi = 1000, .def = "2", .arg = "N",
      .help = "timed passes per run, the fastest is reported" },
    { .name = "seed", .id = FLAG_SEED, .type = SETTING_LONG, .offset = FIELD(seed),
      .lo = 0, .hi = (double)(1L << 62), .def = "1", .arg = "N",
      .help = "seed of the weights and the data" },
    { .name = "threads", .id = FLAG_THREADS, .type = SETTING_INT, .offset = FIELD(threads),
      .lo = 0, .hi = 1024, .def = "0", .arg = "N", .help = "threads, 0 = one per core" },
    { .name = "kernels", .id = FLAG_KERNELS, .type = SETTING_CUSTOM,
      .set = settings_set_kernels, .arg = "K", .help = SETTINGS_KERNELS_HELP },
    { .name = "picture", .id = FLAG_PICTURE, .type = SETTING_INT, .offset = FIELD(picture),
      .lo = 1, .hi = 64, .arg = "N",
      .help = "print which f nodes each strategy holds at every backward\n"
              "step of a chain of N layers (1 to 64), and nothing else" },
    { .name = "log", .id = FLAG_LOG, .type = SETTING_STRING, .offset = FIELD(log_path),
      .def = "backprop_strategies.tsv", .arg = "FILE", .help = "sweep TSV" },
    { .name = "frontier-log", .id = FLAG_FRONTIER_LOG, .type = SETTING_STRING,
      .offset = FIELD(frontier_path), .def = "backprop_frontier.tsv", .arg = "FILE",
      .help = "frontier TSV" },
    { .name = "plot-memory", .id = FLAG_PLOT_MEMORY, .type = SETTING_STRING,
      .offset = FIELD(memory_plot), .def = "backprop_memory.png", .arg = "FILE",
      .help = "peak activation memory vs n, PNG" },
    { .name = "plot-forwards", .id = FLAG_PLOT_FORWARDS, .type = SETTING_STRING,
      .offset = FIELD(forwards_plot), .def = "backprop_forwards.png", .arg = "FILE",
      .help = "forward evaluations vs n, PNG" },
    { .name = "plot-frontier", .id = FLAG_PLOT_FRONTIER, .type = SETTING_STRING,
      .offset = FIELD(frontier_plot), .def = "backprop_frontier.png", .arg = "FILE",
      .help = "memory vs recompute, PNG" },
    { .heading = "  -h, --help          this text" },
};
#undef FIELD
enum { N_SETTINGS = sizeof SETTINGS / sizeof SETTINGS[0] };

static void usage(void)
{
    printf("Usage: backprop_strategies [OPTION]...\n"
           "Backprop through a chain of n MLP layers with each checkpoint strategy: peak\n"
           "activation bytes, forward evaluations and time, measured. TSV on stdout and in\n"
           "files; gnuplot figures.\n\n");
    settings_usage(SETTINGS, N_SETTINGS);
    printf("\nExamples:\n"
           "  backprop_strategies --picture 9\n"
           "  backprop_strategies --n-to 32 --strategies vanilla,sqrt,budget:3\n");
}

/* Splits a comma-separated list; each item goes to add(), which exits on a bad one. An empty
 * list or an empty entry ('', ',', "1,,2") is refused: it is a typo, not "none". */
static void split_list(const char *flag, const char *text, void (*add)(Options *, const char *,
                       const char *), Options *o)
{
    char buf[1024];
    if (strlen(text) >= sizeof buf)
        cli_usage_error("%s: list too long", flag);
    strcpy(buf, text);
    for (char *item = buf, *comma; item; item = comma ? comma + 1 : NULL) {
        comma = strchr(item, ',');
        if (comma)
            *comma = '\0';
        if (!*item)
            cli_usage_error("%s '%s': an empty entry; give a comma-separated list of values",
                            flag, text);
        add(o, flag, item);
    }
}

static void add_strategy(Options *o, const char *flag, const char *item)
{
    char err[200];
    if (o->n_strategies == MAX_LIST)
        cli_usage_error("%s: more than %d entries", flag, MAX_LIST);
    if (!ckpt_parse(item, &o->strategies[o->n_strategies++], err, sizeof err))
        cli_usage_error("%s: %s", flag, err);
}

/* An entry of --budgets or --intervals, by the flag. */
static void add_count(Options *o, const char *flag, const char *item)
{
    bool budgets = strcmp(flag, "--budgets") == 0;
    int *list = budgets ? o->budgets : o->intervals;
    int *count = budgets ? &o->n_budgets : &o->n_intervals;
    if (*count == MAX_LIST)
        cli_usage_error("%s: more than %d entries", flag, MAX_LIST);
    list[(*count)++] = (int)cli_long(flag, item, 1, 1 << 20);
}

static Options parse(int argc, char **argv)
{
    Options o = { 0 };
    settings_defaults(SETTINGS, N_SETTINGS, &o);
    settings_parse(SETTINGS, N_SETTINGS, &o, NULL, FLAG_N_FROM, usage, argc, argv);
    if (o.n_from > o.n_to)
        cli_usage_error("--n-from %d is larger than --n-to %d", o.n_from, o.n_to);
    split_list("--strategies", o.strategies_text, add_strategy, &o);
    split_list("--budgets", o.budgets_text, add_count, &o);
    split_list("--intervals", o.intervals_text, add_count, &o);
    if (o.n_strategies == 0)
        cli_usage_error("--strategies: no strategy given");
    return o;
}

/* Strategy s over a fresh chain of n layers, against vanilla's gradients. */
static CkptRow measure(const Options *o, CkptStrategy s, int n)
{
    return ckpt_row_measure(s, n, o->width, o->batch, (uint64_t)o->seed, o->reps);
}

static const char *const SWEEP_COLUMNS[] = {
    "strategy", "n", "peak_act_bytes", "forward_evals", "formula", "recorded", "max_checkpoints",
    "max_tapes", "ms", "same_grads", NULL,
};

/* One sweep row on stdout and in the TSV. ms is rounded to microseconds. */
static void emit_sweep(TsvWriter *log, const CkptRow *r)
{
    double ms = round(r->run.ms * 1e3) / 1e3;
    const CkptStats *st = &r->run.stats;
    printf("%s\t%d\t%zu\t%ld\t%ld\t%ld\t%d\t%d\t%.3f\t%d\n", r->name, r->n, r->run.peak_act,
           st->forwards, r->formula, st->recorded, st->max_checkpoints, st->max_recorded, ms,
           r->same_grads);
    fflush(stdout);
    tsv_str(log, r->name);
    tsv_int(log, r->n);
    tsv_int(log, (long long)r->run.peak_act);
    tsv_int(log, st->forwards);
    tsv_int(log, r->formula);
    tsv_int(log, st->recorded);
    tsv_int(log, st->max_checkpoints);
    tsv_int(log, st->max_recorded);
    tsv_num(log, ms);
    tsv_int(log, r->same_grads);
    tsv_end_row(log);   /* a failed write is reported by tsv_close, with its reason */
}

static TsvWriter *open_log(const char *path, const char *const *columns)
{
    char err[256];
    TsvWriter *log = tsv_open(path, columns, err, sizeof err);
    if (!log)
        cli_die(1, "%s", err);
    for (int i = 0; columns[i]; i++)
        printf("%s%s", i ? "\t" : "", columns[i]);
    putchar('\n');
    return log;
}

static void close_log(TsvWriter *log)
{
    char err[256];
    if (!tsv_close(log, err, sizeof err))
        cli_die(1, "%s", err);
}

/* Rows are written strategy by strategy, so that each strategy's points are consecutive and
 * gnuplot draws them as one line. Returns false if some gradients differed from vanilla's. */
static bool sweep(const Options *o)
{
    TsvWriter *log = open_log(o->log_path, SWEEP_COLUMNS);
    bool all_same = true;
    for (int i = 0; i < o->n_strategies; i++) {
        for (int n = o->n_from; n <= o->n_to; n += o->n_step) {
            CkptRow r = measure(o, o->strategies[i], n);
            emit_sweep(log, &r);
            all_same &= r.same_grads;
        }
    }
    close_log(log);
    return all_same;
}

static const char *const FRONTIER_COLUMNS[] = {
    "strategy", "family", "n", "peak_act_bytes", "forward_evals", "ms", "pareto", "same_grads",
    NULL,
};

static void emit_frontier(TsvWriter *log, const CkptRow *r)
{
    double ms = round(r->run.ms * 1e3) / 1e3;
    printf("%s\t%s\t%d\t%zu\t%ld\t%.3f\t%d\t%d\n", r->name, r->family, r->n, r->run.peak_act,
           r->run.stats.forwards, ms, r->pareto, r->same_grads);
    tsv_str(log, r->name);
    tsv_str(log, r->family);
    tsv_int(log, r->n);
    tsv_int(log, (long long)r->run.peak_act);
    tsv_int(log, r->run.stats.forwards);
    tsv_num(log, ms);
    tsv_int(log, r->pareto);
    tsv_int(log, r->same_grads);
    tsv_end_row(log);
}

/* The frontier's rows are sorted by forward evaluations, so its points join left to right. */
static bool frontier(const Options *o)
{
    int n = o->frontier_n;
    CkptStrategy list[3 + 2 * MAX_LIST];
    int count = ckpt_frontier_strategies(n, o->intervals, o->n_intervals, o->budgets,
                                         o->n_budgets, list);
    CkptRow *rows = calloc((size_t)count, sizeof *rows);
    if (!rows)
        cli_die(1, "out of memory");
    bool all_same = true;
    for (int i = 0; i < count; i++) {
        rows[i] = measure(o, list[i], n);
        all_same &= rows[i].same_grads;
    }
    ckpt_frontier_sort(rows, count);
    putchar('\n');
    TsvWriter *log = open_log(o->frontier_path, FRONTIER_COLUMNS);
    for (int i = 0; i < count; i++)
        emit_frontier(log, &rows[i]);
    close_log(log);
    free(rows);
    return all_same;
}

static void print_picture_line(int segment, const char *nodes, void *ctx)
{
    (void)ctx;
    printf("  backward of %2d:", segment);
    for (const char *c = nodes; *c; c++)
        printf(" %c", *c);
    putchar('\n');
}

static void picture(const Options *o)
{
    int n = o->picture;
    printf("f nodes x_0 .. x_%d (x_0 the chain input, x_%d its output). Each line shows, just\n"
           "before a layer's backward, what is held: C kept checkpoint, o held since the forward\n"
           "pass, + recomputed and held, . free.\n", n, n);
    for (int i = 0; i < o->n_strategies; i++) {
        char name[NAME_LEN];
        MlpChain *m = mlp_chain_new(n, o->width, o->batch, (uint64_t)o->seed);
        printf("\n%s over %d layers:\n                 ", ckpt_name(o->strategies[i], name,
                                                                   sizeof name), n);
        for (int j = 0; j <= n; j++)
            printf(" %d", j % 10);
        putchar('\n');
        MlpChainRun r = mlp_chain_run(m, o->strategies[i], 1, print_picture_line, NULL);
        printf("  forward evaluations %ld (formula %ld); most checkpoints held %d, most recorded "
               "layers held %d; peak activation bytes %zu\n", r.stats.forwards,
               ckpt_formula_total(o->strategies[i], n), r.stats.max_checkpoints,
               r.stats.max_recorded, r.peak_act);
        mlp_chain_free(m);
    }
}

/* The strategy names as one space-separated gnuplot word list. */
static void strategy_words(const Options *o, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < o->n_strategies && used < len; i++) {
        char name[NAME_LEN];
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? " " : "",
                                 ckpt_name(o->strategies[i], name, sizeof name));
    }
}

static void plot(const char *script, const char *input, const char *output, const char *words)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/backprop_strategies/%s", TAPEGRAD_SOURCE_DIR,
             script);
    const char *names[] = { "input", "output", "strategies" };
    const char *values[] = { input, output, words };
    if (plot_run_vars(path, names, values, words ? 3 : 2, "output") == PLOT_OK)
        fprintf(stderr, "figure: %s\n", output);
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    Options o = parse(argc, argv);
    par_set_threads(o.threads);
    if (o.picture) {
        picture(&o);
        return 0;
    }
    bool same = sweep(&o);
    char words[MAX_LIST * NAME_LEN];
    strategy_words(&o, words, sizeof words);
    plot("memory.gp", o.log_path, o.memory_plot, words);
    plot("forwards.gp", o.log_path, o.forwards_plot, words);
    if (o.frontier_n > 0) {
        same &= frontier(&o);
        plot("frontier.gp", o.frontier_path, o.frontier_plot, NULL);
    }
    fprintf(stderr, "gradients: %s\n",
            same ? "bit-identical to vanilla in every run"
                 : "DIFFERENT from vanilla in some run (see same_grads)");
    return same ? 0 : 1;
}

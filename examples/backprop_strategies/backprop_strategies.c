/* backprop_strategies: how much memory backprop needs, and what recomputation buys back.
 *
 * A chain of n MLP layers (mlp_chain.h: x_{j+1} = gelu(x_j W_j + b_j) at width W, batch B) is
 * run forward and backward with each checkpoint strategy of autograd/checkpoint.h. For every
 * run the program measures the peak of the act category (mem_reset_peaks, then mem_peak minus
 * what was in use before), counts the segment forward evaluations (every run of a layer's
 * forward, recorded or not), times it, and checks its gradients against vanilla's bit for bit.
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
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/checkpoint.h"
#include "autograd/parallel.h"
#include "examples/backprop_strategies/mlp_chain.h"
#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/tsv.h"

enum { MAX_LIST = 64, NAME_LEN = 32 };

typedef struct {
    int          n_from, n_to, n_step, width, batch, reps, threads, frontier_n, picture;
    long         seed;
    CkptStrategy strategies[MAX_LIST];
    int          n_strategies;
    int          budgets[MAX_LIST], n_budgets;
    int          intervals[MAX_LIST], n_intervals;
    const char  *log_path, *frontier_path, *memory_plot, *forwards_plot, *frontier_plot;
} Options;

/* One measured run. */
typedef struct {
    char        name[NAME_LEN];
    const char *family;       /* vanilla, memory-poor, sqrt, every, budget */
    int         n;
    MlpChainRun run;
    long        formula;
    bool        same_grads;   /* bit-identical to vanilla's */
    bool        pareto;       /* no other frontier point has both fewer forwards and fewer bytes */
} Row;

static void usage(void)
{
    printf("Usage: backprop_strategies [OPTION]...\n"
           "Backprop through a chain of n MLP layers with each checkpoint strategy: peak\n"
           "activation bytes, forward evaluations and time, measured. TSV on stdout and in\n"
           "files; gnuplot figures.\n\n"
           "  --n-from N         shortest chain of the sweep (default 4)\n"
           "  --n-to N           longest chain of the sweep (default 64)\n"
           "  --n-step N         step between chain lengths (default 4)\n"
           "  --width W          layer width (default 256)\n"
           "  --batch B          rows per batch (default 32)\n"
           "  --strategies LIST  comma-separated strategies for the sweep and the picture:\n"
           "                     vanilla, memory-poor, sqrt, every:K, budget:S\n"
           "                     (default vanilla,memory-poor,sqrt,every:4,budget:2,budget:4,\n"
           "                     budget:8)\n"
           "  --frontier-n N     chain length of the memory-vs-recompute frontier; 0 skips it\n"
           "                     (default 64)\n"
           "  --budgets LIST     slots S of the budget:S points on the frontier\n"
           "                     (default 1,2,3,4,5,6,8,10,12,16,24,32,48,64)\n"
           "  --intervals LIST   intervals K of the every:K points on the frontier\n"
           "                     (default 1,2,4,8,16,32,64)\n"
           "  --reps N           timed passes per run, the fastest is reported (default 2)\n"
           "  --seed N           seed of the weights and the data (default 1)\n"
           "  --threads N        threads, 0 = one per core (default 0)\n"
           "  --picture N        print which f nodes each strategy holds at every backward\n"
           "                     step of a chain of N layers (1 to 64), and nothing else\n"
           "  --log FILE         sweep TSV (default backprop_strategies.tsv)\n"
           "  --frontier-log FILE  frontier TSV (default backprop_frontier.tsv)\n"
           "  --plot-memory FILE   peak activation memory vs n, PNG (default backprop_memory.png)\n"
           "  --plot-forwards FILE forward evaluations vs n, PNG (default backprop_forwards.png)\n"
           "  --plot-frontier FILE memory vs recompute, PNG (default backprop_frontier.png)\n"
           "  -h, --help         this text\n\n"
           "Examples:\n"
           "  backprop_strategies --picture 9\n"
           "  backprop_strategies --n-to 32 --strategies vanilla,sqrt,budget:3\n");
}

/* Splits a comma-separated list; each item goes to add(), which exits on a bad one. */
static void split_list(const char *flag, const char *text, void (*add)(Options *, const char *,
                       const char *), Options *o)
{
    char buf[1024];
    if (strlen(text) >= sizeof buf)
        cli_usage_error("%s: list too long", flag);
    strcpy(buf, text);
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item;
         item = strtok_r(NULL, ",", &save))
        add(o, flag, item);
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
    Options o = { .n_from = 4, .n_to = 64, .n_step = 4, .width = 256, .batch = 32, .reps = 2,
                  .frontier_n = 64, .seed = 1, .log_path = "backprop_strategies.tsv",
                  .frontier_path = "backprop_frontier.tsv",
                  .memory_plot = "backprop_memory.png", .forwards_plot = "backprop_forwards.png",
                  .frontier_plot = "backprop_frontier.png" };
    const char *strategies = "vanilla,memory-poor,sqrt,every:4,budget:2,budget:4,budget:8";
    const char *budgets = "1,2,3,4,5,6,8,10,12,16,24,32,48,64", *intervals = "1,2,4,8,16,32,64";
    const struct option options[] = {
        { "n-from", required_argument, NULL, 'a' }, { "n-to", required_argument, NULL, 'z' },
        { "n-step", required_argument, NULL, 's' }, { "width", required_argument, NULL, 'W' },
        { "batch", required_argument, NULL, 'B' },
        { "strategies", required_argument, NULL, 'S' },
        { "frontier-n", required_argument, NULL, 'f' },
        { "budgets", required_argument, NULL, 'g' }, { "intervals", required_argument, NULL, 'k' },
        { "reps", required_argument, NULL, 'r' }, { "seed", required_argument, NULL, 'e' },
        { "threads", required_argument, NULL, 't' }, { "picture", required_argument, NULL, 'P' },
        { "log", required_argument, NULL, 'l' }, { "frontier-log", required_argument, NULL, 'L' },
        { "plot-memory", required_argument, NULL, 'm' },
        { "plot-forwards", required_argument, NULL, 'F' },
        { "plot-frontier", required_argument, NULL, 'R' }, { "help", no_argument, NULL, 'h' },
        { 0, 0, 0, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (c) {
        case 'a': o.n_from = (int)cli_long("--n-from", optarg, 1, 1024); break;
        case 'z': o.n_to = (int)cli_long("--n-to", optarg, 1, 1024); break;
        case 's': o.n_step = (int)cli_long("--n-step", optarg, 1, 1024); break;
        case 'W': o.width = (int)cli_long("--width", optarg, 1, 1 << 14); break;
        case 'B': o.batch = (int)cli_long("--batch", optarg, 1, 1 << 16); break;
        case 'S': strategies = optarg; break;
        case 'f': o.frontier_n = (int)cli_long("--frontier-n", optarg, 0, 1024); break;
        case 'g': budgets = optarg; break;
        case 'k': intervals = optarg; break;
        case 'r': o.reps = (int)cli_long("--reps", optarg, 1, 1000); break;
        case 'e': o.seed = cli_long("--seed", optarg, 0, 1L << 62); break;
        case 't': o.threads = (int)cli_long("--threads", optarg, 0, 1024); break;
        case 'P': o.picture = (int)cli_long("--picture", optarg, 1, 64); break;
        case 'l': o.log_path = optarg; break;
        case 'L': o.frontier_path = optarg; break;
        case 'm': o.memory_plot = optarg; break;
        case 'F': o.forwards_plot = optarg; break;
        case 'R': o.frontier_plot = optarg; break;
        case 'h': usage(); exit(0);
        case ':': cli_usage_error("%s needs a value", argv[optind - 1]);
        default: cli_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        cli_usage_error("unexpected argument '%s'", argv[optind]);
    if (o.n_from > o.n_to)
        cli_usage_error("--n-from %d is larger than --n-to %d", o.n_from, o.n_to);
    split_list("--strategies", strategies, add_strategy, &o);
    split_list("--budgets", budgets, add_count, &o);
    split_list("--intervals", intervals, add_count, &o);
    if (o.n_strategies == 0)
        cli_usage_error("--strategies: no strategy given");
    return o;
}

static const char *family_of(CkptStrategy s)
{
    static const char *const names[] = { "vanilla", "memory-poor", "sqrt", "every", "budget" };
    return names[s.kind];
}

/* Runs strategy s over a fresh chain of n layers (the same weights for every strategy) and
 * compares its gradients with vanilla's. */
static Row measure(const Options *o, CkptStrategy s, int n)
{
    Row r = { .family = family_of(s), .n = n, .formula = ckpt_formula_total(s, n) };
    ckpt_name(s, r.name, sizeof r.name);
    MlpChain *m = mlp_chain_new(n, o->width, o->batch, (uint64_t)o->seed);
    mlp_chain_run(m, (CkptStrategy){ CKPT_VANILLA, 0 }, 1, NULL, NULL);
    size_t bytes, got_bytes;
    float *ref = mlp_chain_grads(m, &bytes);
    r.run = mlp_chain_run(m, s, o->reps, NULL, NULL);
    float *got = mlp_chain_grads(m, &got_bytes);
    r.same_grads = got_bytes == bytes && memcmp(got, ref, bytes) == 0;
    mem_free(got);
    mem_free(ref);
    mlp_chain_free(m);
    return r;
}

static const char *const SWEEP_COLUMNS[] = {
    "strategy", "n", "peak_act_bytes", "forward_evals", "formula", "recorded", "max_checkpoints",
    "max_tapes", "ms", "same_grads", NULL,
};

/* One sweep row on stdout and in the TSV. ms is rounded to microseconds. */
static void emit_sweep(TsvWriter *log, const Row *r)
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
            Row r = measure(o, o->strategies[i], n);
            emit_sweep(log, &r);
            all_same &= r.same_grads;
        }
    }
    close_log(log);
    return all_same;
}

/* The strategies of the frontier figure at n layers; returns how many. */
static int frontier_strategies(const Options *o, int n, CkptStrategy *out)
{
    int count = 0;
    out[count++] = (CkptStrategy){ CKPT_VANILLA, 0 };
    out[count++] = (CkptStrategy){ CKPT_MEMORY_POOR, 0 };
    out[count++] = (CkptStrategy){ CKPT_SQRT, 0 };
    for (int i = 0; i < o->n_intervals; i++)
        if (o->intervals[i] < n)        /* every:K with K >= n is vanilla */
            out[count++] = (CkptStrategy){ CKPT_EVERY, o->intervals[i] };
    for (int i = 0; i < o->n_budgets; i++)
        if (o->budgets[i] <= n)         /* more slots than layers change nothing */
            out[count++] = (CkptStrategy){ CKPT_BUDGET, o->budgets[i] };
    return count;
}

static void mark_pareto(Row *rows, int count)
{
    for (int i = 0; i < count; i++) {
        rows[i].pareto = true;
        for (int j = 0; j < count && rows[i].pareto; j++) {
            long fi = rows[i].run.stats.forwards, fj = rows[j].run.stats.forwards;
            size_t mi = rows[i].run.peak_act, mj = rows[j].run.peak_act;
            if (fj <= fi && mj <= mi && (fj < fi || mj < mi))
                rows[i].pareto = false;
        }
    }
}

static int by_forwards(const void *a, const void *b)
{
    const Row *x = a, *y = b;
    if (x->run.stats.forwards != y->run.stats.forwards)
        return x->run.stats.forwards < y->run.stats.forwards ? -1 : 1;
    return (x->run.peak_act > y->run.peak_act) - (x->run.peak_act < y->run.peak_act);
}

static const char *const FRONTIER_COLUMNS[] = {
    "strategy", "family", "n", "peak_act_bytes", "forward_evals", "ms", "pareto", "same_grads",
    NULL,
};

static void emit_frontier(TsvWriter *log, const Row *r)
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
    int count = frontier_strategies(o, n, list);
    Row *rows = calloc((size_t)count, sizeof *rows);
    if (!rows)
        cli_die(1, "out of memory");
    bool all_same = true;
    for (int i = 0; i < count; i++) {
        rows[i] = measure(o, list[i], n);
        all_same &= rows[i].same_grads;
    }
    mark_pareto(rows, count);
    qsort(rows, (size_t)count, sizeof *rows, by_forwards);
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

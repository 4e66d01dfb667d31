/* scaling_laws: Kaplan's and Chinchilla's scaling laws, measured on tiny character-level GPTs
 * (docs/scaling_laws.md).
 *
 * A grid of model sizes (depth and width grown together, as Kaplan et al. and Hoffmann et al.
 * do) is trained at several compute budgets C: each size for D = C / (6 N) tokens, N its
 * non-embedding parameters, with a cosine schedule as long as the run (IsoFLOP profiles). Every
 * run is an in-process Trainer (optim/train.h) on the text of --data, the first 90% training,
 * the last 10% validating. Then the fits (analysis/scaling_fit.h): Chinchilla's approach 2
 * (a parabola per budget, N_opt(C) and D_opt(C) as power laws), approach 3 (L(N, D) = E + A/N^alpha
 * + B/D^beta by Huber loss, with a bootstrap), and Kaplan's L(N) at the largest budget; the
 * compute-optimal tokens per parameter beside Chinchilla's ~20; one figure.
 *
 * Output, in --out DIR: scaling_runs.tsv (one row per run, written as each finishes), the TSV
 * files the figure is drawn from, scaling_fit.tsv (every fitted number) and scaling_laws.png.
 * --from-results FILE refits and redraws from a saved scaling_runs.tsv without training. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/scaling_grid.h"
#include "data/dataset.h"
#include "examples/common/cli.h"
#include "examples/common/progress.h"
#include "examples/common/scaling_rows.h"
#include "examples/common/settings.h"
#include "examples/common/tsv.h"
#include "examples/scaling_laws/scaling_laws.h"

enum { MAX_RUNS = 512 };

/* Depth and width grow together (heads of width 8, 6 at width 12), C / L from 8 to 16, N from
 * 888 to 390k (440x), closest where the optima fall (2k to 40k); the quick grid is the first
 * seven, 888 to 38k (43x). */
typedef struct {
    int layers, width, heads;
} Size;

enum { N_SIZES_FULL = 10, N_SIZES_QUICK = 7 };

static const Size SIZES[N_SIZES_FULL] = {
    { 1, 8, 1 }, { 1, 12, 2 }, { 1, 16, 2 }, { 2, 16, 2 }, { 2, 24, 3 },
    { 3, 24, 3 }, { 3, 32, 4 }, { 4, 40, 5 }, { 4, 64, 8 }, { 5, 80, 10 },
};
static const double BUDGETS_FULL[] = { 1e10, 2.5e10, 6e10, 1.5e11, 4e11, 1e12 };
static const double BUDGETS_QUICK[] = { 1e10, 2.5e10, 6e10 };

typedef struct {
    bool        quick;
    const char *data, *out, *from_results;
    int         min_steps;
    double      max_epochs;
    ScalingTrainConfig train;
    AnalyseOptions analyse;
} Options;

static void set_seed(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    Options *o = opts;      /* one seed for the runs and for the resampling */
    o->train.seed = o->analyse.seed = (uint64_t)cli_long(flag, arg, 0, 1L << 62);
}

enum { FLAG_QUICK = 256, FLAG_DATA, FLAG_OUT, FLAG_FROM, FLAG_MIN_STEPS, FLAG_MAX_EPOCHS,
       FLAG_SEQ, FLAG_BATCH, FLAG_LR, FLAG_EVAL, FLAG_BOOT, FLAG_SEED, FLAG_THREADS, FLAG_KERNELS };

#define FIELD(f) offsetof(Options, f)
static const Setting SETTINGS[] = {
    { .name = "quick", .id = FLAG_QUICK, .type = SETTING_SWITCH, .offset = FIELD(quick),
      .help = "7 sizes (N 888 to 38k) x 3 budgets (1e10 to 6e10 FLOP),\n"
              "256 validation windows: about 2 minutes. The default is the\n"
              "full grid: 10 sizes (to 390k) x 6 budgets (to 1e12), every\n"
              "validation window (see docs/scaling_laws.md for its time)" },
    { .name = "data", .id = FLAG_DATA, .type = SETTING_STRING, .offset = FIELD(data),
      .def = TAPEGRAD_SOURCE_DIR "/data/tinyshakespeare.txt", .arg = "PATH",
      .help = "the corpus" },
    { .name = "out", .id = FLAG_OUT, .type = SETTING_STRING, .offset = FIELD(out),
      .def = "scaling_laws_out", .arg = "DIR",
      .help = "where the TSV files and the figure go" },
    { .name = "from-results", .id = FLAG_FROM, .type = SETTING_STRING,
      .offset = FIELD(from_results), .arg = "FILE",
      .help = "no training: refit and redraw from a saved scaling_runs.tsv" },
    { .name = "min-steps", .id = FLAG_MIN_STEPS, .type = SETTING_INT, .offset = FIELD(min_steps),
      .lo = 1, .hi = 1 << 30, .def = "50", .arg = "N",
      .help = "skip a (size, budget) pair with fewer steps" },
    { .name = "max-epochs", .id = FLAG_MAX_EPOCHS, .type = SETTING_DOUBLE,
      .offset = FIELD(max_epochs), .lo = 1e-6, .hi = 1e9, .def = "10", .arg = "X",
      .help = "skip a pair whose D is more than X passes over the\ntraining text" },
    { .name = "seq", .id = FLAG_SEQ, .type = SETTING_INT, .offset = FIELD(train.seq),
      .lo = 1, .hi = 4096, .def = "64", .arg = "N", .help = "sequence length T" },
    { .name = "batch", .id = FLAG_BATCH, .type = SETTING_INT, .offset = FIELD(train.batch),
      .lo = 1, .hi = 1 << 16, .def = "4", .arg = "N", .help = "rows per step" },
    { .name = "lr", .id = FLAG_LR, .type = SETTING_DOUBLE, .offset = FIELD(train.lr),
      .lo = 1e-9, .hi = 10.0, .def = "0.02", .arg = "X",
      .help = "AdamW's peak rate at width 16; width C trains at X 16 / C" },
    { .name = "eval-windows", .id = FLAG_EVAL, .type = SETTING_INT,
      .offset = FIELD(train.eval_windows), .lo = 1, .hi = 1 << 30, .arg = "N",
      .help = "validation windows of T characters (default: all; --quick 256)" },
    { .name = "bootstrap", .id = FLAG_BOOT, .type = SETTING_INT,
      .offset = FIELD(analyse.bootstrap), .lo = 0, .hi = 100000, .def = "100", .arg = "N",
      .help = "resamples of the runs for approach 3's spread" },
    { .name = "seed", .id = FLAG_SEED, .type = SETTING_CUSTOM, .set = set_seed, .def = "1",
      .arg = "N", .help = "weights and data of every run, and the resampling" },
    { .name = "threads", .id = FLAG_THREADS, .type = SETTING_INT, .offset = FIELD(train.threads),
      .lo = 1, .hi = 1024, .def = "2", .arg = "N", .help = "threads" },
    { .name = "kernels", .id = FLAG_KERNELS, .type = SETTING_CUSTOM,
      .set = settings_set_kernels, .arg = "K", .help = SETTINGS_KERNELS_HELP },
    { .heading = "  -h, --help          this text" },
};
#undef FIELD
enum { N_SETTINGS = sizeof SETTINGS / sizeof SETTINGS[0] };

static void usage(void)
{
    printf("Usage: scaling_laws [OPTION]...\n"
           "Trains GPTs of 7 to 10 sizes at 3 to 6 compute budgets C (each for D = C / 6N tokens)\n"
           "on a text corpus, then fits Chinchilla's approaches 2 and 3 and Kaplan's L(N), and\n"
           "prints the compute-optimal tokens per parameter beside Chinchilla's ~20.\n\n");
    settings_usage(SETTINGS, N_SETTINGS);
}

static Options parse(int argc, char **argv)
{
    Options o = { .train = scaling_train_defaults() };
    o.train.eval_windows = -1;      /* not given: decided by --quick below */
    settings_defaults(SETTINGS, N_SETTINGS, &o);
    settings_parse(SETTINGS, N_SETTINGS, &o, NULL, FLAG_QUICK, usage, argc, argv);
    if (o.train.eval_windows < 0)
        o.train.eval_windows = o.quick ? 256 : 0;
    o.analyse.out = o.out;
    return o;
}

/* Trains every (size, budget) pair of the grid that passes the step and epoch limits (a model
 * too large for a budget gets too few steps to say anything; one too small, tens of passes
 * over the text, which the laws do not describe), writing each row to OUT/scaling_runs.tsv as
 * it finishes. */
static int run_grid(const Options *o, ScalingRun *runs)
{
    char err[512];
    Dataset *ds = dataset_open_text(o->data, o->train.seq, err, sizeof err);
    if (!ds)
        cli_die(1, "--data: %s", err);
    char desc[256];
    printf("data: %s\n", dataset_describe(ds, desc, sizeof desc));

    const double *budgets = o->quick ? BUDGETS_QUICK : BUDGETS_FULL;
    int nb = o->quick ? (int)(sizeof BUDGETS_QUICK / sizeof *BUDGETS_QUICK)
                      : (int)(sizeof BUDGETS_FULL / sizeof *BUDGETS_FULL);
    int ns = o->quick ? N_SIZES_QUICK : N_SIZES_FULL;
    struct { int size; double budget; } todo[MAX_RUNS];
    int n_todo = 0;
    double planned_c = 0;
    for (int b = 0; b < nb; b++)
        for (int s = 0; s < ns; s++) {
            double N = scaling_non_embedding_count(SIZES[s].layers, SIZES[s].width);
            long steps = scaling_steps_for(budgets[b], N, &o->train);
            double D = (double)steps * o->train.batch * o->train.seq;
            double epochs = D / (double)text_train_len(ds->text);
            if (steps < o->min_steps || epochs > o->max_epochs) {
                printf("skipped: L%d C%d (N %.0f) at C %.3g: %ld steps, %.3g epochs\n",
                       SIZES[s].layers, SIZES[s].width, N, budgets[b], steps, epochs);
                continue;
            }
            todo[n_todo].size = s;
            todo[n_todo++].budget = budgets[b];
            planned_c += budgets[b];
        }
    printf("grid: %d runs, %d sizes x %d budgets, %.3g FLOP (6ND) in all; batch %d x %d, "
           "lr %g x 16 / width, cosine to %g, %d threads\n",
           n_todo, ns, nb, planned_c, o->train.batch, o->train.seq, o->train.lr,
           o->train.final_frac, o->train.threads);

    TsvWriter *log = tsv_open_in(o->out, "scaling_runs.tsv", SCALING_COLUMNS);
    double start = progress_now();
    for (int i = 0; i < n_todo; i++) {
        const Size *sz = &SIZES[todo[i].size];
        char label[96];
        snprintf(label, sizeof label, "run %d/%d L%d C%d C=%.3g", i + 1, n_todo, sz->layers,
                 sz->width, todo[i].budget);
        Progress prog = { .out = stdout };
        ScalingWatch watch = scaling_watch_progress(&prog);
        runs[i] = scaling_train_one(ds, &o->train, sz->layers, sz->width, sz->heads,
                                    todo[i].budget, &watch, label);
        const ScalingRun *r = &runs[i];
        printf("%s: N %.0f, D %.4g (%.3g per parameter), %ld steps at lr %.3g, val loss %.4f, "
               "%.1f s\n", label, r->N, r->D, r->D / r->N, r->steps, r->lr, r->val_loss,
               r->seconds);
        if (!scaling_write_row(log, r))
            cli_die(1, "cannot write %s/scaling_runs.tsv", o->out);
    }
    tsv_close_or_die(log);
    char buf[32];
    printf("grid done: %d runs in %s; wrote %s/scaling_runs.tsv\n", n_todo,
           progress_format_duration(progress_now() - start, buf, sizeof buf), o->out);
    dataset_free(ds);
    return n_todo;
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    Options o = parse(argc, argv);
    if (mkdir(o.out, 0777) != 0) {
        struct stat st;
        if (stat(o.out, &st) != 0 || !S_ISDIR(st.st_mode))
            cli_die(1, "--out: cannot create the folder %s", o.out);
    }
    static ScalingRun runs[MAX_RUNS];
    int n;
    if (o.from_results) {
        char err[512];
        if (!scaling_read_results(o.from_results, runs, MAX_RUNS, &n, err, sizeof err))
            cli_die(1, "--from-results: %s", err);
        printf("read %d runs from %s\n", n, o.from_results);
    } else {
        n = run_grid(&o, runs);
    }
    return scaling_analyse(runs, n, &o.analyse) ? 0 : 1;
}

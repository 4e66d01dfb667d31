/* scaling_laws: Kaplan's and Chinchilla's scaling laws, measured on tiny character-level GPTs,
 * with cooldown branches (docs/scaling_laws.md).
 *
 * The study: model sizes (depth and width grown together) at compute budgets C spaced four to a
 * decade. A (size, budget) pair trains D = C / (6 N) tokens, N every parameter (Chinchilla's
 * count), when D / N lies in a window around the optimum (--min-tpp, --max-tpp) and the run has
 * enough steps and few enough passes over the text. Each size is trained once per seed at a
 * constant rate (the trunk, analysis/scaling_branch.h); at every D it is wanted at, a 20%
 * cooldown is branched from a snapshot of the trunk (the loss a schedule matched to D gives),
 * and the trunk itself is evaluated (the loss a schedule longer than the run gives), also at the
 * D that Kaplan's non-embedding count would give. A few pairs are also trained as separate runs
 * with Chinchilla's cosine, to check the branches against them. Then the fits (analyse.c).
 *
 * Output, in --out DIR: see --help; --from-results FILE refits from a saved scaling_study.tsv
 * without training. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/text.h"
#include "examples/common/cli.h"
#include "examples/common/progress.h"
#include "examples/common/scaling_rows.h"
#include "examples/common/settings.h"
#include "examples/common/tsv.h"
#include "examples/scaling_laws/scaling_laws.h"

enum { MAX_POINTS = 2048, MAX_TARGETS = 64, MAX_ITEMS = 512 };

typedef struct {
    int layers, width, heads;
} Size;

/* From 768 to 112k parameters (every one counted), about 1.5x to 2x apart: the smallest ones
 * are the left arms of the smallest budgets' valleys (D / N of thousands of characters). */
static const Size SIZES[] = {
    { 1, 4, 1 }, { 1, 6, 1 }, { 1, 8, 1 }, { 1, 12, 2 }, { 1, 16, 2 }, { 2, 16, 2 },
    { 2, 24, 3 }, { 3, 24, 3 }, { 3, 32, 4 }, { 4, 40, 5 }, { 4, 48, 6 },
};
enum { N_SIZES_FULL = 11, N_SIZES_QUICK = 8 };
/* Four budgets a decade, 1e10 to 3.2e11 (1.5 decades); --quick 1e10 to 5.6e10 (0.75). Branches
 * make a budget between two others cheap: a cooldown of a fifth of the run per size. */
static const double BUDGETS_FULL[] = { 1e10, 1.78e10, 3.16e10, 5.62e10, 1e11, 1.78e11, 3.16e11 };
static const double BUDGETS_QUICK[] = { 1e10, 1.78e10, 3.16e10, 5.62e10 };

typedef struct {
    bool        quick;
    const char *data, *out, *from_results;
    int         min_steps, seeds, compare, jobs;
    double      max_epochs, min_tpp, max_tpp, cooldown;
    ScalingTrainConfig train;
    AnalyseOptions analyse;
} Options;

static void set_seed(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    Options *o = opts;      /* the first seed of the runs, and the resampling's */
    o->train.seed = o->analyse.seed = (uint64_t)cli_long(flag, arg, 0, 1L << 40);
}

enum { FLAG_QUICK = 256, FLAG_DATA, FLAG_OUT, FLAG_FROM, FLAG_MIN_STEPS, FLAG_MAX_EPOCHS,
       FLAG_MIN_TPP, FLAG_MAX_TPP, FLAG_SEEDS, FLAG_JOBS, FLAG_COOLDOWN, FLAG_COMPARE, FLAG_SEQ,
       FLAG_BATCH, FLAG_LR, FLAG_EVAL, FLAG_BOOT, FLAG_SEED, FLAG_THREADS, FLAG_KERNELS };

#define FIELD(f) offsetof(Options, f)
static const Setting SETTINGS[] = {
    { .name = "quick", .id = FLAG_QUICK, .type = SETTING_SWITCH, .offset = FIELD(quick),
      .help = "8 sizes (768 to 42k parameters) x 4 budgets (1e10 to\n"
              "5.6e10 FLOP), 256 validation windows, 50 resamples: about\n"
              "4.5 minutes of CPU. The default is the full study: 11 sizes\n"
              "(to 119k) x 7 budgets (to 3.2e11), 512 windows, 200\n"
              "resamples: about 17 minutes of CPU (docs/scaling_laws.md)" },
    { .name = "data", .id = FLAG_DATA, .type = SETTING_STRING, .offset = FIELD(data),
      .def = TAPEGRAD_SOURCE_DIR "/data/tinyshakespeare.txt", .arg = "PATH",
      .help = "the corpus" },
    { .name = "out", .id = FLAG_OUT, .type = SETTING_STRING, .offset = FIELD(out),
      .def = "scaling_laws_out", .arg = "DIR",
      .help = "where the TSV files, the snapshots and the figure go" },
    { .name = "from-results", .id = FLAG_FROM, .type = SETTING_STRING,
      .offset = FIELD(from_results), .arg = "FILE",
      .help = "no training: refit and redraw from a saved scaling_study.tsv" },
    { .name = "seeds", .id = FLAG_SEEDS, .type = SETTING_INT, .offset = FIELD(seeds),
      .lo = 1, .hi = 100, .def = "2", .arg = "N",
      .help = "seeds per (size, budget): --seed, --seed + 1, ..." },
    { .name = "jobs", .id = FLAG_JOBS, .type = SETTING_INT, .offset = FIELD(jobs),
      .lo = 1, .hi = 64, .def = "2", .arg = "N",
      .help = "processes that share the runs (each with --threads);\nthe numbers do not depend on it" },
    { .name = "cooldown", .id = FLAG_COOLDOWN, .type = SETTING_DOUBLE, .offset = FIELD(cooldown),
      .lo = 0.01, .hi = 0.9, .def = "0.2", .arg = "F",
      .help = "a branch cools down over the last F of its run (1-sqrt)" },
    { .name = "compare", .id = FLAG_COMPARE, .type = SETTING_INT, .offset = FIELD(compare),
      .lo = 0, .hi = 16, .def = "3", .arg = "K",
      .help = "K sizes of the middle budget also trained as separate\n"
              "cosine runs (every seed), to check the branches" },
    { .name = "min-tpp", .id = FLAG_MIN_TPP, .type = SETTING_DOUBLE, .offset = FIELD(min_tpp),
      .lo = 0, .hi = 1e9, .def = "5", .arg = "X",
      .help = "skip a pair with fewer characters per parameter" },
    { .name = "max-tpp", .id = FLAG_MAX_TPP, .type = SETTING_DOUBLE, .offset = FIELD(max_tpp),
      .lo = 1, .hi = 1e12, .def = "5000", .arg = "X",
      .help = "skip a pair with more characters per parameter" },
    { .name = "min-steps", .id = FLAG_MIN_STEPS, .type = SETTING_INT, .offset = FIELD(min_steps),
      .lo = 1, .hi = 1 << 30, .def = "50", .arg = "N",
      .help = "skip a pair with fewer steps" },
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
      .offset = FIELD(train.eval_windows), .lo = 0, .hi = 1 << 30, .arg = "N",
      .help = "validation windows of T characters (0: all;\ndefault 512, --quick 256)" },
    { .name = "bootstrap", .id = FLAG_BOOT, .type = SETTING_INT,
      .offset = FIELD(analyse.bootstrap), .lo = 0, .hi = 100000, .arg = "N",
      .help = "resamples for the 5-95% intervals (default 200,\n--quick 50)" },
    { .name = "seed", .id = FLAG_SEED, .type = SETTING_CUSTOM, .set = set_seed, .def = "1",
      .arg = "N", .help = "the first seed (weights and data), and the resampling's" },
    { .name = "threads", .id = FLAG_THREADS, .type = SETTING_INT, .offset = FIELD(train.threads),
      .lo = 1, .hi = 1024, .def = "1", .arg = "N", .help = "threads" },
    { .name = "kernels", .id = FLAG_KERNELS, .type = SETTING_CUSTOM,
      .set = settings_set_kernels, .arg = "K", .help = SETTINGS_KERNELS_HELP },
    { .heading = "  -h, --help          this text" },
};
#undef FIELD
enum { N_SETTINGS = sizeof SETTINGS / sizeof SETTINGS[0] };

static void usage(void)
{
    printf("Usage: scaling_laws [OPTION]...\n"
           "Trains GPTs of 8 to 11 sizes for compute budgets C (each for D = C / 6N tokens, N\n"
           "every parameter) on a text corpus: one constant-rate run per size and seed, with a\n"
           "cooldown branched from a snapshot at every D; then fits Chinchilla's approaches 2\n"
           "and 3 and, on the same runs, Kaplan's choices (non-embedding N, no cooldown), and\n"
           "ends with the line\n"
           "  summary: D/N approach2 X approach3 Y; a approach2 P approach3 Q\n"
           "(at the largest budget). Files in --out: scaling_study.tsv (every point),\n"
           "scaling_fit.tsv (every fitted number), the figure's TSV files, scaling_laws.png.\n\n");
    settings_usage(SETTINGS, N_SETTINGS);
}

static Options parse(int argc, char **argv)
{
    Options o = { .train = scaling_train_defaults() };
    o.train.eval_windows = -1;      /* not given: decided by --quick below */
    o.analyse.bootstrap = -1;
    settings_defaults(SETTINGS, N_SETTINGS, &o);
    settings_parse(SETTINGS, N_SETTINGS, &o, NULL, FLAG_QUICK, usage, argc, argv);
    if (o.train.eval_windows < 0)
        o.train.eval_windows = o.quick ? 256 : 512;
    if (o.analyse.bootstrap < 0)
        o.analyse.bootstrap = o.quick ? 50 : 200;
    if (o.min_tpp >= o.max_tpp)
        cli_die(2, "--min-tpp %g must be below --max-tpp %g", o.min_tpp, o.max_tpp);
    o.analyse.out = o.out;
    return o;
}

/* The steps of budget C for a model counted as N; 0 when the pair is outside the limits. */
static long steps_if_kept(const Options *o, double C, double N, double train_len)
{
    long steps = scaling_steps_for(C, N, &o->train);
    double D = (double)steps * o->train.batch * o->train.seq;
    if (steps < o->min_steps || D / train_len > o->max_epochs || D / N < o->min_tpp ||
        D / N > o->max_tpp)
        return 0;
    return steps;
}

static double count_all(int layers, int width, int V, int T)
{
    return scaling_non_embedding_count(layers, width) + (double)(V + T) * width;
}

static void write_point(TsvWriter *w, const ScalingPoint *p)
{
    tsv_int(w, p->layers);
    tsv_int(w, p->width);
    tsv_int(w, p->heads);
    tsv_int(w, (long long)p->seed);
    tsv_num(w, p->N_nonemb);
    tsv_num(w, p->N_all);
    tsv_str(w, SCALING_COUNT_NAMES[p->count]);
    tsv_str(w, SCALING_SCHED_NAMES[p->schedule]);
    tsv_num(w, p->budget);
    tsv_int(w, p->steps);
    tsv_num(w, p->D);
    tsv_num(w, p->lr);
    tsv_num(w, p->val_loss);
    tsv_num(w, p->trained);
    tsv_num(w, p->flop);
    tsv_num(w, p->seconds);
    if (!tsv_end_row(w))
        cli_die(1, "cannot write scaling_study.tsv");
}

typedef struct {
    int    seed;        /* 0 .. seeds - 1, added to --seed */
    int    size;
    int    ref;         /* -1: the trunk and branches; else the target a cosine run repeats */
    double cost;        /* for the sharing out: steps x N, roughly */
} Item;

typedef struct {
    const Options *o;
    const Dataset *ds;
    ScalingTarget (*targets)[MAX_TARGETS];
    const int     *n_targets;
} Work;

/* Runs the items whose owner is `me` (all when owner is NULL) into pts; returns the count. */
static int run_items(const Work *w, const Item *items, int n_items, const int *owner, int me,
                     ScalingPoint *pts)
{
    const Options *o = w->o;
    char err[512], snap[1024];
    snprintf(snap, sizeof snap, "%s/branch%d.safetensors", o->out, me < 0 ? 0 : me);
    int n = 0;
    for (int i = 0; i < n_items; i++) {
        if (owner && owner[i] != me)
            continue;
        const Item *it = &items[i];
        const Size *sz = &SIZES[it->size];
        ScalingTrainConfig cfg = o->train;
        cfg.seed = o->train.seed + (uint64_t)it->seed;
        const ScalingTarget *tg = w->targets[it->size];
        int nt = w->n_targets[it->size];
        char label[96];
        Progress prog = { .out = stdout };
        ScalingWatch watch = scaling_watch_progress(&prog);
        if (n + 2 * nt > MAX_POINTS)
            cli_die(1, "more than %d points", MAX_POINTS);
        if (it->ref < 0) {
            snprintf(label, sizeof label, "seed %llu L%d C%d", (unsigned long long)cfg.seed,
                     sz->layers, sz->width);
            int got = scaling_train_branches(w->ds, &cfg, sz->layers, sz->width, sz->heads, tg,
                                             nt, o->cooldown, snap, &watch, label, pts + n,
                                             err, sizeof err);
            if (got == 0)
                cli_die(1, "%s", err);
            double secs = 0;
            for (int k = 0; k < got; k++)
                secs += pts[n + k].seconds;
            printf("%s: %d points in %.1f s;", label, got, secs);
            for (int k = 0; k < got; k++)
                if (pts[n + k].count == SCALING_COUNT_ALL)
                    printf(" %s %.3g %.3f", pts[n + k].schedule == SCALING_SCHED_COOLDOWN
                           ? "cd" : "const", pts[n + k].budget, pts[n + k].val_loss);
            printf("\n");
            n += got;
            continue;
        }
        long shortest = LONG_MAX;
        for (int k = 0; k < nt; k++)
            shortest = tg[k].steps < shortest ? tg[k].steps : shortest;
        const ScalingTarget *t = &tg[it->ref];
        snprintf(label, sizeof label, "seed %llu L%d C%d cosine C=%.3g",
                 (unsigned long long)cfg.seed, sz->layers, sz->width, t->budget);
        /* the branches' warmup, so that only the decay differs */
        pts[n] = scaling_train_cosine(w->ds, &cfg, sz->layers, sz->width, sz->heads, t->budget,
                                      t->steps, scaling_branch_warmup(&cfg, shortest), &watch,
                                      label);
        printf("%s: %ld steps, val loss %.4f, %.1f s\n", label, pts[n].steps, pts[n].val_loss,
               pts[n].seconds);
        n++;
    }
    remove(snap);
    return n;
}

/* Shares the items out over o->jobs forked processes, each writing its points to
 * OUT/scaling_study.partK.tsv, read back here once all have ended. */
static int run_parallel(const Work *w, const Item *items, int n_items, ScalingPoint *pts)
{
    const Options *o = w->o;
    int jobs = o->jobs, owner[MAX_ITEMS], order[MAX_ITEMS];
    double load[64] = { 0 };
    for (int i = 0; i < n_items; i++)
        order[i] = i;
    for (int i = 1; i < n_items; i++)         /* the costliest first */
        for (int j = i; j > 0 && items[order[j]].cost > items[order[j - 1]].cost; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int i = 0; i < n_items; i++) {
        int best = 0;
        for (int k = 1; k < jobs; k++)
            best = load[k] < load[best] ? k : best;
        owner[order[i]] = best;
        load[best] += items[order[i]].cost;
    }
    fflush(stdout);
    pid_t pid[64];
    for (int k = 0; k < jobs; k++) {
        pid[k] = fork();
        if (pid[k] < 0)
            cli_die(1, "--jobs: cannot start a process: %s", strerror(errno));
        if (pid[k] == 0) {
            int got = run_items(w, items, n_items, owner, k, pts);
            char name[64];
            snprintf(name, sizeof name, "scaling_study.part%d.tsv", k);
            TsvWriter *t = tsv_open_in(o->out, name, SCALING_POINT_COLUMNS);
            for (int i = 0; i < got; i++)
                write_point(t, &pts[i]);
            tsv_close_or_die(t);
            fflush(stdout);
            _exit(0);
        }
    }
    bool failed = false;
    for (int k = 0; k < jobs; k++) {
        int status = 0;
        if (waitpid(pid[k], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed = true;
    }
    if (failed)
        cli_die(1, "a study process failed (its message is above)");
    int n = 0;
    for (int k = 0; k < jobs; k++) {
        char path[1024], err[512];
        snprintf(path, sizeof path, "%s/scaling_study.part%d.tsv", o->out, k);
        int got = 0;
        /* a process with no items wrote a header and no rows: that is not an error */
        if (!scaling_points_read(path, pts + n, MAX_POINTS - n, &got, err, sizeof err) &&
            got != 0)
            cli_die(1, "%s", err);
        n += got;
        remove(path);
    }
    return n;
}

/* The file's order: seed, then the size, the trunk's points before the cosine runs, by steps. */
static int point_order(const void *a, const void *b)
{
    const ScalingPoint *x = a, *y = b;
    double kx[6] = { (double)x->seed, x->schedule == SCALING_SCHED_COSINE, x->N_all,
                     (double)x->steps, x->count, x->schedule };
    double ky[6] = { (double)y->seed, y->schedule == SCALING_SCHED_COSINE, y->N_all,
                     (double)y->steps, y->count, y->schedule };
    for (int i = 0; i < 6; i++)
        if (kx[i] != ky[i])
            return kx[i] < ky[i] ? -1 : 1;
    return 0;
}

/* Trains the study: per seed, per size, one trunk with its branches; then the cosine
 * references. Returns the number of points. */
static int run_study(const Options *o, ScalingPoint *pts)
{
    char err[512];
    Dataset *ds = dataset_open_text(o->data, o->train.seq, err, sizeof err);
    if (!ds)
        cli_die(1, "--data: %s", err);
    char desc[256];
    printf("data: %s\n", dataset_describe(ds, desc, sizeof desc));
    int V = dataset_vocab_size(ds), T = o->train.seq;
    double train_len = (double)text_train_len(ds->text);

    const double *budgets = o->quick ? BUDGETS_QUICK : BUDGETS_FULL;
    int nb = o->quick ? (int)(sizeof BUDGETS_QUICK / sizeof *BUDGETS_QUICK)
                      : (int)(sizeof BUDGETS_FULL / sizeof *BUDGETS_FULL);
    int ns = o->quick ? N_SIZES_QUICK : N_SIZES_FULL;
    ScalingTarget targets[N_SIZES_FULL][MAX_TARGETS];
    int n_targets[N_SIZES_FULL] = { 0 };
    for (int s = 0; s < ns; s++) {
        double Na = count_all(SIZES[s].layers, SIZES[s].width, V, T);
        double Nn = scaling_non_embedding_count(SIZES[s].layers, SIZES[s].width);
        ScalingTarget kaplan[MAX_TARGETS];
        int n_kaplan = 0;
        for (int b = 0; b < nb; b++) {
            long sa = steps_if_kept(o, budgets[b], Na, train_len);
            long sn = steps_if_kept(o, budgets[b], Nn, train_len);
            if (sa) {
                targets[s][n_targets[s]++] = (ScalingTarget){ budgets[b], SCALING_COUNT_ALL,
                                                              sa, true };
            }
            if (sn)
                kaplan[n_kaplan++] = (ScalingTarget){ budgets[b], SCALING_COUNT_NONEMB, sn,
                                                      false };
        }
        /* Kaplan's count makes D longer (N is smaller), so these points can run a trunk past
         * its last cooldown point: without them the Kaplan-style profiles lose their left arms
         * (the analysis counts those steps apart from the branches' cost) */
        for (int k = 0; k < n_kaplan && n_targets[s] > 0; k++)
            targets[s][n_targets[s]++] = kaplan[k];
        long longest = 0;
        for (int k = 0; k < n_targets[s]; k++)
            longest = targets[s][k].steps > longest ? targets[s][k].steps : longest;
        printf("size L%d C%d H%d: N %.0f (all) %.0f (non-embedding), %d points, trunk %ld "
               "steps\n", SIZES[s].layers, SIZES[s].width, SIZES[s].heads, Na, Nn,
               n_targets[s], longest);
    }
    /* the cosine references: the middle budget, `compare` of its sizes spread over the
     * profile (its ends and the middle) */
    int mid = nb / 2, ref_size[16], n_ref = 0, in_mid[N_SIZES_FULL], n_mid = 0;
    for (int s = 0; s < ns; s++)
        for (int k = 0; k < n_targets[s]; k++)
            if (targets[s][k].budget == budgets[mid] && targets[s][k].branch)
                in_mid[n_mid++] = s;
    for (int r = 0; r < o->compare && n_mid > 0; r++) {
        int pick = o->compare == 1 ? n_mid / 2
                                   : (int)lround((double)r * (n_mid - 1) / (o->compare - 1));
        if (n_ref == 0 || ref_size[n_ref - 1] != in_mid[pick])
            ref_size[n_ref++] = in_mid[pick];
    }
    printf("study: %d seeds x %d sizes x %d budgets (%.3g to %.3g FLOP as 6ND); cooldown "
           "branches of %.0f%%; %d cosine references at C %.3g; batch %d x %d, lr %g x 16 / "
           "width, %d threads, %d validation windows\n", o->seeds, ns, nb, budgets[0],
           budgets[nb - 1], 100 * o->cooldown, n_ref, budgets[mid], o->train.batch, T,
           o->train.lr, o->train.threads, o->train.eval_windows);

    /* The work: per seed, each size's trunk with its branches, then the cosine references;
     * the items are independent (their own trainer and seed), so --jobs processes share them
     * (the longest first, each to the least loaded process) and the numbers do not depend on
     * how. */
    Item items[MAX_ITEMS];
    int n_items = 0;
    for (int seed = 0; seed < o->seeds; seed++) {
        for (int s = 0; s < ns; s++) {
            long longest = 0;
            for (int k = 0; k < n_targets[s]; k++)
                longest = targets[s][k].steps > longest ? targets[s][k].steps : longest;
            if (n_targets[s] && n_items < MAX_ITEMS)
                items[n_items++] = (Item){ seed, s, -1, longest *
                                           count_all(SIZES[s].layers, SIZES[s].width, V, T) };
        }
        for (int r = 0; r < n_ref && n_items < MAX_ITEMS; r++)
            for (int k = 0; k < n_targets[ref_size[r]]; k++)
                if (targets[ref_size[r]][k].budget == budgets[mid] &&
                    targets[ref_size[r]][k].branch)
                    items[n_items++] = (Item){ seed, ref_size[r], k, budgets[mid] };
    }
    Work w = { .o = o, .ds = ds, .targets = targets, .n_targets = n_targets };
    double start = progress_now();
    int n = o->jobs > 1 ? run_parallel(&w, items, n_items, pts) : run_items(&w, items, n_items,
                                                                          NULL, -1, pts);
    qsort(pts, (size_t)n, sizeof *pts, point_order);
    TsvWriter *log = tsv_open_in(o->out, "scaling_study.tsv", SCALING_POINT_COLUMNS);
    for (int i = 0; i < n; i++)
        write_point(log, &pts[i]);
    tsv_close_or_die(log);
    char buf[32];
    double secs = progress_now() - start;
    struct rusage self, children;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &children);
    double cpu = (double)self.ru_utime.tv_sec + 1e-6 * (double)self.ru_utime.tv_usec +
                 (double)children.ru_utime.tv_sec + 1e-6 * (double)children.ru_utime.tv_usec;
    printf("study done: %d points in %s of wall clock, %.0f s of CPU (%d processes); wrote "
           "%s/scaling_study.tsv\n", n, progress_format_duration(secs, buf, sizeof buf), cpu,
           o->jobs, o->out);
    dataset_free(ds);
    return n;
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
    static ScalingPoint pts[MAX_POINTS];
    int n;
    double start = progress_now();
    if (o.from_results) {
        char err[512];
        if (!scaling_points_read(o.from_results, pts, MAX_POINTS, &n, err, sizeof err))
            cli_die(1, "--from-results: %s", err);
        printf("read %d points from %s\n", n, o.from_results);
    } else {
        n = run_study(&o, pts);
        o.analyse.seconds = progress_now() - start;
    }
    return scaling_analyse(pts, n, &o.analyse) ? 0 : 1;
}

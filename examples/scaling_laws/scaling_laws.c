/* scaling_laws: Kaplan's and Chinchilla's scaling laws, measured on tiny character-level GPTs,
 * with cooldown branches (docs/scaling_laws.md).
 *
 * The study's runs (sizes x budgets, a constant-rate trunk per size and seed with a cooldown
 * branched at every D, a few cosine references: analysis/scaling_sweep.h), then its analysis
 * (analysis/scaling_study.h, which prints the tables of approaches 2 and 3 and Kaplan's) and its
 * files (analysis/scaling_tables.h). This file: the flags, the runs' lines, the rest of the
 * report (the cosine check, the compute, the agreement, the summary) and the figure.
 *
 * Output, in --out DIR: see --help; --from-results FILE refits from a saved scaling_study.tsv
 * without training. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/scaling_sweep.h"
#include "analysis/scaling_tables.h"
#include "cli/settings.h"
#include "data/dataset.h"
#include "data/text.h"
#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "examples/common/tsv.h"

enum { MAX_POINTS = 2048 };

typedef struct {
    const char *data, *out, *from_results;
    ScalingSweepConfig study;   /* study.train.seed: the first seed, and the resampling's */
    int         bootstrap;      /* resamples for the intervals */
} Options;

static void set_seed(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    ((Options *)opts)->study.train.seed = (uint64_t)cli_long(flag, arg, 0, 1L << 40);
}

enum { FLAG_QUICK = 256, FLAG_DATA, FLAG_OUT, FLAG_FROM, FLAG_MIN_STEPS, FLAG_MAX_EPOCHS,
       FLAG_MIN_TPP, FLAG_MAX_TPP, FLAG_SEEDS, FLAG_JOBS, FLAG_COOLDOWN, FLAG_COMPARE, FLAG_SEQ,
       FLAG_BATCH, FLAG_LR, FLAG_EVAL, FLAG_BOOT, FLAG_SEED, FLAG_THREADS, FLAG_KERNELS };

#define FIELD(f) offsetof(Options, f)
static const Setting SETTINGS[] = {
    { .name = "quick", .id = FLAG_QUICK, .type = SETTING_SWITCH, .offset = FIELD(study.quick),
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
    { .name = "seeds", .id = FLAG_SEEDS, .type = SETTING_INT, .offset = FIELD(study.seeds),
      .lo = 1, .hi = 100, .def = "2", .arg = "N",
      .help = "seeds per (size, budget): --seed, --seed + 1, ..." },
    { .name = "jobs", .id = FLAG_JOBS, .type = SETTING_INT, .offset = FIELD(study.jobs),
      .lo = 1, .hi = 64, .def = "2", .arg = "N",
      .help = "processes that share the runs (each with --threads);\nthe numbers do not depend on it" },
    { .name = "cooldown", .id = FLAG_COOLDOWN, .type = SETTING_DOUBLE, .offset = FIELD(study.cooldown),
      .lo = 0.01, .hi = 0.9, .def = "0.2", .arg = "F",
      .help = "a branch cools down over the last F of its run (1-sqrt)" },
    { .name = "compare", .id = FLAG_COMPARE, .type = SETTING_INT, .offset = FIELD(study.compare),
      .lo = 0, .hi = 16, .def = "3", .arg = "K",
      .help = "K sizes of the middle budget also trained as separate\n"
              "cosine runs (every seed), to check the branches" },
    { .name = "min-tpp", .id = FLAG_MIN_TPP, .type = SETTING_DOUBLE, .offset = FIELD(study.min_tpp),
      .lo = 0, .hi = 1e9, .def = "5", .arg = "X",
      .help = "skip a pair with fewer characters per parameter" },
    { .name = "max-tpp", .id = FLAG_MAX_TPP, .type = SETTING_DOUBLE, .offset = FIELD(study.max_tpp),
      .lo = 1, .hi = 1e12, .def = "5000", .arg = "X",
      .help = "skip a pair with more characters per parameter" },
    { .name = "min-steps", .id = FLAG_MIN_STEPS, .type = SETTING_INT, .offset = FIELD(study.min_steps),
      .lo = 1, .hi = 1 << 30, .def = "50", .arg = "N",
      .help = "skip a pair with fewer steps" },
    { .name = "max-epochs", .id = FLAG_MAX_EPOCHS, .type = SETTING_DOUBLE,
      .offset = FIELD(study.max_epochs), .lo = 1e-6, .hi = 1e9, .def = "10", .arg = "X",
      .help = "skip a pair whose D is more than X passes over the\ntraining text" },
    { .name = "seq", .id = FLAG_SEQ, .type = SETTING_INT, .offset = FIELD(study.train.seq),
      .lo = 1, .hi = 4096, .def = "64", .arg = "N", .help = "sequence length T" },
    { .name = "batch", .id = FLAG_BATCH, .type = SETTING_INT, .offset = FIELD(study.train.batch),
      .lo = 1, .hi = 1 << 16, .def = "4", .arg = "N", .help = "rows per step" },
    { .name = "lr", .id = FLAG_LR, .type = SETTING_DOUBLE, .offset = FIELD(study.train.lr),
      .lo = 1e-9, .hi = 10.0, .def = "0.02", .arg = "X",
      .help = "AdamW's peak rate at width 16; width C trains at X 16 / C" },
    { .name = "eval-windows", .id = FLAG_EVAL, .type = SETTING_INT,
      .offset = FIELD(study.train.eval_windows), .lo = 0, .hi = 1 << 30, .arg = "N",
      .help = "validation windows of T characters (0: all;\ndefault 512, --quick 256)" },
    { .name = "bootstrap", .id = FLAG_BOOT, .type = SETTING_INT,
      .offset = FIELD(bootstrap), .lo = 0, .hi = 100000, .arg = "N",
      .help = "resamples for the 5-95% intervals (default 200,\n--quick 50)" },
    { .name = "seed", .id = FLAG_SEED, .type = SETTING_CUSTOM, .set = set_seed, .def = "1",
      .arg = "N", .help = "the first seed (weights and data), and the resampling's" },
    { .name = "threads", .id = FLAG_THREADS, .type = SETTING_INT, .offset = FIELD(study.train.threads),
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
    Options o = { .study.train = scaling_train_defaults() };
    o.study.train.eval_windows = -1;    /* not given: decided by --quick below */
    o.bootstrap = -1;
    settings_defaults(SETTINGS, N_SETTINGS, &o);
    settings_parse(SETTINGS, N_SETTINGS, &o, NULL, FLAG_QUICK, usage, argc, argv);
    if (o.study.train.eval_windows < 0)
        o.study.train.eval_windows = o.study.quick ? 256 : 512;
    if (o.bootstrap < 0)
        o.bootstrap = o.study.quick ? 50 : 200;
    if (o.study.min_tpp >= o.study.max_tpp)
        cli_die(2, "--min-tpp %g must be below --max-tpp %g", o.study.min_tpp, o.study.max_tpp);
    return o;
}

/* A trunk's line: its points' time and the losses by every parameter; a cosine run's loss. */
static void item_done(void *ctx, const ScalingItem *it, const char *label, const ScalingPoint *p,
                      int n)
{
    (void)ctx;
    if (it->ref >= 0) {
        printf("%s: %ld steps, val loss %.4f, %.1f s\n", label, p->steps, p->val_loss,
               p->seconds);
        return;
    }
    double secs = 0;
    for (int k = 0; k < n; k++)
        secs += p[k].seconds;
    printf("%s: %d points in %.1f s;", label, n, secs);
    for (int k = 0; k < n; k++)
        if (p[k].count == SCALING_COUNT_ALL)
            printf(" %s %.3g %.3f", p[k].schedule == SCALING_SCHED_COOLDOWN ? "cd" : "const",
                   p[k].budget, p[k].val_loss);
    printf("\n");
}

static void print_plan(const ScalingSweep *sw)
{
    const ScalingSweepConfig *c = &sw->cfg;
    for (int s = 0; s < sw->ns; s++)
        printf("size L%d C%d H%d: N %.0f (all) %.0f (non-embedding), %d points, trunk %ld "
               "steps\n", sw->sizes[s].layers, sw->sizes[s].width, sw->sizes[s].heads,
               sw->N_all[s], sw->N_nonemb[s], sw->n_targets[s], sw->trunk_steps[s]);
    printf("study: %d seeds x %d sizes x %d budgets (%.3g to %.3g FLOP as 6ND); cooldown "
           "branches of %.0f%%; %d cosine references at C %.3g; batch %d x %d, lr %g x 16 / "
           "width, %d threads, %d validation windows\n", c->seeds, sw->ns, sw->nb,
           sw->budgets[0], sw->budgets[sw->nb - 1], 100 * c->cooldown, sw->n_ref,
           sw->budgets[sw->mid], c->train.batch, c->train.seq, c->train.lr, c->train.threads,
           c->train.eval_windows);
}

/* Trains the study into pts, writes OUT/scaling_study.tsv; returns the number of points. */
/* Each run's steps on the progress line (a plain line every half run). */
static void watch_begin(void *ctx, long steps) { progress_start(ctx, 0, steps, steps / 2); }
static void watch_end(void *ctx) { progress_finish(ctx); }
static void watch_step(void *ctx, long step, double loss, long long tokens, const char *label)
{
    progress_update(ctx, step, loss, tokens, label);
}

static int run_study(const Options *o, ScalingPoint *pts)
{
    char err[512], desc[256];
    Dataset *ds = dataset_open_text(o->data, o->study.train.seq, err, sizeof err);
    if (!ds)
        cli_die(1, "--data: %s", err);
    printf("data: %s\n", dataset_describe(ds, desc, sizeof desc));
    static ScalingSweep sw;
    scaling_sweep_plan(&o->study, dataset_vocab_size(ds), (double)text_train_len(ds->text), &sw);
    print_plan(&sw);
    Progress prog = { .out = stdout };
    ScalingWatch steps = { .begin = watch_begin, .step = watch_step, .end = watch_end,
                           .ctx = &prog };
    ScalingSweepWatch watch = { .watch = &steps, .done = item_done };
    double start = progress_now();
    int n = scaling_sweep_run(ds, &sw, o->out, &watch, pts, MAX_POINTS, err, sizeof err);
    if (n < 0)
        cli_die(1, "%s", err);
    TsvWriter *log = tsv_open_in(o->out, "scaling_study.tsv", SCALING_POINT_COLUMNS);
    for (int i = 0; i < n; i++)
        if (!scaling_write_point(log, &pts[i]))
            cli_die(1, "cannot write scaling_study.tsv");
    tsv_close_or_die(log);
    char buf[32];
    double secs = progress_now() - start;
    printf("study done: %d points in %s of wall clock, %.0f s of CPU (%d processes); wrote "
           "%s/scaling_study.tsv\n", n, progress_format_duration(secs, buf, sizeof buf),
           progress_cpu_seconds(), o->study.jobs, o->out);
    dataset_free(ds);
    return n;
}

static void print_cosine(const ScalingStudy *s)
{
    printf("\ncooldown branches against fixed-length cosine runs (mean over seeds; spread: the "
           "larger of the two seed ranges)\n");
    printf("  %4s %4s %9s %6s %9s %9s %9s %9s %9s %s\n", "L", "C", "budget", "seeds", "cosine",
           "branch", "constant", "diff", "spread", "");
    for (int i = 0; i < s->n_cosine; i++) {
        const ScalingCosineRow *r = &s->cosine[i];
        printf("  %4d %4d %9.3g %6d %9.4f %9.4f %9.4f %+9.4f %9.4f %s\n", r->layers, r->width,
               r->budget, r->seeds, r->cosine, r->branch, r->constant, r->diff, r->spread,
               r->agree ? "within the seeds' spread" : "outside the seeds' spread");
    }
    if (s->n_cosine)
        printf("  %d of %d compared points agree within the seeds' spread\n", s->n_agree,
               s->n_cosine);
    else
        printf("  (no cosine references in these results)\n");
}

static void print_compute(const ScalingStudy *s, double seconds)
{
    const ScalingCompute *c = &s->compute;
    printf("\ncompute: the trunks and branches trained %.4g characters (%.4g FLOP as 6ND, %.4g "
           "counted by the tape); a separate cosine run for each cooldown point would train "
           "%.4g (%.4g FLOP as 6ND): %.1f%% saved. The cosine references added %.4g FLOP as "
           "6ND (%.4g counted); the trunks' steps past their last cooldown point, for Kaplan's "
           "points alone, %.4g.", c->trained, c->trained_6nd, c->counted, c->separate,
           c->separate_6nd, c->saved_percent, c->cosine_6nd, c->cosine_counted, c->kaplan_6nd);
    if (seconds > 0)
        printf(" The study took %.0f s (%.1f min) of wall clock.", seconds, seconds / 60);
    printf("\n");
    printf("\ncounted training FLOP per token against 6N (one row a size):\n");
    printf("  %4s %4s %9s %9s %14s %10s %10s\n", "L", "C", "N_all", "N_nonemb", "counted/token",
           "/ 6N_all", "/ 6N_nonemb");
    for (int i = 0; i < s->n_flop; i++) {
        const ScalingFlopRow *r = &s->flop[i];
        printf("  %4d %4d %9.0f %9.0f %14.4g %10.3f %10.3f\n", r->layers, r->width, r->N_all,
               r->N_nonemb, r->per_token, r->per_token / (6 * r->N_all),
               r->per_token / (6 * r->N_nonemb));
    }
}

static void print_agreement(const ScalingStudy *s)
{
    printf("\nat the largest budget, C = %.3g: D/N %.4g characters (approach 2), %.4g "
           "(approach 3): about %.3g and %.3g BPE tokens per parameter at %.0f characters a "
           "token (assumed)\n", s->C_max, s->tpp2, s->tpp3, s->tpp2 / SCALING_CHARS_PER_BPE,
           s->tpp3 / SCALING_CHARS_PER_BPE, SCALING_CHARS_PER_BPE);
    printf("agreement: D/N ratio %.2f (%s 1.5), |a2 - a3| = %.3f (%s 0.1); Kaplan-style a = "
           "%.3f (approach 2), %.3f (approach 3)\n", s->tpp_ratio,
           s->tpp_ratio <= 1.5 ? "within" : "beyond", s->a_difference,
           s->a_difference <= 0.1 ? "within" : "beyond", s->k2.a,
           s->choice_a[SCALING_CHOICE_KAPLAN]);
    printf("intervals (5-95%%): D/N approach2 %.4g to %.4g, approach3 %.4g to %.4g; a approach2 "
           "%.3f to %.3f, approach3 %.3f to %.3f\n", s->i2.tpp_lo, s->i2.tpp_hi, s->i3.tpp_lo,
           s->i3.tpp_hi, s->i2.a_lo, s->i2.a_hi, s->i3.a_lo, s->i3.a_hi);
}

/* Writes the figure's tables (analysis/scaling_tables.h) into out and draws OUT/scaling_laws.png
 * from them (scaling_laws.gp). */
static void draw_figure(const char *out, const ScalingPoint *pts, int n, const ScalingStudy *s)
{
    char err[800];
    if (!scaling_tables_write(out, pts, n, s, err, sizeof err))
        cli_die(1, "%s", err);
    char bl[512] = "";
    for (int b = 0; b < s->nb; b++)
        snprintf(bl + strlen(bl), sizeof bl - strlen(bl), "%s%.3g", b ? " " : "", s->budgets[b]);
    char path[SCALING_TABLES + 1][1024], nbs[16], a2s[32], a3s[32], k2s[32];
    for (int i = 0; i <= SCALING_TABLES; i++)
        snprintf(path[i], sizeof path[i], "%s/%s", out,
                 i < SCALING_TABLES ? SCALING_TABLE_FILES[i] : "scaling_laws.png");
    snprintf(nbs, sizeof nbs, "%d", s->nb);
    snprintf(a2s, sizeof a2s, "%.3f", s->a2.a);
    snprintf(a3s, sizeof a3s, "%.3f", s->a3);
    snprintf(k2s, sizeof k2s, "%.3f", s->k2.a);
    const char *names[] = { "points", "isoflop", "optimal", "kaplan", "lines", "output", "nb",
                            "budgets", "a2", "a3", "k2" };
    const char *values[] = { path[0], path[1], path[2], path[3], path[4], path[5], nbs, bl,
                             a2s, a3s, k2s };
    if (plot_run_vars(TAPEGRAD_SOURCE_DIR "/examples/scaling_laws/scaling_laws.gp", names,
                      values, 11, "output") == PLOT_OK)
        printf("wrote %s\n", path[5]);
}

/* Analyses the points, prints it all and the summary line, writes OUT/scaling_fit.tsv and the
 * figure's files; seconds: the study's wall clock (0: not known, a refit). False (with a
 * message on stderr) when there are too few points to fit. */
static bool analyse(const ScalingPoint *pts, int n, const Options *o, double seconds)
{
    TsvWriter *fit = tsv_open_in(o->out, "scaling_fit.tsv", SCALING_QUANTITY_COLUMNS);
    ScalingStudy *s = malloc(sizeof *s);
    if (!s)
        cli_die(1, "out of memory");
    ScalingStudyStatus status = scaling_study_analyse(pts, n, o->bootstrap, o->study.train.seed,
                                                      seconds, s);
    if (status == SCALING_STUDY_TOO_FEW)
        fprintf(stderr, "scaling_laws: %d cooldown points over %d budgets: too few to fit\n",
                s->n_points, s->nb);
    else
        scaling_study_print_approach2(s, stdout);
    if (status == SCALING_STUDY_NO_FIT)
        fprintf(stderr, "scaling_laws: approach 3 found no finite fit\n");
    scaling_tables_write_quantities(fit, s);
    tsv_close_or_die(fit);
    if (status == SCALING_STUDY_OK) {
        scaling_study_print_approach3(s, stdout);
        scaling_study_print_kaplan(s, stdout);
        print_cosine(s);
        print_compute(s, seconds);
        print_agreement(s);
        draw_figure(o->out, pts, n, s);
        printf("summary: D/N approach2 %.4g approach3 %.4g; a approach2 %.3f approach3 %.3f\n",
               s->tpp2, s->tpp3, s->a2.a, s->a3);
    }
    free(s);
    return status == SCALING_STUDY_OK;
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
    double start = progress_now(), seconds = 0;
    if (o.from_results) {
        char err[512];
        if (!scaling_points_read(o.from_results, pts, MAX_POINTS, &n, err, sizeof err))
            cli_die(1, "--from-results: %s", err);
        printf("read %d points from %s\n", n, o.from_results);
    } else {
        n = run_study(&o, pts);
        seconds = progress_now() - start;
    }
    return analyse(pts, n, &o, seconds) ? 0 : 1;
}

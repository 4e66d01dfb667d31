/* loss_scaling: the mixed-precision paper's figure on our model (Micikevicius et al. 2018,
 * "Mixed Precision Training", figure 3), then what it means for training.
 *
 * Part 1 (analysis/grad_probe.h): the activation gradients of one batch of train_gpt's default
 * model part-way through fp32 training, as a histogram of log2 |g| against fp16's range; the
 * share of nonzero gradients that fp16 turns into 0 without scaling and with a loss scale S:
 * the paper's (the largest power of two that does not overflow the largest gradient),
 * GradScaler's initial 2^16, and the dynamic scaler's median over its run of part 2.
 *
 * Part 2 (analysis/precision_runs.h; each run a train_gpt subprocess, train_run.h): train_gpt
 * at fp32, bf16, fp16 without and with dynamic loss scaling and fp8, same seed and steps, and a
 * control (fp32 on another thread count): the loss curves, the dynamic scale, and a table.
 *
 * With --seeds: part 2 once per seed, and every run's final validation loss over fp32's of the
 * same seed summed up over the seeds: the final loss of this task moves by more than the
 * formats move it, so only many seeds can say whether a format is within 2% of fp32 (read the
 * t interval with the control's beside it: a run left on the plateau is not what it assumes).
 *
 * Output in --out DIR: loss_scaling_{hist,underflow}.tsv (part 1), loss_scaling_{curves,table}
 * .tsv, runs/ and commands.txt (part 2), loss_scaling_seeds{,_summary}.tsv and seed_S/
 * (--seeds); markdown on stdout. figure.sh draws docs/mixed_precision.md's figures. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/grad_probe.h"
#include "analysis/precision_runs.h"
#include "autograd/parallel.h"
#include "cli/settings.h"
#include "examples/common/cli.h"
#include "examples/common/train_run.h"

typedef struct {
    bool        probe_only, runs_only;  /* the flags */
    bool        probe, curves;          /* the two parts; both by default */
    PrecisionRunsSetup run;             /* part 2's runs, in --out */
    int         jobs;                   /* runs at once */
    bool        from_logs;              /* start no run: read back what earlier ones left */
    long        probe_step;             /* fp32 steps before the gradients are measured */
    long        seeds[SEED_MAX];        /* --seeds: part 2 for each (n_seeds 0: --seed) */
    int         n_seeds;
} Options;

enum { FLAG_PROBE_ONLY = 256, FLAG_RUNS_ONLY, FLAG_OUT, FLAG_TRAIN_GPT, FLAG_STEPS,
       FLAG_PROBE_STEP, FLAG_EVAL_EVERY, FLAG_EVAL_EXAMPLES, FLAG_COMPARE_STEP, FLAG_SEED,
       FLAG_SEEDS, FLAG_FROM_LOGS, FLAG_THREADS, FLAG_KERNELS, FLAG_JOBS };

static void set_seeds(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    Options *o = opts;
    o->n_seeds = seed_list_parse(arg, o->seeds, SEED_MAX);
    if (o->n_seeds < 0)
        cli_usage_error("%s '%s': not a list of distinct seeds like 1-8 or 1,2,5 (at most %d)",
                        flag, arg, SEED_MAX);
}

_Static_assert(SEED_MAX == 31, "--seeds' help names SEED_MAX");
_Static_assert(PRECISION_RUNS_N == 6, "--jobs' range is PRECISION_RUNS_N");

#define FIELD(f) offsetof(Options, f)
static const Setting SETTINGS[] = {
    { .name = "probe-only", .id = FLAG_PROBE_ONLY, .type = SETTING_SWITCH,
      .offset = FIELD(probe_only), .help = "part 1 only (no train_gpt runs)" },
    { .name = "runs-only", .id = FLAG_RUNS_ONLY, .type = SETTING_SWITCH,
      .offset = FIELD(runs_only), .help = "part 2 only" },
    { .name = "out", .id = FLAG_OUT, .type = SETTING_FOLDER, .offset = FIELD(run.dir),
      .def = "loss_scaling_out", .arg = "DIR",
      .help = "where the TSV files and the runs' logs go" },
    { .name = "train-gpt", .id = FLAG_TRAIN_GPT, .type = SETTING_STRING,
      .offset = FIELD(run.train_gpt), .arg = "PATH",
      .help = "the train_gpt program (default: next to this one)" },
    { .name = "steps", .id = FLAG_STEPS, .type = SETTING_LONG, .offset = FIELD(run.steps),
      .lo = 20, .hi = 1000000, .def = "2000", .arg = "N",
      .help = "steps of every run, as train_gpt's default" },
    { .name = "probe-step", .id = FLAG_PROBE_STEP, .type = SETTING_LONG,
      .offset = FIELD(probe_step), .lo = 0, .hi = 1000000, .def = "300", .arg = "N",
      .help = "fp32 steps before the gradients are measured" },
    { .name = "eval-every", .id = FLAG_EVAL_EVERY, .type = SETTING_LONG,
      .offset = FIELD(run.eval_every), .lo = 1, .hi = 1000000, .def = "100", .arg = "N",
      .help = "validation every N steps" },
    { .name = "eval-examples", .id = FLAG_EVAL_EXAMPLES, .type = SETTING_INT,
      .offset = FIELD(run.eval_examples), .lo = 1, .hi = 1 << 20, .def = "1000", .arg = "N",
      .help = "validation rows per evaluation" },
    { .name = "compare-step", .id = FLAG_COMPARE_STEP, .type = SETTING_LONG,
      .offset = FIELD(run.compare_step), .lo = 1, .hi = 1000000, .def = "200", .arg = "N",
      .help = "also compare the validation losses at this step, where\n"
              "the loss is still large and the runs have not yet\n"
              "parted (a multiple of --eval-every)" },
    { .name = "seed", .id = FLAG_SEED, .type = SETTING_LONG, .offset = FIELD(run.seed),
      .lo = 0, .hi = (double)(1L << 40), .def = "1", .arg = "N",
      .help = "weights and data of every run" },
    { .name = "seeds", .id = FLAG_SEEDS, .type = SETTING_CUSTOM, .set = set_seeds,
      .arg = "LIST",
      .help = "part 2 for each seed of LIST (1-8, 1,2,5, at most 31),\n"
              "each in --out/seed_S, then every run's validation loss\n"
              "over fp32's of the same seed, summed up over the seeds\n"
              "(loss_scaling_seeds*.tsv); no part 1" },
    { .name = "from-logs", .id = FLAG_FROM_LOGS, .type = SETTING_SWITCH,
      .offset = FIELD(from_logs),
      .help = "start no run: read the logs an earlier run with the same\n"
              "options left in --out (to redo the tables)" },
    { .name = "threads", .id = FLAG_THREADS, .type = SETTING_INT, .offset = FIELD(run.threads),
      .lo = 0, .hi = 1024, .def = "1", .arg = "N",
      .help = "threads per run and for part 1 (the results depend on\n"
              "the thread count, and one is reproducible); the control\n"
              "runs on 2 (on 1 if N is not 1)" },
    { .name = "kernels", .id = FLAG_KERNELS, .type = SETTING_CUSTOM,
      .set = settings_set_kernels, .arg = "K", .help = SETTINGS_KERNELS_HELP },
    { .name = "jobs", .id = FLAG_JOBS, .type = SETTING_INT, .offset = FIELD(jobs),
      .lo = 1, .hi = PRECISION_RUNS_N, .def = "1", .arg = "N",
      .help = "runs at once; results do not depend on it" },
    { .heading = "  -h, --help          this text" },
};
#undef FIELD
enum { N_SETTINGS = sizeof SETTINGS / sizeof SETTINGS[0] };

static void usage(void)
{
    printf("Usage: loss_scaling [OPTION]...\n"
           "Part 1: the activation gradients of train_gpt's default model after --probe-step\n"
           "fp32 steps, as a log2 histogram against fp16's range, and the share of them fp16\n"
           "turns into zero without a loss scale and with one. Part 2: train_gpt at fp32,\n"
           "bf16, fp16 without loss scaling, fp16 with dynamic loss scaling and fp8, same\n"
           "seed and steps, and fp32 again on another thread count (a control: only the\n"
           "order of the sums differs): the loss curves, the dynamic scale, and a table\n"
           "against fp32.\n\n");
    settings_usage(SETTINGS, N_SETTINGS);
}

static Options parse(int argc, char **argv)
{
    Options o = { 0 };
    settings_defaults(SETTINGS, N_SETTINGS, &o);
    settings_parse(SETTINGS, N_SETTINGS, &o, NULL, FLAG_PROBE_ONLY, usage, argc, argv);
    o.probe = !o.runs_only;
    o.curves = !o.probe_only;
    if (!o.probe && !o.curves)
        cli_usage_error("--probe-only and --runs-only exclude each other");
    if (o.n_seeds > 0 && !o.curves)
        cli_usage_error("--seeds repeats part 2; --probe-only leaves it out");
    if (o.n_seeds > 0)
        o.probe = false;        /* part 1 is one seed's figure */
    if (o.probe && o.probe_step >= o.run.steps)
        cli_usage_error("--probe-step %ld must come before the end of the run (--steps %ld)",
                        o.probe_step, o.run.steps);
    if (o.run.compare_step % o.run.eval_every != 0 || o.run.compare_step > o.run.steps)
        cli_usage_error("--compare-step %ld must be an evaluation step: a multiple of "
                        "--eval-every %ld, at most --steps %ld", o.run.compare_step,
                        o.run.eval_every, o.run.steps);
    return o;
}

/* DIR/NAME, in a buffer the next call overwrites: where a result file goes. */
static const char *in_dir(const char *dir, const char *name)
{
    static char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* ---- part 1 ------------------------------------------------------------------------------- */

static void print_probe(const Options *o, const GradProbe *p, const GradProbeResult *r, int n)
{
    const GradHist *h = &p->hist;
    int lo, hi;
    grad_hist_range(h, &lo, &hi);
    printf("activation gradients of one batch after %ld fp32 steps (batch loss %.6f): %zu "
           "values in %d tensors\n", o->probe_step, p->loss, p->n_grads, p->n_tensors);
    double logged = o->curves ? precision_run_logged_loss(&o->run, 0, o->probe_step + 1) : NAN;
    if (!isnan(logged))
        printf("  the fp32 train_gpt run's loss at step %ld (the same weights, batch and thread "
               "count): %.6f\n", o->probe_step + 1, logged);
    printf("  exactly zero %lld (%.2f%%), largest |g| %.4g (bin 2^%d), smallest nonzero in "
           "bin 2^%d\n", h->zeros, 100.0 * h->zeros / h->total, (double)p->amax,
           grad_hist_exponent(p->amax), lo);
    printf("  fp16: smallest subnormal 2^-24 = %.3g, smallest normal 2^-14 = %.3g, largest "
           "65504; below 2^-25 a value rounds to 0\n\n", 0x1p-24, 0x1p-14);
    printf("| loss scale | chosen as | nonzero gradients | become 0 in fp16 (rounded) | "
           "become 0 in an fp16 backward pass | overflow (rounded / pass) |\n");
    printf("|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        double nz = (double)r[i].rounded.nonzero;
        printf("| 2^%d | %s | %lld | %lld (%.3f%%) | %lld (%.3f%%) | %lld / %lld |\n",
               grad_hist_exponent(r[i].scale), r[i].rule, r[i].rounded.nonzero,
               r[i].rounded.underflow, 100.0 * r[i].rounded.underflow / nz, r[i].pass_zero,
               100.0 * r[i].pass_zero / nz, r[i].rounded.overflow, r[i].pass_nonfinite);
    }
}

/* ---- part 2 ------------------------------------------------------------------------------- */

static double rel(double x, double ref) { return (x - ref) / ref; }

static void print_table(const PrecisionRunsSetup *t, const PrecisionRunSummary *s)
{
    printf("\ntrain_gpt on the add task, %ld steps, seed %ld, %d thread%s per run (the fp32 "
           "control: %d); validation loss and exact match (teacher-forced) at the last "
           "evaluation, and the validation loss at step %ld; relative differences against "
           "fp32\n\n", t->steps, t->seed, t->threads, t->threads == 1 ? "" : "s",
           precision_runs_threads(PRECISION_RUNS_N - 1, t->threads), t->compare_step);
    printf("| run | val loss | vs fp32 | exact match | val loss @%ld | vs fp32 | skipped | "
           "final scale | peak act bytes | vs fp32 |\n", t->compare_step);
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        if (!s[i].ok) {
            printf("| %s | %s | | | | | | | | |\n", PRECISION_RUNS[i].name,
                   s[i].diverged ? "diverged" : "failed");
            continue;
        }
        printf("| %s | %.4g | %+.1f%% | %.1f%% | %.4g | %+.1f%% | %.0f | %g | %.0f | %.3f |\n",
               PRECISION_RUNS[i].name, s[i].val_loss, 100.0 * rel(s[i].val_loss, s[0].val_loss),
               100.0 * s[i].val_acc, s[i].compare_loss,
               100.0 * rel(s[i].compare_loss, s[0].compare_loss), s[i].skipped,
               s[i].final_scale, s[i].peak_act, s[i].peak_act / s[0].peak_act);
    }
}

/* Part 2's runs in t->dir, --jobs at a time (their commands in commands.txt before any starts:
 * a run killed later still leaves the list), or with --from-logs read back from what runs of
 * the same commands left there; col[i] is run i's log, summary[i] what it says in the end. */
static void train_runs(const Options *o, const PrecisionRunsSetup *t, PrecisionRunLog *col,
                       PrecisionRunSummary *summary)
{
    static RunSpec spec[PRECISION_RUNS_N];
    static PrecisionRunCommand cmd;
    RunResult res[PRECISION_RUNS_N];
    const char *labels[PRECISION_RUNS_N];
    char commands[700];
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        memset(&spec[i], 0, sizeof spec[i]);
        precision_run_command(t, i, &cmd);
        for (int j = 0; j < cmd.n; j++)
            run_arg(&spec[i], "%s", cmd.arg[j]);
        precision_run_path(t, i, "tsv", spec[i].log_path, sizeof spec[i].log_path);
        precision_run_path(t, i, "out", spec[i].out_path, sizeof spec[i].out_path);
        labels[i] = PRECISION_RUNS[i].name;
    }
    snprintf(commands, sizeof commands, "%s/commands.txt", t->dir);
    int match = o->from_logs ? run_commands_match(commands, spec, PRECISION_RUNS_N) : 1;
    if (match < 0)
        cli_die(1, "--from-logs: no %s (run once without --from-logs)", commands);
    if (!match)
        cli_die(1, "--from-logs: %s lists other commands than these options make (another "
                "--steps, --seed, --threads or --train-gpt?)", commands);
    for (int i = 0; o->from_logs && i < PRECISION_RUNS_N; i++)
        if (!run_result_from_files(&spec[i], t->steps, &res[i]))
            cli_die(1, "--from-logs: %s is not a finished run of %ld steps", spec[i].log_path,
                    t->steps);
    if (!o->from_logs) {
        run_make_dir(in_dir(t->dir, "runs"));
        run_commands_write(commands, spec, PRECISION_RUNS_N);
        run_jobs(spec, res, PRECISION_RUNS_N, o->jobs, labels);
    }
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        if (!precision_run_log_read(spec[i].log_path, t->steps, &col[i]) ||
            !precision_run_summarize(res[i].ok, res[i].diverged, res[i].val_loss,
                                     res[i].val_acc, &col[i], t->steps, t->compare_step,
                                     &summary[i]))
            cli_die(1, "out of memory");
}

/* Part 2 in t->dir: the runs, their curves and table written, and the validation loss of
 * every run at every evaluation printed: where the curves part, and by how much. */
static void runs_all(const Options *o, const PrecisionRunsSetup *t,
                     PrecisionRunSummary *summary)
{
    PrecisionRunLog col[PRECISION_RUNS_N];
    char err[800];
    train_runs(o, t, col, summary);
    cli_check(precision_runs_write_curves(in_dir(t->dir, "loss_scaling_curves.tsv"), col,
                                          t->steps, err, sizeof err), err);
    printf("\nvalidation loss at every evaluation\n\n| step |");
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        printf(" %s |", PRECISION_RUNS[i].name);
    printf("\n|---|");
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        printf("---|");
    printf("\n");
    for (long s = t->eval_every; s <= t->steps; s += t->eval_every) {
        printf("| %ld |", s);
        for (int i = 0; i < PRECISION_RUNS_N; i++)
            printf(" %.4g |", col[i].val_loss[s]);
        printf("\n");
    }
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        precision_run_log_free(&col[i]);
    cli_check(precision_runs_write_table(in_dir(t->dir, "loss_scaling_table.tsv"), summary,
                                         t->steps, t->compare_step, err, sizeof err), err);
}

/* ---- over the seeds ----------------------------------------------------------------------- */

static void print_per_seed(const Options *o, const PrecisionRunSummary *sum)
{
    printf("\n## every seed\n\nfinal validation loss (exact match), %ld steps, %d thread%s per "
           "run (the fp32 control: %d)\n\n| run |", o->run.steps, o->run.threads,
           o->run.threads == 1 ? "" : "s",
           precision_runs_threads(PRECISION_RUNS_N - 1, o->run.threads));
    for (int k = 0; k < o->n_seeds; k++)
        printf(" seed %ld |", o->seeds[k]);
    printf("\n|---|");
    for (int k = 0; k < o->n_seeds; k++)
        printf("---|");
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        printf("\n| %s |", PRECISION_RUNS[i].name);
        for (int k = 0; k < o->n_seeds; k++) {
            const PrecisionRunSummary *s = &sum[k * PRECISION_RUNS_N + i];
            if (s->ok)
                printf(" %.3g (%.0f%%) |", s->val_loss, 100.0 * s->val_acc);
            else
                printf(" %s |", s->diverged ? "diverged" : "failed");
        }
    }
    printf("\n");
}

/* "geo. mean [lo, hi] | median | min..max | within" of one set of ratios. */
static void print_ratios(int digits, const SeedStats *r, int within)
{
    printf(" %.*g [%.*g, %.*g] | %.*g | %.*g..%.*g | %d of %d |", digits, r->geomean, digits,
           r->ci_lo, digits, r->ci_hi, digits, r->median, digits, r->min, digits, r->max,
           within, r->n);
}

static void print_over_seeds(const Options *o, const PrecisionOverSeeds *v)
{
    printf("\n## over the seeds\n\nratio: a run's validation loss over fp32's of the same "
           "seed; geometric mean of the ratios with its 95%% interval (Student's t on the log "
           "ratios), median, min..max, and the seeds within 2%% (|ratio - 1| <= 0.02); solved: "
           "final exact match >= %.0f%%. Every seed is in (a run left on the plateau too); a "
           "diverged run is left out of its row's counts.\n\n", 100.0 * PRECISION_RUNS_SOLVED);
    printf("| run | solved | final val loss (geo. mean) | vs fp32: geo. mean [95%%] | median "
           "| min..max | within 2%% | at step %ld: vs fp32 [95%%] | median | min..max | "
           "within 2%% |\n|---|---|---|---|---|---|---|---|---|---|---|\n", o->run.compare_step);
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        printf("| %s | %d of %d | %.3g |", PRECISION_RUNS[i].name, v[i].solved, o->n_seeds,
               v[i].loss_st.geomean);
        if (i == 0) {
            printf(" (reference) | | | | (reference: geo. mean %.4g) | | | |\n",
                   v[i].early_st.geomean);
            continue;
        }
        /* the early ratios are near 1: more digits */
        print_ratios(3, &v[i].ratio_st, v[i].within);
        print_ratios(5, &v[i].early_ratio_st, v[i].early_within);
        printf("\n");
    }
}

/* Part 2 once per seed, in --out/seed_S (the files of a single-seed run), then the runs over
 * the seeds, written and printed. */
static void seeds_all(const Options *o)
{
    PrecisionRunSummary *sum = malloc((size_t)o->n_seeds * PRECISION_RUNS_N * sizeof *sum);
    PrecisionOverSeeds v[PRECISION_RUNS_N];
    char err[800];
    if (!sum)
        cli_die(1, "out of memory");
    run_make_dir(o->run.dir);
    for (int k = 0; k < o->n_seeds; k++) {
        char dir[600];
        PrecisionRunsSetup one = o->run;
        one.seed = o->seeds[k];
        snprintf(dir, sizeof dir, "%s/seed_%ld", o->run.dir, one.seed);
        one.dir = dir;
        run_make_dir(dir);
        fprintf(stderr, "seed %ld (%d of %d)\n", one.seed, k + 1, o->n_seeds);
        printf("\n# seed %ld\n", one.seed);
        runs_all(o, &one, &sum[k * PRECISION_RUNS_N]);
        print_table(&one, &sum[k * PRECISION_RUNS_N]);
    }
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        v[i] = precision_runs_over_seeds(sum, PRECISION_RUNS_N, o->n_seeds, i);
    cli_check(precision_runs_write_seeds(in_dir(o->run.dir, "loss_scaling_seeds.tsv"), sum, v,
                                         o->seeds, o->n_seeds, o->run.threads,
                                         o->run.compare_step, err, sizeof err), err);
    cli_check(precision_runs_write_over_seeds(in_dir(o->run.dir,
                                                     "loss_scaling_seeds_summary.tsv"),
                                              v, o->n_seeds, o->run.threads,
                                              o->run.compare_step, err, sizeof err), err);
    print_per_seed(o, sum);
    print_over_seeds(o, v);
    free(sum);
}

static void show_step(void *ctx, long step, long steps, double loss)
{
    (void)ctx;
    fprintf(stderr, "probe: fp32 step %ld/%ld, loss %.4f\n", step, steps, loss);
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    Options o = parse(argc, argv);
    if (!o.run.train_gpt)
        o.run.train_gpt = run_find_train_gpt(argv[0]);
    if (o.n_seeds > 0) {
        seeds_all(&o);
        printf("\nTSV files in %s\n", o.run.dir);
        return 0;
    }
    run_make_dir(o.run.dir);
    par_set_threads(o.run.threads);

    GradProbe *probe = NULL;
    GradProbeResult res[4];
    int n = 0;
    float max_scale = 1.0f;
    char err[800];
    if (o.probe) {
        GradProbeConfig c = grad_probe_defaults(o.run.steps, o.probe_step, o.run.seed);
        GradProbeWatch watch = { .step = show_step };
        probe = grad_probe_new(&c, &watch, err, sizeof err);
        cli_check(probe != NULL, err);
        max_scale = grad_max_pow2_scale(FMT_FP16, probe->amax);
        cli_check(grad_probe_measure(probe, 1.0f, "none", &res[n++], err, sizeof err), err);
        cli_check(grad_probe_measure(probe, 65536.0f, "GradScaler's initial 2^16", &res[n++],
                                     err, sizeof err), err);
        cli_check(grad_probe_measure(probe, max_scale, "largest 2^k not overflowing the "
                                     "largest gradient", &res[n++], err, sizeof err), err);
    }
    PrecisionRunSummary summary[PRECISION_RUNS_N];
    if (o.curves)
        runs_all(&o, &o.run, summary);
    if (o.probe) {
        float dyn = o.curves ? precision_runs_dynamic_scale(summary) : NAN;
        if (isfinite(dyn))
            cli_check(grad_probe_measure(probe, dyn, "median of the dynamic scaler", &res[n++],
                                         err, sizeof err), err);
        /* The outline in the figure: the paper's rule (row 3 of the underflow table). */
        cli_check(grad_hist_write(in_dir(o.run.dir, "loss_scaling_hist.tsv"), &probe->hist,
                                  grad_hist_exponent(max_scale), err, sizeof err), err);
        cli_check(grad_probe_write_underflow(in_dir(o.run.dir, "loss_scaling_underflow.tsv"),
                                             probe, res, n, err, sizeof err), err);
        print_probe(&o, probe, res, n);
        grad_probe_free(probe);
    }
    if (o.curves)
        print_table(&o.run, summary);
    printf("\nTSV files in %s\n", o.run.dir);
    return 0;
}

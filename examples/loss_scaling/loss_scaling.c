/* loss_scaling: the mixed-precision paper's figure on our model (Micikevicius et al. 2018,
 * "Mixed Precision Training", figure 3), then what it means for training.
 *
 * Part 1 (analysis/grad_probe.h): the activation gradients of one batch of train_gpt's default
 * model part-way through fp32 training, as a histogram of log2 |g| against fp16's range; the
 * share of nonzero gradients that fp16 turns into 0 without scaling and with a loss scale S:
 * the paper's (the largest power of two that does not overflow the largest gradient),
 * GradScaler's initial 2^16, and the dynamic scaler's median over its run of part 2.
 *
 * Part 2 (analysis/precision_runs.h; each run a train_gpt subprocess, examples/common/jobs.h): train_gpt
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
 * (--seeds); markdown on stdout, its tables printed by the rooms that compute their rows
 * (grad_probe_print, precision_runs_print_*). figure.sh draws docs/mixed_precision.md's figures. */
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
#include "examples/common/jobs.h"

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
    o->n_seeds = cli_seed_list(flag, arg, o->seeds, SEED_MAX);
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

/* The probe's lines: the batch, the fp32 run's logged loss on it, then its table. */
static void print_probe(const Options *o, const GradProbe *p, const GradProbeResult *r, int n)
{
    printf("activation gradients of one batch after %ld fp32 steps (batch loss %.6f): %zu "
           "values in %d tensors\n", o->probe_step, p->loss, p->n_grads, p->n_tensors);
    double logged = o->curves ? precision_run_logged_loss(&o->run, 0, o->probe_step + 1) : NAN;
    if (!isnan(logged))
        printf("  the fp32 train_gpt run's loss at step %ld (the same weights, batch and thread "
               "count): %.6f\n", o->probe_step + 1, logged);
    grad_probe_print(p, r, n, stdout);
}

/* ---- part 2 ------------------------------------------------------------------------------- */

/* Part 2's runs in t->dir, --jobs at a time (their commands in commands.txt before any starts:
 * a run killed later still leaves the list), or with --from-logs read back from what runs of
 * the same commands left there; col[i] is run i's log, summary[i] what it says in the end. */
static void train_runs(const Options *o, const PrecisionRunsSetup *t, PrecisionRunLog *col,
                       PrecisionRunSummary *summary)
{
    static JobSpec spec[PRECISION_RUNS_N];
    static PrecisionRunCommand cmd;
    JobResult res[PRECISION_RUNS_N];
    const char *labels[PRECISION_RUNS_N];
    char commands[700];
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        memset(&spec[i], 0, sizeof spec[i]);
        precision_run_command(t, i, &cmd);
        for (int j = 0; j < cmd.n; j++)
            job_arg(&spec[i], "%s", cmd.arg[j]);
        precision_run_path(t, i, "tsv", spec[i].log_path, sizeof spec[i].log_path);
        precision_run_path(t, i, "out", spec[i].out_path, sizeof spec[i].out_path);
        labels[i] = PRECISION_RUNS[i].name;
    }
    snprintf(commands, sizeof commands, "%s/commands.txt", t->dir);
    int match = o->from_logs ? jobs_commands_match(commands, spec, PRECISION_RUNS_N) : 1;
    if (match < 0)
        cli_die(1, "--from-logs: no %s (run once without --from-logs)", commands);
    if (!match)
        cli_die(1, "--from-logs: %s lists other commands than these options make (another "
                "--steps, --seed, --threads or --train-gpt?)", commands);
    for (int i = 0; o->from_logs && i < PRECISION_RUNS_N; i++)
        if (!job_result_from_files(&spec[i], t->steps, &res[i]))
            cli_die(1, "--from-logs: %s is not a finished run of %ld steps", spec[i].log_path,
                    t->steps);
    if (!o->from_logs) {
        job_make_dir(in_dir(t->dir, "runs"));
        jobs_commands_write(commands, spec, PRECISION_RUNS_N);
        jobs_run(spec, res, PRECISION_RUNS_N, o->jobs, labels);
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
    precision_runs_print_evals(col, t->steps, t->eval_every, stdout);
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        precision_run_log_free(&col[i]);
    cli_check(precision_runs_write_table(in_dir(t->dir, "loss_scaling_table.tsv"), summary,
                                         t->steps, t->compare_step, err, sizeof err), err);
}

/* ---- over the seeds ----------------------------------------------------------------------- */

/* Part 2 once per seed, in --out/seed_S (the files of a single-seed run), then the runs over
 * the seeds, written and printed. */
static void seeds_all(const Options *o)
{
    PrecisionRunSummary *sum = malloc((size_t)o->n_seeds * PRECISION_RUNS_N * sizeof *sum);
    PrecisionOverSeeds v[PRECISION_RUNS_N];
    char err[800];
    if (!sum)
        cli_die(1, "out of memory");
    job_make_dir(o->run.dir);
    for (int k = 0; k < o->n_seeds; k++) {
        char dir[600];
        PrecisionRunsSetup one = o->run;
        one.seed = o->seeds[k];
        snprintf(dir, sizeof dir, "%s/seed_%ld", o->run.dir, one.seed);
        one.dir = dir;
        job_make_dir(dir);
        fprintf(stderr, "seed %ld (%d of %d)\n", one.seed, k + 1, o->n_seeds);
        printf("\n# seed %ld\n", one.seed);
        runs_all(o, &one, &sum[k * PRECISION_RUNS_N]);
        precision_runs_print_table(&one, &sum[k * PRECISION_RUNS_N], stdout);
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
    printf("\n## every seed\n\n");
    precision_runs_print_seeds(sum, o->seeds, o->n_seeds, o->run.steps, o->run.threads, stdout);
    printf("\n## over the seeds\n\n");
    precision_runs_print_over_seeds(v, o->n_seeds, o->run.compare_step, stdout);
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
        o.run.train_gpt = job_find_train_gpt(argv[0]);
    if (o.n_seeds > 0) {
        seeds_all(&o);
        printf("\nTSV files in %s\n", o.run.dir);
        return 0;
    }
    job_make_dir(o.run.dir);
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
        precision_runs_print_table(&o.run, summary, stdout);
    printf("\nTSV files in %s\n", o.run.dir);
    return 0;
}

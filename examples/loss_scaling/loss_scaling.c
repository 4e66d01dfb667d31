/* loss_scaling: the mixed-precision paper's figure on our model (Micikevicius et al. 2018,
 * "Mixed Precision Training", figure 3), then what it means for training.
 *
 * Part 1 (analysis/grad_probe.h): the activation gradients of one batch of train_gpt's default
 * model part-way through fp32 training, as a histogram of log2 |g| with fp16's smallest
 * subnormal (2^-24), smallest normal (2^-14) and largest value (65504) marked; the share of
 * nonzero gradients that fp16 turns into 0 without scaling and with a loss scale S, S chosen as
 * the paper does (the largest power of two that does not overflow the largest gradient),
 * GradScaler's initial 2^16, and the dynamic scaler's median over its run of part 2.
 *
 * Part 2 (runs.c): train_gpt --precision fp32, bf16, fp16 without loss scaling, fp16 with
 * dynamic loss scaling, fp8: same seed, same steps, and a control (fp32 on another thread
 * count); training and validation loss per step, the dynamic scale over time, and a table of
 * the final numbers against fp32.
 *
 * With --seeds (seeds.c, analysis/precision_runs.h): part 2 once per seed, and every run's final
 * validation loss over fp32's of the same seed summed up over the seeds, for the formats and
 * the control alike: the final loss of this task moves by more than the formats move it, so
 * only many seeds can say whether a format is within 2% of fp32.
 *
 * Output in --out DIR: loss_scaling_hist.tsv, loss_scaling_underflow.tsv (part 1),
 * loss_scaling_curves.tsv, loss_scaling_table.tsv, runs/ and commands.txt (part 2); a summary
 * and the table in markdown on stdout. figure.sh draws docs/figures/loss_scaling_hist.png and
 * loss_scaling_curves.png from them (histogram.gp, curves.gp). docs/mixed_precision.md
 * discusses the numbers. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/parallel.h"
#include "examples/common/cli.h"
#include "examples/common/settings.h"
#include "examples/common/train_run.h"
#include "examples/loss_scaling/loss_scaling.h"

enum { FLAG_PROBE_ONLY = 256, FLAG_RUNS_ONLY, FLAG_OUT, FLAG_TRAIN_GPT, FLAG_STEPS,
       FLAG_PROBE_STEP, FLAG_EVAL_EVERY, FLAG_EVAL_EXAMPLES, FLAG_COMPARE_STEP, FLAG_SEED,
       FLAG_SEEDS, FLAG_FROM_LOGS, FLAG_THREADS, FLAG_KERNELS, FLAG_JOBS };

static void set_out(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    ((Options *)opts)->out = cli_folder(flag, arg);
}

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
    { .name = "out", .id = FLAG_OUT, .type = SETTING_CUSTOM, .set = set_out,
      .def = "loss_scaling_out", .arg = "DIR",
      .help = "where the TSV files and the runs' logs go" },
    { .name = "train-gpt", .id = FLAG_TRAIN_GPT, .type = SETTING_STRING,
      .offset = FIELD(train_gpt), .arg = "PATH",
      .help = "the train_gpt program (default: next to this one)" },
    { .name = "steps", .id = FLAG_STEPS, .type = SETTING_LONG, .offset = FIELD(steps),
      .lo = 20, .hi = 1000000, .def = "2000", .arg = "N",
      .help = "steps of every run, as train_gpt's default" },
    { .name = "probe-step", .id = FLAG_PROBE_STEP, .type = SETTING_LONG,
      .offset = FIELD(probe_step), .lo = 0, .hi = 1000000, .def = "300", .arg = "N",
      .help = "fp32 steps before the gradients are measured" },
    { .name = "eval-every", .id = FLAG_EVAL_EVERY, .type = SETTING_LONG,
      .offset = FIELD(eval_every), .lo = 1, .hi = 1000000, .def = "100", .arg = "N",
      .help = "validation every N steps" },
    { .name = "eval-examples", .id = FLAG_EVAL_EXAMPLES, .type = SETTING_INT,
      .offset = FIELD(eval_examples), .lo = 1, .hi = 1 << 20, .def = "1000", .arg = "N",
      .help = "validation rows per evaluation" },
    { .name = "compare-step", .id = FLAG_COMPARE_STEP, .type = SETTING_LONG,
      .offset = FIELD(compare_step), .lo = 1, .hi = 1000000, .def = "200", .arg = "N",
      .help = "also compare the validation losses at this step, where\n"
              "the loss is still large and the runs have not yet\n"
              "parted (a multiple of --eval-every)" },
    { .name = "seed", .id = FLAG_SEED, .type = SETTING_LONG, .offset = FIELD(seed),
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
    { .name = "threads", .id = FLAG_THREADS, .type = SETTING_INT, .offset = FIELD(threads),
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
    if (o.probe && o.probe_step >= o.steps)
        cli_usage_error("--probe-step %ld must come before the end of the run (--steps %ld)",
                        o.probe_step, o.steps);
    if (o.compare_step % o.eval_every != 0 || o.compare_step > o.steps)
        cli_usage_error("--compare-step %ld must be an evaluation step: a multiple of "
                        "--eval-every %ld, at most --steps %ld", o.compare_step, o.eval_every,
                        o.steps);
    return o;
}

/* ---- part 1 ------------------------------------------------------------------------------- */

static void probe_step(void *ctx, long step, long steps, double loss)
{
    (void)ctx;
    fprintf(stderr, "probe: fp32 step %ld/%ld, loss %.4f\n", step, steps, loss);
}

/* The probe of the fp32 run these options make, its steps reported on stderr. */
static GradProbe *probe_new(const Options *o)
{
    GradProbeConfig c = grad_probe_defaults(o->steps, o->probe_step, o->seed);
    GradProbeWatch watch = { .step = probe_step };
    char err[512];
    GradProbe *p = grad_probe_new(&c, &watch, err, sizeof err);
    if (!p)
        cli_die(1, "%s", err);
    return p;
}

static GradProbeResult probe_measure(GradProbe *p, float scale, const char *rule)
{
    GradProbeResult r;
    char err[512];
    if (!grad_probe_measure(p, scale, rule, &r, err, sizeof err))
        cli_die(1, "%s", err);
    return r;
}

static const char *const HIST_COLUMNS[] = {
    "kind", "log2_bin", "count", "fraction", "count_scaled", "log2_scale", NULL,
};

/* One row per bin between the smallest and the largest nonempty one (and as far right as the
 * scaled histogram reaches), plus a row for the exact zeros. count_scaled is the histogram the
 * gradients have when the loss is scaled by 2^shift; log2_scale is shift, on every row (for the
 * figure's labels). */
static void write_hist(const Options *o, const GradProbe *p, int shift)
{
    TsvWriter *w = tsv_open_in(o->out, "loss_scaling_hist.tsv", HIST_COLUMNS);
    int lo, hi;
    grad_hist_range(&p->hist, &lo, &hi);
    double total = (double)p->hist.total;
    tsv_str(w, "zero");
    tsv_num(w, NAN);
    tsv_int(w, p->hist.zeros);
    tsv_num(w, p->hist.zeros / total);
    tsv_int(w, p->hist.zeros);
    tsv_int(w, shift);
    tsv_end_row(w);
    for (int e = lo; e <= hi + shift; e++) {
        tsv_str(w, "bin");
        tsv_int(w, e);
        tsv_int(w, grad_hist_count(&p->hist, e));
        tsv_num(w, grad_hist_count(&p->hist, e) / total);
        tsv_int(w, grad_hist_count(&p->hist, e - shift));
        tsv_int(w, shift);
        tsv_end_row(w);
    }
    tsv_close_or_die(w);
}

static const char *const UNDERFLOW_COLUMNS[] = {
    "scale_rule", "scale", "log2_scale", "values", "nonzero", "rounded_zero", "rounded_fraction",
    "rounded_overflow", "pass_zero", "pass_fraction", "pass_nonfinite", NULL,
};

static void write_underflow(const Options *o, const GradProbe *p, const GradProbeResult *r,
                            int n)
{
    TsvWriter *w = tsv_open_in(o->out, "loss_scaling_underflow.tsv", UNDERFLOW_COLUMNS);
    for (int i = 0; i < n; i++) {
        double nonzero = (double)r[i].rounded.nonzero;
        tsv_str(w, r[i].rule);
        tsv_num(w, r[i].scale);
        tsv_int(w, grad_hist_exponent(r[i].scale));
        tsv_int(w, (long long)p->n_grads);
        tsv_int(w, r[i].rounded.nonzero);
        tsv_int(w, r[i].rounded.underflow);
        tsv_num(w, r[i].rounded.underflow / nonzero);
        tsv_int(w, r[i].rounded.overflow);
        tsv_int(w, r[i].pass_zero);
        tsv_num(w, r[i].pass_zero / nonzero);
        tsv_int(w, r[i].pass_nonfinite);
        tsv_end_row(w);
    }
    tsv_close_or_die(w);
}

/* The fp32 run's training loss at step `step`, from its log (NAN without one). The log has a
 * row per step from 1, so its first `step` rows end with that step. */
static double logged_loss(const Options *o, long step)
{
    char log[700];
    snprintf(log, sizeof log, "%s/runs/%s.tsv", o->out, PRECISION_RUNS[0].file);
    double *xs = malloc((size_t)step * sizeof *xs), *ys = malloc((size_t)step * sizeof *ys);
    if (!xs || !ys)
        cli_die(1, "out of memory");
    int k = run_read_columns(log, "step", "loss", xs, ys, (int)step);
    double v = k > 0 && xs[k - 1] == (double)step ? ys[k - 1] : NAN;
    free(xs);
    free(ys);
    return v;
}

static void print_probe(const Options *o, const GradProbe *p, const GradProbeResult *r, int n)
{
    const GradHist *h = &p->hist;
    int lo, hi;
    grad_hist_range(h, &lo, &hi);
    printf("activation gradients of one batch after %ld fp32 steps (batch loss %.6f): %zu "
           "values in %d tensors\n", o->probe_step, p->loss, p->n_grads, p->n_tensors);
    double logged = o->curves ? logged_loss(o, o->probe_step + 1) : NAN;
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

/* ---- main --------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    Options o = parse(argc, argv);
    if (!o.train_gpt)
        o.train_gpt = run_find_train_gpt(argv[0]);
    if (o.n_seeds > 0) {
        seeds_run_all(&o);
        printf("\nTSV files in %s\n", o.out);
        return 0;
    }
    run_make_dir(o.out);
    par_set_threads(o.threads);

    GradProbe *probe = NULL;
    GradProbeResult results[4];
    int n_results = 0;
    float max_scale = 1.0f;
    if (o.probe) {
        probe = probe_new(&o);
        max_scale = grad_max_pow2_scale(FMT_FP16, probe->amax);
        results[n_results++] = probe_measure(probe, 1.0f, "none");
        results[n_results++] = probe_measure(probe, 65536.0f, "GradScaler's initial 2^16");
        results[n_results++] = probe_measure(probe, max_scale,
                                             "largest 2^k not overflowing the largest gradient");
    }
    PrecisionRunSummary summary[PRECISION_RUNS_N];
    if (o.curves)
        runs_all(&o, summary);
    if (o.probe) {
        float dyn = o.curves ? precision_runs_dynamic_scale(summary) : NAN;
        if (isfinite(dyn))
            results[n_results++] = probe_measure(probe, dyn, "median of the dynamic scaler");
        /* The outline in the figure: the paper's rule (row 3 of the underflow table). */
        write_hist(&o, probe, grad_hist_exponent(max_scale));
        write_underflow(&o, probe, results, n_results);
        print_probe(&o, probe, results, n_results);
        grad_probe_free(probe);
    }
    if (o.curves)
        runs_print_table(&o, summary);
    printf("\nTSV files in %s\n", o.out);
    return 0;
}

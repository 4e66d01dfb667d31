/* loss_scaling: the mixed-precision paper's figure on our model (Micikevicius et al. 2018,
 * "Mixed Precision Training", figure 3), then what it means for training.
 *
 * Part 1 (probe.c): the activation gradients of one batch of train_gpt's default model part-way
 * through fp32 training, as a histogram of log2 |g| with fp16's smallest subnormal (2^-24),
 * smallest normal (2^-14) and largest value (65504) marked; the share of nonzero gradients that
 * fp16 turns into 0 without scaling and with a loss scale S, S chosen as the paper does (the
 * largest power of two that does not overflow the largest gradient), GradScaler's initial
 * 2^16, and the dynamic scaler's median over its run of part 2.
 *
 * Part 2 (runs.c): train_gpt --precision fp32, bf16, fp16 without loss scaling, fp16 with
 * dynamic loss scaling, fp8: same seed, same steps, and a control (fp32 on another thread
 * count); training and validation loss per step, the dynamic scale over time, and a table of
 * the final numbers against fp32.
 *
 * With --seeds (seeds.c): part 2 once per seed, and every run's final validation loss over
 * fp32's of the same seed summed up over the seeds, for the formats and the control alike: the
 * final loss of this task moves by more than the formats move it, so only many seeds can say
 * whether a format is within 2% of fp32.
 *
 * Output in --out DIR: loss_scaling_hist.tsv, loss_scaling_underflow.tsv (part 1),
 * loss_scaling_curves.tsv, loss_scaling_table.tsv, runs/ and commands.txt (part 2); a summary
 * and the table in markdown on stdout. figure.sh draws docs/figures/loss_scaling_hist.png and
 * loss_scaling_curves.png from them (histogram.gp, curves.gp). docs/mixed_precision.md
 * discusses the numbers. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/parallel.h"
#include "examples/common/cli.h"
#include "examples/common/train_run.h"
#include "examples/loss_scaling/loss_scaling.h"

static void usage(void)
{
    printf("Usage: loss_scaling [OPTION]...\n"
           "Part 1: the activation gradients of train_gpt's default model after --probe-step\n"
           "fp32 steps, as a log2 histogram against fp16's range, and the share of them fp16\n"
           "turns into zero without a loss scale and with one. Part 2: train_gpt at fp32,\n"
           "bf16, fp16 without loss scaling, fp16 with dynamic loss scaling and fp8, same\n"
           "seed and steps, and fp32 again on another thread count (a control: only the\n"
           "order of the sums differs): the loss curves, the dynamic scale, and a table\n"
           "against fp32.\n\n"
           "  --probe-only         part 1 only (no train_gpt runs)\n"
           "  --runs-only          part 2 only\n"
           "  --out DIR            where the TSV files and the runs' logs go\n"
           "                       (default loss_scaling_out)\n"
           "  --train-gpt PATH     the train_gpt program (default: next to this one)\n"
           "  --steps N            steps of every run (default 2000, train_gpt's)\n"
           "  --probe-step N       fp32 steps before the gradients are measured (default 300)\n"
           "  --eval-every N       validation every N steps (default 100)\n"
           "  --eval-examples N    validation rows per evaluation (default 1000)\n"
           "  --compare-step N     also compare the validation losses at this step, where\n"
           "                       the loss is still large and the runs have not yet\n"
           "                       parted (default 200; a multiple of --eval-every)\n"
           "  --seed N             weights and data of every run (default 1)\n"
           "  --seeds LIST         part 2 for each seed of LIST (1-8, 1,2,5, at most %d),\n"
           "                       each in --out/seed_S, then every run's validation loss\n"
           "                       over fp32's of the same seed, summed up over the seeds\n"
           "                       (loss_scaling_seeds*.tsv); no part 1\n"
           "  --from-logs          start no run: read the logs an earlier run with the same\n"
           "                       options left in --out (to redo the tables)\n"
           "  --threads N          threads per run and for part 1 (default 1: the results\n"
           "                       depend on the thread count, and one is reproducible);\n"
           "                       the control runs on 2 (on 1 if N is not 1)\n"
           "  --jobs N             runs at once (default 1); results do not depend on it\n"
           "  -h, --help           this text\n", SEED_MAX);
}

static Options parse(int argc, char **argv)
{
    Options o = { .probe = true, .curves = true, .out = "loss_scaling_out", .steps = 2000,
                  .probe_step = 300, .eval_every = 100, .compare_step = 200,
                  .eval_examples = 1000, .threads = 1, .jobs = 1, .seed = 1 };
    const struct option options[] = {
        { "probe-only", no_argument, NULL, 'P' }, { "runs-only", no_argument, NULL, 'R' },
        { "out", required_argument, NULL, 'o' }, { "train-gpt", required_argument, NULL, 'g' },
        { "steps", required_argument, NULL, 's' },
        { "probe-step", required_argument, NULL, 'p' },
        { "eval-every", required_argument, NULL, 'e' },
        { "eval-examples", required_argument, NULL, 'v' },
        { "compare-step", required_argument, NULL, 'c' },
        { "seed", required_argument, NULL, 'S' }, { "seeds", required_argument, NULL, 'L' },
        { "from-logs", no_argument, NULL, 'F' }, { "threads", required_argument, NULL, 't' },
        { "jobs", required_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' },
        { 0, 0, 0, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (c) {
        case 'P': o.curves = false; break;
        case 'R': o.probe = false; break;
        case 'o': o.out = cli_folder("--out", optarg); break;
        case 'g': o.train_gpt = optarg; break;
        case 's': o.steps = cli_long("--steps", optarg, 20, 1000000); break;
        case 'p': o.probe_step = cli_long("--probe-step", optarg, 0, 1000000); break;
        case 'e': o.eval_every = cli_long("--eval-every", optarg, 1, 1000000); break;
        case 'v': o.eval_examples = (int)cli_long("--eval-examples", optarg, 1, 1 << 20); break;
        case 'c': o.compare_step = cli_long("--compare-step", optarg, 1, 1000000); break;
        case 'S': o.seed = cli_long("--seed", optarg, 0, 1L << 40); break;
        case 'L':
            o.n_seeds = seed_list_parse(optarg, o.seeds, SEED_MAX);
            if (o.n_seeds < 0)
                cli_usage_error("--seeds '%s': not a list of distinct seeds like 1-8 or 1,2,5 "
                                "(at most %d)", optarg, SEED_MAX);
            break;
        case 'F': o.from_logs = true; break;
        case 't': o.threads = (int)cli_long("--threads", optarg, 0, 1024); break;
        case 'j': o.jobs = (int)cli_long("--jobs", optarg, 1, N_RUNS); break;
        case 'h': usage(); exit(0);
        case ':': cli_usage_error("%s needs a value", argv[optind - 1]);
        default: cli_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        cli_usage_error("unexpected argument '%s'", argv[optind]);
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

/* ---- part 1's output ---------------------------------------------------------------------- */

static const char *const HIST_COLUMNS[] = {
    "kind", "log2_bin", "count", "fraction", "count_scaled", "log2_scale", NULL,
};

/* One row per bin between the smallest and the largest nonempty one (and as far right as the
 * scaled histogram reaches), plus a row for the exact zeros. count_scaled is the histogram the
 * gradients have when the loss is scaled by 2^shift; log2_scale is shift, on every row (for the
 * figure's labels). */
static void write_hist(const Options *o, const Probe *p, int shift)
{
    TsvWriter *w = tsv_open_in(o->out, "loss_scaling_hist.tsv", HIST_COLUMNS);
    int lo = GRAD_HIST_MAX_EXP, hi = GRAD_HIST_MIN_EXP;
    for (int e = GRAD_HIST_MIN_EXP; e <= GRAD_HIST_MAX_EXP; e++)
        if (grad_hist_count(&p->hist, e)) {
            lo = e < lo ? e : lo;
            hi = e;
        }
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

static void write_underflow(const Options *o, const Probe *p, const ProbeResult *r, int n)
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
    snprintf(log, sizeof log, "%s/runs/%s.tsv", o->out, RUNS[0].file);
    double *xs = malloc((size_t)step * sizeof *xs), *ys = malloc((size_t)step * sizeof *ys);
    if (!xs || !ys)
        cli_die(1, "out of memory");
    int k = run_read_columns(log, "step", "loss", xs, ys, (int)step);
    double v = k > 0 && xs[k - 1] == (double)step ? ys[k - 1] : NAN;
    free(xs);
    free(ys);
    return v;
}

static void print_probe(const Options *o, const Probe *p, const ProbeResult *r, int n)
{
    const GradHist *h = &p->hist;
    int lo = GRAD_HIST_MAX_EXP;
    for (int e = GRAD_HIST_MIN_EXP; e <= GRAD_HIST_MAX_EXP && lo == GRAD_HIST_MAX_EXP; e++)
        if (grad_hist_count(h, e))
            lo = e;
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

/* The dynamic scaler's typical scale: the median over its run, rounded down to a power of two
 * (it only ever halves and doubles from 2^16, so it is one already). */
static float dynamic_scale(const RunSummary *s)
{
    for (int i = 0; i < N_RUNS; i++)
        if (strcmp(RUNS[i].loss_scale, "dynamic") == 0 && isfinite(s[i].median_scale) &&
            s[i].median_scale > 0.0)
            return ldexpf(1.0f, grad_hist_exponent((float)s[i].median_scale));
    return NAN;
}

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
    runs_make_dir(o.out);
    par_set_threads(o.threads);

    Probe *probe = NULL;
    ProbeResult results[4];
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
    RunSummary summary[N_RUNS];
    if (o.curves)
        runs_all(&o, summary);
    if (o.probe) {
        float dyn = o.curves ? dynamic_scale(summary) : NAN;
        if (isfinite(dyn))
            results[n_results++] = probe_measure(probe, dyn, "median of the dynamic scaler");
        /* The outline in the figure: the paper's rule (row 3 of the underflow table). */
        write_hist(&o, probe, grad_hist_exponent(max_scale));
        write_underflow(&o, probe, results, n_results);
        print_probe(&o, probe, results, n_results);
        probe_free(probe);
    }
    if (o.curves)
        runs_print_table(&o, summary);
    printf("\nTSV files in %s\n", o.out);
    return 0;
}

/* The precision runs as train_gpt subprocesses, the probe, the result files (precision_train.h). */
#include "examples/common/precision_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/cli.h"
#include "examples/common/train_run.h"

/* ---- the runs ----------------------------------------------------------------------------- */

static void log_path(const PrecisionTrain *t, int i, const char *ext, char *buf, size_t len)
{
    snprintf(buf, len, "%s/runs/%s.%s", t->dir, PRECISION_RUNS[i].file, ext);
}

/* Run i's command: the probe's model and schedule written out as flags, so that both stay the
 * same run even if train_gpt's defaults move. */
static void build_run(const PrecisionTrain *t, int i, RunSpec *r)
{
    const PrecisionRunConfig *c = &PRECISION_RUNS[i];
    memset(r, 0, sizeof *r);
    log_path(t, i, "tsv", r->log_path, sizeof r->log_path);
    log_path(t, i, "out", r->out_path, sizeof r->out_path);
    GradProbeConfig rs = grad_probe_defaults(t->steps, 0, t->seed);
    run_arg(r, "%s", t->train_gpt);
    run_arg(r, "--precision=%s", c->precision);
    run_arg(r, "--loss-scale=%s", c->loss_scale);
    run_arg(r, "--steps=%ld", t->steps);
    run_arg(r, "--seed=%ld", t->seed);
    run_arg(r, "--task=add");
    run_arg(r, "--batch=%d", rs.batch);
    run_arg(r, "--layers=%d", rs.layers);
    run_arg(r, "--heads=%d", rs.heads);
    run_arg(r, "--embd=%d", rs.embd);
    run_arg(r, "--lr=%g", rs.lr);
    run_arg(r, "--warmup=%ld", rs.warmup);
    run_arg(r, "--warmup-type=gradual");
    run_arg(r, "--decay=cosine");
    run_arg(r, "--beta2=%g", rs.beta2);
    run_arg(r, "--weight-decay=%g", rs.weight_decay);
    run_arg(r, "--clip=%g", rs.clip);
    run_arg(r, "--eval-every=%ld", t->eval_every);
    run_arg(r, "--eval-examples=%d", t->eval_examples);
    run_arg(r, "--threads=%d", precision_runs_threads(i, t->threads));
    run_arg(r, "--log=%s", r->log_path);
}

/* What earlier runs left in t->dir, if commands.txt lists exactly these runs' commands. */
static void read_back(const PrecisionTrain *t, const char *commands, const RunSpec *spec,
                      RunResult *res)
{
    int match = run_commands_match(commands, spec, PRECISION_RUNS_N);
    if (match < 0)
        cli_die(1, "--from-logs: no %s (run once without --from-logs)", commands);
    if (!match)
        cli_die(1, "--from-logs: %s lists other commands than these options make (another "
                "--steps, --seed, --threads or --train-gpt?)", commands);
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        if (!run_result_from_files(&spec[i], t->steps, &res[i]))
            cli_die(1, "--from-logs: %s is not a finished run of %ld steps", spec[i].log_path,
                    t->steps);
}

static PrecisionRunLog read_log(const char *path, long steps)
{
    PrecisionRunLog col;
    if (!precision_run_log_alloc(&col, steps))
        cli_die(1, "out of memory");
    run_read_by_step(path, "loss", steps, col.loss);
    run_read_by_step(path, "val_loss", steps, col.val_loss);
    run_read_by_step(path, "val_acc", steps, col.val_acc);
    run_read_by_step(path, "loss_scale", steps, col.scale);
    run_read_by_step(path, "skipped", steps, col.skipped);
    run_read_by_step(path, "peak_act", steps, col.peak_act);
    return col;
}

void precision_train_runs(const PrecisionTrain *t, PrecisionRunLog *col,
                          PrecisionRunSummary *summary)
{
    static RunSpec spec[PRECISION_RUNS_N];
    RunResult res[PRECISION_RUNS_N];
    const char *labels[PRECISION_RUNS_N];
    char path[700];
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        build_run(t, i, &spec[i]);
        labels[i] = PRECISION_RUNS[i].name;
    }
    snprintf(path, sizeof path, "%s/commands.txt", t->dir);
    if (t->from_logs) {
        read_back(t, path, spec, res);
    } else {
        /* the list whole before any run starts: a run killed later still leaves it */
        char runs[700];
        snprintf(runs, sizeof runs, "%s/runs", t->dir);
        run_make_dir(runs);
        run_commands_write(path, spec, PRECISION_RUNS_N);
        run_jobs(spec, res, PRECISION_RUNS_N, t->jobs, labels);
    }
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        col[i] = read_log(spec[i].log_path, t->steps);
        if (!precision_run_summarize(res[i].ok, res[i].diverged, res[i].val_loss,
                                     res[i].val_acc, &col[i], t->steps, t->compare_step,
                                     &summary[i]))
            cli_die(1, "out of memory");
    }
}

/* The log has a row per step from 1, so its first `step` rows end with that step. */
double precision_train_logged_loss(const PrecisionTrain *t, int i, long step)
{
    char log[700];
    log_path(t, i, "tsv", log, sizeof log);
    double *xs = malloc((size_t)step * sizeof *xs), *ys = malloc((size_t)step * sizeof *ys);
    if (!xs || !ys)
        cli_die(1, "out of memory");
    int k = run_read_columns(log, "step", "loss", xs, ys, (int)step);
    double v = k > 0 && xs[k - 1] == (double)step ? ys[k - 1] : NAN;
    free(xs);
    free(ys);
    return v;
}

PrecisionTrain precision_train_seed(const PrecisionTrain *t, long seed, char *dir, size_t len)
{
    PrecisionTrain one = *t;
    one.seed = seed;
    snprintf(dir, len, "%s/seed_%ld", t->dir, seed);
    one.dir = dir;
    run_make_dir(dir);
    return one;
}

/* ---- the gradient probe ------------------------------------------------------------------- */

static void show_step(void *ctx, long step, long steps, double loss)
{
    (void)ctx;
    fprintf(stderr, "probe: fp32 step %ld/%ld, loss %.4f\n", step, steps, loss);
}

GradProbe *precision_train_probe(const PrecisionTrain *t, long probe_step)
{
    GradProbeConfig c = grad_probe_defaults(t->steps, probe_step, t->seed);
    GradProbeWatch watch = { .step = show_step };
    char err[512];
    GradProbe *p = grad_probe_new(&c, &watch, err, sizeof err);
    if (!p)
        cli_die(1, "%s", err);
    return p;
}

GradProbeResult precision_train_measure(GradProbe *p, float scale, const char *rule)
{
    GradProbeResult r;
    char err[512];
    if (!grad_probe_measure(p, scale, rule, &r, err, sizeof err))
        cli_die(1, "%s", err);
    return r;
}

/* ---- the result files --------------------------------------------------------------------- */

/* dir/name into path; the end of the program with the writer's message when !ok. */
static const char *in_dir(char *path, size_t len, const char *dir, const char *name)
{
    snprintf(path, len, "%s/%s", dir, name);
    return path;
}

static void or_die(bool ok, const char *err)
{
    if (!ok)
        cli_die(1, "%s", err);
}

void precision_train_write_curves(const PrecisionTrain *t, const char *name,
                                  const PrecisionRunLog *col)
{
    char path[700], err[800];
    or_die(precision_runs_write_curves(in_dir(path, sizeof path, t->dir, name), col, t->steps,
                                       err, sizeof err), err);
}

void precision_train_write_table(const PrecisionTrain *t, const char *name,
                                 const PrecisionRunSummary *summary)
{
    char path[700], err[800];
    or_die(precision_runs_write_table(in_dir(path, sizeof path, t->dir, name), summary,
                                      t->steps, t->compare_step, err, sizeof err), err);
}

void precision_train_write_seeds(const PrecisionTrain *t, const char *name, const long *seeds,
                                 int n_seeds, const PrecisionRunSummary *sum,
                                 const PrecisionOverSeeds *v)
{
    char path[700], err[800];
    or_die(precision_runs_write_seeds(in_dir(path, sizeof path, t->dir, name), sum, v, seeds,
                                      n_seeds, t->threads, t->compare_step, err, sizeof err),
           err);
}

void precision_train_write_over_seeds(const PrecisionTrain *t, const char *name, int n_seeds,
                                      const PrecisionOverSeeds *v)
{
    char path[700], err[800];
    or_die(precision_runs_write_over_seeds(in_dir(path, sizeof path, t->dir, name), v, n_seeds,
                                           t->threads, t->compare_step, err, sizeof err), err);
}

void precision_train_write_hist(const char *dir, const char *name, const GradProbe *p,
                                int shift)
{
    char path[700], err[800];
    or_die(grad_hist_write(in_dir(path, sizeof path, dir, name), &p->hist, shift, err,
                           sizeof err), err);
}

void precision_train_write_underflow(const char *dir, const char *name, const GradProbe *p,
                                     const GradProbeResult *res, int n)
{
    char path[700], err[800];
    or_die(grad_probe_write_underflow(in_dir(path, sizeof path, dir, name), p, res, n, err,
                                      sizeof err), err);
}

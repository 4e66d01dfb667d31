/* Part 2: train_gpt on its default task at each precision, same seed, same steps, as
 * subprocesses (examples/common/train_run.h), so every curve is a command a student can rerun;
 * the commands are in --out/commands.txt. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "autograd/outfile.h"
#include "examples/common/cli.h"
#include "examples/common/train_run.h"
#include "examples/loss_scaling/loss_scaling.h"

const RunConfig RUNS[N_RUNS] = {
    { "fp32", "fp32", "fp32", "none", false },
    { "bf16", "bf16", "bf16", "none", false },
    { "fp16", "fp16_none", "fp16", "none", false },
    { "fp16 dynamic", "fp16_dynamic", "fp16", "dynamic", false },
    { "fp8", "fp8", "fp8", "none", false },
    { "fp32 control", "fp32_control", "fp32", "none", true },
};

int runs_control_threads(const Options *o) { return o->threads == 1 ? 2 : 1; }

void runs_make_dir(const char *dir)
{
    struct stat st;
    if (mkdir(dir, 0755) != 0 && stat(dir, &st) != 0)
        cli_die(1, "cannot create %s", dir);
}

GradProbeConfig runs_settings(const Options *o)
{
    return (GradProbeConfig){ .batch = 64, .layers = 2, .heads = 4, .embd = 128,
                              .warmup = o->steps / 10 < 100 ? o->steps / 10 : 100, .lr = 1e-3,
                              .beta2 = 0.99, .weight_decay = 0.1, .clip = 1.0,
                              .steps = o->steps, .probe_step = o->probe_step, .seed = o->seed };
}

static void build_run(const Options *o, const RunConfig *c, RunSpec *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->log_path, sizeof r->log_path, "%s/runs/%s.tsv", o->out, c->file);
    snprintf(r->out_path, sizeof r->out_path, "%s/runs/%s.out", o->out, c->file);
    GradProbeConfig rs = runs_settings(o);
    run_arg(r, "%s", o->train_gpt);
    run_arg(r, "--precision=%s", c->precision);
    run_arg(r, "--loss-scale=%s", c->loss_scale);
    run_arg(r, "--steps=%ld", o->steps);
    run_arg(r, "--seed=%ld", o->seed);
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
    run_arg(r, "--eval-every=%ld", o->eval_every);
    run_arg(r, "--eval-examples=%d", o->eval_examples);
    run_arg(r, "--threads=%d", c->control ? runs_control_threads(o) : o->threads);
    run_arg(r, "--log=%s", r->log_path);
}

static void print_command(FILE *f, const RunSpec *r)
{
    for (int i = 0; i < r->argc; i++)
        fprintf(f, "%s%s", i ? " " : "", r->argv[i]);
    fputc('\n', f);
}

/* ---- reading a log ------------------------------------------------------------------------ */

/* Column `name` of a log by step into v[step], step 1..steps (v comes NAN-filled). */
static void read_by_step(const char *log, const char *name, long steps, double *v)
{
    double *xs = malloc((size_t)steps * sizeof *xs), *ys = malloc((size_t)steps * sizeof *ys);
    if (!xs || !ys)
        cli_die(1, "out of memory");
    int n = run_read_columns(log, "step", name, xs, ys, (int)steps);
    for (int i = 0; i < n; i++)
        if (xs[i] >= 1 && xs[i] <= steps)
            v[(long)xs[i]] = ys[i];
    free(xs);
    free(ys);
}

/* ---- the curves and the summary ----------------------------------------------------------- */

enum { CURVE_EVERY = 5 };   /* steps between curve rows */

static const char *const CURVE_COLUMNS[] = {
    "run", "step", "loss", "loss_mean20", "loss_mean20_vs_fp32", "val_loss", "val_loss_vs_fp32",
    "val_acc", "loss_scale", NULL,
};

static PrecisionRunLog read_columns(const Options *o, const RunSpec *r)
{
    PrecisionRunLog col;
    if (!precision_run_log_alloc(&col, o->steps))
        cli_die(1, "out of memory");
    read_by_step(r->log_path, "loss", o->steps, col.loss);
    read_by_step(r->log_path, "val_loss", o->steps, col.val_loss);
    read_by_step(r->log_path, "val_acc", o->steps, col.val_acc);
    read_by_step(r->log_path, "loss_scale", o->steps, col.scale);
    read_by_step(r->log_path, "skipped", o->steps, col.skipped);
    read_by_step(r->log_path, "peak_act", o->steps, col.peak_act);
    return col;
}

/* Whether step s gets a row: every CURVE_EVERY-th step (the curves are running means, smooth at
 * that spacing), the first and the last, every evaluation and every change of the loss scale;
 * the per-step values are in each run's log. */
static bool curve_row(const PrecisionRunLog *col, long s, long steps)
{
    bool scale_moved = s > 1 && col->scale[s] != col->scale[s - 1] && !isnan(col->scale[s]);
    return s == 1 || s == steps || s % CURVE_EVERY == 0 || !isnan(col->val_loss[s]) ||
           scale_moved;
}

/* One run's rows; ref is fp32's columns, for the relative differences. */
static void write_curve(TsvWriter *w, const RunConfig *c, const PrecisionRunLog *col,
                        const PrecisionRunLog *ref, long steps)
{
    for (long s = 1; s <= steps; s++) {
        if (isnan(col->loss[s]) || !curve_row(col, s, steps))
            continue;
        double mean = precision_run_mean(col->loss, s);
        tsv_str(w, c->name);
        tsv_int(w, s);
        /* floats: the log's losses are floats, and a figure needs no more digits */
        tsv_float(w, (float)col->loss[s]);
        tsv_float(w, (float)mean);
        tsv_float(w, (float)(mean / precision_run_mean(ref->loss, s) - 1.0));
        tsv_float(w, (float)col->val_loss[s]);
        tsv_float(w, (float)(col->val_loss[s] / ref->val_loss[s] - 1.0));
        tsv_float(w, (float)col->val_acc[s]);
        tsv_num(w, col->scale[s]);
        tsv_end_row(w);
    }
}

/* The validation loss of every run at every evaluation: where the curves part, and by how
 * much. */
static void print_val_table(const Options *o, const PrecisionRunLog *col)
{
    printf("\nvalidation loss at every evaluation\n\n| step |");
    for (int i = 0; i < N_RUNS; i++)
        printf(" %s |", RUNS[i].name);
    printf("\n|---|");
    for (int i = 0; i < N_RUNS; i++)
        printf("---|");
    printf("\n");
    for (long s = o->eval_every; s <= o->steps; s += o->eval_every) {
        printf("| %ld |", s);
        for (int i = 0; i < N_RUNS; i++)
            printf(" %.4g |", col[i].val_loss[s]);
        printf("\n");
    }
}

/* ---- the table ---------------------------------------------------------------------------- */

static const char *const TABLE_COLUMNS[] = {
    "run", "precision", "loss_scale", "steps", "diverged", "val_loss", "val_acc",
    "rel_diff_val_loss", "compare_step", "compare_val_loss", "rel_diff_compare", "skipped",
    "final_scale", "median_scale", "peak_act_bytes", "peak_act_vs_fp32", NULL,
};

static double rel(double x, double ref) { return (x - ref) / ref; }

static void write_table(const Options *o, const PrecisionRunSummary *s)
{
    TsvWriter *w = tsv_open_in(o->out, "loss_scaling_table.tsv", TABLE_COLUMNS);
    for (int i = 0; i < N_RUNS; i++) {
        tsv_str(w, RUNS[i].name);
        tsv_str(w, RUNS[i].precision);
        tsv_str(w, RUNS[i].loss_scale);
        tsv_int(w, o->steps);
        tsv_int(w, s[i].diverged);
        tsv_num(w, s[i].val_loss);
        tsv_num(w, s[i].val_acc);
        tsv_num(w, rel(s[i].val_loss, s[0].val_loss));
        tsv_int(w, o->compare_step);
        tsv_num(w, s[i].compare_loss);
        tsv_num(w, rel(s[i].compare_loss, s[0].compare_loss));
        tsv_num(w, s[i].skipped);
        tsv_num(w, s[i].final_scale);
        tsv_num(w, s[i].median_scale);
        tsv_num(w, s[i].peak_act);
        tsv_num(w, s[i].peak_act / s[0].peak_act);
        tsv_end_row(w);
    }
    tsv_close_or_die(w);
}

void runs_print_table(const Options *o, const PrecisionRunSummary *s)
{
    printf("\ntrain_gpt on the add task, %ld steps, seed %ld, %d thread%s per run (the fp32 "
           "control: %d); validation loss and exact match (teacher-forced) at the last "
           "evaluation, and the validation loss at step %ld; relative differences against "
           "fp32\n\n", o->steps, o->seed, o->threads, o->threads == 1 ? "" : "s",
           runs_control_threads(o), o->compare_step);
    printf("| run | val loss | vs fp32 | exact match | val loss @%ld | vs fp32 | skipped | "
           "final scale | peak act bytes | vs fp32 |\n", o->compare_step);
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < N_RUNS; i++) {
        if (!s[i].ok) {
            printf("| %s | %s | | | | | | | | |\n", RUNS[i].name,
                   s[i].diverged ? "diverged" : "failed");
            continue;
        }
        printf("| %s | %.4g | %+.1f%% | %.1f%% | %.4g | %+.1f%% | %.0f | %g | %.0f | %.3f |\n",
               RUNS[i].name, s[i].val_loss, 100.0 * rel(s[i].val_loss, s[0].val_loss),
               100.0 * s[i].val_acc, s[i].compare_loss,
               100.0 * rel(s[i].compare_loss, s[0].compare_loss), s[i].skipped,
               s[i].final_scale, s[i].peak_act, s[i].peak_act / s[0].peak_act);
    }
}

/* Records the runs' commands in --out/commands.txt (whole, before any run starts, so a run
 * killed later still leaves the list --from-logs checks), then starts them --jobs at a time. */
static void start_runs(const Options *o, const RunSpec *spec, RunResult *res)
{
    char path[700], err[900];
    snprintf(path, sizeof path, "%s/runs", o->out);
    runs_make_dir(path);
    snprintf(path, sizeof path, "%s/commands.txt", o->out);
    OutFile out;
    if (!outfile_open(&out, path, err, sizeof err))
        cli_die(1, "%s", err);
    FILE *commands = outfile_stream(&out);
    if (!commands)
        cli_die(1, "%s: out of memory", path);
    for (int i = 0; i < N_RUNS; i++)
        print_command(commands, &spec[i]);
    if (!outfile_commit(&out, err, sizeof err))
        cli_die(1, "%s", err);
    for (int first = 0; first < N_RUNS; first += o->jobs) {
        int last = first + o->jobs < N_RUNS ? first + o->jobs : N_RUNS;
        pid_t pid[N_RUNS];
        for (int i = first; i < last; i++) {
            fprintf(stderr, "run: %s\n", RUNS[i].name);
            pid[i] = run_start(&spec[i]);
        }
        for (int i = first; i < last; i++)
            res[i] = run_wait(&spec[i], pid[i]);
    }
}

/* ---- --from-logs -------------------------------------------------------------------------- */

/* The logs in --out are only these options' runs if --out/commands.txt lists exactly the
 * commands they make. */
static void check_commands(const Options *o, const RunSpec *spec)
{
    char *want = NULL, path[700];
    size_t len = 0;
    FILE *m = open_memstream(&want, &len);
    if (!m)
        cli_die(1, "out of memory");
    for (int i = 0; i < N_RUNS; i++)
        print_command(m, &spec[i]);
    fclose(m);
    snprintf(path, sizeof path, "%s/commands.txt", o->out);
    FILE *f = fopen(path, "r");
    if (!f)
        cli_die(1, "--from-logs: no %s (run once without --from-logs)", path);
    char *have = malloc(len + 1);
    if (!have)
        cli_die(1, "out of memory");
    size_t got = fread(have, 1, len + 1, f);
    fclose(f);
    bool same = got == len && memcmp(have, want, len) == 0;
    free(have);
    free(want);
    if (!same)
        cli_die(1, "--from-logs: %s lists other commands than these options make (another "
                "--steps, --seed, --threads or --train-gpt?)", path);
}

/* train_gpt ends a diverged run with a message saying so (run_wait reads it the same way). */
static bool said_diverged(const char *out_path)
{
    FILE *f = fopen(out_path, "r");
    char line[1024];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, "diverged") != NULL;
    if (f)
        fclose(f);
    return found;
}

/* What run_wait would have said about a finished run, from its files. */
static RunResult result_from_files(const Options *o, const RunSpec *r)
{
    RunResult res = { .val_loss = run_last_value(r->log_path, "val_loss"),
                      .val_acc = run_last_value(r->log_path, "val_acc") };
    res.ok = !isnan(res.val_loss) && run_last_value(r->log_path, "step") == (double)o->steps;
    res.diverged = !res.ok && said_diverged(r->out_path);
    if (!res.ok && !res.diverged)
        cli_die(1, "--from-logs: %s is not a finished run of %ld steps", r->log_path, o->steps);
    return res;
}

void runs_all(const Options *o, PrecisionRunSummary *summary)
{
    static RunSpec spec[N_RUNS];
    RunResult res[N_RUNS];
    for (int i = 0; i < N_RUNS; i++)
        build_run(o, &RUNS[i], &spec[i]);
    if (o->from_logs) {
        check_commands(o, spec);
        for (int i = 0; i < N_RUNS; i++)
            res[i] = result_from_files(o, &spec[i]);
    } else {
        start_runs(o, spec, res);
    }
    PrecisionRunLog col[N_RUNS];
    for (int i = 0; i < N_RUNS; i++) {
        col[i] = read_columns(o, &spec[i]);
        if (!precision_run_summarize(res[i].ok, res[i].diverged, res[i].val_loss,
                                     res[i].val_acc, &col[i], o->steps, o->compare_step,
                                     &summary[i]))
            cli_die(1, "out of memory");
    }
    TsvWriter *curves = tsv_open_in(o->out, "loss_scaling_curves.tsv", CURVE_COLUMNS);
    for (int i = 0; i < N_RUNS; i++)
        write_curve(curves, &RUNS[i], &col[i], &col[0], o->steps);
    tsv_close_or_die(curves);
    print_val_table(o, col);
    for (int i = 0; i < N_RUNS; i++)
        precision_run_log_free(&col[i]);
    write_table(o, summary);
}

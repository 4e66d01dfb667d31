/* Part 2: train_gpt on its default task at each precision, same seed, same steps, as
 * subprocesses (examples/common/train_run.h), so every curve is a command a student can rerun;
 * the commands are in --out/commands.txt. */
#include <math.h>
#include <string.h>

#include "examples/common/cli.h"
#include "examples/common/train_run.h"
#include "examples/loss_scaling/loss_scaling.h"

static void build_run(const Options *o, int i, RunSpec *r)
{
    const PrecisionRunConfig *c = &PRECISION_RUNS[i];
    memset(r, 0, sizeof *r);
    snprintf(r->log_path, sizeof r->log_path, "%s/runs/%s.tsv", o->out, c->file);
    snprintf(r->out_path, sizeof r->out_path, "%s/runs/%s.out", o->out, c->file);
    GradProbeConfig rs = grad_probe_defaults(o->steps, o->probe_step, o->seed);
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
    run_arg(r, "--threads=%d", precision_runs_threads(i, o->threads));
    run_arg(r, "--log=%s", r->log_path);
}

/* ---- the curves and the summary ----------------------------------------------------------- */

static const char *const CURVE_COLUMNS[] = {
    "run", "step", "loss", "loss_mean20", "loss_mean20_vs_fp32", "val_loss", "val_loss_vs_fp32",
    "val_acc", "loss_scale", NULL,
};

static PrecisionRunLog read_columns(const Options *o, const RunSpec *r)
{
    PrecisionRunLog col;
    if (!precision_run_log_alloc(&col, o->steps))
        cli_die(1, "out of memory");
    run_read_by_step(r->log_path, "loss", o->steps, col.loss);
    run_read_by_step(r->log_path, "val_loss", o->steps, col.val_loss);
    run_read_by_step(r->log_path, "val_acc", o->steps, col.val_acc);
    run_read_by_step(r->log_path, "loss_scale", o->steps, col.scale);
    run_read_by_step(r->log_path, "skipped", o->steps, col.skipped);
    run_read_by_step(r->log_path, "peak_act", o->steps, col.peak_act);
    return col;
}

/* One run's rows; ref is fp32's columns, for the relative differences. */
static void write_curve(TsvWriter *w, const PrecisionRunConfig *c, const PrecisionRunLog *col,
                        const PrecisionRunLog *ref, long steps)
{
    for (long s = 1; s <= steps; s++) {
        if (isnan(col->loss[s]) || !precision_run_curve_row(col, s, steps))
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
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        printf(" %s |", PRECISION_RUNS[i].name);
    printf("\n|---|");
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        printf("---|");
    printf("\n");
    for (long s = o->eval_every; s <= o->steps; s += o->eval_every) {
        printf("| %ld |", s);
        for (int i = 0; i < PRECISION_RUNS_N; i++)
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
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        tsv_str(w, PRECISION_RUNS[i].name);
        tsv_str(w, PRECISION_RUNS[i].precision);
        tsv_str(w, PRECISION_RUNS[i].loss_scale);
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
           precision_runs_threads(PRECISION_RUNS_N - 1, o->threads), o->compare_step);
    printf("| run | val loss | vs fp32 | exact match | val loss @%ld | vs fp32 | skipped | "
           "final scale | peak act bytes | vs fp32 |\n", o->compare_step);
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

void runs_all(const Options *o, PrecisionRunSummary *summary)
{
    static RunSpec spec[PRECISION_RUNS_N];
    RunResult res[PRECISION_RUNS_N];
    const char *labels[PRECISION_RUNS_N];
    char path[700];
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        build_run(o, i, &spec[i]);
        labels[i] = PRECISION_RUNS[i].name;
    }
    snprintf(path, sizeof path, "%s/commands.txt", o->out);
    if (o->from_logs) {
        /* the logs in --out are only these options' runs if commands.txt lists their commands */
        int match = run_commands_match(path, spec, PRECISION_RUNS_N);
        if (match < 0)
            cli_die(1, "--from-logs: no %s (run once without --from-logs)", path);
        if (!match)
            cli_die(1, "--from-logs: %s lists other commands than these options make (another "
                    "--steps, --seed, --threads or --train-gpt?)", path);
        for (int i = 0; i < PRECISION_RUNS_N; i++)
            if (!run_result_from_files(&spec[i], o->steps, &res[i]))
                cli_die(1, "--from-logs: %s is not a finished run of %ld steps",
                        spec[i].log_path, o->steps);
    } else {
        /* the list whole before any run starts: a run killed later still leaves it */
        char runs[700];
        snprintf(runs, sizeof runs, "%s/runs", o->out);
        run_make_dir(runs);
        run_commands_write(path, spec, PRECISION_RUNS_N);
        run_jobs(spec, res, PRECISION_RUNS_N, o->jobs, labels);
    }
    PrecisionRunLog col[PRECISION_RUNS_N];
    for (int i = 0; i < PRECISION_RUNS_N; i++) {
        col[i] = read_columns(o, &spec[i]);
        if (!precision_run_summarize(res[i].ok, res[i].diverged, res[i].val_loss,
                                     res[i].val_acc, &col[i], o->steps, o->compare_step,
                                     &summary[i]))
            cli_die(1, "out of memory");
    }
    TsvWriter *curves = tsv_open_in(o->out, "loss_scaling_curves.tsv", CURVE_COLUMNS);
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        write_curve(curves, &PRECISION_RUNS[i], &col[i], &col[0], o->steps);
    tsv_close_or_die(curves);
    print_val_table(o, col);
    for (int i = 0; i < PRECISION_RUNS_N; i++)
        precision_run_log_free(&col[i]);
    write_table(o, summary);
}

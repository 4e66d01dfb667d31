/* fit_largest: the search's table, the winner's training run (train_gpt as a subprocess, under
 * --mem-budget), and the homework's table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "examples/common/cli.h"
#include "examples/common/progress.h"
#include "examples/common/train_run.h"
#include "examples/common/tsv.h"
#include "examples/fit_largest/fit_largest.h"

static double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

void fit_print_search(const FitSearch *s, const FitGoal *g, FILE *out)
{
    fprintf(out, "\n%d candidates listed, %d shapes predicted to fit (the preferred way to "
            "train each), %d measured\n", s->n_candidates, s->n, s->measured);
    fprintf(out, "%-4s %-50s %9s %9s %9s %9s %9s %7s  %s\n", "rank", "setup", "params",
            "pred MiB", "meas MiB", "meas-pred", "update s", "updates", "verdict");
    /* Every row up to the last one measured, and three more for context. */
    int last = 0;
    for (int i = 0; i < s->n; i++)
        if (s->rows[i].measured)
            last = i;
    for (int i = 0; i < s->n && i <= last + 3; i++) {
        const FitRow *r = &s->rows[i];
        char d[128], meas[32] = "-", diff[32] = "-", upd[32] = "-", steps[32] = "-";
        if (r->measured && r->m.fits) {
            snprintf(meas, sizeof meas, "%.2f", mib(r->m.peak[MEM_ALL]));
            snprintf(diff, sizeof diff, "%+.0f", r->m.peak[MEM_ALL] - r->c.predicted);
        }
        if (r->update_seconds > 0) {
            snprintf(upd, sizeof upd, "%.3f", r->update_seconds);
            snprintf(steps, sizeof steps, "%ld", r->steps);
        }
        fprintf(out, "%-4d %-50s %9zu %9.2f %9s %9s %9s %7s  %s\n", i + 1,
                fit_describe(&r->c, d, sizeof d), r->c.params, mib(r->c.predicted), meas, diff,
                upd, steps, r->verdict);
        if (r->measured && !r->m.fits)
            fprintf(out, "     %s\n", r->m.error);
    }
    fprintf(out, "(pred: the memory calculator's total, the sum of the category peaks; meas: the "
            "peak of the trainer built and run for two updates under the budget of %zu bytes, "
            "meas-pred in bytes; updates: in %.0fs at the measured update time, or at the "
            "fastest FLOP rate measured)\n", g->budget, g->train_seconds);
}

/* One argument of the winner's run. */
static void add_arg(void *spec, const char *arg)
{
    run_arg(spec, "%s", arg);
}

FitResult fit_train(const FitOptions *o, const FitSearch *s)
{
    const FitRow *w = &s->rows[s->winner];
    /* As many updates as the measured update time allows in the training share. */
    FitResult r = { .val_loss = NAN, .steps = w->steps };
    RunSpec spec = { .argc = 0 };
    run_arg(&spec, "%s", o->train_gpt);
    run_arg(&spec, "--data");
    run_arg(&spec, "%s", o->data);
    fit_each_arg(&w->c, add_arg, &spec);
    run_arg(&spec, "--steps");
    run_arg(&spec, "%ld", r.steps);
    run_arg(&spec, "--eval-every");
    run_arg(&spec, "0");
    run_arg(&spec, "--eval-examples");
    run_arg(&spec, "256");
    run_arg(&spec, "--sample");
    run_arg(&spec, "%d", o->sample);
    run_arg(&spec, "--mem-budget");
    run_arg(&spec, "%zu", o->budget);
    run_arg(&spec, "--threads");
    run_arg(&spec, "%d", o->threads);
    snprintf(spec.log_path, sizeof spec.log_path, "%s/fit_largest.%d.log.tsv", o->work,
             (int)getpid());
    snprintf(spec.out_path, sizeof spec.out_path, "%s/fit_largest.%d.out.txt", o->work,
             (int)getpid());
    run_arg(&spec, "--log");
    run_arg(&spec, "%s", spec.log_path);

    size_t at = 0;
    for (int i = 0; i < spec.argc && at < sizeof r.command; i++)
        at += (size_t)snprintf(r.command + at, sizeof r.command - at, "%s%s", i ? " " : "",
                               spec.argv[i]);
    printf("\ntraining the winner for %ld updates: %s\n", r.steps, r.command);
    fflush(stdout);
    double t0 = progress_now();
    RunResult res = run_train_gpt(&spec);
    r.seconds = progress_now() - t0;
    if (!res.ok)
        cli_die(1, "train_gpt gave no evaluation; its output is in %s", spec.out_path);
    r.val_loss = res.val_loss;
    if (!run_read_console(spec.out_path, &r.run))
        cli_die(1, "cannot read train_gpt's output %s", spec.out_path);
    remove(spec.log_path);
    remove(spec.out_path);
    return r;
}

/* The sample on one line: newlines shown as " / ". */
static void one_line(const char *text, char *buf, size_t len)
{
    size_t j = 0;
    for (const char *p = text; *p && j + 4 < len; p++) {
        if (*p == '\n') {
            memcpy(buf + j, " / ", 3);
            j += 3;
        } else {
            buf[j++] = *p == '\t' ? ' ' : *p;
        }
    }
    buf[j] = '\0';
}

void fit_print_result(const FitOptions *o, const FitSearch *s, const FitResult *r, FILE *out)
{
    const FitRow *w = &s->rows[s->winner];
    char d[128], b[32];
    fprintf(out, "\nthe homework's table (budget %s, time %gs):\n",
            mem_format_bytes(o->budget, b, sizeof b), o->seconds);
    fprintf(out, "  setup              %s\n", fit_describe(&w->c, d, sizeof d));
    if (w->c.base)
        fprintf(out, "  base               %s (fine-tuned: %s)\n", w->c.base,
                fit_method(&w->c, b, sizeof b));
    if (w->c.lora.rank > 0)
        fprintf(out, "  parameters         %zu, of which %zu trained (%.2f%%: the adapters)\n",
                w->c.params, w->c.trainable, 100.0 * (double)w->c.trainable /
                (double)w->c.params);
    else
        fprintf(out, "  parameters         %zu\n", w->c.params);
    fprintf(out, "  peak memory        %zu bytes (%.2f MiB) over the training steps, %zu "
            "(%.2f MiB) over the run; one step measured %.0f, predicted %.0f (%.2f MiB)\n",
            r->run.peak_step, mib((double)r->run.peak_step), r->run.peak_run, mib((double)r->run.peak_run),
            w->m.peak[MEM_ALL], w->c.predicted, mib(w->c.predicted));
    fprintf(out, "  eval loss          %.4f (validation, 256 rows, after %ld updates)\n",
            r->val_loss, r->steps);
    fprintf(out, "  batch size         %d rows = %d x %d accumulated, of %d tokens\n",
            w->c.B * w->c.accum, w->c.B, w->c.accum, w->c.T);
    fprintf(out, "  time               %.1f s (train_gpt's whole run)\n", r->seconds);
    fprintf(out, "  sample             (the first 32 characters are the prompt)\n----\n%s\n"
            "----\n", r->run.sample);
}

void fit_write_tsv(const FitOptions *o, const FitSearch *s, const FitResult *r)
{
    static const char *const cols[] = {
        "budget", "setup", "layers", "embd", "heads", "batch", "accum", "checkpoint",
        "precision", "optimizer", "params", "peak_step", "peak_run", "measured_step",
        "predicted", "eval_loss", "steps", "seconds", "sample", "method", "lora_rank",
        "trainable", NULL,
    };
    char err[512];
    TsvWriter *t = tsv_open(o->out, cols, err, sizeof err);
    if (!t)
        cli_die(1, "--out: %s", err);
    const FitRow *w = &s->rows[s->winner];
    char d[128], ck[32];
    static char line[sizeof r->run.sample * 3];
    tsv_int(t, (long long)o->budget);
    tsv_str(t, fit_describe(&w->c, d, sizeof d));
    tsv_int(t, w->c.model.n_layer);
    tsv_int(t, w->c.model.n_embd);
    tsv_int(t, w->c.model.n_head);
    tsv_int(t, w->c.B);
    tsv_int(t, w->c.accum);
    tsv_str(t, ckpt_name(w->c.strategy, ck, sizeof ck));
    tsv_str(t, FIT_PRECISION_NAMES[w->c.precision]);
    tsv_str(t, MC_OPTIMIZER_NAMES[w->c.optimizer]);
    tsv_int(t, (long long)w->c.params);
    tsv_int(t, (long long)r->run.peak_step);
    tsv_int(t, (long long)r->run.peak_run);
    tsv_num(t, w->m.peak[MEM_ALL]);
    tsv_num(t, round(w->c.predicted));
    tsv_num(t, r->val_loss);
    tsv_int(t, r->steps);
    tsv_num(t, round(r->seconds * 10) / 10);
    one_line(r->run.sample, line, sizeof line);
    tsv_str(t, line);
    char m[32];
    tsv_str(t, fit_method(&w->c, m, sizeof m));
    tsv_int(t, w->c.lora.rank);
    tsv_int(t, (long long)w->c.trainable);
    if (!tsv_end_row(t) || !tsv_close(t, err, sizeof err))
        cli_die(1, "--out: %s", err);
    printf("table: %s\n", o->out);
}

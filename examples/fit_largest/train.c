/* fit_largest: the search's table, the winner's training run (train_gpt as a subprocess, under
 * --mem-budget), and the homework's table. */
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "examples/common/cli.h"
#include "examples/common/progress.h"
#include "examples/common/train_run.h"
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

FitTrained fit_train(const FitOptions *o, const FitSearch *s)
{
    const FitRow *w = &s->rows[s->winner];
    /* As many updates as the measured update time allows in the training share. */
    FitTrained r = { .val_loss = NAN, .steps = w->steps };
    FitRunArgs a = { .data = o->data, .steps = r.steps, .sample = o->sample,
                     .threads = o->threads, .budget = o->budget };
    RunSpec spec = { .argc = 0 };
    run_arg(&spec, "%s", o->train_gpt);
    fit_each_run_arg(&w->c, &a, add_arg, &spec);
    snprintf(spec.log_path, sizeof spec.log_path, "%s/fit_largest.%d.log.tsv", o->work,
             (int)getpid());
    snprintf(spec.out_path, sizeof spec.out_path, "%s/fit_largest.%d.out.txt", o->work,
             (int)getpid());
    run_arg(&spec, "--log");
    run_arg(&spec, "%s", spec.log_path);
    printf("\ntraining the winner for %ld updates: ", r.steps);
    run_print_command(stdout, &spec);
    fflush(stdout);
    double t0 = progress_now();
    RunResult res = run_train_gpt(&spec);
    r.seconds = progress_now() - t0;
    if (!res.ok)
        cli_die(1, "train_gpt gave no evaluation; its output is in %s", spec.out_path);
    r.val_loss = res.val_loss;
    RunConsole con = { 0 };
    if (!run_read_console(spec.out_path, &con))
        cli_die(1, "cannot read train_gpt's output %s", spec.out_path);
    r.peak_step = con.peak_step;
    r.peak_run = con.peak_run;
    snprintf(r.sample, sizeof r.sample, "%s", con.sample);
    remove(spec.log_path);
    remove(spec.out_path);
    return r;
}

void fit_print_result(const FitOptions *o, const FitSearch *s, const FitTrained *r, FILE *out)
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
            r->peak_step, mib((double)r->peak_step), r->peak_run, mib((double)r->peak_run),
            w->m.peak[MEM_ALL], w->c.predicted, mib(w->c.predicted));
    fprintf(out, "  eval loss          %.4f (validation, %d rows, after %ld updates)\n",
            r->val_loss, FIT_EVAL_EXAMPLES, r->steps);
    fprintf(out, "  batch size         %d rows = %d x %d accumulated, of %d tokens\n",
            w->c.B * w->c.accum, w->c.B, w->c.accum, w->c.T);
    fprintf(out, "  time               %.1f s (train_gpt's whole run)\n", r->seconds);
    fprintf(out, "  sample             (the first 32 characters are the prompt)\n----\n%s\n"
            "----\n", r->sample);
}

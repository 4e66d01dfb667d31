/* The winner's training run (declared in fit_search.h): the train_gpt arguments beyond the
 * candidate's own, and the homework's table from what the run reported, as one TSV row and as
 * fit_largest prints it. In: the winner's row of the search, the run's numbers (FitTrained);
 * out: arguments, one at a time, the file and the printed table. fit_largest starts the run. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/mem.h"
#include "plan/fit_search.h"

/* One argument formatted, as fit_each_arg's. */
static void arg_num(FitArgFn fn, void *ctx, long long v)
{
    char a[32];
    snprintf(a, sizeof a, "%lld", v);
    fn(ctx, a);
}

void fit_each_run_arg(const FitCandidate *c, const FitRunArgs *a, FitArgFn fn, void *ctx)
{
    fn(ctx, "--data"), fn(ctx, a->data);
    fit_each_arg(c, fn, ctx);
    fn(ctx, "--steps"), arg_num(fn, ctx, a->steps);
    fn(ctx, "--eval-every"), fn(ctx, "0");
    fn(ctx, "--eval-examples"), arg_num(fn, ctx, FIT_EVAL_EXAMPLES);
    fn(ctx, "--sample"), arg_num(fn, ctx, a->sample);
    fn(ctx, "--mem-budget"), arg_num(fn, ctx, (long long)a->budget);
    fn(ctx, "--threads"), arg_num(fn, ctx, a->threads);
}

/* The sample on one line: newlines shown as " / " (a TSV cell has none). */
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

const char *const FIT_TABLE_COLUMNS[] = {
    "budget", "setup", "layers", "embd", "heads", "batch", "accum", "checkpoint",
    "precision", "optimizer", "params", "peak_step", "peak_run", "measured_step",
    "predicted", "eval_loss", "steps", "seconds", "sample", "method", "lora_rank",
    "trainable", NULL,
};

static void table_row(TsvWriter *t, size_t budget, const FitRow *w, const FitTrained *r)
{
    const FitCandidate *c = &w->c;
    char d[128], ck[32], m[32];
    static char line[sizeof r->sample * 3];
    tsv_int(t, (long long)budget);
    tsv_str(t, fit_describe(c, d, sizeof d));
    tsv_int(t, c->model.n_layer);
    tsv_int(t, c->model.n_embd);
    tsv_int(t, c->model.n_head);
    tsv_int(t, c->B);
    tsv_int(t, c->accum);
    tsv_str(t, ckpt_name(c->strategy, ck, sizeof ck));
    tsv_str(t, FIT_PRECISION_NAMES[c->precision]);
    tsv_str(t, MC_OPTIMIZER_NAMES[c->optimizer]);
    tsv_int(t, (long long)c->params);
    tsv_int(t, (long long)r->peak_step);
    tsv_int(t, (long long)r->peak_run);
    tsv_num(t, w->m.peak[MEM_ALL]);
    tsv_num(t, round(c->predicted));
    tsv_num(t, r->val_loss);
    tsv_int(t, r->steps);
    tsv_num(t, round(r->seconds * 10) / 10);
    one_line(r->sample, line, sizeof line);
    tsv_str(t, line);
    tsv_str(t, fit_method(c, m, sizeof m));
    tsv_int(t, c->lora.rank);
    tsv_int(t, (long long)c->trainable);
}

bool fit_write_table(const char *path, size_t budget, const FitRow *w, const FitTrained *r,
                     char *err, size_t errlen)
{
    TsvWriter *t = tsv_open(path, FIT_TABLE_COLUMNS, err, errlen);
    if (!t)
        return false;
    table_row(t, budget, w, r);
    (void)tsv_end_row(t);       /* a failed write is tsv_close's message */
    return tsv_close(t, err, errlen);
}

void fit_trained_print(const FitTrained *r, const FitRow *w, size_t budget, double seconds,
                       FILE *out)
{
    char d[128], b[32];
    fprintf(out, "\nthe homework's table (budget %s, time %gs):\n",
            mem_format_bytes(budget, b, sizeof b), seconds);
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
            r->peak_step, mem_mib((double)r->peak_step), r->peak_run, mem_mib((double)r->peak_run),
            w->m.peak[MEM_ALL], w->c.predicted, mem_mib(w->c.predicted));
    fprintf(out, "  eval loss          %.4f (validation, %d rows, after %ld updates)\n",
            r->val_loss, FIT_EVAL_EXAMPLES, r->steps);
    fprintf(out, "  batch size         %d rows = %d x %d accumulated, of %d tokens\n",
            w->c.B * w->c.accum, w->c.B, w->c.accum, w->c.T);
    fprintf(out, "  time               %.1f s (train_gpt's whole run)\n", r->seconds);
    fprintf(out, "  sample             (the first 32 characters are the prompt)\n----\n%s\n"
            "----\n", r->sample);
}

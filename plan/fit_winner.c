/* The winner's training run (declared in fit_search.h): the train_gpt arguments beyond the
 * candidate's own, and the homework's table as one TSV row from what the run reported. In: the
 * winner's row of the search, the run's numbers (FitTrained); out: arguments, one at a time,
 * and the file. fit_largest starts the run and prints the table. */
#include <math.h>
#include <stdio.h>
#include <string.h>

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

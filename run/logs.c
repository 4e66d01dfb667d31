/* A run's result files, written from each step's record (run/train.h): the step log (--log, one
 * row per step; columns in docs/gpt.md) and, under a pipeline, its own log and the events of
 * every stage (docs/pipeline.md):
 *     log       one row per step: loss, grad norm, time, bytes sent by all ranks, the bubble
 *               (measured, replayed from CPU times, counted from the schedule, the formula),
 *               the validation loss and accuracy when evaluated, and each stage's peak act
 *               bytes
 *     events    one row per forward and backward of every micro-batch on every stage of every
 *               step: start, input ready, end (ms), waiting, compute, CPU
 * Validation cells stay empty between evaluations (and val_acc for text): gnuplot and
 * spreadsheets read an empty cell as missing, and the curves are drawn across the gaps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/tsv.h"
#include "run/train.h"

/* Readers find columns by name (examples/train_gpt/loss.gp, examples/common/jobs.h), so
 * new ones go before the peak_* group that closes a row. */
static const char *const STEP_COLUMNS[] = {
    "step", "loss", "lr", "grad_norm", "tokens_per_s", "ms", "val_loss", "val_acc",
    "loss_scale", "skipped", "flop", "mfu",
    "peak_param", "peak_grad", "peak_optim", "peak_act", "peak_temp", NULL,
};

static const char *const EVENT_COLUMNS[] = {
    "step", "stage", "micro_batch", "kind", "start_ms", "ready_ms", "end_ms", "wait_ms",
    "compute_ms", "cpu_ms", NULL,
};

struct RunLogs {
    TsvWriter  *log, *events;
    const char *log_path, *events_path;
};

static TsvWriter *open_or_fail(const char *path, const char *const *cols)
{
    char err[512];
    TsvWriter *w = tsv_open(path, cols, err, sizeof err);
    if (!w)
        run_fail(1, "%s", err);
    return w;
}

/* A pipeline's log: fixed columns, then peak_act_s0 .. peak_act_s{p-1} (readers find them by
 * name: examples/pipeline_parallel/figure.sh). */
static TsvWriter *open_pipe_log(const char *path, int p)
{
    static const char *const fixed[] = {
        "step", "loss", "lr", "grad_norm", "ms", "bytes_sent", "bubble", "bubble_replayed",
        "bubble_schedule", "bubble_formula", "val_loss", "val_acc",
    };
    enum { NF = sizeof fixed / sizeof fixed[0] };
    if (p < 1 || p > 4096)
        run_fail(1, "%d ranks: at most 4096 stages", p);
    const char **cols = calloc((size_t)NF + (size_t)p + 1, sizeof *cols);
    char (*names)[24] = calloc((size_t)p, sizeof *names);
    if (!cols || !names)
        run_fail(1, "out of memory");
    for (int i = 0; i < NF; i++)
        cols[i] = fixed[i];
    for (int s = 0; s < p; s++) {
        snprintf(names[s], sizeof names[s], "peak_act_s%d", s);
        cols[NF + s] = names[s];
    }
    TsvWriter *w = open_or_fail(path, cols);
    free(cols);
    free(names);
    return w;
}

RunLogs *run_logs_open(const RunLocal *l, int stages)
{
    RunLogs *g = calloc(1, sizeof *g);
    if (!g)
        run_fail(1, "out of memory");
    if (l->log_path) {
        g->log = stages > 0 ? open_pipe_log(l->log_path, stages)
                            : open_or_fail(l->log_path, STEP_COLUMNS);
        g->log_path = l->log_path;
    }
    if (stages > 0 && l->parallel.pipe_events) {
        g->events = open_or_fail(l->parallel.pipe_events, EVENT_COLUMNS);
        g->events_path = l->parallel.pipe_events;
    }
    return g;
}

static void end_row(TsvWriter *w, const char *path)
{
    if (!tsv_end_row(w))
        run_fail(1, "%s: write failed (disk full?)", path);
}

static void write_step(RunLogs *g, const RunStepRecord *rec)
{
    TsvWriter *w = g->log;
    tsv_int(w, rec->step);
    tsv_float(w, (float)rec->result.loss);     /* the loss is a float; no false digits */
    tsv_num(w, rec->lr);
    tsv_num(w, rec->result.grad_norm);
    tsv_num(w, (double)rec->tokens / rec->seconds);
    tsv_num(w, 1000.0 * rec->seconds);
    tsv_num_or_empty(w, rec->ev ? rec->ev->loss : NAN);
    tsv_num_or_empty(w, rec->ev ? rec->ev->accuracy : NAN);
    tsv_num(w, rec->result.loss_scale);
    tsv_int(w, rec->result.skipped);
    tsv_num(w, rec->flop);
    tsv_num(w, rec->mfu);
    for (int c = 0; c < MEM_NCAT; c++)
        tsv_int(w, (long long)rec->peaks[c]);
    end_row(w, g->log_path);
}

static void write_events(RunLogs *g, long step, const PipeEvent *ev, int n)
{
    for (int i = 0; i < n; i++) {
        char kind[2] = { ev[i].kind, '\0' };
        tsv_int(g->events, step);
        tsv_int(g->events, ev[i].stage);
        tsv_int(g->events, ev[i].mb);
        tsv_str(g->events, kind);
        tsv_num(g->events, 1e3 * ev[i].start);
        tsv_num(g->events, 1e3 * ev[i].ready);
        tsv_num(g->events, 1e3 * ev[i].end);
        tsv_num(g->events, 1e3 * (ev[i].ready - ev[i].start));
        tsv_num(g->events, 1e3 * (ev[i].end - ev[i].ready));
        tsv_num(g->events, 1e3 * ev[i].cpu);
        if (!tsv_end_row(g->events))
            run_fail(1, "writing the event log failed (disk full?)");
    }
}

static void write_pipe_step(RunLogs *g, const RunPipeStep *rec)
{
    if (g->events)
        write_events(g, rec->step, rec->events, rec->n_events);
    if (!g->log)
        return;
    TsvWriter *w = g->log;
    tsv_int(w, rec->step);
    tsv_float(w, (float)rec->loss);
    tsv_num(w, rec->lr);
    tsv_num(w, rec->grad_norm);
    tsv_num(w, rec->ms);
    tsv_int(w, (long long)rec->bytes_sent);
    tsv_num(w, rec->bubble);
    tsv_num(w, rec->bubble_replayed);
    tsv_num(w, rec->bubble_schedule);
    tsv_num(w, rec->bubble_formula);
    tsv_num_or_empty(w, rec->val_loss);
    tsv_num_or_empty(w, rec->val_acc);
    for (int s = 0; s < rec->stages; s++)
        tsv_int(w, (long long)rec->act_peaks[s]);
    end_row(w, g->log_path);
}

void run_logs_write(RunLogs *g, const RunStepRecord *rec)
{
    if (rec->pipe)
        write_pipe_step(g, rec->pipe);
    else if (!rec->pipelined && g->log)
        write_step(g, rec);
}

void run_logs_close(RunLogs *g)
{
    if (!g)
        return;
    char err[512];
    if (g->log && !tsv_close(g->log, err, sizeof err))
        run_fail(1, "%s", err);
    if (g->events && !tsv_close(g->events, err, sizeof err))
        run_fail(1, "%s", err);
    if (g->events_path)
        printf("events: %s\n", g->events_path);
    free(g);
}

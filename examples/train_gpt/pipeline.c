/* train_gpt --parallel pipeline:{naive,gpipe,1f1b,pipedream} --micro-batches m [--stages LIST]:
 * the checks of its flags, and the files rank 0 writes from each step's record (run/ranks.h,
 * RunPipeStep; the pipeline itself is run/ranks_pipeline.c's, docs/pipeline.md):
 *     --log FILE          one row per step: loss, grad norm, time, bytes sent by all ranks, the
 *                         bubble (measured, replayed from CPU times, counted from the
 *                         schedule, the formula), the validation loss and accuracy when
 *                         evaluated, and each stage's peak act bytes
 *     --pipe-events FILE  one row per forward and backward of every micro-batch on every stage
 *                         of every step: start, input ready, end (ms), waiting, compute, CPU */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "examples/common/cli.h"
#include "examples/common/tsv.h"
#include "examples/train_gpt/train_gpt.h"

void pipeline_check_options(Options *o)
{
    if (!run_parallel_pipeline(&o->run.local.parallel))    /* the pipeline flags need it */
        return;
    if (options_given(o, FLAG_ACCUM))
        cli_usage_error("--parallel pipeline accumulates its --micro-batches; leave --accum out");
    if (o->run.lora.rank > 0 || o->run.local.load_base_path)
        cli_usage_error("--parallel pipeline: --lora, --qlora and --load-base are not built (the "
                        "adapters and their base would be cut over the stages)");
    if (o->run.local.plot_path)
        cli_usage_error("--parallel pipeline draws no --plot (see examples/pipeline_parallel)");
    if (o->run.local.parallel.dist.micro_batches < 1)
        o->run.local.parallel.dist.micro_batches = 1;
    /* the schedule's effective batch is batch x m */
    o->run.kept.accum = o->run.local.parallel.dist.micro_batches;
}

/* --load: the snapshot's accumulation (merged into accum) is the pipeline's micro-batch count, so
 * that it goes on with the same batches; a --micro-batches that differs is refused, as --accum
 * would be. A LoRA run's snapshot is refused like --lora. */
void pipeline_check_loaded(Options *o, const char *path)
{
    if (!run_parallel_pipeline(&o->run.local.parallel))
        return;
    if (o->run.lora.rank > 0)
        cli_usage_error("--parallel pipeline: --load %s is a LoRA run's snapshot; LoRA is not "
                        "built under a pipeline", path);
    int *m = &o->run.local.parallel.dist.micro_batches;
    if (options_given(o, FLAG_MICRO_BATCHES) && *m != o->run.kept.accum)
        cli_usage_error("--micro-batches %d does not match the snapshot %s, which accumulates %d "
                        "micro-batches a step (leave --micro-batches out to continue it)",
                        o->run.local.parallel.dist.micro_batches, path, o->run.kept.accum);
    o->run.local.parallel.dist.micro_batches = o->run.kept.accum;
}

static const char *const EVENT_COLUMNS[] = {
    "step", "stage", "micro_batch", "kind", "start_ms", "ready_ms", "end_ms", "wait_ms",
    "compute_ms", "cpu_ms", NULL,
};

static void write_events(TsvWriter *w, long step, const PipeEvent *ev, int n)
{
    for (int i = 0; i < n; i++) {
        char kind[2] = { ev[i].kind, '\0' };
        tsv_int(w, step);
        tsv_int(w, ev[i].stage);
        tsv_int(w, ev[i].mb);
        tsv_str(w, kind);
        tsv_num(w, 1e3 * ev[i].start);
        tsv_num(w, 1e3 * ev[i].ready);
        tsv_num(w, 1e3 * ev[i].end);
        tsv_num(w, 1e3 * (ev[i].ready - ev[i].start));
        tsv_num(w, 1e3 * (ev[i].end - ev[i].ready));
        tsv_num(w, 1e3 * ev[i].cpu);
        if (!tsv_end_row(w))
            cli_die(1, "writing the event log failed (disk full?)");
    }
}

/* The run's log: fixed columns, then peak_act_s0 .. peak_act_s{p-1} (readers find them by name:
 * examples/pipeline_parallel/figure.sh). */
static TsvWriter *open_log(const char *path, int p)
{
    static const char *const fixed[] = {
        "step", "loss", "lr", "grad_norm", "ms", "bytes_sent", "bubble", "bubble_replayed",
        "bubble_schedule", "bubble_formula", "val_loss", "val_acc",
    };
    enum { NF = sizeof fixed / sizeof fixed[0] };
    if (p < 1 || p > 4096)
        cli_die(1, "%d ranks: at most 4096 stages", p);
    const char **cols = calloc((size_t)NF + (size_t)p + 1, sizeof *cols);
    char (*names)[24] = calloc((size_t)p, sizeof *names);
    if (!cols || !names)
        cli_die(1, "out of memory");
    for (int i = 0; i < NF; i++)
        cols[i] = fixed[i];
    for (int s = 0; s < p; s++) {
        snprintf(names[s], sizeof names[s], "peak_act_s%d", s);
        cols[NF + s] = names[s];
    }
    char err[512];
    TsvWriter *w = tsv_open(path, cols, err, sizeof err);
    free(cols);
    free(names);
    if (!w)
        cli_die(1, "%s", err);
    return w;
}


struct PipeLogs {
    TsvWriter  *log, *events;
    const char *log_path, *events_path;
};

PipeLogs *pipe_logs_open(const Options *o, int stages)
{
    PipeLogs *l = calloc(1, sizeof *l);
    if (!l)
        cli_die(1, "out of memory");
    char err[512];
    if (o->run.local.log_path) {
        l->log = open_log(o->run.local.log_path, stages);
        l->log_path = o->run.local.log_path;
    }
    if (o->run.local.parallel.pipe_events) {
        l->events = tsv_open(o->run.local.parallel.pipe_events, EVENT_COLUMNS, err, sizeof err);
        if (!l->events)
            cli_die(1, "%s", err);
        l->events_path = o->run.local.parallel.pipe_events;
    }
    return l;
}

static void log_cell(TsvWriter *w, double v)
{
    if (isnan(v))
        tsv_str(w, "");
    else
        tsv_num(w, v);
}

void pipe_logs_write(PipeLogs *l, const RunPipeStep *rec)
{
    if (l->events)
        write_events(l->events, rec->step, rec->events, rec->n_events);
    if (!l->log)
        return;
    tsv_int(l->log, rec->step);
    tsv_float(l->log, (float)rec->loss);
    tsv_num(l->log, rec->lr);
    tsv_num(l->log, rec->grad_norm);
    tsv_num(l->log, rec->ms);
    tsv_int(l->log, (long long)rec->bytes_sent);
    tsv_num(l->log, rec->bubble);
    tsv_num(l->log, rec->bubble_replayed);
    tsv_num(l->log, rec->bubble_schedule);
    tsv_num(l->log, rec->bubble_formula);
    log_cell(l->log, rec->val_loss);
    log_cell(l->log, rec->val_acc);
    for (int s = 0; s < rec->stages; s++)
        tsv_int(l->log, (long long)rec->act_peaks[s]);
    if (!tsv_end_row(l->log))
        cli_die(1, "%s: write failed (disk full?)", l->log_path);
}

void pipe_logs_close(PipeLogs *l)
{
    if (!l)
        return;
    char err[512];
    if (l->log && !tsv_close(l->log, err, sizeof err))
        cli_die(1, "%s", err);
    if (l->events && !tsv_close(l->events, err, sizeof err))
        cli_die(1, "%s", err);
    if (l->events_path)
        printf("events: %s\n", l->events_path);
    free(l);
}

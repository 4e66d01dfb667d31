/* train_gpt --parallel pipeline:{naive,gpipe,1f1b,pipedream} --micro-batches m [--stages LIST], run as
 * `scripts/mpirun -np p build/bin/train_gpt ...`: the blocks cut over p ranks, one step per
 * global batch of m micro-batches (dist/pipeline.h, docs/pipeline.md). The pipeline is one case
 * of the calls train_gpt's one training loop makes (ranks.c): every rank builds or loads the
 * whole trainer as one process would and draws the same batches from the same data RNG; the
 * stage trains its own blocks; before an evaluation the stages share their weights, and after
 * the last step the trainer comes back whole (weights, masters, optimizer state), so the final
 * evaluation, the samples and --save (one ordinary snapshot, which one process or a pipeline of
 * any shape --load's) are those of any run. Rank 0 prints and writes the files:
 *     --log FILE          one row per step: loss, grad norm, time, bytes sent by all ranks, the
 *                         bubble (measured, replayed from CPU times, counted from the
 *                         schedule, the formula), the validation loss and accuracy when
 *                         evaluated, and each stage's peak act bytes
 *     --pipe-events FILE  one row per forward and backward of every micro-batch on every stage
 *                         of every step: start, input ready, end (ms), waiting, compute, CPU
 * Without --parallel train_gpt never starts MPI. Left out here: LoRA (a stage would hold part of
 * the adapters) and --plot (the log has its own columns; see examples/pipeline_parallel).
 * pipeline:pipedream (asynchronous, dist/pipeline.h) makes m updates a step, each stage on its
 * own; the loop's per-step reports (the FLOP sum, the log) synchronise the stages once a step,
 * so its measured bubble is a window's between two synchronisations, and the replayed one the
 * steady state without them (pipe_bubble_replayed). Each step's loss is the last stage's (the
 * step's own m micro-batches); the report adds each stage's weight stash and staleness. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/mem.h"
#include "dist/run.h"
#include "examples/common/cli.h"
#include "examples/common/progress.h"
#include "examples/common/tsv.h"
#include "examples/train_gpt/train_gpt.h"

bool pipeline_requested(const Options *o) { return run_parallel_pipeline(&o->local.parallel) != NULL; }

void pipeline_check_options(Options *o)
{
    if (!run_parallel_pipeline(&o->local.parallel))       /* the pipeline flags need it (settings.c) */
        return;
    if (options_given(o, FLAG_ACCUM))
        cli_usage_error("--parallel pipeline accumulates its --micro-batches; leave --accum out");
    if (o->lora.rank > 0 || o->local.load_base_path)
        cli_usage_error("--parallel pipeline: --lora, --qlora and --load-base are not built (the "
                        "adapters and their base would be cut over the stages)");
    if (o->local.plot_path)
        cli_usage_error("--parallel pipeline draws no --plot (see examples/pipeline_parallel)");
    if (o->local.parallel.dist.micro_batches < 1)
        o->local.parallel.dist.micro_batches = 1;
    o->kept.accum = o->local.parallel.dist.micro_batches;   /* the schedule's effective batch is
                                                             * batch x m */
}

/* --load: the snapshot's accumulation (merged into accum) is the pipeline's micro-batch count, so
 * that it goes on with the same batches; a --micro-batches that differs is refused, as --accum
 * would be. A LoRA run's snapshot is refused like --lora. */
void pipeline_check_loaded(Options *o, const char *path)
{
    if (!run_parallel_pipeline(&o->local.parallel))
        return;
    if (o->lora.rank > 0)
        cli_usage_error("--parallel pipeline: --load %s is a LoRA run's snapshot; LoRA is not "
                        "built under a pipeline", path);
    int *m = &o->local.parallel.dist.micro_batches;
    if (options_given(o, FLAG_MICRO_BATCHES) && *m != o->kept.accum)
        cli_usage_error("--micro-batches %d does not match the snapshot %s, which accumulates %d "
                        "micro-batches a step (leave --micro-batches out to continue it)",
                        o->local.parallel.dist.micro_batches, path, o->kept.accum);
    o->local.parallel.dist.micro_batches = o->kept.accum;
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


struct PipelineRun {
    DistRun      *run;              /* the pipeline's strategy (dist/run.h) */
    DistComm     *c;                /* the pipeline's ranks (the world without replicas) */
    int           p, rank, m, B, T; /* rank: in the world (rank 0 prints) */
    int           replicas, zero_level;
    long          steps;            /* --steps: the last */
    PipeSchedKind kind;
    const int    *first;            /* [p + 1], the run's */
    PipeSchedule  sched;            /* for the replay and the counted bubble */
    double        bubble_sched;
    TsvWriter    *log, *events;     /* rank 0's --log and --pipe-events */
    const char   *log_path, *events_path;
    size_t       *peaks;            /* [p] the last step's peak act bytes per stage */
    double       *bubble;           /* [p] */
    long          first_step;       /* the run's first step warms the allocator's cache */
    long          last_step;
    double        last_loss;
    double        sum_bubble, sum_replayed, wait_ms, compute_ms;   /* over the measured steps */
    long          measured;
    double       *async_stats;      /* pipedream, [p][5] on rank 0: stash peak, weight bytes,
                                     * updates, staleness mean, max (pipeline_training_done) */
};

PipelineRun *pipeline_start(const Options *o, Trainer *tr, DistRun *run)
{
    PipelineRun *pr = calloc(1, sizeof *pr);
    if (!pr)
        dist_fail("out of memory");
    const DistPlan *plan = &dist_run_config(run)->plan;
    pr->run = run;
    pr->c = dist_run_comm(run);
    pr->rank = dist_world()->rank;
    pr->replicas = plan->replicas;
    pr->zero_level = plan->zero_level;
    pr->kind = plan->sched;
    pr->first = dist_run_stage_split(run, &pr->p);
    pr->m = o->local.parallel.dist.micro_batches;
    pr->steps = o->kept.steps;
    pr->B = o->kept.batch;
    pr->T = o->seq;
    pr->peaks = calloc((size_t)pr->p, sizeof *pr->peaks);
    pr->bubble = calloc((size_t)pr->p, sizeof *pr->bubble);
    if (!pr->peaks || !pr->bubble)
        dist_fail("out of memory");
    pr->sched = pipe_schedule_new(pr->kind, pr->p, pr->m);
    pr->bubble_sched = 1.0 - 3.0 * pr->m / pipe_simulate(&pr->sched, NULL, NULL, NULL);
    pr->first_step = pr->last_step = tr->step;
    char err[512];
    if (pr->rank == 0 && o->local.log_path) {
        pr->log = open_log(o->local.log_path, pr->p);
        pr->log_path = o->local.log_path;
    }
    if (pr->rank == 0 && o->local.parallel.pipe_events) {
        pr->events = tsv_open(o->local.parallel.pipe_events, EVENT_COLUMNS, err, sizeof err);
        if (!pr->events)
            cli_die(1, "%s", err);
        pr->events_path = o->local.parallel.pipe_events;
    }
    return pr;
}

void pipeline_describe(const PipelineRun *pr)
{
    printf("pipeline: %s over %d ranks, %d micro-batches of %d x %d tokens; blocks per stage:",
           PIPE_SCHED_NAMES[pr->kind], pr->p, pr->m, pr->B, pr->T);
    for (int i = 0; i < pr->p; i++)
        printf(" %d", pr->first[i + 1] - pr->first[i]);
    if (pr->replicas > 1)
        printf("\ndata parallel: %d replicas of the pipeline, each on %d of the global batch's %d "
               "micro-batches; each stage's gradients summed over its replicas in rank order",
               pr->replicas, pr->m, pr->replicas * pr->m);
    if (pr->zero_level)
        printf("\nzero-1 in the data groups: each stage's optimizer state and fp32 masters cut "
               "into %d shards over its replicas; gradients reduce-scattered, updated shards "
               "all-gathered", pr->replicas);
    if (pr->kind == PIPE_PIPEDREAM) {
        printf("\npipedream: no flush, an update after every backward (m = %d a step), each "
               "stage's weights stashed for its micro-batches in flight\nbubble: steady state "
               "0%%; counted from the schedule (F = 1, B = 2) for one step between two "
               "synchronisations %.1f%% (the fill alone)\n", pr->m, 100.0 * pr->bubble_sched);
        return;
    }
    printf("\nbubble: formula %.1f%%, counted from the schedule (F = 1, B = 2) %.1f%%\n",
           100.0 * pipe_bubble_formula(pr->kind, pr->p, pr->m), 100.0 * pr->bubble_sched);
}

static void log_cell(TsvWriter *w, double v)
{
    if (isnan(v))
        tsv_str(w, "");
    else
        tsv_num(w, v);
}

/* Everything here is bookkeeping, after the step: the bytes every rank sent, each stage's peak
 * act bytes and every rank's events gathered on rank 0, which measures the bubble and writes. */
void pipeline_step_report(PipelineRun *pr, long step, double lr, TrainStepResult r,
                          double seconds, size_t act_peak, const EvalResult *ev)
{
    Pipeline *pp = dist_run_pipeline(pr->run);
    int p = pr->p;
    double sent = dist_sum_double(pr->c, (double)pipe_bytes_sent(pp));
    if (pr->c->rank == 0) {
        pr->peaks[0] = act_peak;
        for (int s = 1; s < p; s++)
            dist_recv(pr->c, &pr->peaks[s], sizeof pr->peaks[s], s, pipe_first_free_tag(pp));
    } else {
        dist_send(pr->c, &act_peak, sizeof act_peak, 0, pipe_first_free_tag(pp));
    }
    int n;
    PipeEvent *events = pipe_gather_events(pp, &n);
    pr->last_loss = r.loss;
    pr->last_step = step;
    if (pr->rank != 0) {            /* another replica's first stage gathered its own */
        free(events);
        return;
    }
    pipe_bubble(events, n, p, pr->bubble);
    double mean = 0.0;
    for (int s = 0; s < p; s++)
        mean += pr->bubble[s] / p;
    double replayed = pipe_bubble_replayed(&pr->sched, events, n);
    if (step > pr->first_step + 1) {
        pr->sum_bubble += mean;
        pr->sum_replayed += replayed;
        for (int i = 0; i < n; i++) {
            pr->wait_ms += 1e3 * (events[i].ready - events[i].start) / p;
            pr->compute_ms += 1e3 * (events[i].end - events[i].ready) / p;
        }
        pr->measured++;
    }
    if (pr->events)
        write_events(pr->events, step, events, n);
    double ms = 1e3 * seconds;
    if (pr->log) {
        tsv_int(pr->log, step);
        tsv_float(pr->log, (float)r.loss);
        tsv_num(pr->log, lr);
        tsv_num(pr->log, r.grad_norm);
        tsv_num(pr->log, ms);
        tsv_int(pr->log, (long long)sent);
        tsv_num(pr->log, mean);
        tsv_num(pr->log, replayed);
        tsv_num(pr->log, pr->bubble_sched);
        tsv_num(pr->log, pipe_bubble_formula(pr->kind, p, pr->m));
        log_cell(pr->log, ev ? ev->loss : NAN);
        log_cell(pr->log, ev ? ev->accuracy : NAN);
        for (int s = 0; s < p; s++)
            tsv_int(pr->log, (long long)pr->peaks[s]);
        if (!tsv_end_row(pr->log))
            cli_die(1, "%s: write failed (disk full?)", pr->log_path);
    }
    if (step == pr->first_step + 1 || step == pr->steps || step % 10 == 0)
        printf("step %5ld  loss %.4f  %.1f ms  bubble %.1f%% (replayed %.1f%%)  sent %.0f "
               "bytes\n", step, r.loss, ms, 100.0 * mean, 100.0 * replayed, sent);
    free(events);
}

/* Before the trainer goes back (ranks_training_done): pipedream's stash, updates and staleness
 * per stage, after the drain, so that every update has counted. */
void pipeline_training_done(PipelineRun *pr)
{
    Pipeline *pp = dist_run_pipeline(pr->run);
    if (!pp || pr->kind != PIPE_PIPEDREAM)
        return;
    pipe_drain(pp);
    int most;
    double stale = pipe_staleness(pp, &most);
    double mine[5] = { (double)pipe_stash_peak(pp), (double)pipe_stage_weight_bytes(pp),
                       (double)pipe_updates(pp), stale, most };
    free(pr->async_stats);
    pr->async_stats = calloc((size_t)pr->p * 5, sizeof *pr->async_stats);
    if (!pr->async_stats)
        dist_fail("out of memory");
    dist_allgather(pr->c, mine, pr->async_stats, (size_t)pr->p * 5, sizeof *mine);
}

void pipeline_report(PipelineRun *pr)
{
    if (pr->rank != 0)
        return;
    long k = pr->measured > 0 ? pr->measured : 1;
    if (pr->last_step > pr->first_step) {
        printf("final train loss %.4f\n", pr->last_loss);
        printf("bubble over steps %ld..%ld: measured %.1f%% (idle / span, wall clock), replayed "
               "from CPU times %.1f%%, schedule %.1f%%, formula %.1f%%\n", pr->first_step + 2,
               pr->last_step, 100.0 * pr->sum_bubble / k, 100.0 * pr->sum_replayed / k,
               100.0 * pr->bubble_sched, 100.0 * pipe_bubble_formula(pr->kind, pr->p, pr->m));
        printf("per stage and step: %.2f ms waiting, %.2f ms computing (mean over stages)\n",
               pr->wait_ms / k, pr->compute_ms / k);
        printf("peak act bytes per stage (last step):");
        for (int s = 0; s < pr->p; s++)
            printf(" %zu", pr->peaks[s]);
        printf("\n");
    }
    for (int s = 0; pr->async_stats && s < pr->p; s++) {
        const double *x = pr->async_stats + (size_t)s * 5;
        if (s == 0)
            printf("pipedream per stage: updates, weight stash peak bytes (formula (p-1-s) x "
                   "the stage's weight bytes), staleness of the updates (mean, max; p-1-s in "
                   "steady state)\n");
        printf("  stage %d  %6.0f updates  stash %9.0f = %d x %.0f %s  staleness %.3f, max "
               "%.0f\n", s, x[2], x[0], pr->p - 1 - s, x[1],
               x[0] == (pr->p - 1 - s) * x[1] ? "(equal)" : "(differs)", x[3], x[4]);
    }
    char err[512];
    if (pr->log && !tsv_close(pr->log, err, sizeof err))
        cli_die(1, "%s", err);
    if (pr->events && !tsv_close(pr->events, err, sizeof err))
        cli_die(1, "%s", err);
    pr->log = pr->events = NULL;
    if (pr->events_path)
        printf("events: %s\n", pr->events_path);
}

void pipeline_end(PipelineRun *pr)
{
    if (!pr)
        return;
    pipe_schedule_free(&pr->sched);
    free(pr->async_stats);
    free(pr->peaks);
    free(pr->bubble);
    free(pr);
}

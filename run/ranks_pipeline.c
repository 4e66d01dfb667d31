/* --parallel pipeline:{naive,gpipe,1f1b,pipedream} --micro-batches m [--stages LIST], run as
 * `scripts/mpirun -np p build/bin/train_gpt ...`: the blocks cut over p ranks, one step per
 * global batch of m micro-batches (dist/pipeline.h, docs/pipeline.md). The pipeline is one case
 * of the calls the run's one training loop makes (run/ranks.c): every rank builds or loads the
 * whole trainer as one process would and draws the same batches from the same data RNG; the
 * stage trains its own blocks; before an evaluation the stages share their weights, and after
 * the last step the trainer comes back whole (weights, masters, optimizer state), so the final
 * evaluation, the samples and --save (one ordinary snapshot, which one process or a pipeline of
 * any shape --load's) are those of any run. Rank 0 prints and keeps the records
 * that the program writes:
 *     --log FILE          one row per step: loss, grad norm, time, bytes sent by all ranks, the
 *                         bubble (measured, replayed from CPU times, counted from the
 *                         schedule, the formula), the validation loss and accuracy when
 *                         evaluated, and each stage's peak act bytes
 *     --pipe-events FILE  one row per forward and backward of every micro-batch on every stage
 *                         of every step: start, input ready, end (ms), waiting, compute, CPU
 * Without --parallel MPI never starts. Left out here: LoRA (a stage would hold part of
 * the adapters) and --plot (the log has its own columns; see examples/pipeline_parallel).
 * pipeline:pipedream (asynchronous, dist/pipeline.h) makes m updates a step, each stage on its
 * own; the loop's per-step reports (the FLOP sum, the log) synchronise the stages once a step,
 * so its measured bubble is a window's between two synchronisations, and the replayed one the
 * steady state without them (pipe_bubble_replayed). Each step's loss is the last stage's (the
 * step's own m micro-batches); the report adds each stage's weight stash and staleness. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/mem.h"
#include "dist/run.h"
#include "run/ranks_internal.h"

struct RunPipe {
    DistRun      *run;              /* the pipeline's strategy (dist/run.h) */
    DistComm     *c;                /* the pipeline's ranks (the world without replicas) */
    int           p, rank, m, B, T; /* rank: in the world (rank 0 prints) */
    int           replicas, zero_level;
    long          steps;            /* --steps: the last */
    PipeSchedKind kind;
    const int    *first;            /* [p + 1], the run's */
    PipeSchedule  sched;            /* for the replay and the counted bubble */
    double        bubble_sched;
    RunPipeStep   rec;              /* rank 0's record of the last step */
    PipeEvent    *events;           /* its events */
    size_t       *peaks;            /* [p] the last step's peak act bytes per stage */
    double       *bubble;           /* [p] */
    long          first_step;       /* the run's first step warms the allocator's cache */
    long          last_step;
    double        last_loss;
    double        sum_bubble, sum_replayed, wait_ms, compute_ms;   /* over the measured steps */
    long          measured;
    double       *async_stats;      /* pipedream, [p][5] on rank 0: stash peak, weight bytes,
                                     * updates, staleness mean, max (run_pipe_training_done) */
};

RunPipe *run_pipe_start(Trainer *tr, DistRun *run, int m, long steps, int B, int T)
{
    RunPipe *pr = calloc(1, sizeof *pr);
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
    pr->m = m;
    pr->steps = steps;
    pr->B = B;
    pr->T = T;
    pr->peaks = calloc((size_t)pr->p, sizeof *pr->peaks);
    pr->bubble = calloc((size_t)pr->p, sizeof *pr->bubble);
    if (!pr->peaks || !pr->bubble)
        dist_fail("out of memory");
    pr->sched = pipe_schedule_new(pr->kind, pr->p, pr->m);
    pr->bubble_sched = 1.0 - 3.0 * pr->m / pipe_simulate(&pr->sched, NULL, NULL, NULL);
    pr->first_step = pr->last_step = tr->step;
    return pr;
}

int run_pipe_stages(const RunPipe *pr) { return pr->p; }

void run_pipe_describe(const RunPipe *pr)
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

/* Everything here is bookkeeping, after the step: the bytes every rank sent, each stage's peak
 * act bytes and every rank's events gathered on rank 0, which measures the bubble and writes. */
const RunPipeStep *run_pipe_step_report(RunPipe *pr, long step, double lr, TrainStepResult r,
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
    free(pr->events);
    pr->events = events;
    if (pr->rank != 0)              /* another replica's first stage gathered its own */
        return NULL;
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
    double ms = 1e3 * seconds;
    pr->rec = (RunPipeStep){
        .step = step, .loss = r.loss, .lr = lr, .grad_norm = r.grad_norm, .ms = ms,
        .bytes_sent = sent, .bubble = mean, .bubble_replayed = replayed,
        .bubble_schedule = pr->bubble_sched,
        .bubble_formula = pipe_bubble_formula(pr->kind, p, pr->m),
        .val_loss = ev ? ev->loss : NAN, .val_acc = ev ? ev->accuracy : NAN,
        .stages = p, .act_peaks = pr->peaks, .n_events = n, .events = events,
    };
    if (step == pr->first_step + 1 || step == pr->steps || step % 10 == 0)
        printf("step %5ld  loss %.4f  %.1f ms  bubble %.1f%% (replayed %.1f%%)  sent %.0f "
               "bytes\n", step, r.loss, ms, 100.0 * mean, 100.0 * replayed, sent);
    return &pr->rec;
}

/* Before the trainer goes back (run_ranks_training_done): pipedream's stash, updates and staleness
 * per stage, after the drain, so that every update has counted. */
void run_pipe_training_done(RunPipe *pr)
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

void run_pipe_report(RunPipe *pr)
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
}

void run_pipe_end(RunPipe *pr)
{
    if (!pr)
        return;
    pipe_schedule_free(&pr->sched);
    free(pr->async_stats);
    free(pr->events);
    free(pr->peaks);
    free(pr->bubble);
    free(pr);
}

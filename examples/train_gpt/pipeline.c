/* train_gpt --parallel pipeline:{naive,gpipe,1f1b} --micro-batches m [--stages LIST], run as
 * `scripts/mpirun -np p build/bin/train_gpt ...`: the blocks cut over p ranks, one step per
 * global batch of m micro-batches (dist/pipeline.h, docs/pipeline.md). Every rank draws the
 * same batches from the same data RNG; rank 0 prints and writes the files:
 *     --log FILE          one row per step: loss, grad norm, time, bytes sent by all ranks, the
 *                         bubble (measured, replayed from CPU times, counted from the
 *                         schedule, the formula) and each stage's peak act bytes
 *     --pipe-events FILE  one row per forward and backward of every micro-batch on every stage
 *                         of every step: start, input ready, end (ms), waiting, compute, CPU
 * Without --parallel train_gpt never starts MPI. Left out here: evaluation during the run,
 * --load, --save, LoRA (a stage holds part of the model). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/mem.h"
#include "dist/pipeline.h"
#include "examples/common/cli.h"
#include "examples/common/progress.h"
#include "examples/common/tsv.h"
#include "examples/train_gpt/train_gpt.h"

static PipeSchedKind sched_of(const Options *o)
{
    PipeSchedKind k = PIPE_GPIPE;
    pipe_sched_parse(o->parallel + strlen("pipeline:"), &k);
    return k;
}

void pipeline_set_option(void *opts, int f, const char *flag, const char *arg)
{
    (void)f;
    PipeSchedKind k;
    if (strncmp(arg, "pipeline:", 9) != 0 || !pipe_sched_parse(arg + 9, &k))
        cli_usage_error("%s '%s': expected pipeline:naive, pipeline:gpipe or pipeline:1f1b",
                        flag, arg);
    ((Options *)opts)->parallel = arg;
}

bool pipeline_requested(const Options *o) { return o->parallel != NULL; }

void pipeline_check_options(Options *o)
{
    if (!o->parallel)       /* the pipeline flags need it (settings.c) */
        return;
    if (options_given(o, FLAG_ACCUM))
        cli_usage_error("--parallel pipeline accumulates its --micro-batches; leave --accum out");
    if (o->load_path || o->save_path || o->lora.rank > 0 || o->load_base_path)
        cli_usage_error("--parallel pipeline does not take --load, --save, --load-base or "
                        "--lora");
    if (o->plot_path)
        cli_usage_error("--parallel pipeline draws no --plot (see examples/pipeline_parallel)");
    if (o->micro_batches < 1)
        o->micro_batches = 1;
    o->accum = o->micro_batches;        /* the schedule's effective batch is batch x m */
}

/* The same error on every rank (each found it from the same arguments, which the ranks have
 * agreed on: parallel_setup_done): nobody waits, and rank 0 alone says it, once. */
static _Noreturn void die_everywhere(int rank, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (rank == 0)
        fprintf(stderr, "%s: %s\n", cli_program(), msg);
    fflush(stderr);
    dist_finalize();
    exit(1);
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

/* The run's log: fixed columns, then peak_act_s0 .. peak_act_s{p-1}. */
static TsvWriter *open_log(const char *path, int p)
{
    static const char *const fixed[] = {
        "step", "loss", "lr", "grad_norm", "ms", "bytes_sent", "bubble", "bubble_replayed",
        "bubble_schedule", "bubble_formula",
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

typedef struct {
    double bubble, replayed, wait_ms, compute_ms;   /* sums over measured steps */
    long   steps;
} Totals;

int pipeline_main(Options *o, Dataset *ds)
{
    dist_init(NULL, NULL);
    parallel_setup_done(o, 0);
    DistComm *w = dist_world();
    int p = w->size, rank = w->rank;
    TrainerConfig cfg = o->cfg;
    cfg.model.vocab_size = dataset_vocab_size(ds);
    cfg.model.max_seq = o->seq;
    int *first = malloc((size_t)(p + 1) * sizeof *first);
    char err[256];
    if (!first)
        dist_fail("out of memory");
    if (!pipe_split_parse(o->stages, cfg.model.n_layer, p, first, err, sizeof err))
        die_everywhere(rank, "%s", err);
    if (o->seq > cfg.model.max_seq || cfg.model.vocab_size < dataset_vocab_size(ds))
        die_everywhere(rank, "the model does not cover the data");
    PipeSchedKind kind = sched_of(o);
    int m = o->micro_batches, B = o->batch, T = o->seq;
    Pipeline *pp = pipe_new(&cfg, w, kind, m, first);
    gpt_set_tiled_attention(pipe_trainer(pp)->model, o->attention == ATTENTION_TILED);
    PipeSchedule sched = pipe_schedule_new(kind, p, m);
    double busy_units[64];
    double span_units = pipe_simulate(&sched, NULL, NULL, p <= 64 ? busy_units : NULL);
    double bubble_sched = 1.0 - 3.0 * m / span_units;
    if (rank == 0) {
        char buf[512];
        printf("%s\n", dataset_describe(ds, buf, sizeof buf));
        printf("pipeline: %s over %d ranks, %d micro-batches of %d x %d tokens; blocks per "
               "stage:", PIPE_SCHED_NAMES[kind], p, m, B, T);
        for (int s = 0; s < p; s++)
            printf(" %d", first[s + 1] - first[s]);
        printf("\nbubble: formula %.1f%%, counted from the schedule (F = 1, B = 2) %.1f%%\n",
               100.0 * pipe_bubble_formula(kind, p, m), 100.0 * bubble_sched);
    }
    TsvWriter *log = rank == 0 && o->log_path ? open_log(o->log_path, p) : NULL;
    TsvWriter *evlog = NULL;
    if (rank == 0 && o->pipe_events) {
        evlog = tsv_open(o->pipe_events, EVENT_COLUMNS, err, sizeof err);
        if (!evlog)
            cli_die(1, "%s", err);
    }
    size_t n_tok = (size_t)m * B * T;
    int *tokens = malloc(n_tok * sizeof *tokens), *targets = malloc(n_tok * sizeof *targets);
    size_t *peaks = calloc((size_t)p, sizeof *peaks);
    double *bubble = calloc((size_t)p, sizeof *bubble);
    if (!tokens || !targets || !peaks || !bubble)
        dist_fail("out of memory for %zu tokens", n_tok);
    Trainer *tr = pipe_trainer(pp);
    Totals tot = { 0 };
    double last_loss = 0.0;
    for (long step = 1; step <= o->steps; step++) {
        double lr = options_lr(o, step);
        dataset_train_batch(ds, &tr->data_rng, m * B, tokens, targets);
        mem_reset_peaks();
        double t0 = progress_now();
        TrainStepResult r = pipe_step(pp, tokens, targets, B, T, lr);
        double ms = 1e3 * (progress_now() - t0);
        /* Everything below is bookkeeping, after the step. */
        double sent = dist_sum_double(w, (double)pipe_bytes_sent(pp));
        size_t my_peak = mem_peak(MEM_ACT);
        if (rank == 0) {
            peaks[0] = my_peak;
            for (int s = 1; s < p; s++)
                dist_recv(w, &peaks[s], sizeof peaks[s], s, pipe_first_free_tag(pp));
        } else {
            dist_send(w, &my_peak, sizeof my_peak, 0, pipe_first_free_tag(pp));
        }
        int n;
        PipeEvent *ev = pipe_gather_events(pp, &n);
        last_loss = r.loss;
        if (rank != 0)
            continue;
        pipe_bubble(ev, n, p, bubble);
        double mean = 0.0;
        for (int s = 0; s < p; s++)
            mean += bubble[s] / p;
        double replayed = pipe_bubble_replayed(&sched, ev, n);
        if (step > 1) {             /* the first step warms the allocator's cache */
            tot.bubble += mean;
            tot.replayed += replayed;
            for (int i = 0; i < n; i++) {
                tot.wait_ms += 1e3 * (ev[i].ready - ev[i].start) / p;
                tot.compute_ms += 1e3 * (ev[i].end - ev[i].ready) / p;
            }
            tot.steps++;
        }
        if (evlog)
            write_events(evlog, step, ev, n);
        if (log) {
            tsv_int(log, step);
            tsv_float(log, (float)r.loss);
            tsv_num(log, lr);
            tsv_num(log, r.grad_norm);
            tsv_num(log, ms);
            tsv_int(log, (long long)sent);
            tsv_num(log, mean);
            tsv_num(log, replayed);
            tsv_num(log, bubble_sched);
            tsv_num(log, pipe_bubble_formula(kind, p, m));
            for (int s = 0; s < p; s++)
                tsv_int(log, (long long)peaks[s]);
            if (!tsv_end_row(log))
                cli_die(1, "%s: write failed (disk full?)", o->log_path);
        }
        if (step == 1 || step == o->steps || step % 10 == 0)
            printf("step %5ld  loss %.4f  %.1f ms  bubble %.1f%% (replayed %.1f%%)  sent %.0f "
                   "bytes\n", step, r.loss, ms, 100.0 * mean, 100.0 * replayed, sent);
        free(ev);
    }
    if (rank == 0) {
        long k = tot.steps > 0 ? tot.steps : 1;
        printf("final train loss %.4f\n", last_loss);
        printf("bubble over steps 2..%ld: measured %.1f%% (idle / span, wall clock), replayed "
               "from CPU times %.1f%%, schedule %.1f%%, formula %.1f%%\n", o->steps,
               100.0 * tot.bubble / k, 100.0 * tot.replayed / k, 100.0 * bubble_sched,
               100.0 * pipe_bubble_formula(kind, p, m));
        printf("per stage and step: %.2f ms waiting, %.2f ms computing (mean over stages)\n",
               tot.wait_ms / k, tot.compute_ms / k);
        printf("peak act bytes per stage (last step):");
        for (int s = 0; s < p; s++)
            printf(" %zu", peaks[s]);
        printf("\n");
        if (log && !tsv_close(log, err, sizeof err))
            cli_die(1, "%s", err);
        if (evlog && !tsv_close(evlog, err, sizeof err))
            cli_die(1, "%s", err);
        if (log)
            printf("log: %s\n", o->log_path);
        if (evlog)
            printf("events: %s\n", o->pipe_events);
    }
    free(tokens);
    free(targets);
    free(peaks);
    free(bubble);
    free(first);
    pipe_schedule_free(&sched);
    pipe_free(pp);
    dataset_free(ds);
    dist_finalize();
    return 0;
}

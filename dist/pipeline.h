#ifndef TAPEGRAD_PIPELINE_H
#define TAPEGRAD_PIPELINE_H
/* Pipeline parallelism (docs/pipeline.md): the GPT's blocks cut into p stages, one per rank of
 * a communicator; the embedding goes with stage 0, the final LayerNorm, head and loss with stage
 * p-1. A step runs one schedule (dist/pipeline_schedule.h) over m micro-batches:
 *
 *     F k   stage s receives x [B, T, C] from s-1 (stage 0 embeds the tokens), runs its blocks
 *           (nn/gpt_pass.h: any checkpointing strategy), and sends the
 *           output to s+1 with a non-blocking send (stage p-1 computes the loss instead)
 *     B k   stage s receives dy from s+1 (stage p-1 seeds its loss with S/m, as one process
 *           accumulating m micro-batches does), backprops its chain, and sends dx to s-1
 *           (stage 0 backprops the embedding)
 *
 * then, once per global batch: the tied embedding's two halves (stage 0's embedding term, stage
 * p-1's head term) added as head + embedding on both, the inf/NaN check agreed over the ranks,
 * the global gradient norm (each stage's sum of squares, added in rank order), clipping, and
 * each stage's optimizer over its own parameters (optim/train.h: trainer_new_part).
 *
 * Equality with one process: the gradients and the updated parameters are those of
 * trainer_step_accum with K = m on the same micro-batches, bit for bit, for an untied head,
 * with or without a precision policy, with no clipping (or a norm under the limit). A tied head
 * sums its two terms in another order (one process adds them per micro-batch), a rounding
 * apart; the norm is summed in another order, so the clipping factor can be one rounding apart.
 *
 * Every rank holds the whole model (the same weights from the same seed, or from the same
 * snapshot, no broadcast) but computes with, keeps gradients of and updates only its stage's
 * parameters: the weights of the others go stale on it until pipe_share_weights. The trainer
 * comes back whole (pipe_give_back: every stage's weights, fp32 masters and optimizer state on
 * every rank), so it can be evaluated and saved as one ordinary snapshot, which a single process
 * continues bit for bit (an untied head, no clipping: the equality above), and a snapshot of any
 * run starts a pipeline (pipe_new_on takes a loaded trainer).
 *
 * PipeDream (kind PIPE_PIPEDREAM: asynchronous 1F1B with weight stashing, docs/pipeline.md). The
 * micro-batches are one stream over the steps and the pipe is never flushed: a step (a window,
 * dist/pipeline_schedule.h) runs on stage s the forwards of its m micro-batches, each followed
 * by the backward of the micro-batch p-1-s before it (the w = p-1-s latest stay in flight into
 * the next step), and each backward by an update of the stage's weights. The update is the one
 * tail of optim/step.h (step_finish) on the stage alone: the last one of a step is step_run's
 * own, the others run inside the strategy's micro_batches. Per update:
 *     the learning rate is the step's (m updates at lr per step);
 *     the loss of a micro-batch is seeded with S (not S/m: each update sees one micro-batch's
 *         mean loss); S must be static (no --loss-scale dynamic: a skipped update on one stage
 *         would need every stage to agree on the same micro-batch, a synchronisation);
 *     clipping is per stage, on the norm of the stage's own gradients (the others' gradients
 *         of the same micro-batch exist at other times on other ranks).
 * Weight stashing: a micro-batch's backward must use the weights its forward used. Before each
 * update the stage copies its current weights (their stored bytes: packed under a policy) for
 * the micro-batches in flight that used them, and swaps that copy in around their backward;
 * the last micro-batch using a copy frees it. In steady state stage s holds p-1-s copies besides
 * its live weights (category param, pipe_stash_peak). The gradient of update u+1 on stage s was
 * computed on the weights of version u - (p-1-s): staleness p-1-s (pipe_staleness). The stages
 * use different versions for the same micro-batch, so the result is no single model's gradient:
 * it equals one process that sets each stage's blocks to that stage's version before each
 * micro-batch (tests/test_dist_pipedream.c). The untied head only (the two halves of a tied wte
 * would be updated at different times on two ranks); m >= p.
 * No collective runs inside a step: the loss travels back with the gradients (one more float),
 * so stage s knows the losses of the micro-batches it backpropagated; the log's clocks are each
 * rank's monotonic clock (one machine). pipe_drain ends the stream: the in-flight backwards and
 * their updates; pipe_give_back and pipe_free drain first.
 *
 * Waiting is a poll (dist_test, then a 20 us sleep), not MPI's spin: with more ranks than cores
 * a waiting rank must give its core to a computing one.
 *
 * Measured per step: an event per action (start, when its input arrived, end, and the compute
 * time on the CPU), bytes sent, and the peak act bytes (the caller's mem_reset_peaks /
 * mem_peak(MEM_ACT): every rank is its own process, with its own accounting). */
#include <stdint.h>

#include "dist/comm.h"
#include "dist/pipeline_schedule.h"
#include "optim/train.h"

typedef struct {
    int    stage, mb;
    char   kind;            /* 'F' or 'B' */
    double start;           /* seconds from the step's start (a shared monotonic clock) */
    double ready;           /* its input arrived: start..ready is waiting */
    double end;             /* ready..end is compute */
    double cpu;             /* CPU seconds of this thread during the compute */
} PipeEvent;

typedef struct Pipeline Pipeline;

/* A stage of a pipeline on comm (stage = rank, p = comm->size) with the block split first[p+1]
 * (pipe_split_parse), schedule kind and m micro-batches per step, training cfg's model under
 * cfg's optimizer, policy, loss scaling, clipping and checkpointing strategy (within the
 * stage's blocks). Every rank calls it with the same arguments. */
Pipeline *pipe_new(const TrainerConfig *cfg, DistComm *comm, PipeSchedKind kind, int m,
                   const int *first);
/* The same around the caller's trainer t (fresh, or loaded from a snapshot; the same on every
 * rank): its optimizer is replaced by one of the same kind over the stage's parameters, with
 * their state, masters and step count taken from t's. Not for a LoRA trainer. The trainer stays
 * the caller's: give it back with pipe_give_back. */
Pipeline *pipe_new_on(DistComm *comm, Trainer *t, PipeSchedKind kind, int m, const int *first);
/* Frees the pipeline and, for pipe_new's, its trainer. */
void      pipe_free(Pipeline *pp);
/* pipe_new_on's trainer whole again, on every rank, and the pipeline freed: each parameter's
 * weights, fp32 masters and optimizer state broadcast from the stage that owns it (stage 0 for a
 * tied wte) into an ordinary optimizer over the whole model, the one a single process would
 * hold. Collective. */
void      pipe_give_back(Pipeline *pp);
/* Every rank's model with the current weights of every stage (for an evaluation): each
 * parameter's storage broadcast from its owner. The stage's own training is unaffected.
 * Collective. */
void      pipe_share_weights(Pipeline *pp);
Trainer  *pipe_trainer(Pipeline *pp);
int       pipe_stage(const Pipeline *pp);
/* True when the parameter of that name lives on this stage. */
bool      pipe_owns(const Pipeline *pp, const char *name);
const PipeSchedule *pipe_schedule(const Pipeline *pp);

/* Forward and backward of m micro-batches (tokens, targets [m B T] on every rank, as for
 * trainer_step_accum), the tied head's terms added: the stage's gradients are then those of
 * trainer_accumulate(K = m). Returns the mean loss, on every rank. Not for pipedream, whose
 * step is pipe_step alone (its updates happen inside the window). */
double    pipe_accumulate(Pipeline *pp, const int *tokens, const int *targets, int B, int T);
/* pipe_accumulate, then the update (see above). The result is the same on every rank.
 * pipedream: a window, m updates at lr; the loss is the mean over the micro-batches this stage
 * backpropagated in the window (the last stage: the step's own m; stage s: p-1-s earlier), the
 * norm that of the stage's last update. */
TrainStepResult pipe_step(Pipeline *pp, const int *tokens, const int *targets, int B, int T,
                          double lr);
/* Pipeline x data parallel: D = dp->size replicas of the pipeline, each on its own comm over
 * its own m micro-batches (the global batch's D m, replica r's are r m .. r m + m - 1, in the
 * order of dp's ranks); dp links this stage with the same stage of the others (dist_split of
 * the world by stage, the pipeline's comm by replica). Each micro-batch's seed becomes
 * (1/(D m)) S, and after the backwards each stage's gradients are summed over dp in rank order
 * (dist_allreduce_sum), so every replica takes the same update: the bits of
 * ddp_reference_step_accum(N = D, K = m) for an untied head in fp32, as for DDP. The loss is
 * the mean over the D m micro-batches, bytes_sent counts dp's too. NULL or one rank: none.
 * Synchronous schedules only. Collective-free; call before the first step. */
void      pipe_set_replicas(Pipeline *pp, DistComm *dp);
/* ZeRO level 1 inside the data-parallel groups (after pipe_set_replicas with D > 1): each
 * stage's optimizer state and fp32 masters cut into D shards over its group (dist/zero.h), so a
 * rank keeps 1/D of its stage's optimizer bytes. After the backwards each stage's gradients are
 * reduce-scattered over the group instead of all-reduced (the same rank-ordered sums, into the
 * owner's shard), each rank updates its shard, and the updated weights are all-gathered: the
 * same bytes on the wire as the all-reduce's 2 Psi_s (D-1)/D values, the same bits (the update
 * rules are elementwise). The inf/NaN check and the norm's sum of squares run over the group,
 * then over the stages. ZeRO's composition with the pipeline is its strategy's callbacks run
 * inside the pipeline's (optim/step.h); level 1 only: levels 2 and 3 reduce and gather per
 * unit during the schedule's backwards, which this does not build. Collective over dp; fatal
 * for a config ZeRO refuses (zero_check) or without replicas. */
void      pipe_set_zero(Pipeline *pp, int level);
/* pipedream: the backwards of the micro-batches still in flight, each followed by its update at
 * the last step's learning rate. Collective; nothing for the synchronous schedules. */
void      pipe_drain(Pipeline *pp);
/* pipedream's weight stash on this stage: the peak bytes of the stashed copies so far, and the
 * bytes of one copy of the stage's weights (the formula's unit: peak = (p-1-s) x that). */
size_t    pipe_stash_peak(const Pipeline *pp);
size_t    pipe_stage_weight_bytes(const Pipeline *pp);
/* pipedream: updates applied on this stage, and the staleness of their gradients (how many
 * updates of this stage came between a micro-batch's forward and its backward): mean, max. */
long      pipe_updates(const Pipeline *pp);
double    pipe_staleness(const Pipeline *pp, int *max);

/* The first message tag the pipeline never uses on comm: a caller's own messages take it and
 * above. */
int       pipe_first_free_tag(const Pipeline *pp);
/* The last step's events on this rank (up to 2 m; pipedream's micro-batches numbered over the
 * whole stream, a backward's event including the update after it) and its payload bytes
 * sent. */
const PipeEvent *pipe_events(const Pipeline *pp, int *n);
uint64_t  pipe_bytes_sent(const Pipeline *pp);
/* Collective: every rank's events of the last step, on rank 0 (*n <= 2 m p; NULL elsewhere),
 * stage by stage, times from the earliest start over the ranks. Free with free(). */
PipeEvent *pipe_gather_events(Pipeline *pp, int *n);

/* From a gathered log: per stage, the compute time (wall) and the busy fraction of the span
 * from the first start to the last end; bubble[s] = 1 - busy / span. Returns the span. */
double    pipe_bubble(const PipeEvent *ev, int n, int p, double *bubble);
/* The schedule played with each action's measured CPU time as its duration (pipe_simulate,
 * means over micro-batches per stage and kind): the bubble a machine with a core per stage
 * would show. Returns the mean over stages. pipedream: in steady state
 * (pipe_simulate_steady). */
double    pipe_bubble_replayed(const PipeSchedule *s, const PipeEvent *ev, int n);

#endif

#ifndef TAPEGRAD_DIST_RUN_H
#define TAPEGRAD_DIST_RUN_H
/* A trainer's steps on the ranks MPI started, whatever the strategy: the one place that turns a
 * plan ("ddp", "zero3", "pipeline:1f1b,dp2,zero1": train_gpt's --parallel) into communicators
 * and a strategy of the one step driver (optim/step.h), and that counts what each step sent.
 *
 *     ddp          every rank keeps the whole model states; gradients all-reduced (dist/ddp.h)
 *     zeroL        levels 1-3: optimizer state, + gradients, + weights sharded (dist/zero.h)
 *     pipeline:S   the blocks cut over the ranks, schedule S (dist/pipeline.h)
 *     pipeline:S,dpD        D data-parallel replicas of that pipeline: the world split by
 *                           replica (each pipeline) and by stage (each data group)
 *     pipeline:S,dpD,zero1  the same, each stage's optimizer sharded over its data group
 *
 * The global batch. Every rank draws the same rows from the same data RNG (the trainer's):
 * dist_run_batch_groups(plan, ranks) groups of K micro-batches of B rows each, K the run's
 * micro-batches (--accum per rank under ddp and ZeRO, the schedule's m under a pipeline).
 * Group g is rank g's under ddp and ZeRO and replica g's under a pipeline (every stage of a
 * replica reads its rows; only the first embeds them and only the last scores them).
 * dist_run_step picks this rank's group. One process running K = groups x micro-batches of the
 * same rows makes the same update (each strategy's header says how exactly).
 *
 * Traffic: each step's bytes, as the communicator counted them, added into DistRunTraffic;
 * ZeRO's split into gradients and weights, DDP's gradients and its bucket buffers' peak. */
#include <stdbool.h>
#include <stdint.h>

#include "dist/ddp.h"
#include "dist/pipeline.h"
#include "dist/wire.h"
#include "dist/zero.h"
#include "optim/train.h"

typedef enum { DIST_RUN_NONE, DIST_RUN_DDP, DIST_RUN_ZERO, DIST_RUN_PIPELINE } DistRunKind;

typedef struct {
    DistRunKind   kind;
    int           zero_level;   /* ZERO: 1-3; PIPELINE: 0, or 1 inside its data groups */
    PipeSchedKind sched;        /* PIPELINE */
    int           replicas;     /* PIPELINE: D data-parallel replicas (1: none) */
} DistPlan;

/* text into *plan: "none", "ddp", "zero1".."zero3", "pipeline:S", "pipeline:S,dpD",
 * "pipeline:S,dpD,zero1" (S naive, gpipe, 1f1b or pipedream; 1 <= D <= 4096). False with one
 * sentence in why (without the flag's name) for anything else, and for the combinations not
 * built: pipedream with replicas (its stages update on their own, with no step to reduce at),
 * zero1 without replicas. */
bool dist_plan_parse(const char *text, DistPlan *plan, char *why, size_t len);
/* How many groups of micro-batches one global batch has over that many ranks (above): the ranks
 * under ddp and ZeRO, the replicas under a pipeline, 1 without a plan. */
int  dist_run_batch_groups(const DistPlan *plan, int ranks);

typedef struct {
    DistPlan    plan;
    int         micro_batches;  /* K per group (>= 1) */
    int         bucket_kb;      /* ddp: gradients in buckets of that many KiB, started during
                                 * backward; 0: one after backward */
    DistWire    wire;           /* ddp, ZeRO: what the gradients travel as */
    const char *stages;         /* pipeline: blocks per stage, "2,1,1" (NULL: even) */
} DistRunConfig;

typedef struct {
    uint64_t sent, recv;                    /* every byte of the steps, this rank */
    uint64_t grad_sent, grad_recv;          /* ddp, ZeRO: the gradients' share */
    uint64_t param_sent, param_recv;        /* ZeRO: the weights' all-gathers */
    size_t   bucket_peak;                   /* ddp: the most bucket-buffer bytes of a step */
    size_t   states[3];                     /* ZeRO: param, grad, optim bytes at the last update */
    long     steps;
} DistRunTraffic;

typedef struct DistRun DistRun;

/* The run of cfg over the world's ranks, around the caller's trainer t (fresh or loaded; the
 * same on every rank), which the strategy takes over until dist_run_give_back. NULL with one
 * sentence in why when the plan does not fit the world or the model (a rank count that is not
 * replicas x stages, a stage split that does not cover the blocks, a config ZeRO refuses):
 * every rank finds the same from the same arguments, so each can say it and leave. Collective. */
DistRun        *dist_run_new(const DistRunConfig *cfg, Trainer *t, char *why, size_t len);
/* One step on the global batch (tokens, targets: dist_run_batch_groups x K x B rows of T): this
 * rank's group, through the strategy; the result is the same on every rank (the loss the mean
 * of the global batch; pipedream: the last stage's). Collective. */
TrainStepResult dist_run_step(DistRun *r, const int *tokens, const int *targets, int B, int T,
                              double lr);
/* Every weight current on every rank (true: ZeRO-3 gathers, a pipeline's stages share theirs),
 * or back to how the strategy keeps them (false). For an evaluation or a sample. Collective. */
void            dist_run_whole_weights(DistRun *r, bool whole);
/* The trainer whole again on every rank, as one process would hold it (weights, masters,
 * optimizer state), the strategy ended: for the report, the samples and one ordinary snapshot.
 * pipedream drains first. Collective; once (later calls do nothing). */
void            dist_run_give_back(DistRun *r);
/* Every rank's FLOP counts summed into f (the job's, not this rank's). Collective. */
void            dist_run_sum_flops(const DistRun *r, TapeFlops *f);
void            dist_run_free(DistRun *r);

const DistRunTraffic *dist_run_traffic(const DistRun *r);
const DistRunConfig  *dist_run_config(const DistRun *r);
/* The communicator of the step's collectives: the world, or under a pipeline this replica's
 * pipeline (its stages); and this stage's data group (NULL without replicas). */
DistComm       *dist_run_comm(const DistRun *r);
DistComm       *dist_run_data_group(const DistRun *r);
/* The strategy's object, NULL when it is another's; ZeRO's and the pipeline's end with
 * dist_run_give_back, DDP's with dist_run_free. */
Ddp            *dist_run_ddp(const DistRun *r);
Zero           *dist_run_zero(const DistRun *r);
Pipeline       *dist_run_pipeline(const DistRun *r);
/* Pipeline: blocks [first[s], first[s + 1]) on stage s, p + 1 entries; this rank's replica. */
const int      *dist_run_stage_split(const DistRun *r, int *p);
int             dist_run_replica(const DistRun *r);

#endif

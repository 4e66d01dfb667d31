#ifndef TAPEGRAD_DDP_H
#define TAPEGRAD_DDP_H
/* Data parallel training (DDP): every rank holds the whole model and the same optimizer; each
 * step, each of the N ranks runs forward and backward on its own micro-batch of the global
 * batch (N B rows), the gradients are summed over the ranks, and every rank takes the same
 * update, so the replicas stay identical without ever sending a weight.
 *
 *     rank r:   g_r = d(loss_r / N)/dw, computed from zero     (trainer_backward_micro, K = N)
 *     all:      g = ((g_0 + g_1) + g_2) + ...                   (rank order, dist/comm.h)
 *     all:      unscale, clip, update, release                  (trainer_finish_step)
 *
 * Determinism: the sum is the same float additions, in the same order, on every rank, so N
 * ranks give the bits of ONE process that computes each of the N micro-batch gradients from
 * zero and adds them in micro-batch order (ddp_reference_step below). That is not quite what
 * trainer_step_accum (--accum N) does: it lets micro-batch k's backward add into the gradients
 * of micro-batches 0..k-1 inside each op (sgemm with beta 1, and under a policy a rounding to the
 * parameter format after every node), an order of additions no reduction over ranks can repeat.
 * The two agree to float rounding (tests/test_dist_ddp.c measures by how much).
 *
 * Buckets: the gradients are sent in groups of about bucket_bytes, filled in the reverse of the
 * parameters' order (the order backward finishes them). With overlap on, each bucket's
 * all-reduce starts from the tape's after_node hook the moment its last gradient is final, and
 * runs while the rest of backward computes; without it (or under a checkpointing strategy, whose
 * backward runs on tapes of its own) every bucket starts after backward. The bits are the same
 * either way: bucketing changes when values are sent, not how they are added. A bucket's buffer
 * and the reduction's scratch are category temp (autograd/mem.h).
 *
 * Traffic per step, counted by the communicator: a bucket of b values sends (b - c_r) + (N-1) c_r
 * values from rank r (c_r its shard), 2 b (N-1)/N on average over the ranks, so the gradients
 * cost 2 Psi (N-1)/N values per rank over all buckets (Psi values in all); the mean loss adds
 * N-1 doubles each way. */
#include "dist/comm.h"
#include "optim/train.h"

typedef struct {
    size_t bucket_bytes;    /* a bucket's size in bytes (at least one tensor); 0: one bucket */
    bool   overlap;         /* start each bucket's all-reduce during backward */
    DistWire wire;          /* what the gradients travel as (dist/wire.h); fp32 by default */
} DdpConfig;

typedef struct {
    TrainStepResult r;      /* loss: the mean over the ranks' micro-batches */
    uint64_t grad_bytes_sent, grad_bytes_recv;   /* the gradients' all-reduce, this rank */
    uint64_t bytes_sent, bytes_recv;             /* everything this step, this rank */
    int      buckets_overlapped;                 /* buckets started before backward ended */
    size_t   bucket_bytes_peak;  /* the most bytes of bucket buffers allocated at once (temp),
                                  * from the allocator's block sizes; the reductions' own
                                  * scratch (a shard each) is not included */
} DdpStepResult;

typedef struct Ddp Ddp;

/* Collective over c: the ranks check that they hold the same parameters (same count and sizes)
 * and fail together otherwise. The trainer must be built from the same config on every rank. */
Ddp          *ddp_new(DistComm *c, Trainer *t, const DdpConfig *cfg);
void          ddp_free(Ddp *d);
int           ddp_bucket_count(const Ddp *d);
size_t        ddp_param_count(const Ddp *d);      /* Psi, the values all-reduced per step */

/* One step: tokens and targets are this rank's micro-batch [B * T]. Collective over c. */
DdpStepResult ddp_step(Ddp *d, const int *tokens, const int *targets, int B, int T, double lr);
/* The same with K micro-batches per rank, accumulated on the rank as trainer_accumulate does
 * (tokens [K * B * T], each loss / (N K)), then summed over the ranks in rank order: the
 * buckets start during the last micro-batch's backward. K = 1 is ddp_step. */
DdpStepResult ddp_step_accum(Ddp *d, const int *tokens, const int *targets, int B, int T,
                             int K, double lr);

/* The single-process equivalent, no MPI involved: K micro-batches [K * B * T], each one's
 * gradient computed from zero (loss / K, seeded with S) and added in order, ((g_0 + g_1) + ...),
 * then trainer_finish_step. N ranks of ddp_step give its bits with K = N. Scratch: one copy of
 * the gradients, category temp. */
TrainStepResult ddp_reference_step(Trainer *t, const int *tokens, const int *targets, int B,
                                   int T, int K, double lr);
/* With K micro-batches per rank: tokens [N * K * B * T], rank r's in micro-batches r K ..
 * r K + K - 1; each rank's K accumulated as ddp_step_accum does, then the N sums added in rank
 * order. (N, 1) is ddp_reference_step with K = N. */
TrainStepResult ddp_reference_step_accum(Trainer *t, const int *tokens, const int *targets,
                                         int B, int T, int N, int K, double lr);
/* ddp_reference_step_accum with the gradients on wire w, as the collectives round them: each
 * rank's sum rounded as the wire rounds it before it is added (in fp32, rank order), and the
 * total rounded again when round_sum (DDP's all-reduce sends it back over the wire; ZeRO's
 * reduce-scatter keeps its shard's sum in fp32). fp32 and bf16 only: e5m2's scales follow the
 * buckets and the shards, which one process does not cut. */
TrainStepResult ddp_reference_step_wire(Trainer *t, const int *tokens, const int *targets,
                                        int B, int T, int N, int K, DistWire w, bool round_sum,
                                        double lr);

#endif

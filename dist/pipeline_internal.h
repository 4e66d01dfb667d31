#ifndef TAPEGRAD_PIPELINE_INTERNAL_H
#define TAPEGRAD_PIPELINE_INTERNAL_H
/* The pipeline's state, shared by its three files and by nobody else (callers: dist/pipeline.h):
 * dist/pipeline.c (the stages, the actions, the synchronous schedules' step), pipeline_pipedream.c
 * (the asynchronous schedule: its window, weight stash and drain) and pipeline_log.c (the
 * events and the bubbles). */
#include <time.h>

#include "dist/pipeline.h"
#include "dist/zero.h"
#include "optim/step.h"

/* pipedream: one copy of the stage's weights (their stored bytes and scales), shared by the
 * micro-batches in flight whose forward used it. */
typedef struct {
    unsigned char *bytes;           /* category param */
    float         *scales;
    int            refs;
} Stash;

/* One micro-batch in flight on this stage: what its forward left for its backward. */
typedef struct {
    GptPass     *pass;              /* the stage's share of the model (nn/gpt_pass.h) */
    Tape        *tape;              /* the pass's: vanilla records there */
    Tensor      *x;                 /* the input received (stages 1 .. p-1) */
    Tensor      *y;                 /* the output (owned by the pass), until it is sent */
    float       *out;               /* send buffer of y, until the send completes */
    DistRequest  out_req;
    float        loss;              /* the last stage's, sent back with dx (pipedream) */
    long         version;           /* pipedream: the stage's updates before its forward */
    Stash       *stash;             /* pipedream: its weights, once an update replaced them */
} Slot;

/* A send whose buffer is freed once it completes (dx to the previous stage). */
typedef struct {
    float       *buf;
    DistRequest  req;
} Pending;

struct Pipeline {
    Trainer      *tr;
    bool          owns_trainer;     /* pipe_new's; pipe_new_on's is the caller's */
    DistComm     *comm;
    int           stage, p, m;
    int          *first;            /* [p + 1] */
    PipeSchedule  sched;
    StepStrategy  strategy;         /* the step's callbacks (optim/step.h) */
    Slot         *slots;            /* [m]: micro-batch n in slots[n % m] */
    Pending      *pending;          /* [2 m] dx sends */
    int           n_pending;
    /* data-parallel replicas of this pipeline (pipe_set_replicas): this stage in each */
    DistComm     *dp;               /* NULL: one pipeline */
    int           replicas;         /* D, 1 without */
    Zero         *zero;             /* ZeRO-1 over dp (pipe_set_zero), NULL: an all-reduce */
    /* pipedream (async) */
    bool          async;
    StepStrategy  update;           /* the tail of an update inside a step: no collective */
    long          n_fwd, n_bwd;     /* micro-batches forwarded, backpropagated so far */
    double        lr;               /* the step's */
    long          updates;
    long          stale_sum, stale_max;
    size_t        stash_bytes, stash_peak, weight_bytes;
    int           n_losses;         /* losses known this step (backwards run) */
    int           tok_B, tok_T;     /* the micro-batches' shape, for pipe_drain */
    PipeEvent    *events;           /* [2 m] */
    int           n_events;
    uint64_t      bytes_sent;
    double        t0;
    double        loss_sum;
};

static inline double pipe_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline double pipe_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Message tags, one per kind of message of a step: micro-batch k's boundary activation
 * (forward) and its gradient (backward), then the tied wte's halves and the log's clock and
 * events; pipe_first_free_tag is the first a caller may use. */
static inline int tag_activation(int k) { return 2 * k; }
static inline int tag_gradient(int k) { return 2 * k + 1; }
static inline int tag_tied_halves(const Pipeline *pp) { return 2 * pp->m; }
static inline int tag_log_clock(const Pipeline *pp) { return 2 * pp->m + 1; }
static inline int tag_log_events(const Pipeline *pp) { return 2 * pp->m + 2; }

/* pipeline.c: micro-batch n's forward and backward (slot n % m), and the dx sends reaped. */
void   pipe_forward(Pipeline *pp, long n, const int *tokens, const int *targets, int B, int T,
                    PipeEvent *ev);
void   pipe_backward(Pipeline *pp, long n, int B, int T, PipeEvent *ev);
void   pipe_reap_pending(Pipeline *pp, bool all);
/* pipeline_pipedream.c: the stash around a backward and before an update; one step. */
void   pipe_stash_before_update(Pipeline *pp);
void   pipe_stash_swap(Pipeline *pp, Stash *st);
void   pipe_stash_drop(Pipeline *pp, Slot *sl);
double pipe_window(Pipeline *pp, const int *tokens, const int *targets, int B, int T);

#endif

#ifndef TAPEGRAD_CHECKPOINT_H
#define TAPEGRAD_CHECKPOINT_H
/* Gradient checkpointing over a chain of n segments (docs/checkpointing.md tells the story).
 *
 *     x_0 --seg 0--> x_1 --seg 1--> ... --seg n-1--> x_n
 *
 * A segment is a function from one tensor to one tensor that records its ops on the tape it is
 * given (an MLP layer, a transformer block). The x_j are the lecture's f nodes at segment
 * boundaries; their gradients dx_j are the b nodes. A strategy decides which x_j are kept and
 * how the others are recomputed:
 *
 *     vanilla       record every segment in the forward pass, keep everything.
 *     memory-poor   keep only x_0; before each segment's backward, recompute its input from x_0.
 *     every:K       keep x_0, x_K, x_2K, ...; reverse one run of K segments at a time.
 *     sqrt          every:K with K = ceil(sqrt(n)).
 *     budget:S      S checkpoint slots, the fewest forwards possible (Revolve, by a DP below).
 *     none          another name for vanilla (train_gpt's --checkpoint none).
 *
 * How the runner works. A strategy compiles to a plan, a list of four kinds of step:
 *     ADVANCE j   run segment j forward on a scratch tape that does not record, copy x_{j+1}
 *                 out (an act tensor the runner owns) and reset the scratch tape; x_j is freed
 *                 unless it is a checkpoint.
 *     STORE j     keep the x_j just computed: it becomes a checkpoint.
 *     RECORD j    run segment j forward on its own recording tape (a fresh sub-tape per
 *                 segment), which holds its activations and x_{j+1} until it is reversed.
 *     REVERSE j   backprop segment j's tape from dx_{j+1}, which leaves dx_j on x_j and adds
 *                 to the parameter gradients; then free the tape, and x_j if it is the
 *                 runner's copy (nothing later needs x_j: every later backward is of a segment
 *                 before it; an x_j made by RECORD j-1 goes with that tape).
 * Segments are reversed strictly in the order n-1, n-2, ..., 0. Recomputation never records the
 * segments it only passes through (ADVANCE). What it records is a design choice per strategy:
 *     every:K and sqrt record the whole run being reversed (K tapes held at once). Each segment
 *         is then computed at most twice, which is what gives sqrt about 2n forwards.
 *     memory-poor and budget:S record only the segment about to be reversed (one tape at a
 *         time): Griewank and Walther's model, in which Revolve's count is optimal.
 * vanilla is one recorded run of n segments.
 *
 * Counting. Every run of a segment's forward counts as one forward evaluation, recorded or not
 * (ADVANCE and RECORD alike; the first pass too). The exact totals:
 *     vanilla       n
 *     memory-poor   n (n + 1) / 2                   (segment j runs n - j times)
 *     every:K       n + K (ceil(n / K) - 1)         (2n - K when K divides n; n when K >= n)
 *     sqrt          every:K with K = ceil(sqrt(n))  (120 for n = 64)
 *     budget:S      n + r n - C(S + r, S + 1), r the smallest integer with C(S + r, S) >= n
 * The chain input x_0 counts as one of the S slots (it is held all along, by the caller), so
 * budget:1 is memory-poor and budget:S for S >= n - 1 reaches the floor 2n - 1 of the
 * one-tape-at-a-time model. The FLOPs of the ops follow the same rule (tape.h): a segment's
 * first forward of a pass counts as forward, every later one as recompute, so the recomputed
 * FLOPs are (total - n) segment forwards. The budget's current state (the x_j being advanced, or the one
 * about to be recorded) is not a slot: it is the working copy, as in Revolve.
 *
 * The budget schedule. F(l, s), the fewest forwards that reverse l segments from a kept input
 * with s slots (that input's included), satisfies
 *     F(0, s) = 0,   F(1, s) = 1,   F(l, 0) = infinity for l >= 2,
 *     F(l, s) = min over 1 <= m < l of   m + F(l - m, s - 1) + F(m, s):
 * advance m segments, keep x_m in a slot (not needed when l - m = 1), reverse the right part
 * with one slot fewer, then the left part with all s. The runner executes the plan this
 * recursion chooses; tests check it against an exhaustive search over all schedules for small
 * n and against the closed form above.
 *
 * Memory. Checkpoints are act tensors; recorded tapes hold act tensors; the b nodes (dx_j and
 * the tapes' activation gradients) are temp, freed as soon as they are consumed. Nothing here
 * estimates bytes: callers measure with mem_reset_peaks / mem_peak(MEM_ACT).
 *
 * Gradients are bit-identical whatever the strategy: recomputation reruns the same
 * deterministic ops on identical inputs, segments are reversed in the same order, and each
 * dx_j handed from one tape to the next is added to a zero buffer, which is exact. A segment
 * must be deterministic (no random draws, or draws it can repeat) for this to hold.
 *
 * Under a precision policy (chain.policy, autograd/policy.h) every tape of the run, the
 * scratch one included, carries the policy, so each op's output is rounded to the act dtype
 * as on one tape: recorded tapes pack their activations, and a checkpoint made by ADVANCE is
 * packed too, in the act dtype with the scale the scratch tape rounded it with (so it holds
 * the same codes the one tape would). Loss, gradients and the act bytes of the recorded
 * segments are then those of one tape under the policy; only fp8's delayed scaling is
 * refused: its amax history is indexed by the order of packed tensors on one tape across steps, which
 * recomputation on fresh tapes cannot keep (tape.h).
 *
 * Use, in two phases:
 *     CkptRun *run = ckpt_run_new(&chain, strategy);
 *     Tensor *y = ckpt_forward(run, x);          (x_n; valid until ckpt_backward returns)
 *     loss = ... ops on the caller's own tape, reading y ...;
 *     tape_backward(head_tape, loss);            (leaves dx_n in y->grad)
 *     ckpt_backward(run);                        (dx_0 into x->grad if x requires grad,
 *                                                 parameter gradients accumulated)
 * and the run can do it again (a training loop reuses one run). */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/tape.h"

/* Computes x_{index+1} from x on `tape`. Must return a tensor the tape created (not x). */
typedef Tensor *(*CkptSegmentFn)(Tape *tape, Tensor *x, int index, void *ctx);

/* Called just before segment `segment` is reversed. nodes[j], j = 0..n, describes x_j:
 * 'C' kept checkpoint (x_0 included), 'o' held since its first computation, '+' recomputed and
 * held, '.' free. A NUL-terminated string of n + 1 marks. */
typedef void (*CkptObserver)(int segment, const char *nodes, void *ctx);

/* Called with done false just before segment `segment` is reversed, and with done true just
 * after: then the gradients of the parameters only that segment reads take no more terms. For
 * code that keeps a segment's weights or gradients elsewhere between uses (dist/zero.h). */
typedef void (*CkptReverseHook)(int segment, bool done, void *ctx);

typedef struct {
    CkptSegmentFn fn;
    void         *ctx;
    int           n;              /* segments, >= 1 */
    CkptObserver  observe;        /* optional */
    void         *observe_ctx;
    CkptReverseHook on_reverse;   /* optional */
    void         *on_reverse_ctx;
    /* The precision policy of every tape the run makes (NULL: fp32), which should be the
     * caller's tape's; it must outlive the run. See "Under a precision policy" above. */
    const PrecisionPolicy *policy;
} CkptChain;

typedef enum {
    CKPT_VANILLA,
    CKPT_MEMORY_POOR,
    CKPT_SQRT,
    CKPT_EVERY,        /* k = K, the interval */
    CKPT_BUDGET,       /* k = S, the slots */
} CkptKind;

typedef struct {
    CkptKind kind;
    int      k;
} CkptStrategy;

/* "vanilla", "none", "memory-poor", "sqrt", "every:K" (K >= 1), "budget:S" (S >= 1). False with
 * one sentence in err for anything else. */
bool        ckpt_parse(const char *text, CkptStrategy *s, char *err, size_t len);
/* The canonical name ("every:4") in buf. */
const char *ckpt_name(CkptStrategy s, char *buf, size_t len);
/* The run length every:K and sqrt use for n segments (ceil(sqrt(n)) for sqrt); 0 otherwise. */
int         ckpt_interval(CkptStrategy s, int n);

/* The total above, as a formula in n (and K or S). */
long        ckpt_formula_total(CkptStrategy s, int n);
/* Revolve's closed form, n + r n - C(S + r, S + 1), for n >= 1 and S >= 1. */
long        ckpt_revolve_forwards(int n, int slots);
/* The budget DP's minimum F(n, S): the forwards its plan performs. */
long        ckpt_budget_forwards(int n, int slots);

/* The plan a strategy compiles to, for tests and pictures. */
typedef enum { CKPT_ADVANCE, CKPT_KEEP, CKPT_RECORD, CKPT_REVERSE } CkptOp;

typedef struct {
    CkptOp op;
    int    j;          /* the segment (ADVANCE, RECORD, REVERSE) or boundary x_j (KEEP) */
} CkptStep;

typedef struct {
    CkptStep *steps;
    int       n_steps, cap;
    int       n;
} CkptPlan;

CkptPlan    ckpt_plan(CkptStrategy s, int n);
void        ckpt_plan_free(CkptPlan *plan);

/* What one forward + backward did. */
typedef struct {
    long forwards;          /* segment forward evaluations, recorded or not */
    long recorded;          /* of those, on a recording tape */
    int  max_checkpoints;   /* most kept x_j at once, x_0 included (budget:S keeps <= S) */
    int  max_recorded;      /* most segment tapes held at once */
    TapeFlops flops;        /* the segments' FLOPs: forward, backward, recompute */
} CkptStats;

typedef struct CkptRun CkptRun;

/* A runner for chain with strategy s (an invalid strategy is a programming error: parse first).
 * The chain is copied; its ctx must outlive the run. */
CkptRun    *ckpt_run_new(const CkptChain *chain, CkptStrategy s);
void        ckpt_run_free(CkptRun *run);
/* The forward phase, up to the first backward step: returns x_n, owned by the run and valid
 * until ckpt_backward returns. x is not copied and must stay alive until then; its gradient is
 * accumulated only if x->requires_grad. */
Tensor     *ckpt_forward(CkptRun *run, Tensor *x);
/* The backward phase, seeded with the gradient the caller left on x_n (y->grad). */
void        ckpt_backward(CkptRun *run);
/* The same with the seed given: adds seed (x_n's size) to x_n's gradient first. */
void        ckpt_backward_seeded(CkptRun *run, const float *seed);
/* Counters of the last forward + backward (reset by ckpt_forward). */
CkptStats   ckpt_stats(const CkptRun *run);
/* Forward evaluations of each segment, [n]. */
const long *ckpt_segment_forwards(const CkptRun *run);

#endif

/* Checkpoint strategies over a chain of segments: names, count formulas, the plans (the budget
 * one by dynamic programming) and the runner that executes a plan on real tapes. */
#include "autograd/checkpoint.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Strategy names ----------------------------------------------------------------------------- */

enum { CKPT_MAX_K = 1 << 24 };

static bool parse_count(const char *s, int *k)
{
    if (*s < '0' || *s > '9')
        return false;       /* strtol would skip spaces and take a sign */
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > CKPT_MAX_K)
        return false;
    *k = (int)v;
    return true;
}

bool ckpt_parse(const char *text, CkptStrategy *s, char *err, size_t len)
{
    const struct { const char *name; CkptKind kind; } plain[] = {
        { "vanilla", CKPT_VANILLA }, { "none", CKPT_VANILLA },
        { "memory-poor", CKPT_MEMORY_POOR }, { "sqrt", CKPT_SQRT },
    };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        if (strcmp(text, plain[i].name) == 0) {
            *s = (CkptStrategy){ plain[i].kind, 0 };
            return true;
        }
    }
    const struct { const char *prefix; CkptKind kind; } counted[] = {
        { "every:", CKPT_EVERY }, { "budget:", CKPT_BUDGET },
    };
    for (size_t i = 0; i < sizeof counted / sizeof counted[0]; i++) {
        size_t n = strlen(counted[i].prefix);
        if (strncmp(text, counted[i].prefix, n) != 0)
            continue;
        int k;
        if (!parse_count(text + n, &k)) {
            snprintf(err, len, "'%s': the number after '%s' must be an integer from 1 to %d",
                     text, counted[i].prefix, CKPT_MAX_K);
            return false;
        }
        *s = (CkptStrategy){ counted[i].kind, k };
        return true;
    }
    snprintf(err, len, "unknown checkpoint strategy '%s' (expected vanilla, none, memory-poor, "
             "sqrt, every:K or budget:S)", text);
    return false;
}

const char *ckpt_name(CkptStrategy s, char *buf, size_t len)
{
    switch (s.kind) {
    case CKPT_VANILLA:     snprintf(buf, len, "vanilla"); break;
    case CKPT_MEMORY_POOR: snprintf(buf, len, "memory-poor"); break;
    case CKPT_SQRT:        snprintf(buf, len, "sqrt"); break;
    case CKPT_EVERY:       snprintf(buf, len, "every:%d", s.k); break;
    case CKPT_BUDGET:      snprintf(buf, len, "budget:%d", s.k); break;
    }
    return buf;
}

static int ceil_sqrt(int n)
{
    /* BEGIN SOLUTION sqrt_schedule */
    int k = 1;
    while ((long)k * k < n)
        k++;
    return k;
    /* STUDENT
    return n;
    */
    /* END SOLUTION sqrt_schedule */
}

int ckpt_interval(CkptStrategy s, int n)
{
    if (s.kind == CKPT_SQRT)
        return ceil_sqrt(n);
    return s.kind == CKPT_EVERY ? s.k : 0;
}

static void check_strategy(CkptStrategy s, int n, const char *who)
{
    bool counted = s.kind == CKPT_EVERY || s.kind == CKPT_BUDGET;
    if (n < 1 || (unsigned)s.kind > CKPT_BUDGET || (counted && s.k < 1))
        tensor_fatal("%s: strategy %d:%d over %d segments", who, (int)s.kind, s.k, n);
}

/* Count formulas ----------------------------------------------------------------------------- */

long ckpt_revolve_forwards(int n, int slots)
{
    if (n < 1 || slots < 1)
        tensor_fatal("ckpt_revolve_forwards: %d segments, %d slots", n, slots);
    /* binom = C(S + r, S), grown one r at a time: C(S + r, S) = C(S + r - 1, S) (S + r) / r. */
    long long r = 0, binom = 1;
    while (binom < n) {
        r++;
        binom = binom * (slots + r) / r;
    }
    /* C(S + r, S + 1) = C(S + r, S) r / (S + 1). */
    long long above = binom * r / (slots + 1);
    return (long)(n + r * n - above);
}

long ckpt_formula_total(CkptStrategy s, int n)
{
    check_strategy(s, n, "ckpt_formula_total");
    switch (s.kind) {
    case CKPT_VANILLA:     return n;
    case CKPT_MEMORY_POOR: return (long)n * (n + 1) / 2;
    case CKPT_BUDGET:      return ckpt_revolve_forwards(n, s.k);
    default: {
        long K = ckpt_interval(s, n);
        return n + K * ((n + K - 1) / K - 1);
    }
    }
}

/* The budget DP ------------------------------------------------------------------------------ */

/* cost(l, k) = F(l, k) of the header; split(l, k) the m that attains it. Slots beyond n change
 * nothing (at most n segment inputs exist), so k is capped at n. */
typedef struct {
    int   n, s;
    long *cost;
    int  *split;
} Budget;

static const long INFINITE = LONG_MAX / 4;

static size_t at(const Budget *b, int l, int k) { return (size_t)l * (size_t)(b->s + 1) + k; }

static Budget budget_solve(int n, int slots)
{
    Budget b = { n, slots < n ? slots : n, NULL, NULL };
    size_t cells = (size_t)(n + 1) * (size_t)(b.s + 1);
    b.cost = malloc(cells * sizeof *b.cost);
    b.split = calloc(cells, sizeof *b.split);
    if (!b.cost || !b.split)
        tensor_fatal("out of memory for a budget schedule of %d segments", n);
    for (int l = 0; l <= n; l++) {
        for (int k = 0; k <= b.s; k++) {
            long best = l <= 1 ? l : INFINITE;
            int best_m = 0;
            /* With k = 0 nothing can be kept, and two or more segments cannot be reversed. */
            /* BEGIN SOLUTION budget_schedule */
            for (int m = 1; l >= 2 && k >= 1 && m < l; m++) {
                long c = m + b.cost[at(&b, l - m, k - 1)] + b.cost[at(&b, m, k)];
                if (c < best) {
                    best = c;
                    best_m = m;
                }
            }
            /* END SOLUTION budget_schedule */
            b.cost[at(&b, l, k)] = best;
            b.split[at(&b, l, k)] = best_m;
        }
    }
    return b;
}

static void budget_free(Budget *b)
{
    free(b->cost);
    free(b->split);
}

long ckpt_budget_forwards(int n, int slots)
{
    if (n < 1 || slots < 1)
        tensor_fatal("ckpt_budget_forwards: %d segments, %d slots", n, slots);
    Budget b = budget_solve(n, slots);
    long c = b.cost[at(&b, n, b.s)];
    budget_free(&b);
    return c;
}

/* Plans -------------------------------------------------------------------------------------- */

static void emit(CkptPlan *p, CkptOp op, int j)
{
    if (p->n_steps == p->cap) {
        int cap = p->cap ? 2 * p->cap : 64;
        CkptStep *steps = realloc(p->steps, (size_t)cap * sizeof *steps);
        if (!steps)
            tensor_fatal("out of memory for a checkpoint plan");
        p->steps = steps;
        p->cap = cap;
    }
    p->steps[p->n_steps++] = (CkptStep){ op, j };
}

/* Keep x_0, x_K, x_2K, ...; the last run is recorded by the forward pass itself, every earlier
 * run is recorded again from its checkpoint just before it is reversed. K >= n is vanilla. */
static void plan_every(CkptPlan *p, int n, int K)
{
    /* BEGIN SOLUTION sqrt_schedule */
    int runs = (n + K - 1) / K, last = K * (runs - 1);
    for (int j = 0; j < last; j++) {
        if (j > 0 && j % K == 0)
            emit(p, CKPT_KEEP, j);
        emit(p, CKPT_ADVANCE, j);
    }
    if (last > 0)
        emit(p, CKPT_KEEP, last);
    for (int r = runs - 1; r >= 0; r--) {
        int start = r * K, end = r == runs - 1 ? n : start + K;
        for (int j = start; j < end; j++)
            emit(p, CKPT_RECORD, j);
        for (int j = end - 1; j >= start; j--)
            emit(p, CKPT_REVERSE, j);
    }
    /* STUDENT
    (void)K;
    for (int j = 0; j < n; j++)
        emit(p, CKPT_RECORD, j);
    for (int j = n - 1; j >= 0; j--)
        emit(p, CKPT_REVERSE, j);
    */
    /* END SOLUTION sqrt_schedule */
}

/* Keep x_0 only: segment i's input is recomputed from x_0 just before segment i is reversed. */
static void plan_memory_poor(CkptPlan *p, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        for (int j = 0; j < i; j++)
            emit(p, CKPT_ADVANCE, j);
        emit(p, CKPT_RECORD, i);
        emit(p, CKPT_REVERSE, i);
    }
}

/* Reverse segments [a, a + l) from x_a with k slots (x_a's included), as the DP chose. */
static void plan_budget_part(CkptPlan *p, const Budget *b, int a, int l, int k)
{
    /* BEGIN SOLUTION budget_schedule */
    if (l == 1) {
        emit(p, CKPT_RECORD, a);
        emit(p, CKPT_REVERSE, a);
        return;
    }
    int m = b->split[at(b, l, k)];
    for (int j = a; j < a + m; j++)
        emit(p, CKPT_ADVANCE, j);
    /* A single segment on the right is recorded straight from the working copy. */
    if (l - m >= 2)
        emit(p, CKPT_KEEP, a + m);
    plan_budget_part(p, b, a + m, l - m, k - 1);
    plan_budget_part(p, b, a, m, k);
    /* STUDENT
    (void)b, (void)k;
    for (int i = a + l - 1; i >= a; i--) {
        for (int j = a; j < i; j++)
            emit(p, CKPT_ADVANCE, j);
        emit(p, CKPT_RECORD, i);
        emit(p, CKPT_REVERSE, i);
    }
    */
    /* END SOLUTION budget_schedule */
}

CkptPlan ckpt_plan(CkptStrategy s, int n)
{
    check_strategy(s, n, "ckpt_plan");
    CkptPlan p = { .n = n };
    switch (s.kind) {
    case CKPT_VANILLA:     plan_every(&p, n, n); break;
    case CKPT_MEMORY_POOR: plan_memory_poor(&p, n); break;
    case CKPT_SQRT:
    case CKPT_EVERY:       plan_every(&p, n, ckpt_interval(s, n)); break;
    case CKPT_BUDGET: {
        Budget b = budget_solve(n, s.k);
        plan_budget_part(&p, &b, 0, n, b.s);
        budget_free(&b);
        break;
    }
    }
    return p;
}

void ckpt_plan_free(CkptPlan *plan)
{
    free(plan->steps);
    *plan = (CkptPlan){ 0 };
}

/* The runner --------------------------------------------------------------------------------- */

/* Who holds x_j: nobody, the caller (x_0), the runner (a copy made by ADVANCE), or the tape of
 * segment j - 1 (its output, made by RECORD). */
typedef enum { HELD_BY_NOBODY, HELD_BY_CALLER, HELD_BY_RUNNER, HELD_BY_TAPE } Holder;

struct CkptRun {
    CkptChain    chain;
    CkptPlan     plan;
    int          next;          /* next plan step; 0 between passes */
    Tensor     **x;             /* [n + 1] the boundary x_j while held */
    Holder      *holder;        /* [n + 1] */
    bool        *kept;          /* [n + 1] x_j is a checkpoint */
    Tape       **tape;          /* [n] segment j's recording tape, made on first use */
    Tape        *scratch;       /* for ADVANCE: never records */
    long        *forwards;      /* [n] */
    float       *pending;       /* dx_{j+1}, waiting for REVERSE j (temp) */
    char        *marks;         /* [n + 2] for the observer */
    CkptStats    stats;
    int          kept_now, recorded_now;
};

CkptRun *ckpt_run_new(const CkptChain *chain, CkptStrategy s)
{
    if (!chain->fn)
        tensor_fatal("ckpt_run_new: the chain has no segment function");
    /* Delayed scaling keys its amax history on the k-th packed tensor of one tape over the last
     * steps; fresh segment tapes, and recomputed segments packing twice, would lose or shift
     * it. */
    if (policy_delays_fp8(chain->policy))
        tensor_fatal("checkpointing under fp8 delayed scaling is not built: its amax history "
                     "belongs to one tape and would not survive recomputation on fresh tapes "
                     "(use current scaling)");
    int n = chain->n;
    CkptRun *run = calloc(1, sizeof *run);
    if (!run)
        tensor_fatal("out of memory for a checkpoint runner");
    run->chain = *chain;
    run->plan = ckpt_plan(s, n);
    run->x = calloc((size_t)n + 1, sizeof *run->x);
    run->holder = calloc((size_t)n + 1, sizeof *run->holder);
    run->kept = calloc((size_t)n + 1, sizeof *run->kept);
    run->tape = calloc((size_t)n, sizeof *run->tape);
    run->forwards = calloc((size_t)n, sizeof *run->forwards);
    run->marks = calloc((size_t)n + 2, 1);
    if (!run->x || !run->holder || !run->kept || !run->tape || !run->forwards || !run->marks)
        tensor_fatal("out of memory for a checkpoint runner of %d segments", n);
    run->scratch = tape_new();
    run->scratch->recording = false;
    run->scratch->packs_unrecorded = true;
    run->scratch->policy = chain->policy;
    run->scratch->flops = &run->stats.flops;
    return run;
}

static void release(CkptRun *run, int j)
{
    if (run->holder[j] == HELD_BY_RUNNER)
        tensor_free(run->x[j]);
    if (run->kept[j])
        run->kept_now--;
    run->x[j] = NULL;
    run->holder[j] = HELD_BY_NOBODY;
    run->kept[j] = false;
}

/* Frees whatever an unfinished pass left (a run freed between forward and backward). */
static void abandon(CkptRun *run)
{
    for (int j = 0; j <= run->chain.n; j++) {
        if (j < run->chain.n && run->tape[j])
            tape_reset(run->tape[j]);
        if (run->holder[j] == HELD_BY_TAPE)
            run->holder[j] = HELD_BY_NOBODY;     /* freed with its tape */
        release(run, j);
    }
    mem_free(run->pending);
    run->pending = NULL;
    run->recorded_now = 0;
    run->next = 0;
}

void ckpt_run_free(CkptRun *run)
{
    if (!run)
        return;
    abandon(run);
    for (int j = 0; j < run->chain.n; j++)
        tape_free(run->tape[j]);
    tape_free(run->scratch);
    ckpt_plan_free(&run->plan);
    free(run->x);
    free(run->holder);
    free(run->kept);
    free(run->tape);
    free(run->forwards);
    free(run->marks);
    free(run);
}

static Tensor *held(const CkptRun *run, int j, const char *step)
{
    if (!run->x[j])
        tensor_fatal("checkpoint plan: %s of segment %d needs x_%d, which is not held", step, j, j);
    return run->x[j];
}

static void place(CkptRun *run, int j, Tensor *t, Holder holder)
{
    if (run->x[j])
        tensor_fatal("checkpoint plan: x_%d computed while already held", j);
    run->x[j] = t;
    run->holder[j] = holder;
}

static Tensor *run_segment(CkptRun *run, Tape *tape, Tensor *x, int j)
{
    tape->recomputing = run->forwards[j] > 0;
    Tensor *y = run->chain.fn(tape, x, j, run->chain.ctx);
    if (!y || y == x)
        tensor_fatal("checkpoint segment %d must return a new tensor made on its tape", j);
    run->forwards[j]++;
    run->stats.forwards++;
    return y;
}

/* x_{j+1} as a recording tape would pack it: the scratch tape packs its outputs in the act
 * dtype as a recording tape does (packs_unrecorded; a scalar stays fp32), so the copy is y's
 * codes and scale as they are and decodes to y bit for bit. */
static Tensor *checkpoint_copy(const Tensor *y)
{
    return tensor_clone(MEM_ACT, y);
}

static void advance(CkptRun *run, int j)
{
    Tensor *y = run_segment(run, run->scratch, held(run, j, "ADVANCE"), j);
    /* Only x_{j+1} survives: the segment's other activations go with the scratch tape. */
    Tensor *copy = checkpoint_copy(y);
    tape_reset(run->scratch);
    if (run->holder[j] == HELD_BY_RUNNER && !run->kept[j])
        release(run, j);
    place(run, j + 1, copy, HELD_BY_RUNNER);
}

static void keep(CkptRun *run, int j)
{
    held(run, j, "KEEP");
    if (run->kept[j])
        return;
    run->kept[j] = true;
    if (++run->kept_now > run->stats.max_checkpoints)
        run->stats.max_checkpoints = run->kept_now;
}

static void record(CkptRun *run, int j)
{
    Tensor *x = held(run, j, "RECORD");
    /* A copy is a leaf of this tape: it must ask for its gradient, dx_j. */
    if (run->holder[j] == HELD_BY_RUNNER)
        x->requires_grad = true;
    if (!run->tape[j]) {
        run->tape[j] = tape_new();
        run->tape[j]->policy = run->chain.policy;
        run->tape[j]->flops = &run->stats.flops;
    }
    place(run, j + 1, run_segment(run, run->tape[j], x, j), HELD_BY_TAPE);
    run->stats.recorded++;
    if (++run->recorded_now > run->stats.max_recorded)
        run->stats.max_recorded = run->recorded_now;
}

static void observe(CkptRun *run, int segment)
{
    for (int j = 0; j <= run->chain.n; j++) {
        char m = '.';
        if (run->x[j])
            m = run->kept[j] ? 'C' : run->forwards[j - 1] > 1 ? '+' : 'o';
        run->marks[j] = m;
    }
    run->marks[run->chain.n + 1] = '\0';
    run->chain.observe(segment, run->marks, run->chain.observe_ctx);
}

static void reverse(CkptRun *run, int j)
{
    if (run->holder[j + 1] != HELD_BY_TAPE)
        tensor_fatal("checkpoint plan: segment %d reversed without being recorded", j);
    if (run->chain.observe)
        observe(run, j);
    if (run->chain.on_reverse)
        run->chain.on_reverse(j, false, run->chain.on_reverse_ctx);
    Tensor *y = run->x[j + 1];
    /* 0 + seed is exactly seed: handing dx_{j+1} from tape to tape changes no bit. */
    if (run->pending)
        tape_backward_seeded(run->tape[j], y, run->pending);
    mem_free(run->pending);
    run->pending = NULL;
    tape_reset(run->tape[j]);
    run->x[j + 1] = NULL;
    run->holder[j + 1] = HELD_BY_NOBODY;
    run->recorded_now--;
    if (run->chain.on_reverse)
        run->chain.on_reverse(j, true, run->chain.on_reverse_ctx);

    Tensor *x = held(run, j, "REVERSE");
    if (j > 0) {
        run->pending = x->grad;     /* dx_j: the seed of segment j - 1 */
        x->grad = NULL;
    }
    if (run->holder[j] == HELD_BY_RUNNER)
        release(run, j);
}

static void run_step(CkptRun *run, CkptStep step)
{
    switch (step.op) {
    case CKPT_ADVANCE: advance(run, step.j); break;
    case CKPT_KEEP:    keep(run, step.j); break;
    case CKPT_RECORD:  record(run, step.j); break;
    case CKPT_REVERSE: reverse(run, step.j); break;
    }
}

Tensor *ckpt_forward(CkptRun *run, Tensor *x)
{
    if (run->next != 0)
        tensor_fatal("ckpt_forward: the previous pass has not been backpropagated");
    int n = run->chain.n;
    memset(run->forwards, 0, (size_t)n * sizeof *run->forwards);
    run->stats = (CkptStats){ .max_checkpoints = 1 };
    run->x[0] = x;
    run->holder[0] = HELD_BY_CALLER;
    run->kept[0] = true;
    run->kept_now = 1;
    while (run->plan.steps[run->next].op != CKPT_REVERSE)
        run_step(run, run->plan.steps[run->next++]);
    return held(run, n, "the end of the forward pass");
}

void ckpt_backward(CkptRun *run)
{
    int n = run->chain.n;
    if (run->next == 0)
        tensor_fatal("ckpt_backward: no forward pass to backpropagate");
    Tensor *y = run->x[n];
    if (!y->grad)
        tensor_fatal("ckpt_backward: the chain output has no gradient (backprop the loss first)");
    run->pending = y->grad;
    y->grad = NULL;
    while (run->next < run->plan.n_steps)
        run_step(run, run->plan.steps[run->next++]);
    run->next = 0;
    for (int j = 1; j <= n; j++)
        if (run->x[j])
            tensor_fatal("checkpoint plan: x_%d still held after the backward pass", j);
    release(run, 0);    /* the caller's: forgotten, not freed */
}

void ckpt_backward_seeded(CkptRun *run, const float *seed)
{
    if (run->next == 0)
        tensor_fatal("ckpt_backward_seeded: no forward pass to backpropagate");
    Tensor *y = run->x[run->chain.n];
    float *g = tensor_grad(y);
    for (size_t i = 0; i < y->size; i++)
        g[i] += seed[i];
    ckpt_backward(run);
}

CkptStats ckpt_stats(const CkptRun *run) { return run->stats; }

const long *ckpt_segment_forwards(const CkptRun *run) { return run->forwards; }

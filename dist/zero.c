/* ZeRO levels 1-3 (the paper's stages; here a stage is a pipeline's) and FSDP (dist/zero.h):
 * model states sharded over the ranks. */
#include "dist/zero.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/mem.h"
#include "optim/step.h"

/* One parameter and this rank's shard of it. `view` is what the shard optimizer updates: a 1-D
 * tensor of the shard's fp32 values (`data`: straight into the whole weight for fp32 levels 1
 * and 2, otherwise a buffer of the shard's own: the masters under a packed format, the weights
 * themselves for fp32 level 3) and of its summed gradient (`grad`). */
typedef struct {
    Tensor *p;
    size_t  begin, count;
    Tensor *view;
    void   *codes;          /* level 3, packed format: the shard of the packed weight */
    int     unit;           /* GPT_UNIT_ENDS or the block */
    bool    own_values;     /* view->data is a buffer of the shard's own */
} Shard;

struct Zero {
    DistComm *c;
    Trainer  *t;
    int       level;
    bool      packed;       /* weights in a 2- or 1-byte format, with fp32 masters */
    Shard    *shards;
    Tensor  **views;        /* the shard optimizer's parameters */
    int       n;
    size_t    psi, owned;
    uint64_t  grad_sent, grad_recv, param_sent, param_recv;   /* this step's */
    bool      first_micro;  /* levels 2, 3: a micro-batch's sums replace the shard's, else add */
    StepStrategy strategy;  /* the step's callbacks, below */
    DistWire  wire;         /* the gradients' (dist/wire.h) */
    size_t    param_bytes, grad_bytes, optim_bytes;     /* model states at the update */
};

const char *zero_check(const TrainerConfig *cfg, int level)
{
    if (level < 1 || level > 3)
        return "ZeRO has levels 1, 2 and 3";
    if (cfg->optimizer == TRAIN_ADAFACTOR)
        return "Adafactor cannot be sharded by ZeRO: its factored second moment needs whole "
               "rows and columns (use adamw, adam8bit or sgd)";
    Dtype d = cfg->policy.param;
    if (d == DTYPE_E4M3 || d == DTYPE_E5M2)
        return "fp8 weights cannot be sharded by ZeRO: each has a per-tensor scale that a "
               "shard cannot compute";
    if (cfg->policy.fp8_scaling == POLICY_FP8_DELAYED)
        return "fp8's delayed scaling cannot run under ZeRO, which runs the blocks as a chain "
               "of tapes (autograd/checkpoint.h says why)";
    return NULL;
}

static size_t code_bytes(const Tensor *p, size_t values)
{
    return fmt_packed_bytes(tensor_dtype_format(p->dtype), values);
}

/* Bytes moved by one collective go to the gradient or the weight counters. */
static void count_since(Zero *z, uint64_t sent0, uint64_t recv0, bool grads)
{
    uint64_t s = z->c->bytes_sent - sent0, r = z->c->bytes_recv - recv0;
    if (grads) {
        z->grad_sent += s;
        z->grad_recv += r;
    } else {
        z->param_sent += s;
        z->param_recv += r;
    }
}

/* ---- the collectives, one per unit ----------------------------------------------------------
 * A unit's tensors travel together: rank k's block is the concatenation of its shards of every
 * tensor of the set, in parameter order, so a unit costs one message per pair of ranks (not one
 * per tensor: on shared cores each message is a wait for the other rank to be scheduled) and
 * exactly the bytes of the per-tensor collectives. ANY selects every tensor. */
enum { ANY = -2 };

static bool in_set(const Shard *s, int unit) { return unit == ANY || s->unit == unit; }

/* Each rank's block size, in values, for the set. */
static size_t *block_counts(Zero *z, int unit)
{
    int N = z->c->size;
    size_t *counts = calloc((size_t)N, sizeof *counts);
    if (!counts)
        dist_fail("out of memory for ZeRO");
    for (int i = 0; i < z->n; i++)
        for (int k = 0; in_set(&z->shards[i], unit) && k < N; k++)
            counts[k] += dist_shard_count(z->shards[i].p->size, N, k);
    return counts;
}

/* Where a weight's values are stored, and the bytes of one. */
static char *weight_bytes(const Zero *z, const Tensor *p)
{
    return z->packed ? (char *)p->packed : (char *)p->data;
}

static size_t value_bytes(const Zero *z)
{
    return z->packed ? code_bytes(z->shards[0].p, 1) : sizeof(float);
}

/* This rank's values of a weight: level 3 keeps them apart, levels 1 and 2 in the whole. */
static const char *own_values(const Zero *z, const Shard *s)
{
    if (z->level == 3)
        return z->packed ? (const char *)s->codes : (const char *)s->view->data;
    return weight_bytes(z, s->p) + s->begin * value_bytes(z);
}

/* Between the whole tensors of a set (weights, or gradients) and the blocked layout of the _v
 * collectives, where rank k's block is its shard of each tensor of the set, in order. */
static void blocked_copy(Zero *z, int unit, bool grads, char *blocks, bool to_blocks)
{
    int N = z->c->size;
    size_t vb = grads ? sizeof(float) : value_bytes(z), off = 0;
    for (int k = 0; k < N; k++) {
        for (int i = 0; i < z->n; i++) {
            Shard *s = &z->shards[i];
            if (!in_set(s, unit))
                continue;
            size_t b = dist_shard_begin(s->p->size, N, k), n = dist_shard_count(s->p->size, N, k);
            char *whole = (grads ? (char *)tensor_grad(s->p) : weight_bytes(z, s->p)) + b * vb;
            if (to_blocks)
                memcpy(blocks + off * vb, whole, n * vb);
            else
                memcpy(whole, blocks + off * vb, n * vb);
            off += n;
        }
    }
}

/* Every rank's shards of the set's weights into the whole weights (allocated first for level 3,
 * gathered in place for levels 1 and 2). */
static void gather_weights(Zero *z, int unit)
{
    int N = z->c->size, me = z->c->rank;
    size_t vb = value_bytes(z), *counts = block_counts(z, unit), total = 0;
    for (int k = 0; k < N; k++)
        total += counts[k];
    char *all = mem_alloc(MEM_TEMP, total * vb + 1);
    char *mine = mem_alloc(MEM_TEMP, counts[me] * vb + 1);
    size_t off = 0;
    for (int i = 0; i < z->n; i++) {
        Shard *s = &z->shards[i];
        if (!in_set(s, unit))
            continue;
        if (z->level == 3 && z->packed)
            s->p->packed = mem_alloc(MEM_PARAM, code_bytes(s->p, s->p->size));
        else if (z->level == 3)
            s->p->data = mem_alloc(MEM_PARAM, s->p->size * sizeof(float));
        memcpy(mine + off * vb, own_values(z, s), s->count * vb);
        off += s->count;
    }
    uint64_t s0 = z->c->bytes_sent, r0 = z->c->bytes_recv;
    dist_allgather_v(z->c, mine, all, counts, vb);
    count_since(z, s0, r0, false);
    blocked_copy(z, unit, false, all, false);
    mem_free(mine);
    mem_free(all);
    free(counts);
}

/* Stage 3: the set's whole weights freed (their shards stay). */
static void free_weights(Zero *z, int unit)
{
    for (int i = 0; i < z->n; i++) {
        Tensor *p = z->shards[i].p;
        if (!in_set(&z->shards[i], unit))
            continue;
        tensor_release(p);      /* a decoded copy an op left behind, if any */
        if (p->dtype == DTYPE_F32) {
            mem_free(p->data);
            p->data = NULL;
        } else {
            mem_free(p->packed);
            p->packed = NULL;
        }
    }
}

/* After an update, this rank's values in the parameter format: encoded from the masters into the
 * whole weight's range (levels 1, 2: a shard of a 2-byte format is a byte range of the whole) or
 * into the shard's codes (level 3). fp32 weights are updated in place. */
static void encode_own(Zero *z, Shard *s)
{
    if (!z->packed || !s->count)
        return;
    void *codes = z->level == 3 ? s->codes : (char *)s->p->packed + code_bytes(s->p, s->begin);
    Tensor piece = { .ndim = 1, .shape = { (int)s->count }, .size = s->count,
                     .dtype = s->p->dtype, .packed = codes, .scale = s->p->scale };
    tensor_store(&piece, s->view->data);
}

/* Every rank's whole gradients of the set, summed in rank order into their owners' shards: the
 * shard's range of the whole gradient for level 1, the shard's own buffer (and the whole freed)
 * for levels 2 and 3. */
static void reduce_grads(Zero *z, int unit)
{
    int N = z->c->size, me = z->c->rank;
    size_t *counts = block_counts(z, unit), total = 0;
    for (int k = 0; k < N; k++)
        total += counts[k];
    float *all = mem_alloc(MEM_TEMP, (total + 1) * sizeof *all);
    float *sum = mem_alloc(MEM_TEMP, (counts[me] + 1) * sizeof *sum);
    blocked_copy(z, unit, true, (char *)all, true);
    uint64_t s0 = z->c->bytes_sent, r0 = z->c->bytes_recv;
    dist_reduce_scatter_sum_wire(z->c, all, sum, counts, z->wire);
    count_since(z, s0, r0, true);
    size_t off = 0;
    for (int i = 0; i < z->n; i++) {
        Shard *s = &z->shards[i];
        if (!in_set(s, unit))
            continue;
        if (z->level == 1)
            s->view->grad = s->p->grad + s->begin;
        else
            tensor_free_grad(s->p);
        float *g = s->view->grad;
        if (z->level == 1 || z->first_micro)
            memcpy(g, sum + off, s->count * sizeof *sum);
        else
            for (size_t j = 0; j < s->count; j++)
                g[j] += sum[off + j];
        off += s->count;
    }
    mem_free(sum);
    mem_free(all);
    free(counts);
}

static void on_unit(int unit, GptUnitEvent event, void *ctx)
{
    Zero *z = ctx;
    if (event == GPT_UNIT_GATHER && z->level == 3)
        gather_weights(z, unit);
    else if (event == GPT_UNIT_RELEASE && z->level == 3)
        free_weights(z, unit);
    else if (event == GPT_UNIT_GRADS_FINAL && z->level >= 2 && unit != GPT_UNIT_HEAD)
        reduce_grads(z, unit);          /* the ends together: one reduce-scatter, at theirs */
}

/* ---- setting up ----------------------------------------------------------------------------- */

static StepStrategy zero_strategy(Zero *z);

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        dist_fail("out of memory for ZeRO");
    return p;
}

/* The shard's view and storage, from the trainer's full optimizer (its masters, if any). */
static void make_shard(Zero *z, Shard *s, const Optim *full, int i)
{
    Tensor *p = s->p;
    int N = z->c->size, r = z->c->rank;
    s->begin = dist_shard_begin(p->size, N, r);
    s->count = dist_shard_count(p->size, N, r);
    s->unit = gpt_unit_of(p);
    Tensor *v = xcalloc(1, sizeof *v);
    *v = (Tensor){ .ndim = 1, .shape = { (int)s->count }, .size = s->count,
                   .dtype = DTYPE_F32, .cat = MEM_PARAM, .requires_grad = true,
                   .is_param = true };
    tensor_set_name(v, p->name);
    size_t bytes = s->count * sizeof(float);
    const float *master = optim_master(full, i);
    s->own_values = master || z->level == 3;
    if (master) {
        v->data = mem_alloc(MEM_OPTIM, bytes ? bytes : sizeof(float));
        memcpy(v->data, master + s->begin, bytes);
    } else if (z->level == 3) {
        v->data = mem_alloc(MEM_PARAM, bytes ? bytes : sizeof(float));
        memcpy(v->data, p->data + s->begin, bytes);
    } else {
        v->data = p->data + s->begin;
    }
    if (z->level >= 2)
        v->grad = mem_calloc(MEM_GRAD, bytes ? bytes : sizeof(float));
    if (z->level == 3 && z->packed) {
        s->codes = mem_alloc(MEM_PARAM, code_bytes(p, s->count ? s->count : 1));
        memcpy(s->codes, (char *)p->packed + code_bytes(p, s->begin), code_bytes(p, s->count));
    }
    s->view = v;
}

Zero *zero_new(DistComm *c, Trainer *t, int level)
{
    const char *why = zero_check(&t->cfg, level);
    if (why)
        dist_fail("%s", why);
    if (t->lora)
        dist_fail("LoRA under ZeRO is not built");
    Zero *z = xcalloc(1, sizeof *z);
    z->c = c;
    z->t = t;
    z->level = level;
    z->packed = t->cfg.policy.param != DTYPE_F32;
    Optim *full = t->optim;
    /* The reduce-scatter reads the gradients as fp32 buffers (shard views point into them):
     * they stay fp32, holding the format's values. */
    optim_keep_fp32_grads(full);
    z->n = full->n;
    z->shards = xcalloc((size_t)z->n, sizeof *z->shards);
    z->views = xcalloc((size_t)z->n, sizeof *z->views);
    for (int i = 0; i < z->n; i++) {
        z->shards[i].p = full->params[i];
        make_shard(z, &z->shards[i], full, i);
        z->views[i] = z->shards[i].view;
        z->psi += full->params[i]->size;
        z->owned += z->shards[i].count;
    }
    if (level == 3)
        free_weights(z, ANY);
    /* The same optimizer over the shards; which tensors decay is the whole tensors' rule (a
     * shard is 1-D, and the default rule would spare it). A trainer loaded from a snapshot
     * brings its state: each rank keeps its slice. */
    Optim *o = trainer_make_optimizer(&t->cfg, z->views, z->n);
    if (full->step > 0 && t->cfg.optimizer == TRAIN_ADAM8BIT)
        dist_fail("resuming 8-bit Adam under ZeRO is not built: its blocks follow the shards");
    for (int i = 0; i < z->n; i++) {
        o->decay[i] = full->decay[i];
        for (int k = 0; k < o->n_slots; k++)
            memcpy(o->state[i * o->n_slots + k]->data,
                   full->state[i * full->n_slots + k]->data + z->shards[i].begin,
                   z->shards[i].count * sizeof(float));
    }
    o->step = full->step;
    optim_free(full);
    t->optim = o;
    z->strategy = zero_strategy(z);
    double sig = (double)z->psi * 1000.0 + z->n;
    if (dist_max_double(c, sig) != sig || -dist_max_double(c, -sig) != sig)
        dist_fail("ZeRO ranks hold different models (%zu values in %d tensors here)", z->psi,
                  z->n);
    return z;
}

/* Every rank's slice of a state tensor or master, gathered whole (a shard's values are a
 * contiguous range of the whole's). */
static void gather_values(Zero *z, const Shard *s, const float *mine, float *whole)
{
    uint64_t s0 = z->c->bytes_sent, r0 = z->c->bytes_recv;
    dist_allgather(z->c, mine, whole, s->p->size, sizeof(float));
    count_since(z, s0, r0, false);
}

void zero_free(Zero *z)
{
    if (!z)
        return;
    Trainer *t = z->t;
    Optim *o = t->optim;
    zero_gather_weights(z);
    Tensor **params = malloc(sizeof *params * (size_t)z->n);
    if (!params)
        dist_fail("out of memory for ZeRO");
    for (int i = 0; i < z->n; i++)
        params[i] = z->shards[i].p;
    Optim *full = trainer_make_optimizer(&t->cfg, params, z->n);
    free(params);
    full->step = o->step;
    if (z->packed)
        optim_add_masters(full);
    for (int i = 0; i < z->n; i++) {
        Shard *s = &z->shards[i];
        full->decay[i] = o->decay[i];
        for (int k = 0; k < o->n_slots; k++)
            gather_values(z, s, o->state[i * o->n_slots + k]->data,
                          full->state[i * full->n_slots + k]->data);
        if (z->packed)
            gather_values(z, s, s->view->data, full->masters[i]);
    }
    for (int i = 0; i < z->n; i++) {
        Shard *s = &z->shards[i];
        if (s->own_values)
            mem_free(s->view->data);
        if (z->level >= 2)
            mem_free(s->view->grad);
        mem_free(s->codes);
        free(s->view);
    }
    optim_free(o);
    t->optim = full;
    free(z->shards);
    free(z->views);
    free(z);
}

size_t zero_param_count(const Zero *z) { return z->psi; }
const StepStrategy *zero_step_strategy(const Zero *z) { return &z->strategy; }
void zero_set_wire(Zero *z, DistWire w) { z->wire = w; }
size_t zero_shard_values(const Zero *z) { return z->owned; }

void zero_gather_weights(Zero *z)
{
    if (z->level != 3 || z->shards[0].p->data || z->shards[0].p->packed)
        return;
    gather_weights(z, ANY);
}

void zero_shard_weights(Zero *z)
{
    if (z->level != 3 || !(z->shards[0].p->data || z->shards[0].p->packed))
        return;
    free_weights(z, ANY);
}

/* ---- one step: ZeRO as a strategy of optim/step.h ------------------------------------------ */

static void on_micro_start(int k, int K, void *ctx)
{
    (void)K;
    Zero *z = ctx;
    z->first_micro = k == 0;
}

/* Stage 1 reduces the whole accumulated gradients once; then the model states held at the
 * update are what the ZeRO formulas predict. */
static void on_grads_done(void *ctx)
{
    Zero *z = ctx;
    if (z->level == 1)
        reduce_grads(z, ANY);
    z->param_bytes = mem_current(MEM_PARAM);
    z->grad_bytes = mem_current(MEM_GRAD);
    z->optim_bytes = mem_current(MEM_OPTIM);
}

static double on_sum(double x, void *ctx) { return dist_sum_double(((Zero *)ctx)->c, x); }
static bool on_all_ok(bool ok, void *ctx) { return dist_all_ok(((Zero *)ctx)->c, ok); }

/* The optimizer updated the shards: their codes, and levels 1 and 2 gather every rank's, so
 * every rank holds the whole model again (level 3 gathers before each use). */
static void on_updated(void *ctx)
{
    Zero *z = ctx;
    for (int i = 0; i < z->n; i++)
        encode_own(z, &z->shards[i]);
    if (z->level < 3)
        gather_weights(z, ANY);
}

/* The step zeroed the shards' gradients; level 1's whole gradients are the model's. */
static void on_released(void *ctx)
{
    Zero *z = ctx;
    for (int i = 0; z->level == 1 && i < z->n; i++)
        tensor_zero_grad(z->shards[i].p);
}

static StepStrategy zero_strategy(Zero *z)
{
    static const char *const names[] = { "zero-1", "zero-2", "zero-3" };
    return (StepStrategy){ .name = names[z->level - 1], .ctx = z, .ranks = z->c->size,
                           .on_unit = on_unit, .micro_start = on_micro_start,
                           .grads_done = on_grads_done, .sum = on_sum, .sum_squares = on_sum,
                           .all_ok = on_all_ok,
                           .updated = on_updated, .released = on_released };
}

ZeroStepResult zero_step_accum(Zero *z, const int *tokens, const int *targets, int B, int T,
                               int K, double lr)
{
    DistComm *c = z->c;
    ZeroStepResult s = { 0 };
    uint64_t sent0 = c->bytes_sent, recv0 = c->bytes_recv;
    z->grad_sent = z->grad_recv = z->param_sent = z->param_recv = 0;
    s.r = step_run(z->t, &z->strategy, tokens, targets, B, T, K, lr);
    s.param_bytes = z->param_bytes;
    s.grad_bytes = z->grad_bytes;
    s.optim_bytes = z->optim_bytes;
    s.grad_bytes_sent = z->grad_sent;
    s.grad_bytes_recv = z->grad_recv;
    s.param_bytes_sent = z->param_sent;
    s.param_bytes_recv = z->param_recv;
    s.bytes_sent = c->bytes_sent - sent0;
    s.bytes_recv = c->bytes_recv - recv0;
    return s;
}

ZeroStepResult zero_step(Zero *z, const int *tokens, const int *targets, int B, int T,
                         double lr)
{
    return zero_step_accum(z, tokens, targets, B, T, 1, lr);
}

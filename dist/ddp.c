/* Data parallel training (dist/ddp.h): buckets of gradients all-reduced in rank order. */
#include "dist/ddp.h"

#include <stdlib.h>
#include <string.h>

#include "autograd/mem.h"
#include "optim/step.h"

typedef struct {
    int           first, count;   /* params order[first .. first + count - 1] */
    size_t        n;              /* values */
    int           pending;        /* gradients not final yet this step */
    float        *buf;            /* temp, while the reduction runs */
    DistAllreduce h;
    bool          started;
} Bucket;

struct Ddp {
    DistComm *c;
    Trainer  *t;
    DdpConfig cfg;
    int       n_params;
    int      *order;              /* parameter indices, reverse of the optimizer's order */
    int      *bucket_of;          /* by parameter index */
    int      *unit_of;            /* by parameter index: the unit whose GRADS_FINAL frees it */
    bool     *final;              /* by parameter index: final in this step's last micro-batch */
    Bucket   *buckets;
    int       n_buckets;
    size_t    psi;
    bool      last_micro;         /* the micro-batch whose backward finishes the gradients */
    uint64_t  sent0, recv0, grad_sent, grad_recv;   /* the communicator's counts, this step */
    StepStrategy strategy;        /* the step's callbacks, below */
    size_t    held, held_peak;    /* bytes of bucket buffers allocated now, and this step's most */
    int       overlapped;
};

static StepStrategy ddp_strategy(Ddp *d);

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        dist_fail("out of memory for data parallel training");
    return p;
}

Ddp *ddp_new(DistComm *c, Trainer *t, const DdpConfig *cfg)
{
    Ddp *d = xcalloc(1, sizeof *d);
    d->c = c;
    d->t = t;
    d->cfg = *cfg;
    Optim *o = t->optim;
    /* The buckets are fp32 buffers copied whole from and into the gradients (the wire, if
     * lower, encodes from them): the gradients stay fp32 buffers, holding the format's values. */
    optim_keep_fp32_grads(o);
    d->n_params = o->n;
    d->order = xcalloc((size_t)o->n, sizeof *d->order);
    d->bucket_of = xcalloc((size_t)o->n, sizeof *d->bucket_of);
    d->unit_of = xcalloc((size_t)o->n, sizeof *d->unit_of);
    d->final = xcalloc((size_t)o->n, sizeof *d->final);
    d->buckets = xcalloc((size_t)o->n, sizeof *d->buckets);
    for (int i = 0; i < o->n; i++)
        d->order[i] = o->n - 1 - i;
    for (int i = 0; i < o->n; i++) {
        int p = d->order[i];
        size_t bytes = o->params[p]->size * sizeof(float);
        Bucket *b = d->n_buckets ? &d->buckets[d->n_buckets - 1] : NULL;
        if (!b || (cfg->bucket_bytes && (b->n * sizeof(float) + bytes > cfg->bucket_bytes))) {
            b = &d->buckets[d->n_buckets++];
            b->first = i;
        }
        b->count++;
        b->n += o->params[p]->size;
        d->bucket_of[p] = (int)(b - d->buckets);
        d->unit_of[p] = gpt_final_unit_of(o->params[p]);
        d->psi += o->params[p]->size;
    }
    if (d->n_buckets > DIST_IALLREDUCE_SLOTS)
        dist_fail("%d gradient buckets (at most %d): use larger buckets", d->n_buckets,
                  DIST_IALLREDUCE_SLOTS);
    /* Same model everywhere, or the reductions would pair different tensors. */
    d->strategy = ddp_strategy(d);
    double sig = (double)d->psi * 1000.0 + d->n_params;
    bool same = dist_max_double(c, sig) == sig && -dist_max_double(c, -sig) == sig;
    if (!same)
        dist_fail("data parallel ranks hold different models (%zu values in %d tensors here)",
                  d->psi, d->n_params);
    return d;
}

void ddp_free(Ddp *d)
{
    if (!d)
        return;
    free(d->order);
    free(d->bucket_of);
    free(d->unit_of);
    free(d->final);
    free(d->buckets);
    free(d);
}

int ddp_bucket_count(const Ddp *d) { return d->n_buckets; }
size_t ddp_param_count(const Ddp *d) { return d->psi; }

/* Copies the bucket's gradients into one buffer and starts their all-reduce. */
static void start_bucket(Ddp *d, int k)
{
    Bucket *b = &d->buckets[k];
    Tensor **params = d->t->optim->params;
    b->buf = mem_alloc(MEM_TEMP, b->n * sizeof *b->buf);
    d->held += mem_size(b->buf);
    d->held_peak = d->held > d->held_peak ? d->held : d->held_peak;
    size_t off = 0;
    for (int i = b->first; i < b->first + b->count; i++) {
        Tensor *p = params[d->order[i]];
        memcpy(b->buf + off, tensor_grad(p), p->size * sizeof *b->buf);
        off += p->size;
    }
    dist_iallreduce_start_wire(d->c, &b->h, b->buf, b->n, k, d->cfg.wire);
    b->started = true;
}

static void finish_bucket(Ddp *d, int k)
{
    Bucket *b = &d->buckets[k];
    Tensor **params = d->t->optim->params;
    dist_iallreduce_wait(&b->h);
    size_t off = 0;
    for (int i = b->first; i < b->first + b->count; i++) {
        Tensor *p = params[d->order[i]];
        memcpy(tensor_grad(p), b->buf + off, p->size * sizeof *b->buf);
        off += p->size;
    }
    d->held -= mem_size(b->buf);
    mem_free(b->buf);
    b->buf = NULL;
}

/* ---- one step: DDP as a strategy of optim/step.h ------------------------------------------- */

static void on_micro_start(int k, int K, void *ctx)
{
    Ddp *d = ctx;
    d->last_micro = k == K - 1;
    if (k > 0)
        return;
    for (int b = 0; b < d->n_buckets; b++) {
        d->buckets[b].started = false;
        d->buckets[b].pending = d->buckets[b].count;
    }
    for (int i = 0; i < d->n_params; i++)
        d->final[i] = false;
    d->overlapped = 0;
    d->held_peak = 0;
    d->sent0 = d->c->bytes_sent;
    d->recv0 = d->c->bytes_recv;
}

/* Parameter i's gradient is final: its bucket's count goes down, and the bucket whose every
 * gradient is final starts its all-reduce, while the rest of backward runs. */
static void param_done(Ddp *d, int i)
{
    if (d->final[i])
        return;
    d->final[i] = true;
    int bk = d->bucket_of[i];
    if (--d->buckets[bk].pending == 0) {
        start_bucket(d, bk);
        d->overlapped++;
    }
}

/* Only the last micro-batch's backward finishes gradients. A vanilla pass says so per
 * parameter (on_param_final); a unit's GRADS_FINAL covers whatever it did not. */
static bool overlapping(const Ddp *d) { return d->last_micro && d->cfg.overlap; }

static void on_param_final(const Tensor *param, void *ctx)
{
    Ddp *d = ctx;
    if (!overlapping(d))
        return;
    Tensor **params = d->t->optim->params;
    for (int i = 0; i < d->n_params; i++)
        if (params[i] == param)
            param_done(d, i);
}

static void on_unit(int unit, GptUnitEvent event, void *ctx)
{
    Ddp *d = ctx;
    if (event != GPT_UNIT_GRADS_FINAL || !overlapping(d))
        return;
    for (int i = 0; i < d->n_params; i++)
        if (d->unit_of[i] == unit)
            param_done(d, i);
}

/* Move the reductions in flight on while backward computes: MPI progresses messages inside its
 * calls only, and a bucket's second half (the all-gather) is posted by a test. */
static void on_progress(void *ctx)
{
    Ddp *d = ctx;
    for (int b = 0; b < d->n_buckets; b++)
        if (d->buckets[b].started && d->buckets[b].h.phase)
            dist_iallreduce_test(&d->buckets[b].h);
}

static void on_grads_done(void *ctx)
{
    Ddp *d = ctx;
    for (int k = 0; k < d->n_buckets; k++)
        if (!d->buckets[k].started)
            start_bucket(d, k);
    for (int k = 0; k < d->n_buckets; k++)
        finish_bucket(d, k);
    d->grad_sent = d->c->bytes_sent - d->sent0;
    d->grad_recv = d->c->bytes_recv - d->recv0;
}

static double on_sum(double x, void *ctx) { return dist_sum_double(((Ddp *)ctx)->c, x); }

/* Every rank ends with the same summed gradients: the inf check and the norm need no
 * reduction of their own. */
static StepStrategy ddp_strategy(Ddp *d)
{
    return (StepStrategy){ .name = "ddp", .ctx = d, .ranks = d->c->size, .on_unit = on_unit,
                           .micro_start = on_micro_start, .progress = on_progress,
                           .param_final = on_param_final,
                           .grads_done = on_grads_done,
                           .sum = on_sum };
}

DdpStepResult ddp_step_accum(Ddp *d, const int *tokens, const int *targets, int B, int T,
                             int K, double lr)
{
    DistComm *c = d->c;
    DdpStepResult s = { 0 };
    uint64_t sent0 = c->bytes_sent, recv0 = c->bytes_recv;
    s.r = step_run(d->t, &d->strategy, tokens, targets, B, T, K, lr);
    s.bytes_sent = c->bytes_sent - sent0;
    s.bytes_recv = c->bytes_recv - recv0;
    s.grad_bytes_sent = d->grad_sent;
    s.grad_bytes_recv = d->grad_recv;
    s.buckets_overlapped = d->overlapped;
    s.bucket_bytes_peak = d->held_peak;
    return s;
}

DdpStepResult ddp_step(Ddp *d, const int *tokens, const int *targets, int B, int T, double lr)
{
    return ddp_step_accum(d, tokens, targets, B, T, 1, lr);
}

TrainStepResult ddp_reference_step_wire(Trainer *t, const int *tokens, const int *targets,
                                        int B, int T, int N, int K, DistWire w, bool round_sum,
                                        double lr)
{
    if (w == DIST_WIRE_E5M2)
        tensor_fatal("ddp_reference_step_wire: e5m2's scales follow the buckets and shards");
    Optim *o = t->optim;
    size_t psi = 0;
    for (int i = 0; i < o->n; i++)
        psi += o->params[i]->size;
    float *acc = mem_alloc(MEM_TEMP, psi * sizeof *acc);
    TrainStepResult r = { .loss_scale = loss_scale_value(&t->scaler) };
    /* Each micro-batch's loss / (N K), seeded with S, as step_run on N ranks does. */
    float seed = (float)r.loss_scale * (1.0f / (float)(N * K));
    double sum = 0.0;
    size_t rows = (size_t)B * T;
    bool vanilla = t->cfg.local.checkpoint.kind == CKPT_VANILLA;
    for (int rank = 0; rank < N; rank++) {
        optim_zero_grad(o);
        double mine = 0.0;
        for (int m = 0; m < K; m++) {
            size_t at = ((size_t)rank * K + m) * rows;
            mine += step_micro_batch(t, NULL, tokens + at, targets + at, B, T, seed);
            if (vanilla)
                tape_reset(t->tape);
        }
        sum += mine;
        size_t off = 0;
        for (int i = 0; i < o->n; i++) {
            float *g = tensor_grad(o->params[i]);
            dist_wire_round(w, g, g, o->params[i]->size);
            for (size_t j = 0; j < o->params[i]->size; j++)
                acc[off + j] = rank == 0 ? g[j] : acc[off + j] + g[j];
            off += o->params[i]->size;
        }
    }
    if (round_sum)
        dist_wire_round(w, acc, acc, psi);
    size_t off = 0;
    for (int i = 0; i < o->n; i++) {
        memcpy(tensor_grad(o->params[i]), acc + off, o->params[i]->size * sizeof *acc);
        off += o->params[i]->size;
    }
    mem_free(acc);
    r.loss = sum / (N * K);
    step_finish(t, NULL, lr, &r);
    t->step++;
    return r;
}

TrainStepResult ddp_reference_step_accum(Trainer *t, const int *tokens, const int *targets,
                                         int B, int T, int N, int K, double lr)
{
    return ddp_reference_step_wire(t, tokens, targets, B, T, N, K, DIST_WIRE_FP32, false, lr);
}

TrainStepResult ddp_reference_step(Trainer *t, const int *tokens, const int *targets, int B,
                                   int T, int K, double lr)
{
    return ddp_reference_step_accum(t, tokens, targets, B, T, K, 1, lr);
}

/* Data parallel training (dist/ddp.h): buckets of gradients all-reduced in rank order. */
#include "dist/ddp.h"

#include <stdlib.h>
#include <string.h>

#include "autograd/mem.h"

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
    int      *last_node;          /* by parameter index: lowest tape node using it, -1: none */
    Bucket   *buckets;
    int       n_buckets;
    size_t    psi;
    bool      scanned;            /* last_node filled for this backward */
    size_t    held, held_peak;    /* bytes of bucket buffers allocated now, and this step's most */
    int       overlapped;
};

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
    /* The buckets are fp32 and copied whole from and into the gradients (a bf16 all-reduce
     * is not built): the gradients stay fp32 buffers, holding the format's values. */
    optim_keep_fp32_grads(o);
    d->n_params = o->n;
    d->order = xcalloc((size_t)o->n, sizeof *d->order);
    d->bucket_of = xcalloc((size_t)o->n, sizeof *d->bucket_of);
    d->last_node = xcalloc((size_t)o->n, sizeof *d->last_node);
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
        d->psi += o->params[p]->size;
    }
    if (d->n_buckets > DIST_IALLREDUCE_SLOTS)
        dist_fail("%d gradient buckets (at most %d): use larger buckets", d->n_buckets,
                  DIST_IALLREDUCE_SLOTS);
    /* Same model everywhere, or the reductions would pair different tensors. */
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
    free(d->last_node);
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
    dist_iallreduce_start(d->c, &b->h, b->buf, b->n, k);
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

/* For each parameter, the lowest node that reads it: after that node's backward its gradient
 * takes no more terms. Parameters no node reads are final (zero) from the start. */
static void scan_tape(Ddp *d, const Tape *tape)
{
    Tensor **params = d->t->optim->params;
    for (int p = 0; p < d->n_params; p++)
        d->last_node[p] = -1;
    for (int k = tape->n_nodes - 1; k >= 0; k--) {
        const Node *node = &tape->nodes[k];
        for (int j = 0; j < node->n_in; j++) {
            if (!node->in[j] || !node->in[j]->is_param)
                continue;
            for (int p = 0; p < d->n_params; p++)
                if (params[p] == node->in[j])
                    d->last_node[p] = k;
        }
    }
    for (int k = 0; k < d->n_buckets; k++)
        d->buckets[k].pending = d->buckets[k].count;
    for (int p = 0; p < d->n_params; p++)
        if (d->last_node[p] < 0)
            d->buckets[d->bucket_of[p]].pending--;
    d->scanned = true;
}

static void after_node(Tape *tape, int k, void *ctx)
{
    Ddp *d = ctx;
    if (!d->scanned)
        scan_tape(d, tape);
    for (int p = 0; p < d->n_params; p++) {
        if (d->last_node[p] != k)
            continue;
        int bk = d->bucket_of[p];
        if (--d->buckets[bk].pending == 0) {
            start_bucket(d, bk);
            d->overlapped++;
        }
    }
    /* Move the reductions in flight on: MPI progresses messages inside its calls. */
    for (int b = 0; b < d->n_buckets; b++)
        if (d->buckets[b].started && d->buckets[b].h.phase)
            dist_iallreduce_test(&d->buckets[b].h);
}

DdpStepResult ddp_step_accum(Ddp *d, const int *tokens, const int *targets, int B, int T,
                             int K, double lr)
{
    Trainer *t = d->t;
    DistComm *c = d->c;
    DdpStepResult s = { 0 };
    uint64_t sent0 = c->bytes_sent, recv0 = c->bytes_recv;
    for (int k = 0; k < d->n_buckets; k++)
        d->buckets[k].started = false;
    d->scanned = false;
    d->overlapped = 0;
    d->held_peak = 0;
    bool vanilla = t->cfg.checkpoint.kind == CKPT_VANILLA;
    s.r.loss_scale = loss_scale_value(&t->scaler);
    double loss = 0.0;
    size_t rows = (size_t)B * T;
    for (int m = 0; m < K; m++) {
        /* Only the last micro-batch's backward finishes gradients: its buckets go early. */
        if (d->cfg.overlap && vanilla && m == K - 1) {
            t->tape->after_node = after_node;
            t->tape->after_node_ctx = d;
        }
        loss += trainer_backward_micro(t, tokens + m * rows, targets + m * rows, B, T,
                                       c->size * K);
        if (vanilla && m + 1 < K)
            tape_reset(t->tape);
    }
    t->tape->after_node = NULL;
    t->tape->after_node_ctx = NULL;
    for (int k = 0; k < d->n_buckets; k++)
        if (!d->buckets[k].started)
            start_bucket(d, k);
    for (int k = 0; k < d->n_buckets; k++)
        finish_bucket(d, k);
    s.grad_bytes_sent = c->bytes_sent - sent0;
    s.grad_bytes_recv = c->bytes_recv - recv0;
    s.buckets_overlapped = d->overlapped;
    s.bucket_bytes_peak = d->held_peak;
    /* The same additions as ddp_reference_step_accum's: each rank's sum, then in rank order. */
    s.r.loss = dist_sum_double(c, loss) / (c->size * K);
    trainer_finish_step(t, lr, &s.r);
    s.bytes_sent = c->bytes_sent - sent0;
    s.bytes_recv = c->bytes_recv - recv0;
    return s;
}

DdpStepResult ddp_step(Ddp *d, const int *tokens, const int *targets, int B, int T, double lr)
{
    return ddp_step_accum(d, tokens, targets, B, T, 1, lr);
}

TrainStepResult ddp_reference_step_accum(Trainer *t, const int *tokens, const int *targets,
                                         int B, int T, int N, int K, double lr)
{
    Optim *o = t->optim;
    size_t psi = 0;
    for (int i = 0; i < o->n; i++)
        psi += o->params[i]->size;
    float *acc = mem_alloc(MEM_TEMP, psi * sizeof *acc);
    TrainStepResult r = { .loss_scale = loss_scale_value(&t->scaler) };
    double sum = 0.0;
    size_t rows = (size_t)B * T;
    bool vanilla = t->cfg.checkpoint.kind == CKPT_VANILLA;
    for (int rank = 0; rank < N; rank++) {
        optim_zero_grad(o);
        double mine = 0.0;
        for (int m = 0; m < K; m++) {
            size_t at = ((size_t)rank * K + m) * rows;
            mine += trainer_backward_micro(t, tokens + at, targets + at, B, T, N * K);
            if (vanilla)
                tape_reset(t->tape);
        }
        sum += mine;
        size_t off = 0;
        for (int i = 0; i < o->n; i++) {
            const float *g = tensor_grad(o->params[i]);
            for (size_t j = 0; j < o->params[i]->size; j++)
                acc[off + j] = rank == 0 ? g[j] : acc[off + j] + g[j];
            off += o->params[i]->size;
        }
    }
    size_t off = 0;
    for (int i = 0; i < o->n; i++) {
        memcpy(tensor_grad(o->params[i]), acc + off, o->params[i]->size * sizeof *acc);
        off += o->params[i]->size;
    }
    mem_free(acc);
    r.loss = sum / (N * K);
    trainer_finish_step(t, lr, &r);
    return r;
}

TrainStepResult ddp_reference_step(Trainer *t, const int *tokens, const int *targets, int B,
                                   int T, int K, double lr)
{
    return ddp_reference_step_accum(t, tokens, targets, B, T, K, 1, lr);
}

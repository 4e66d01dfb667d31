#include "dist/pipeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autograd/mem.h"
#include "dist/pipeline_internal.h"

static StepStrategy pipe_strategy(Pipeline *pp);
static StepStrategy pipe_update_strategy(Pipeline *pp);

/* A wait that leaves the core to others: MPI's own wait spins. */
static void wait_polite(DistRequest *r)
{
    struct timespec nap = { 0, 20000 };
    while (!dist_test(r))
        nanosleep(&nap, NULL);
}

static void recv_polite(DistComm *c, void *buf, size_t bytes, int src, int tag)
{
    DistRequest r = dist_irecv(c, buf, bytes, src, tag);
    wait_polite(&r);
}

/* Ownership ---------------------------------------------------------------------------------- */

typedef struct {
    int  lo, hi;                    /* blocks [lo, hi) */
    bool first, last, tied;
} Owner;

static bool owner_keeps(const char *name, void *ctx)
{
    const Owner *o = ctx;
    int layer;
    if (sscanf(name, "blocks.%d.", &layer) == 1)
        return layer >= o->lo && layer < o->hi;
    if (strncmp(name, "wte.", 4) == 0)
        return o->first || (o->last && o->tied);
    if (strncmp(name, "wpe.", 4) == 0)
        return o->first;
    return o->last;                 /* ln_f, head */
}

static Owner owner_of(const Pipeline *pp)
{
    return (Owner){ pp->first[pp->stage], pp->first[pp->stage + 1], pp->stage == 0,
                    pp->stage == pp->p - 1, pp->tr->cfg.model.tied };
}

bool pipe_owns(const Pipeline *pp, const char *name)
{
    Owner o = owner_of(pp);
    return owner_keeps(name, &o);
}

/* The lowest stage that owns the parameter of that name (stage 0 for a tied wte). */
static int first_owner(const Pipeline *pp, const char *name)
{
    for (int s = 0; s < pp->p; s++) {
        Owner o = { pp->first[s], pp->first[s + 1], s == 0, s == pp->p - 1,
                    pp->tr->cfg.model.tied };
        if (owner_keeps(name, &o))
            return s;
    }
    tensor_fatal("pipeline: no stage owns %s", name);
}

/* Every state tensor and buffer (the masters among them) of dst given the values of src's of
 * the same name: optimizers of one kind over overlapping parameters name their state alike. */
static void copy_state(Optim *dst, const Optim *src)
{
    char name[OPTIM_NAME_LEN];
    for (int i = 0; i < dst->n * dst->n_slots; i++) {
        Tensor *from = optim_find_state(src, optim_state_name(dst, i, name, sizeof name));
        if (!from)
            tensor_fatal("pipeline: no optimizer state %s to copy", name);
        memcpy(dst->state[i]->data, from->data, dst->state[i]->size * sizeof(float));
    }
    for (int i = 0; i < optim_buffer_count(dst); i++) {
        OptimBuffer *b = optim_buffer(dst, i), *from = optim_find_buffer(src, b->name);
        if (!from)
            tensor_fatal("pipeline: no optimizer buffer %s to copy", b->name);
        memcpy(b->data, from->data, optim_buffer_bytes(b));
    }
}

/* The trainer's optimizer narrowed to the stage's parameters: one of the same kind over them,
 * with their state, masters, decay and step count (a loaded trainer's carry on). */
static void narrow_optimizer(Pipeline *pp)
{
    Trainer *t = pp->tr;
    Optim *whole = t->optim;
    Owner o = owner_of(pp);
    Tensor **kept = malloc((size_t)whole->n * sizeof *kept);
    bool *decay = malloc((size_t)whole->n * sizeof *decay);
    if (!kept || !decay)
        tensor_fatal("out of memory for a pipeline");
    int n = 0;
    for (int i = 0; i < whole->n; i++)
        if (owner_keeps(whole->params[i]->name, &o)) {
            decay[n] = whole->decay[i];
            kept[n++] = whole->params[i];
        }
    Optim *part = trainer_make_optimizer(&t->cfg, kept, n);
    part->step = whole->step;
    for (int i = 0; i < n; i++)
        part->decay[i] = decay[i];
    if (whole->masters)
        optim_add_masters(part);
    copy_state(part, whole);
    free(kept);
    free(decay);
    optim_free(whole);
    t->optim = part;
}

Pipeline *pipe_new(const TrainerConfig *cfg, DistComm *comm, PipeSchedKind kind, int m,
                   const int *first)
{
    Pipeline *pp = pipe_new_on(comm, trainer_new(cfg), kind, m, first);
    pp->owns_trainer = true;
    return pp;
}

Pipeline *pipe_new_on(DistComm *comm, Trainer *t, PipeSchedKind kind, int m, const int *first)
{
    Pipeline *pp = calloc(1, sizeof *pp);
    if (!pp)
        tensor_fatal("out of memory for a pipeline");
    pp->tr = t;
    pp->comm = comm;
    pp->stage = comm->rank;
    pp->p = comm->size;
    pp->m = m;
    pp->first = malloc((size_t)(pp->p + 1) * sizeof *pp->first);
    pp->slots = calloc((size_t)m, sizeof *pp->slots);
    pp->pending = calloc((size_t)2 * m, sizeof *pp->pending);
    pp->events = calloc((size_t)2 * m, sizeof *pp->events);
    if (!pp->first || !pp->slots || !pp->pending || !pp->events)
        tensor_fatal("out of memory for a pipeline");
    memcpy(pp->first, first, (size_t)(pp->p + 1) * sizeof *first);
    Owner o = owner_of(pp);
    if (o.hi <= o.lo || first[pp->p] != t->cfg.model.n_layer)
        tensor_fatal("pipe_new: stage %d gets blocks [%d, %d) of %d", pp->stage, o.lo, o.hi,
                     t->cfg.model.n_layer);
    pp->async = kind == PIPE_PIPEDREAM;
    pp->replicas = 1;
    if (pp->async && (m < pp->p || (t->cfg.model.tied && pp->p > 1) ||
                      t->cfg.loss_scale.mode == LOSS_SCALE_DYNAMIC))
        tensor_fatal("pipe_new: pipedream needs m >= p (%d < %d?), an untied head and a static "
                     "loss scale", m, pp->p);
    int n_params;
    gpt_params(t->model, &n_params);
    if (!t->optim || t->optim->n != n_params)
        tensor_fatal("pipe_new_on: the trainer's optimizer is not over its whole model (LoRA?)");
    narrow_optimizer(pp);
    /* The stages' gradient sums and clipping read fp32 buffers: the gradients stay fp32. */
    optim_keep_fp32_grads(t->optim);
    pp->sched = pipe_schedule_new(kind, pp->p, m);
    GptPassConfig share = { .lo = o.lo, .hi = o.hi, .embed = o.first, .head = o.last,
                            .strategy = t->cfg.local.checkpoint };
    for (int k = 0; k < m; k++) {
        /* A tape per micro-batch in flight, counting into the trainer's FLOPs. */
        Tape *tape = tape_new_under(t->tape->policy);
        tape->flops = &t->flops;
        pp->slots[k].tape = tape;
        pp->slots[k].pass = gpt_pass_new(t->model, &share, tape);
    }
    pp->strategy = pipe_strategy(pp);
    pp->update = pipe_update_strategy(pp);
    for (int i = 0; i < t->optim->n; i++)
        pp->weight_bytes += tensor_bytes(t->optim->params[i]);
    return pp;
}

void pipe_free(Pipeline *pp)
{
    if (!pp)
        return;
    pipe_drain(pp);
    zero_free(pp->zero);
    for (int k = 0; k < pp->m; k++) {
        gpt_pass_free(pp->slots[k].pass);
        tape_free(pp->slots[k].tape);
    }
    if (pp->owns_trainer)
        trainer_free(pp->tr);
    pipe_schedule_free(&pp->sched);
    free(pp->first);
    free(pp->slots);
    free(pp->pending);
    free(pp->events);
    free(pp);
}

void pipe_share_weights(Pipeline *pp)
{
    int n;
    Tensor *const *params = gpt_params(pp->tr->model, &n);
    for (int i = 0; i < n && pp->p > 1; i++) {
        Tensor *p = params[i];
        int root = first_owner(pp, p->name);
        dist_broadcast(pp->comm, p->packed ? p->packed : (void *)p->data, tensor_bytes(p), root);
        dist_broadcast(pp->comm, &p->scale, sizeof p->scale, root);
    }
}

/* values (bytes) into dst on every rank, from the lowest rank that holds them (mine != NULL). */
static void from_holder(Pipeline *pp, void *dst, const void *mine, size_t bytes,
                        const char *name)
{
    double top = dist_max_double(pp->comm, mine ? (double)(pp->p - pp->stage) : 0.0);
    if (top == 0.0)
        tensor_fatal("pipeline: no stage holds %s", name);
    int root = pp->p - (int)top;
    if (root == pp->stage)
        memcpy(dst, mine, bytes);
    dist_broadcast(pp->comm, dst, bytes, root);
}

void pipe_give_back(Pipeline *pp)
{
    Trainer *t = pp->tr;
    pipe_drain(pp);
    zero_free(pp->zero);            /* the stage's optimizer whole on every replica */
    pp->zero = NULL;
    pipe_share_weights(pp);
    int n;
    Tensor *const *params = gpt_params(t->model, &n);
    Optim *part = t->optim, *whole = trainer_make_optimizer(&t->cfg, params, n);
    whole->step = part->step;
    if (part->masters)
        optim_add_masters(whole);
    char name[OPTIM_NAME_LEN];
    for (int i = 0; i < whole->n * whole->n_slots; i++) {
        Tensor *st = whole->state[i];
        Tensor *mine = optim_find_state(part, optim_state_name(whole, i, name, sizeof name));
        from_holder(pp, st->data, mine ? mine->data : NULL, st->size * sizeof(float), name);
    }
    for (int i = 0; i < optim_buffer_count(whole); i++) {
        OptimBuffer *b = optim_buffer(whole, i), *mine = optim_find_buffer(part, b->name);
        from_holder(pp, b->data, mine ? mine->data : NULL, optim_buffer_bytes(b), b->name);
    }
    for (int i = 0, j = 0; i < n; i++) {        /* part's parameters: whole's, in order */
        bool mine = j < part->n && part->params[j] == params[i];
        bool decay = mine && part->decay[j++];
        whole->decay[i] = dist_max_double(pp->comm, mine ? 1.0 + decay : 0.0) > 1.5;
    }
    optim_free(part);
    t->optim = whole;
    pipe_free(pp);
}

Trainer *pipe_trainer(Pipeline *pp) { return pp->tr; }
int pipe_stage(const Pipeline *pp) { return pp->stage; }
const PipeSchedule *pipe_schedule(const Pipeline *pp) { return &pp->sched; }

const PipeEvent *pipe_events(const Pipeline *pp, int *n)
{
    *n = pp->n_events;
    return pp->events;
}

uint64_t pipe_bytes_sent(const Pipeline *pp) { return pp->bytes_sent; }

/* The actions ------------------------------------------------------------------------------- */

int pipe_first_free_tag(const Pipeline *pp) { return 2 * pp->m + 3; }

/* Micro-batch n's forward (slot n % m; tokens and targets its rows). Activations travel as fp32
 * values (under a policy the values the act dtype rounded them to) followed by the scale they
 * were rounded with; the receiver packs them back, so its act bytes and values are those of one
 * tape. */
void pipe_forward(Pipeline *pp, long n, const int *tokens, const int *targets, int B, int T,
                    PipeEvent *ev)
{
    int k = (int)(n % pp->m);
    Slot *sl = &pp->slots[k];
    const PrecisionPolicy *policy = sl->tape->policy;
    int C = pp->tr->cfg.model.n_embd;
    size_t len = (size_t)B * T * C;
    sl->version = pp->updates;
    if (pp->stage > 0) {
        float *in = mem_alloc(MEM_TEMP, (len + 1) * sizeof *in);
        recv_polite(pp->comm, in, (len + 1) * sizeof *in, pp->stage - 1, tag_activation(k));
        ev->ready = pipe_now() - pp->t0;
        sl->x = tensor_new3(MEM_ACT, B, T, C);
        memcpy(sl->x->data, in, len * sizeof *in);
        if (policy && policy->act != DTYPE_F32)
            tensor_pack(sl->x, policy->act, in[len]);
        mem_free(in);
        sl->x->requires_grad = true;
    } else {
        ev->ready = pipe_now() - pp->t0;
    }
    double c0 = pipe_cpu_now();
    Tensor *out = gpt_pass_forward(sl->pass, tokens, targets, sl->x, B, T);
    if (pp->stage == pp->p - 1) {
        sl->loss = out->data[0];
        if (!pp->async)
            pp->loss_sum += sl->loss;
    } else {
        sl->y = out;
        sl->out = mem_alloc(MEM_TEMP, (len + 1) * sizeof *sl->out);
        memcpy(sl->out, tensor_unpack(sl->y), len * sizeof *sl->out);
        tensor_release(sl->y);
        sl->out[len] = sl->y->dtype == DTYPE_F32 ? 1.0f : sl->y->scale;
        sl->out_req = dist_isend(pp->comm, sl->out, (len + 1) * sizeof *sl->out, pp->stage + 1,
                                 tag_activation(k));
    }
    ev->cpu = pipe_cpu_now() - c0;
}

/* Micro-batch n's backward. pipedream: with the weights its forward used (swapped in from the
 * stash when an update has replaced them since), and its loss travels back with dx. */
void pipe_backward(Pipeline *pp, long n, int B, int T, PipeEvent *ev)
{
    int k = (int)(n % pp->m);
    Slot *sl = &pp->slots[k];
    size_t len = (size_t)B * T * pp->tr->cfg.model.n_embd, wire = len + pp->async;
    float *dy = NULL;
    if (pp->stage < pp->p - 1) {
        dy = mem_alloc(MEM_TEMP, wire * sizeof *dy);
        recv_polite(pp->comm, dy, wire * sizeof *dy, pp->stage + 1, tag_gradient(k));
        if (pp->async)
            sl->loss = dy[len];
    }
    ev->ready = pipe_now() - pp->t0;
    double c0 = pipe_cpu_now();
    if (sl->stash)
        pipe_stash_swap(pp, sl->stash);
    if (dy) {
        gpt_pass_backward(sl->pass, dy);
        mem_free(dy);
    } else {
        /* (1/(D m)) S: the seed one process accumulating the D m micro-batches of D replicas
         * gives each (optim/step.c); pipedream's update is on this micro-batch alone: S. */
        float S = loss_scale_value(&pp->tr->scaler);
        float seed = pp->async ? S : S * (1.0f / (float)(pp->replicas * pp->m));
        gpt_pass_backward(sl->pass, &seed);
    }
    tape_reset(sl->tape);
    if (sl->stash) {
        pipe_stash_swap(pp, sl->stash);
        pipe_stash_drop(pp, sl);
    }
    if (pp->async) {
        long stale = pp->updates - sl->version;
        pp->stale_sum += stale;
        pp->stale_max = stale > pp->stale_max ? stale : pp->stale_max;
        pp->loss_sum += sl->loss;
        pp->n_losses++;
    }
    if (pp->stage > 0) {
        if (pp->n_pending == 2 * pp->m)
            pipe_reap_pending(pp, true);
        Pending *pd = &pp->pending[pp->n_pending++];
        pd->buf = mem_alloc(MEM_TEMP, wire * sizeof *pd->buf);
        memcpy(pd->buf, tensor_grad(sl->x), len * sizeof *pd->buf);
        if (pp->async)
            pd->buf[len] = sl->loss;
        pd->req = dist_isend(pp->comm, pd->buf, wire * sizeof *pd->buf, pp->stage - 1,
                             tag_gradient(k));
        tensor_free(sl->x);
    }
    sl->x = sl->y = NULL;
    ev->cpu = pipe_cpu_now() - c0;
    /* The next stage has received y (its dy came back), so this completes at once. */
    if (sl->out) {
        wait_polite(&sl->out_req);
        mem_free(sl->out);
        sl->out = NULL;
    }
}

/* The dx sends that have completed freed (all of them: waited for). */
void pipe_reap_pending(Pipeline *pp, bool all)
{
    int kept = 0;
    for (int i = 0; i < pp->n_pending; i++) {
        Pending *pd = &pp->pending[i];
        if (all)
            wait_polite(&pd->req);
        if (all || dist_test(&pd->req))
            mem_free(pd->buf);
        else
            pp->pending[kept++] = *pd;
    }
    pp->n_pending = kept;
}

/* The step ---------------------------------------------------------------------------------- */

/* A tied wte: stage 0 holds the embedding's term E, stage p-1 the head's H; both become H + E
 * (commutative, so the same bits on both). */
static void add_tied_halves(Pipeline *pp)
{
    if (!pp->tr->cfg.model.tied || pp->p == 1 || (pp->stage != 0 && pp->stage != pp->p - 1))
        return;
    Tensor *wte = pp->tr->model->wte;
    float *g = tensor_grad(wte);
    float *other = mem_alloc(MEM_TEMP, wte->size * sizeof *other);
    int peer = pp->stage == 0 ? pp->p - 1 : 0;
    DistRequest s = dist_isend(pp->comm, g, wte->size * sizeof *g, peer, tag_tied_halves(pp));
    recv_polite(pp->comm, other, wte->size * sizeof *other, peer, tag_tied_halves(pp));
    wait_polite(&s);
    for (size_t i = 0; i < wte->size; i++)
        g[i] = pp->stage == 0 ? other[i] + g[i] : g[i] + other[i];
    mem_free(other);
}

double pipe_accumulate(Pipeline *pp, const int *tokens, const int *targets, int B, int T)
{
    if (pp->async)
        tensor_fatal("pipe_accumulate: pipedream updates inside its steps (pipe_step)");
    uint64_t sent0 = pp->comm->bytes_sent, dp0 = pp->dp ? pp->dp->bytes_sent : 0;
    /* The clocks start together: a collective, then each rank's monotonic clock (one clock on
     * one machine; the gathered log subtracts the earliest start anyway). */
    dist_all_ok(pp->comm, true);
    pp->t0 = pipe_now();
    pp->loss_sum = 0.0;
    pp->n_pending = 0;
    const PipeAction *acts = pipe_stage_actions(&pp->sched, pp->stage);
    size_t rows = (size_t)B * T;
    for (int i = 0; i < pp->sched.n_actions; i++) {
        PipeEvent *ev = &pp->events[i];
        int k = acts[i].mb;
        *ev = (PipeEvent){ .stage = pp->stage, .mb = k, .kind = acts[i].kind,
                           .start = pipe_now() - pp->t0 };
        if (acts[i].kind == PIPE_F)
            pipe_forward(pp, k, tokens + k * rows, targets + k * rows, B, T, ev);
        else
            pipe_backward(pp, k, B, T, ev);
        ev->end = pipe_now() - pp->t0;
    }
    pp->n_events = pp->sched.n_actions;
    pipe_reap_pending(pp, true);
    add_tied_halves(pp);
    pp->bytes_sent = pp->comm->bytes_sent - sent0;
    double loss = pp->stage == pp->p - 1 ? pp->loss_sum / pp->m : 0.0;
    if (pp->dp) {
        /* The replicas' sums in replica order, as DDP adds its ranks' (dist/ddp.h); every
         * stage of every replica then holds the gradients of the whole global batch. */
        Optim *o = pp->tr->optim;
        for (int i = 0; !pp->zero && i < o->n; i++)     /* ZeRO reduce-scatters in the tail */
            dist_allreduce_sum(pp->dp, tensor_grad(o->params[i]), o->params[i]->size);
        double sum = dist_sum_double(pp->dp, pp->stage == pp->p - 1 ? pp->loss_sum : 0.0);
        loss = sum / (pp->replicas * pp->m);
        pp->bytes_sent = pp->comm->bytes_sent - sent0 + pp->dp->bytes_sent - dp0;
    }
    dist_broadcast(pp->comm, &loss, sizeof loss, pp->p - 1);
    return loss;
}

void pipe_set_replicas(Pipeline *pp, DistComm *dp)
{
    if (pp->async && dp && dp->size > 1)
        tensor_fatal("pipe_set_replicas: pipedream has no data-parallel replicas");
    pp->dp = dp && dp->size > 1 ? dp : NULL;
    pp->replicas = pp->dp ? dp->size : 1;
}

void pipe_set_zero(Pipeline *pp, int level)
{
    if (!pp->dp || level != 1 || pp->zero)
        tensor_fatal("pipe_set_zero: level %d over %d replicas (level 1, once, after "
                     "pipe_set_replicas with 2 or more)", level, pp->replicas);
    pp->zero = zero_new(pp->dp, pp->tr, level);
    pp->strategy = pipe_strategy(pp);
}

/* The pipeline as a strategy of optim/step.h: it runs the micro-batches in its schedule's
 * order; the norm adds each stage's sum of squares over the parameters it owns (a tied wte
 * counted on stage 0 only), in rank order. pipedream's runs a window and has no collective:
 * each stage's update is its own. */
static double on_micro_batches(Trainer *t, const int *tokens, const int *targets, int B, int T,
                               int K, void *ctx)
{
    (void)t;
    Pipeline *pp = ctx;
    if (K != pp->m)
        tensor_fatal("pipe_step: %d micro-batches for a schedule of %d", K, pp->m);
    if (pp->async) {
        pp->tok_B = B;
        pp->tok_T = T;
        return pipe_window(pp, tokens, targets, B, T);
    }
    return pipe_accumulate(pp, tokens, targets, B, T);
}

/* With ZeRO inside the data groups (pipe_set_zero) each event first runs ZeRO's callback over
 * the stage's group, then the pipeline's over the stages: the group's sum, then the stages'. */
static const StepStrategy *inner(const Pipeline *pp)
{
    return pp->zero ? zero_step_strategy(pp->zero) : NULL;
}

/* ZeRO's collectives over the group, their bytes counted with the step's. */
static void on_grads_done(void *ctx)
{
    Pipeline *pp = ctx;
    uint64_t sent0 = pp->dp->bytes_sent;
    inner(pp)->grads_done(inner(pp)->ctx);
    pp->bytes_sent += pp->dp->bytes_sent - sent0;
}

static void on_updated(void *ctx)
{
    Pipeline *pp = ctx;
    uint64_t sent0 = pp->dp->bytes_sent;
    inner(pp)->updated(inner(pp)->ctx);
    pp->bytes_sent += pp->dp->bytes_sent - sent0;
}

static void on_released(void *ctx)
{
    Pipeline *pp = ctx;
    if (inner(pp))
        inner(pp)->released(inner(pp)->ctx);
    pp->updates++;
}

static double on_sum_squares(double x, void *ctx)
{
    Pipeline *pp = ctx;
    if (inner(pp))
        x = inner(pp)->sum_squares(x, inner(pp)->ctx);
    return dist_sum_double(pp->comm, x);
}

static bool on_all_ok(bool ok, void *ctx)
{
    Pipeline *pp = ctx;
    if (inner(pp))
        ok = inner(pp)->all_ok(ok, inner(pp)->ctx);
    return dist_all_ok(pp->comm, ok);
}

/* A tied wte is counted on stage 0 only (under ZeRO the optimizer's tensor is a shard of it,
 * with its name). */
static bool on_counted(const Tensor *p, void *ctx)
{
    Pipeline *pp = ctx;
    bool second_wte = pp->tr->cfg.model.tied && pp->stage == pp->p - 1 && pp->p > 1;
    return !(second_wte && strcmp(p->name, pp->tr->model->wte->name) == 0);
}

static StepStrategy pipe_strategy(Pipeline *pp)
{
    if (pp->async)
        return (StepStrategy){ .name = "pipedream", .ctx = pp, .micro_batches = on_micro_batches,
                               .released = on_released };
    StepStrategy s = { .name = "pipeline", .ctx = pp, .micro_batches = on_micro_batches,
                       .sum_squares = on_sum_squares, .all_ok = on_all_ok, .counted = on_counted,
                       .released = on_released };
    if (pp->zero) {
        s.name = "pipeline, zero-1 in its data groups";
        s.grads_done = on_grads_done;
        s.updated = on_updated;
    }
    return s;
}

static StepStrategy pipe_update_strategy(Pipeline *pp)
{
    return (StepStrategy){ .name = "pipedream update", .ctx = pp, .released = on_released };
}

TrainStepResult pipe_step(Pipeline *pp, const int *tokens, const int *targets, int B, int T,
                          double lr)
{
    pp->lr = lr;
    return step_run(pp->tr, &pp->strategy, tokens, targets, B, T, pp->m, lr);
}

/* PipeDream's asynchronous 1F1B with weight stashing (dist/pipeline.h, docs/pipeline.md): a
 * step as a window of one stream of micro-batches, an update after every backward, the weights
 * each micro-batch in flight read kept until its backward. */
#include <stdlib.h>
#include <string.h>

#include "autograd/mem.h"
#include "dist/pipeline_internal.h"

/* Weight stashing (pipedream) ---------------------------------------------------------------- */

static void stash_count(Pipeline *pp, long delta)
{
    pp->stash_bytes += (size_t)delta;
    if (pp->stash_bytes > pp->stash_peak)
        pp->stash_peak = pp->stash_bytes;
}

/* A parameter's stored bytes: its packed codes, or its fp32 values. */
static unsigned char *storage(Tensor *p)
{
    if (p->dtype != DTYPE_F32) {
        if (p->borrows_data)
            tensor_fatal("pipedream: %s reads borrowed master weights; cannot stash it", p->name);
        tensor_release(p);          /* no unpacked copy of the old values may survive a swap */
        return p->packed;
    }
    return (unsigned char *)p->data;
}

/* Before an update: the micro-batches in flight whose forward read the current weights keep a
 * copy of them (one, shared). */
void pipe_stash_before_update(Pipeline *pp)
{
    Stash *st = NULL;
    Optim *o = pp->tr->optim;
    for (long n = pp->n_bwd; n < pp->n_fwd; n++) {
        Slot *sl = &pp->slots[n % pp->m];
        if (sl->stash)
            continue;
        if (!st) {
            st = calloc(1, sizeof *st);
            if (!st || !(st->scales = malloc((size_t)o->n * sizeof *st->scales)))
                tensor_fatal("out of memory for a weight stash");
            st->bytes = mem_alloc(MEM_PARAM, pp->weight_bytes);
            stash_count(pp, (long)pp->weight_bytes);
            size_t at = 0;
            for (int i = 0; i < o->n; i++) {
                Tensor *p = o->params[i];
                memcpy(st->bytes + at, storage(p), tensor_bytes(p));
                st->scales[i] = p->scale;
                at += tensor_bytes(p);
            }
        }
        st->refs++;
        sl->stash = st;
    }
}

/* The stash's weights and the stage's exchange places, byte for byte (twice: back again). */
void pipe_stash_swap(Pipeline *pp, Stash *st)
{
    Optim *o = pp->tr->optim;
    size_t at = 0;
    for (int i = 0; i < o->n; i++) {
        Tensor *p = o->params[i];
        unsigned char *a = storage(p), *b = st->bytes + at;
        for (size_t j = 0, n = tensor_bytes(p); j < n; j++) {
            unsigned char x = a[j];
            a[j] = b[j];
            b[j] = x;
        }
        float sc = p->scale;
        p->scale = st->scales[i];
        st->scales[i] = sc;
        at += tensor_bytes(p);
    }
}

void pipe_stash_drop(Pipeline *pp, Slot *sl)
{
    Stash *st = sl->stash;
    sl->stash = NULL;
    if (!st || --st->refs > 0)
        return;
    mem_free(st->bytes);
    stash_count(pp, -(long)pp->weight_bytes);
    free(st->scales);
    free(st);
}

/* pipedream: an update inside a step, the one tail (optim/step.h) on this stage alone. The
 * trainer counts steps (global batches: --steps, the schedule of the learning rate), which the
 * tail leaves to step_run; the optimizer's own count (Adam's bias correction) is of updates. */
static void update_inside(Pipeline *pp)
{
    pipe_stash_before_update(pp);
    TrainStepResult r = { 0 };
    step_finish(pp->tr, &pp->update, pp->lr, &r);
}

/* One step of pipedream: the window of dist/pipeline_schedule.h, an update after each backward
 * but the last, which is step_run's tail's (the copies it needs are made here). */
double pipe_window(Pipeline *pp, const int *tokens, const int *targets, int B, int T)
{
    uint64_t sent0 = pp->comm->bytes_sent;
    pp->t0 = pipe_now();         /* no collective: a step starts when this stage is ready */
    pp->loss_sum = 0.0;
    pp->n_losses = 0;
    pp->n_events = 0;
    int w = pp->p - 1 - pp->stage;
    size_t rows = (size_t)B * T;
    for (int i = 0; i < pp->m; i++) {
        PipeEvent *ev = &pp->events[pp->n_events++];
        *ev = (PipeEvent){ .stage = pp->stage, .mb = (int)pp->n_fwd, .kind = PIPE_F,
                           .start = pipe_now() - pp->t0 };
        pipe_forward(pp, pp->n_fwd++, tokens + i * rows, targets + i * rows, B, T, ev);
        ev->end = pipe_now() - pp->t0;
        if (pp->n_fwd - 1 < w)
            continue;               /* the very first step's warm-up */
        ev = &pp->events[pp->n_events++];
        *ev = (PipeEvent){ .stage = pp->stage, .mb = (int)pp->n_bwd, .kind = PIPE_B,
                           .start = pipe_now() - pp->t0 };
        pipe_backward(pp, pp->n_bwd++, B, T, ev);
        /* The update is work, not bubble: a backward's event ends after it (the step's last
         * update, step_run's, comes after every event, as a synchronous step's does). */
        if (i + 1 < pp->m) {
            double c0 = pipe_cpu_now();
            update_inside(pp);
            ev->cpu += pipe_cpu_now() - c0;
        }
        ev->end = pipe_now() - pp->t0;
    }
    pipe_stash_before_update(pp);        /* for step_run's update, next */
    pipe_reap_pending(pp, false);
    pp->bytes_sent = pp->comm->bytes_sent - sent0;
    return pp->loss_sum / pp->n_losses;
}

void pipe_drain(Pipeline *pp)
{
    if (!pp->async)
        return;
    while (pp->n_bwd < pp->n_fwd) {
        PipeEvent ev = { 0 };
        pipe_backward(pp, pp->n_bwd++, pp->tok_B, pp->tok_T, &ev);
        update_inside(pp);
    }
    pipe_reap_pending(pp, true);
}

size_t pipe_stash_peak(const Pipeline *pp) { return pp->stash_peak; }
size_t pipe_stage_weight_bytes(const Pipeline *pp) { return pp->weight_bytes; }
long pipe_updates(const Pipeline *pp) { return pp->updates; }

double pipe_staleness(const Pipeline *pp, int *max)
{
    if (max)
        *max = (int)pp->stale_max;
    return pp->n_bwd > 0 ? (double)pp->stale_sum / (double)pp->n_bwd : 0.0;
}

/* The pipeline's log (dist/pipeline.h): every rank's events on rank 0, and the bubbles. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist/pipeline_internal.h"

PipeEvent *pipe_gather_events(Pipeline *pp, int *n)
{
    /* Each rank's absolute start, so rank 0 can put every event on one time axis, and its
     * count (pipedream's first step has fewer backwards on the first stages). */
    double head[2] = { pp->t0, (double)pp->n_events };
    if (pp->stage != 0) {
        dist_send(pp->comm, head, sizeof head, 0, tag_log_clock(pp));
        dist_send(pp->comm, pp->events, (size_t)pp->n_events * sizeof(PipeEvent), 0,
                  tag_log_events(pp));
        *n = 0;
        return NULL;
    }
    int per = 2 * pp->m, total = 0;
    PipeEvent *all = malloc((size_t)per * pp->p * sizeof *all);
    double *t0 = malloc((size_t)pp->p * sizeof *t0);
    int *count = malloc((size_t)pp->p * sizeof *count);
    if (!all || !t0 || !count)
        tensor_fatal("out of memory for a pipeline log");
    for (int s = 0; s < pp->p; s++) {
        if (s > 0)
            dist_recv(pp->comm, head, sizeof head, s, tag_log_clock(pp));
        else
            head[1] = pp->n_events;
        t0[s] = s > 0 ? head[0] : pp->t0;
        count[s] = (int)head[1];
        if (s > 0)
            dist_recv(pp->comm, all + total, (size_t)count[s] * sizeof *all, s,
                      tag_log_events(pp));
        else
            memcpy(all, pp->events, (size_t)count[0] * sizeof *all);
        total += count[s];
    }
    double base = t0[0];
    for (int s = 1; s < pp->p; s++)
        base = t0[s] < base ? t0[s] : base;
    for (int s = 0, at = 0; s < pp->p; at += count[s++]) {
        for (int i = 0; i < count[s]; i++) {
            PipeEvent *e = &all[at + i];
            double shift = t0[s] - base;
            e->start += shift;
            e->ready += shift;
            e->end += shift;
        }
    }
    free(t0);
    free(count);
    *n = total;
    return all;
}

double pipe_bubble(const PipeEvent *ev, int n, int p, double *bubble)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        lo = ev[i].start < lo ? ev[i].start : lo;
        hi = ev[i].end > hi ? ev[i].end : hi;
    }
    double span = hi - lo;
    for (int s = 0; s < p; s++) {
        double busy = 0.0;
        for (int i = 0; i < n; i++)
            if (ev[i].stage == s)
                busy += ev[i].end - ev[i].ready;
        bubble[s] = span > 0.0 ? 1.0 - busy / span : 0.0;
    }
    return span;
}

double pipe_bubble_replayed(const PipeSchedule *s, const PipeEvent *ev, int n)
{
    int p = s->p;
    double *f = calloc((size_t)p * 5, sizeof *f), *b = f + p, *busy = f + 2 * p;
    double *nf = f + 3 * p, *nb = f + 4 * p;
    if (!f)
        tensor_fatal("out of memory replaying a schedule");
    for (int i = 0; i < n; i++) {
        (ev[i].kind == PIPE_F ? f : b)[ev[i].stage] += ev[i].cpu;
        (ev[i].kind == PIPE_F ? nf : nb)[ev[i].stage] += 1.0;
    }
    for (int st = 0; st < p; st++) {
        f[st] /= nf[st] > 0.0 ? nf[st] : 1.0;
        b[st] /= nb[st] > 0.0 ? nb[st] : 1.0;
    }
    double mean = 0.0;
    if (s->kind == PIPE_PIPEDREAM) {
        mean = pipe_simulate_steady(p, s->m, f, b, NULL);
    } else {
        double span = pipe_simulate(s, f, b, busy);
        for (int st = 0; st < p; st++)
            mean += (1.0 - busy[st] / span) / p;
    }
    free(f);
    return mean;
}

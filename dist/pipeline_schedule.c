#include "dist/pipeline_schedule.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tensor.h"

const char *const PIPE_SCHED_NAMES[] = { "naive", "gpipe", "1f1b", "pipedream", NULL };

bool pipe_sched_parse(const char *name, PipeSchedKind *out)
{
    for (int k = 0; k < PIPE_NKINDS; k++) {
        if (strcmp(name, PIPE_SCHED_NAMES[k]) == 0) {
            *out = (PipeSchedKind)k;
            return true;
        }
    }
    return false;
}

static void push(PipeAction **at, char kind, int mb)
{
    **at = (PipeAction){ kind, mb };
    (*at)++;
}

PipeSchedule pipe_schedule_new(PipeSchedKind kind, int p, int m)
{
    if (p < 1 || m < 1 || kind < 0 || kind >= PIPE_NKINDS || (kind == PIPE_PIPEDREAM && m < p))
        tensor_fatal("pipe_schedule_new: kind %d, %d stages, %d micro-batches", (int)kind, p, m);
    PipeSchedule s = { kind, p, m, 2 * m, calloc((size_t)p * 2 * m, sizeof(PipeAction)) };
    if (!s.actions)
        tensor_fatal("out of memory for a schedule of %d x %d actions", p, 2 * m);
    for (int st = 0; st < p; st++) {
        PipeAction *at = s.actions + (size_t)st * 2 * m;
        if (kind == PIPE_NAIVE) {
            for (int k = 0; k < m; k++) {
                push(&at, PIPE_F, k);
                push(&at, PIPE_B, k);
            }
        } else if (kind == PIPE_PIPEDREAM) {
            /* No warm-up and no drain: the w in flight come from the previous step and stay
             * for the next. */
            for (int k = 0; k < m; k++) {
                push(&at, PIPE_F, k);
                push(&at, PIPE_B, k - (p - 1 - st));
            }
        } else if (kind == PIPE_GPIPE) {
            for (int k = 0; k < m; k++)
                push(&at, PIPE_F, k);
            for (int k = 0; k < m; k++)
                push(&at, PIPE_B, k);
        } else {
            /* Warm-up fills the pipe below this stage; then each forward is followed by the
             * backward of the oldest micro-batch in flight; the drain empties it. */
            int warm = p - 1 - st < m ? p - 1 - st : m;
            int f = 0, b = 0;
            while (f < warm)
                push(&at, PIPE_F, f++);
            while (f < m) {
                push(&at, PIPE_F, f++);
                push(&at, PIPE_B, b++);
            }
            while (b < m)
                push(&at, PIPE_B, b++);
        }
    }
    return s;
}

void pipe_schedule_free(PipeSchedule *s)
{
    free(s->actions);
    s->actions = NULL;
}

const PipeAction *pipe_stage_actions(const PipeSchedule *s, int stage)
{
    return s->actions + (size_t)stage * s->n_actions;
}

const char *pipe_stage_string(const PipeSchedule *s, int stage, char *buf, size_t len)
{
    const PipeAction *a = pipe_stage_actions(s, stage);
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->n_actions && used < len; i++) {
        int n = snprintf(buf + used, len - used, "%s%c%d", i ? " " : "", a[i].kind, a[i].mb);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return buf;
}

int pipe_max_in_flight(const PipeSchedule *s, int stage)
{
    const PipeAction *a = pipe_stage_actions(s, stage);
    int now = 0, most = 0;
    for (int i = 0; i < s->n_actions; i++)      /* the previous step's, still in flight */
        now += a[i].mb < 0;
    most = now;
    for (int i = 0; i < s->n_actions; i++) {
        now += a[i].kind == PIPE_F ? 1 : -1;
        if (now > most)
            most = now;
    }
    return most;
}

/* Finish time of an action, or -1 while it has not run; micro-batches -p .. m-1 (pipedream's
 * negative ones are the previous step's). */
static double *finish(double *done, int p, int m, int stage, char kind, int mb)
{
    return &done[((size_t)stage * 2 + (kind == PIPE_B)) * (m + p) + mb + p];
}

double pipe_simulate(const PipeSchedule *s, const double *f, const double *b, double *busy)
{
    int p = s->p, m = s->m;
    double *done = malloc((size_t)p * 2 * (m + p) * sizeof *done);
    double *clock = calloc((size_t)p, sizeof *clock);
    int *next = calloc((size_t)p, sizeof *next);
    if (!done || !clock || !next)
        tensor_fatal("out of memory simulating a schedule");
    for (size_t i = 0; i < (size_t)p * 2 * (m + p); i++)
        done[i] = -1.0;
    /* The previous step's backwards that this window does not run are done before it starts. */
    for (int st = 0; st < p; st++) {
        int first_b = 0;
        for (int i = 0; i < s->n_actions; i++) {
            PipeAction a = pipe_stage_actions(s, st)[i];
            if (a.kind == PIPE_B && a.mb < first_b)
                first_b = a.mb;
        }
        for (int mb = -p; mb < first_b; mb++)
            *finish(done, p, m, st, PIPE_B, mb) = 0.0;
    }
    if (busy)
        memset(busy, 0, (size_t)p * sizeof *busy);
    int left = p * s->n_actions;
    while (left > 0) {
        bool progress = false;
        for (int st = 0; st < p; st++) {
            if (next[st] == s->n_actions)
                continue;
            PipeAction a = pipe_stage_actions(s, st)[next[st]];
            double ready;
            if (a.kind == PIPE_F)
                ready = st == 0 ? 0.0 : *finish(done, p, m, st - 1, PIPE_F, a.mb);
            else
                ready = st == p - 1 ? *finish(done, p, m, st, PIPE_F, a.mb)
                                    : *finish(done, p, m, st + 1, PIPE_B, a.mb);
            if (ready < 0.0)
                continue;
            double dur = a.kind == PIPE_F ? (f ? f[st] : 1.0) : (b ? b[st] : 2.0);
            double start = ready > clock[st] ? ready : clock[st];
            clock[st] = start + dur;
            *finish(done, p, m, st, a.kind, a.mb) = clock[st];
            if (busy)
                busy[st] += dur;
            next[st]++;
            left--;
            progress = true;
        }
        if (!progress)
            tensor_fatal("pipe_simulate: the %s schedule deadlocks", PIPE_SCHED_NAMES[s->kind]);
    }
    double span = 0.0;
    for (int st = 0; st < p; st++)
        span = clock[st] > span ? clock[st] : span;
    free(done);
    free(clock);
    free(next);
    return span;
}

double pipe_simulate_steady(int p, int m, const double *f, const double *b, double *busy)
{
    /* A stream of W windows is 1F1B's order over W m micro-batches (warm-up once, drain once);
     * one window more adds the steady state's span of one window. */
    enum { W = 8 };
    PipeSchedule a = pipe_schedule_new(PIPE_1F1B, p, W * m);
    PipeSchedule c = pipe_schedule_new(PIPE_1F1B, p, (W + 1) * m);
    double span = pipe_simulate(&c, f, b, NULL) - pipe_simulate(&a, f, b, NULL), mean = 0.0;
    pipe_schedule_free(&a);
    pipe_schedule_free(&c);
    for (int st = 0; st < p; st++) {
        double work = m * ((f ? f[st] : 1.0) + (b ? b[st] : 2.0));
        if (busy)
            busy[st] = work;
        mean += (1.0 - work / span) / p;
    }
    return mean;
}

double pipe_bubble_formula(PipeSchedKind kind, int p, int m)
{
    if (kind == PIPE_PIPEDREAM)
        return 0.0;
    if (kind == PIPE_NAIVE)
        return (double)(p - 1) / p;
    return (double)(p - 1) / (m + p - 1);
}

bool pipe_split_parse(const char *text, int n_layer, int p, int *first, char *err, size_t len)
{
    if (p < 1) {
        snprintf(err, len, "%d stages: need at least 1", p);
        return false;
    }
    if (!text) {
        if (n_layer % p != 0) {
            snprintf(err, len,
                     "%d ranks do not divide the model's %d blocks evenly: give --stages, %d "
                     "block counts (each >= 1) summing to %d",
                     p, n_layer, p, n_layer);
            return false;
        }
        for (int s = 0; s <= p; s++)
            first[s] = s * (n_layer / p);
        return true;
    }
    const char *at = text;
    first[0] = 0;
    for (int s = 0; s < p; s++) {
        char *end;
        errno = 0;
        long n = strtol(at, &end, 10);
        if (end == at || errno || n < 1 || n > n_layer) {
            snprintf(err, len, "--stages '%s': entry %d is not a block count in 1..%d", text,
                     s + 1, n_layer);
            return false;
        }
        first[s + 1] = first[s] + (int)n;
        at = end;
        if (s + 1 < p && *at != ',') {
            snprintf(err, len, "--stages '%s' has %d entries for %d ranks", text, s + 1, p);
            return false;
        }
        if (s + 1 < p)
            at++;
    }
    if (*at != '\0') {
        snprintf(err, len, "--stages '%s' has more entries than the %d ranks", text, p);
        return false;
    }
    if (first[p] != n_layer) {
        snprintf(err, len, "--stages '%s' counts %d blocks; the model has %d", text, first[p],
                 n_layer);
        return false;
    }
    return true;
}

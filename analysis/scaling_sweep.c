/* The runs of a scaling-law study: the plan, and the training shared over processes
 * (scaling_sweep.h). */
#include "analysis/scaling_sweep.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autograd/outfile.h"

/* From 768 to 112k parameters (every one counted), about 1.5x to 2x apart: the smallest ones
 * are the left arms of the smallest budgets' valleys (D / N of thousands of characters). */
static const ScalingSize SIZES[SCALING_MAX_SIZES] = {
    { 1, 4, 1 }, { 1, 6, 1 }, { 1, 8, 1 }, { 1, 12, 2 }, { 1, 16, 2 }, { 2, 16, 2 },
    { 2, 24, 3 }, { 3, 24, 3 }, { 3, 32, 4 }, { 4, 40, 5 }, { 4, 48, 6 },
};
enum { N_SIZES_QUICK = 8 };
/* Four budgets a decade, 1e10 to 3.2e11 (1.5 decades); quick 1e10 to 5.6e10 (0.75). Branches
 * make a budget between two others cheap: a cooldown of a fifth of the run per size. */
static const double BUDGETS_FULL[] = { 1e10, 1.78e10, 3.16e10, 5.62e10, 1e11, 1.78e11, 3.16e11 };
static const double BUDGETS_QUICK[] = { 1e10, 1.78e10, 3.16e10, 5.62e10 };

/* The steps of budget C for a model counted as N; 0 when the pair is outside the limits. */
static long steps_if_kept(const ScalingSweepConfig *o, double C, double N, double train_len)
{
    long steps = scaling_steps_for(C, N, &o->train);
    double D = (double)steps * o->train.batch * o->train.seq;
    if (steps < o->min_steps || D / train_len > o->max_epochs || D / N < o->min_tpp ||
        D / N > o->max_tpp)
        return 0;
    return steps;
}

/* One size's targets: every budget's D by every parameter (with a branch), then by Kaplan's
 * count (the trunk alone). */
static void plan_size(ScalingSweep *sw, int s, double train_len)
{
    ScalingTarget kaplan[SCALING_MAX_TARGETS];
    int n_kaplan = 0;
    for (int b = 0; b < sw->nb; b++) {
        long sa = steps_if_kept(&sw->cfg, sw->budgets[b], sw->N_all[s], train_len);
        long sn = steps_if_kept(&sw->cfg, sw->budgets[b], sw->N_nonemb[s], train_len);
        if (sa)
            sw->targets[s][sw->n_targets[s]++] = (ScalingTarget){ sw->budgets[b],
                                                                  SCALING_COUNT_ALL, sa, true };
        if (sn)
            kaplan[n_kaplan++] = (ScalingTarget){ sw->budgets[b], SCALING_COUNT_NONEMB, sn,
                                                  false };
    }
    /* Kaplan's count makes D longer (N is smaller), so these points can run a trunk past its
     * last cooldown point: without them the Kaplan-style profiles lose their left arms (the
     * analysis counts those steps apart from the branches' cost) */
    for (int k = 0; k < n_kaplan && sw->n_targets[s] > 0; k++)
        sw->targets[s][sw->n_targets[s]++] = kaplan[k];
    for (int k = 0; k < sw->n_targets[s]; k++)
        if (sw->targets[s][k].steps > sw->trunk_steps[s])
            sw->trunk_steps[s] = sw->targets[s][k].steps;
}

/* The cosine references: the middle budget, `compare` of its sizes spread over the profile
 * (its ends and the middle). */
static void plan_references(ScalingSweep *sw)
{
    int in_mid[SCALING_MAX_SIZES], n_mid = 0, compare = sw->cfg.compare;
    sw->mid = sw->nb / 2;
    for (int s = 0; s < sw->ns; s++)
        for (int k = 0; k < sw->n_targets[s]; k++)
            if (sw->targets[s][k].budget == sw->budgets[sw->mid] && sw->targets[s][k].branch)
                in_mid[n_mid++] = s;
    for (int r = 0; r < compare && n_mid > 0 && sw->n_ref < SCALING_MAX_REFS; r++) {
        int pick = compare == 1 ? n_mid / 2
                                : (int)lround((double)r * (n_mid - 1) / (compare - 1));
        if (sw->n_ref == 0 || sw->ref_size[sw->n_ref - 1] != in_mid[pick])
            sw->ref_size[sw->n_ref++] = in_mid[pick];
    }
}

void scaling_sweep_plan(const ScalingSweepConfig *cfg, int vocab, double train_len,
                        ScalingSweep *sw)
{
    memset(sw, 0, sizeof *sw);
    sw->cfg = *cfg;
    sw->sizes = SIZES;
    sw->ns = cfg->quick ? N_SIZES_QUICK : SCALING_MAX_SIZES;
    sw->budgets = cfg->quick ? BUDGETS_QUICK : BUDGETS_FULL;
    sw->nb = cfg->quick ? (int)(sizeof BUDGETS_QUICK / sizeof *BUDGETS_QUICK)
                        : (int)(sizeof BUDGETS_FULL / sizeof *BUDGETS_FULL);
    for (int s = 0; s < sw->ns; s++) {
        sw->N_nonemb[s] = scaling_non_embedding_count(SIZES[s].layers, SIZES[s].width);
        sw->N_all[s] = sw->N_nonemb[s] + (double)(vocab + cfg->train.seq) * SIZES[s].width;
        plan_size(sw, s, train_len);
    }
    plan_references(sw);
    /* per seed, each size's trunk with its branches, then the cosine references */
    for (int seed = 0; seed < cfg->seeds; seed++) {
        for (int s = 0; s < sw->ns; s++)
            if (sw->n_targets[s] && sw->n_items < SCALING_MAX_ITEMS)
                sw->items[sw->n_items++] = (ScalingItem){ seed, s, -1,
                                                          sw->trunk_steps[s] * sw->N_all[s] };
        for (int r = 0; r < sw->n_ref && sw->n_items < SCALING_MAX_ITEMS; r++)
            for (int k = 0; k < sw->n_targets[sw->ref_size[r]]; k++) {
                const ScalingTarget *t = &sw->targets[sw->ref_size[r]][k];
                if (t->budget == sw->budgets[sw->mid] && t->branch)
                    sw->items[sw->n_items++] = (ScalingItem){ seed, sw->ref_size[r], k,
                                                              sw->budgets[sw->mid] };
            }
    }
}

/* One item into pts (room for its 2 points a target); its count, or -1 with err. */
static int run_item(const Dataset *ds, const ScalingSweep *sw, const ScalingItem *it,
                    const char *snap, const ScalingSweepWatch *w, ScalingPoint *pts, char *err,
                    size_t errlen)
{
    const ScalingSize *sz = &sw->sizes[it->size];
    ScalingTrainConfig cfg = sw->cfg.train;
    cfg.seed = sw->cfg.train.seed + (uint64_t)it->seed;
    const ScalingTarget *tg = sw->targets[it->size];
    int nt = sw->n_targets[it->size], got = 1;
    char label[96];
    if (it->ref < 0) {
        snprintf(label, sizeof label, "seed %llu L%d C%d", (unsigned long long)cfg.seed,
                 sz->layers, sz->width);
        got = scaling_train_branches(ds, &cfg, sz->layers, sz->width, sz->heads, tg, nt,
                                     sw->cfg.cooldown, snap, w->watch, label, pts, err, errlen);
        if (got == 0)
            return -1;
    } else {
        long shortest = LONG_MAX;
        for (int k = 0; k < nt; k++)
            shortest = tg[k].steps < shortest ? tg[k].steps : shortest;
        const ScalingTarget *t = &tg[it->ref];
        snprintf(label, sizeof label, "seed %llu L%d C%d cosine C=%.3g",
                 (unsigned long long)cfg.seed, sz->layers, sz->width, t->budget);
        /* the branches' warmup, so that only the decay differs */
        pts[0] = scaling_train_cosine(ds, &cfg, sz->layers, sz->width, sz->heads, t->budget,
                                      t->steps, scaling_branch_warmup(&cfg, shortest), w->watch,
                                      label);
    }
    if (w->done)
        w->done(w->ctx, it, label, pts, got);
    return got;
}

/* The items whose owner is `me` (all when owner is NULL) into pts; their count, or -1. */
static int run_items(const Dataset *ds, const ScalingSweep *sw, const char *dir,
                     const ScalingSweepWatch *w, const int *owner, int me, ScalingPoint *pts,
                     int max, char *err, size_t errlen)
{
    char snap[1024];
    snprintf(snap, sizeof snap, "%s/branch%d.safetensors", dir, me < 0 ? 0 : me);
    int n = 0;
    for (int i = 0; i < sw->n_items && n >= 0; i++) {
        if (owner && owner[i] != me)
            continue;
        if (n + 2 * sw->n_targets[sw->items[i].size] > max) {
            snprintf(err, errlen, "more than %d points", max);
            n = -1;
            break;
        }
        int got = run_item(ds, sw, &sw->items[i], snap, w, pts + n, err, errlen);
        n = got < 0 ? -1 : n + got;
    }
    remove(snap);
    return n;
}

/* Each item to the least loaded of `jobs` processes, the costliest first. */
static void share_out(const ScalingSweep *sw, int jobs, int *owner)
{
    int order[SCALING_MAX_ITEMS];
    double load[SCALING_MAX_JOBS] = { 0 };
    for (int i = 0; i < sw->n_items; i++)
        order[i] = i;
    for (int i = 1; i < sw->n_items; i++)
        for (int j = i; j > 0 && sw->items[order[j]].cost > sw->items[order[j - 1]].cost; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int i = 0; i < sw->n_items; i++) {
        int best = 0;
        for (int k = 1; k < jobs; k++)
            best = load[k] < load[best] ? k : best;
        owner[order[i]] = best;
        load[best] += sw->items[order[i]].cost;
    }
}

/* What a process sends back through its pipe: this, then n points. */
typedef struct {
    int  n;             /* -1: it failed, err says why */
    char err[512];
} PartHeader;

/* The items over jobs forked processes, each sending its points back through a pipe. */
static int run_parallel(const Dataset *ds, const ScalingSweep *sw, const char *dir,
                        const ScalingSweepWatch *w, ScalingPoint *pts, int max, char *err,
                        size_t errlen)
{
    int jobs = sw->cfg.jobs < SCALING_MAX_JOBS ? sw->cfg.jobs : SCALING_MAX_JOBS;
    int owner[SCALING_MAX_ITEMS], fd[SCALING_MAX_JOBS];
    pid_t pid[SCALING_MAX_JOBS];
    share_out(sw, jobs, owner);
    fflush(NULL);       /* nothing buffered is printed twice */
    int started = 0;
    for (int k = 0; k < jobs; k++, started++) {
        int p[2];
        if (pipe(p) != 0 || (pid[k] = fork()) < 0) {
            snprintf(err, errlen, "--jobs: cannot start a process: %s", strerror(errno));
            break;
        }
        if (pid[k] == 0) {
            close(p[0]);
            for (int j = 0; j < k; j++)
                close(fd[j]);
            PartHeader h = { 0 };
            h.n = run_items(ds, sw, dir, w, owner, k, pts, max, h.err, sizeof h.err);
            fflush(NULL);
            /* a failed write shows as a short read in the parent */
            (void)outfile_write_all(p[1], &h, sizeof h);
            if (h.n > 0)
                (void)outfile_write_all(p[1], pts, (size_t)h.n * sizeof *pts);
            _exit(h.n < 0);
        }
        close(p[1]);
        fd[k] = p[0];
    }
    /* each pipe read to its end before its process is waited for: a process blocks while
     * its points do not fit in the pipe */
    int n = 0;
    bool failed = started < jobs;
    for (int k = 0; k < started; k++) {
        PartHeader h;
        bool ok = outfile_read_all(fd[k], &h, sizeof h) == sizeof h && h.n >= 0 &&
                  h.n <= max - n;
        size_t part = ok ? (size_t)h.n * sizeof *pts : 0;
        ok = ok && outfile_read_all(fd[k], pts + n, part) == part;
        close(fd[k]);
        int status = 0;
        while (waitpid(pid[k], &status, 0) < 0 && errno == EINTR)
            ;
        ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok && !failed) {
            failed = true;
            snprintf(err, errlen, "a study process failed: %s",
                     h.n < 0 ? h.err : "it ended without its points");
        }
        n += ok ? h.n : 0;
    }
    return failed ? -1 : n;
}

/* The file's order: seed, then the size, the trunk's points before the cosine runs, by steps. */
static int point_order(const void *a, const void *b)
{
    const ScalingPoint *x = a, *y = b;
    double kx[6] = { (double)x->seed, x->schedule == SCALING_SCHED_COSINE, x->N_all,
                     (double)x->steps, x->count, x->schedule };
    double ky[6] = { (double)y->seed, y->schedule == SCALING_SCHED_COSINE, y->N_all,
                     (double)y->steps, y->count, y->schedule };
    for (int i = 0; i < 6; i++)
        if (kx[i] != ky[i])
            return kx[i] < ky[i] ? -1 : 1;
    return 0;
}

int scaling_sweep_run(const Dataset *ds, const ScalingSweep *sw, const char *dir,
                      const ScalingSweepWatch *w, ScalingPoint *pts, int max, char *err,
                      size_t errlen)
{
    static const ScalingSweepWatch none = { 0 };
    w = w ? w : &none;
    int n = sw->cfg.jobs > 1 ? run_parallel(ds, sw, dir, w, pts, max, err, errlen)
                             : run_items(ds, sw, dir, w, NULL, -1, pts, max, err, errlen);
    if (n > 0)
        qsort(pts, (size_t)n, sizeof *pts, point_order);
    return n;
}

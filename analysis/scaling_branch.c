/* Cooldown branches from one constant-rate trunk, and the cosine reference run
 * (scaling_branch.h). */
#include "analysis/scaling_branch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/results_file.h"
#include "autograd/parallel.h"
#include "autograd/snapshot.h"
#include "optim/schedule.h"
#include "optim/train.h"
#include "optim/train_snapshot.h"

const char *const SCALING_COUNT_NAMES[] = { "all", "nonemb", NULL };
const char *const SCALING_SCHED_NAMES[] = { "cooldown", "constant", "cosine", NULL };

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double tape_flop(const Trainer *tr)
{
    return (double)(flop_total(tr->flops.forward) + flop_total(tr->flops.backward) +
                    flop_total(tr->flops.recompute));
}

long scaling_branch_warmup(const ScalingTrainConfig *cfg, long shortest)
{
    long w = lround(cfg->warmup_frac * (double)shortest);
    if (w > cfg->warmup_max)
        w = cfg->warmup_max;
    /* the shortest branch must start after the warmup: its cooldown is 20% of it at most */
    if (w > shortest / 2)
        w = shortest / 2;
    return w < 1 ? 1 : w;
}

static SchedConfig base_schedule(const ScalingTrainConfig *cfg, int width, long total,
                                 long warmup)
{
    SchedConfig sc = sched_defaults();
    sc.base_lr = scaling_lr_for(cfg, width);
    sc.base_batch = sc.batch = cfg->batch;
    sc.warmup = SCHED_WARMUP_GRADUAL;
    sc.warmup_steps = warmup < total ? warmup : total - 1;
    sc.total_steps = total;
    return sc;
}

static Trainer *new_trainer(const Dataset *ds, const ScalingTrainConfig *cfg, int layers,
                            int width, int heads)
{
    par_set_threads(cfg->threads);
    TrainerConfig tc = trainer_config_default();
    tc.model.vocab_size = dataset_vocab_size(ds);
    tc.model.max_seq = cfg->seq;
    tc.model.n_layer = layers;
    tc.model.n_embd = width;
    tc.model.n_head = heads;
    tc.seed = cfg->seed;
    return trainer_new(&tc);
}

/* Steps [tr->step, to) under sc, the batches drawn with the trainer's own data RNG. */
static void train_until(Trainer *tr, const Dataset *ds, const ScalingTrainConfig *cfg,
                        const SchedConfig *sc, long to, const ScalingWatch *watch,
                        const char *label)
{
    int B = cfg->batch, T = cfg->seq;
    int *tokens = malloc((size_t)B * T * sizeof *tokens);
    int *targets = malloc((size_t)B * T * sizeof *targets);
    if (!tokens || !targets) {
        fprintf(stderr, "scaling_branch: out of memory\n");
        exit(1);
    }
    while (tr->step < to) {
        long s = tr->step;
        dataset_train_batch(ds, &tr->data_rng, B, tokens, targets);
        TrainStepResult r = trainer_step(tr, tokens, targets, B, T, sched_lr(sc, s));
        if (watch && watch->step)
            watch->step(watch->ctx, s + 1, r.loss, (long long)B * T, label);
    }
    free(tokens);
    free(targets);
}

static ScalingPoint point_of(const Trainer *tr, const ScalingTrainConfig *cfg,
                             const ScalingTarget *t, ScalingSchedule schedule)
{
    const GptConfig *g = &tr->model->cfg;
    ScalingPoint p = { .layers = g->n_layer, .width = g->n_embd, .heads = g->n_head,
                       .seed = cfg->seed, .count = t->count, .schedule = schedule,
                       .budget = t->budget, .steps = t->steps };
    p.N_nonemb = scaling_non_embedding_params(tr->model);
    p.N_all = (double)gpt_n_params(tr->model);
    p.D = (double)t->steps * cfg->batch * cfg->seq;
    p.lr = scaling_lr_for(cfg, g->n_embd);
    return p;
}

/* Saves the trunk, loads a second trainer from the file and cools it down to t->steps. */
static bool branch(Trainer *trunk, const Dataset *ds, const ScalingTrainConfig *cfg,
                   const ScalingTarget *t, long F, long warmup, const char *path,
                   const ScalingWatch *watch, const char *label, ScalingPoint *out, char *err,
                   size_t errlen)
{
    double start = now_seconds();
    SnapshotError se;
    if (!train_snapshot_save(trunk, path, NULL, NULL, 0, &se)) {
        snprintf(err, errlen, "snapshot %s: %s", path, se.message);
        return false;
    }
    SnapshotReader *r = snapshot_open(path, &se);
    Trainer *b = r ? train_snapshot_load(r, path, &se) : NULL;
    if (r)
        snapshot_close(r);
    if (!b) {
        snprintf(err, errlen, "snapshot %s: %s", path, se.message);
        return false;
    }
    SchedConfig sc = base_schedule(cfg, trunk->model->cfg.n_embd, t->steps, warmup);
    sc.decay = SCHED_DECAY_WSD;
    sc.cooldown_steps = F;
    sc.cooldown = SCHED_COOLDOWN_1SQRT;
    sc.final_fraction = 0.0;
    char blabel[160];
    snprintf(blabel, sizeof blabel, "%s cooldown to %ld", label, t->steps);
    train_until(b, ds, cfg, &sc, t->steps, watch, blabel);
    *out = point_of(b, cfg, t, SCALING_SCHED_COOLDOWN);
    out->trained = (double)F * cfg->batch * cfg->seq;
    out->flop = tape_flop(b);
    out->val_loss = scaling_validation_loss(b, ds, cfg->eval_windows);
    trainer_free(b);
    out->seconds = now_seconds() - start;
    return true;
}

typedef struct {
    long step;
    int  target;
    bool is_branch;
} Event;

static int by_step(const void *a, const void *b)
{
    const Event *x = a, *y = b;
    if (x->step != y->step)
        return (x->step > y->step) - (x->step < y->step);
    return (int)x->is_branch - (int)y->is_branch;
}

int scaling_train_branches(const Dataset *ds, const ScalingTrainConfig *cfg, int layers,
                           int width, int heads, const ScalingTarget *targets, int n,
                           double cooldown_frac, const char *snapshot_path,
                           const ScalingWatch *watch, const char *label, ScalingPoint *out,
                           char *err, size_t errlen)
{
    Event *ev = malloc((size_t)2 * n * sizeof *ev);
    if (!ev) {
        fprintf(stderr, "scaling_branch: out of memory\n");
        exit(1);
    }
    long last = 0, shortest = targets[0].steps;
    for (int i = 0; i < n; i++) {
        last = targets[i].steps > last ? targets[i].steps : last;
        shortest = targets[i].steps < shortest ? targets[i].steps : shortest;
    }
    long warmup = scaling_branch_warmup(cfg, shortest);
    int ne = 0;
    for (int i = 0; i < n; i++) {
        ev[ne++] = (Event){ .step = targets[i].steps, .target = i, .is_branch = false };
        if (targets[i].branch) {
            long F = lround(cooldown_frac * (double)targets[i].steps);
            long s = targets[i].steps - (F < 1 ? 1 : F);
            ev[ne++] = (Event){ .step = s < warmup ? warmup : s, .target = i,
                                .is_branch = true };
        }
    }
    qsort(ev, (size_t)ne, sizeof *ev, by_step);

    /* The trunk: the warmup, then the peak rate for good (WSD's stable phase). */
    Trainer *trunk = new_trainer(ds, cfg, layers, width, heads);
    SchedConfig sc = base_schedule(cfg, width, last, warmup);
    sc.decay = SCHED_DECAY_CONSTANT;
    if (watch && watch->begin)
        watch->begin(watch->ctx, last);
    int k = 0;
    double since = now_seconds(), flop_before = 0;
    long step_before = 0;
    for (int e = 0; e < ne; e++) {
        const ScalingTarget *t = &targets[ev[e].target];
        train_until(trunk, ds, cfg, &sc, ev[e].step, watch, label);
        if (ev[e].is_branch) {
            double paused = now_seconds();
            if (!branch(trunk, ds, cfg, t, t->steps - ev[e].step, warmup, snapshot_path, NULL,
                        label, &out[k], err, errlen)) {
                k = 0;
                break;
            }
            k++;
            since += now_seconds() - paused;    /* the branch's time is its own */
            continue;
        }
        ScalingPoint *p = &out[k++];
        *p = point_of(trunk, cfg, t, SCALING_SCHED_CONSTANT);
        p->trained = (double)(trunk->step - step_before) * cfg->batch * cfg->seq;
        p->flop = tape_flop(trunk) - flop_before;
        p->val_loss = scaling_validation_loss(trunk, ds, cfg->eval_windows);
        p->seconds = now_seconds() - since;
        step_before = trunk->step;
        flop_before = tape_flop(trunk);
        since = now_seconds();
    }
    if (watch && watch->end)
        watch->end(watch->ctx);
    trainer_free(trunk);
    free(ev);
    return k;
}

ScalingPoint scaling_train_cosine(const Dataset *ds, const ScalingTrainConfig *cfg, int layers,
                                  int width, int heads, double budget, long steps, long warmup,
                                  const ScalingWatch *watch, const char *label)
{
    double start = now_seconds();
    Trainer *tr = new_trainer(ds, cfg, layers, width, heads);
    SchedConfig sc = base_schedule(cfg, width, steps, warmup);
    sc.decay = SCHED_DECAY_COSINE;
    sc.final_fraction = cfg->final_frac;
    if (watch && watch->begin)
        watch->begin(watch->ctx, steps);
    train_until(tr, ds, cfg, &sc, steps, watch, label);
    if (watch && watch->end)
        watch->end(watch->ctx);
    ScalingTarget t = { .budget = budget, .count = SCALING_COUNT_ALL, .steps = steps };
    ScalingPoint p = point_of(tr, cfg, &t, SCALING_SCHED_COSINE);
    p.trained = p.D;
    p.flop = tape_flop(tr);
    p.val_loss = scaling_validation_loss(tr, ds, cfg->eval_windows);
    trainer_free(tr);
    p.seconds = now_seconds() - start;
    return p;
}

const char *const SCALING_POINT_COLUMNS[] = {
    "layers", "width", "heads", "seed", "N_nonemb", "N_all", "count", "schedule", "budget",
    "steps", "D", "lr", "val_loss", "trained", "flop", "seconds", NULL };

bool scaling_points_read(const char *path, ScalingPoint *pts, int max, int *n, char *err,
                         size_t errlen)
{
    enum { N_PCOLS = 16, COL_COUNT = 6, COL_SCHED = 7 };
    ResultsColumn cols[N_PCOLS];
    for (int k = 0; k < N_PCOLS; k++)
        cols[k] = (ResultsColumn){ .name = SCALING_POINT_COLUMNS[k] };
    cols[COL_COUNT].names = SCALING_COUNT_NAMES;
    cols[COL_SCHED].names = SCALING_SCHED_NAMES;
    double *all = malloc(((size_t)max + 1) * N_PCOLS * sizeof *all);
    if (!all) {
        snprintf(err, errlen, "out of memory for %d rows of %s", max, path);
        return false;
    }
    bool ok = results_read(path, cols, N_PCOLS, all, max, n, err, errlen);
    for (int r = 0; ok && r < *n; r++) {
        const double *v = all + (size_t)r * N_PCOLS;
        pts[r] = (ScalingPoint){
            .layers = (int)v[0], .width = (int)v[1], .heads = (int)v[2],
            .seed = (uint64_t)v[3], .N_nonemb = v[4], .N_all = v[5],
            .count = (ScalingCount)v[6], .schedule = (ScalingSchedule)v[7], .budget = v[8],
            .steps = (long)v[9], .D = v[10], .lr = v[11], .val_loss = v[12],
            .trained = v[13], .flop = v[14], .seconds = v[15] };
    }
    free(all);
    return ok;
}

bool scaling_write_point(TsvWriter *w, const ScalingPoint *p)
{
    tsv_int(w, p->layers);
    tsv_int(w, p->width);
    tsv_int(w, p->heads);
    tsv_int(w, (long long)p->seed);
    tsv_num(w, p->N_nonemb);
    tsv_num(w, p->N_all);
    tsv_str(w, SCALING_COUNT_NAMES[p->count]);
    tsv_str(w, SCALING_SCHED_NAMES[p->schedule]);
    tsv_num(w, p->budget);
    tsv_int(w, p->steps);
    tsv_num(w, p->D);
    tsv_num(w, p->lr);
    tsv_num(w, p->val_loss);
    tsv_num(w, p->trained);
    tsv_num(w, p->flop);
    tsv_num(w, p->seconds);
    return tsv_end_row(w);
}

/* One run of a scaling-law grid, and the results file (scaling_grid.h). */
#include "analysis/scaling_grid.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/eval.h"
#include "analysis/results_file.h"
#include "autograd/parallel.h"
#include "optim/schedule.h"
#include "optim/train.h"

/* Wall-clock seconds: a run's time in the results file. */
static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ScalingTrainConfig scaling_train_defaults(void)
{
    return (ScalingTrainConfig){ .seq = 64, .batch = 4, .lr = 0.02, .lr_width = 16,
                                 .warmup_frac = 0.05,
                                 .warmup_max = 100, .final_frac = 0.1, .eval_windows = 0,
                                 .threads = 1, .seed = 1 };
}

double scaling_non_embedding_params(const Gpt *model)
{
    const GptConfig *c = &model->cfg;
    size_t emb = (size_t)c->vocab_size * c->n_embd + (size_t)c->max_seq * c->n_embd;
    if (!c->tied)
        emb += (size_t)c->vocab_size * c->n_embd;     /* the head, a second embedding */
    return (double)(gpt_n_params(model) - emb);
}

double scaling_non_embedding_count(int layers, int width)
{
    double L = layers, C = width;
    return 12 * L * C * C + 13 * L * C + 2 * C;
}

double scaling_lr_for(const ScalingTrainConfig *cfg, int width)
{
    return cfg->lr * cfg->lr_width / width;
}

long scaling_steps_for(double budget, double N, const ScalingTrainConfig *cfg)
{
    double tokens_per_step = (double)cfg->batch * cfg->seq;
    long steps = lround(budget / (6 * N * tokens_per_step));
    return steps < 1 ? 1 : steps;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "scaling_grid: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

double scaling_validation_loss(Trainer *tr, const Dataset *ds, int n)
{
    return eval_teacher_forced(tr, ds, 32, n > 0 ? n : INT_MAX).loss;
}

ScalingRun scaling_train_one(const Dataset *ds, const ScalingTrainConfig *cfg, int layers,
                             int width, int heads, double budget, const ScalingWatch *watch,
                             const char *label)
{
    double start = seconds_now();
    par_set_threads(cfg->threads);
    TrainerConfig tc = trainer_config_default();
    tc.model.vocab_size = dataset_vocab_size(ds);
    tc.model.max_seq = cfg->seq;
    tc.model.n_layer = layers;
    tc.model.n_embd = width;
    tc.model.n_head = heads;
    tc.seed = cfg->seed;
    Trainer *tr = trainer_new(&tc);

    ScalingRun run = { .layers = layers, .width = width, .heads = heads, .budget = budget };
    run.N = scaling_non_embedding_params(tr->model);
    run.steps = scaling_steps_for(budget, run.N, cfg);
    int B = cfg->batch, T = cfg->seq;
    run.D = (double)run.steps * B * T;
    run.C = 6 * run.N * run.D;

    /* The cosine spans exactly the run: its length matches D, as Chinchilla requires (a
     * schedule longer than the run leaves the model at a high rate and overstates its loss). */
    SchedConfig sc = sched_defaults();
    run.lr = sc.base_lr = scaling_lr_for(cfg, width);
    sc.base_batch = sc.batch = B;
    sc.warmup = SCHED_WARMUP_GRADUAL;
    long w = lround(cfg->warmup_frac * (double)run.steps);
    sc.warmup_steps = w < 1 ? 1 : (w > cfg->warmup_max ? cfg->warmup_max : w);
    if (sc.warmup_steps >= run.steps)
        sc.warmup_steps = run.steps - 1;
    sc.decay = SCHED_DECAY_COSINE;
    sc.total_steps = run.steps;
    sc.final_fraction = cfg->final_frac;

    int *tokens = xmalloc((size_t)B * T * sizeof *tokens);
    int *targets = xmalloc((size_t)B * T * sizeof *targets);
    if (watch && watch->begin)
        watch->begin(watch->ctx, run.steps);
    for (long s = 0; s < run.steps; s++) {
        dataset_train_batch(ds, &tr->data_rng, B, tokens, targets);
        TrainStepResult r = trainer_step(tr, tokens, targets, B, T, sched_lr(&sc, s));
        if (watch && watch->step)
            watch->step(watch->ctx, s + 1, r.loss, (long long)B * T, label);
    }
    if (watch && watch->end)
        watch->end(watch->ctx);
    free(tokens);
    free(targets);
    /* read before the evaluation, which the trainer does not count anyway */
    run.flop = (double)(flop_total(tr->flops.forward) + flop_total(tr->flops.backward) +
                        flop_total(tr->flops.recompute));
    run.val_loss = scaling_validation_loss(tr, ds, cfg->eval_windows);
    trainer_free(tr);
    run.seconds = seconds_now() - start;
    return run;
}

const char *const SCALING_COLUMNS[] = { "layers", "width", "heads", "N", "D", "C", "budget",
                                        "steps", "lr", "val_loss", "seconds", "flop", NULL };

bool scaling_read_results(const char *path, ScalingRun *runs, int max, int *n, char *err,
                          size_t errlen)
{
    enum { N_COLS = 12, FLOP_COL = 11 };
    ResultsColumn cols[N_COLS];
    for (int k = 0; k < N_COLS; k++)
        cols[k] = (ResultsColumn){ .name = SCALING_COLUMNS[k] };
    cols[FLOP_COL].optional = true;     /* files written before it: NAN */
    double *all = malloc(((size_t)max + 1) * N_COLS * sizeof *all);
    if (!all) {
        snprintf(err, errlen, "out of memory for %d rows of %s", max, path);
        return false;
    }
    bool ok = results_read(path, cols, N_COLS, all, max, n, err, errlen);
    for (int r = 0; ok && r < *n; r++) {
        const double *v = all + (size_t)r * N_COLS;
        runs[r] = (ScalingRun){ .layers = (int)v[0], .width = (int)v[1], .heads = (int)v[2],
                                .N = v[3], .D = v[4], .C = v[5], .budget = v[6],
                                .steps = (long)v[7], .lr = v[8], .val_loss = v[9],
                                .seconds = v[10], .flop = v[FLOP_COL] };
    }
    free(all);
    return ok;
}

bool scaling_write_row(TsvWriter *w, const ScalingRun *r)
{
    tsv_int(w, r->layers);
    tsv_int(w, r->width);
    tsv_int(w, r->heads);
    tsv_num(w, r->N);
    tsv_num(w, r->D);
    tsv_num(w, r->C);
    tsv_num(w, r->budget);
    tsv_int(w, r->steps);
    tsv_num(w, r->lr);
    tsv_num(w, r->val_loss);
    tsv_num(w, r->seconds);
    tsv_num(w, r->flop);
    return tsv_end_row(w);
}

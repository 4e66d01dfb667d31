#include "optim/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim/clip.h"

static const char *const optimizer_names[] = { "adamw", "sgd" };
enum { N_OPTIMIZERS = 2 };

TrainerConfig trainer_config_default(void)
{
    return (TrainerConfig){ .model = gpt_config_default(), .seed = 1, .optimizer = TRAIN_ADAMW,
                            .adamw = adamw_defaults(), .sgd = sgd_defaults(), .clip = 1.0 };
}

const char *trainer_optimizer_name(TrainOptimizer o)
{
    return (unsigned)o < N_OPTIMIZERS ? optimizer_names[o] : "?";
}

bool trainer_optimizer_parse(const char *name, TrainOptimizer *out)
{
    for (int i = 0; i < N_OPTIMIZERS; i++) {
        if (strcmp(name, optimizer_names[i]) == 0) {
            *out = (TrainOptimizer)i;
            return true;
        }
    }
    return false;
}

static Optim *make_optimizer(const TrainerConfig *cfg, Gpt *model)
{
    int n;
    Tensor *const *params = gpt_params(model, &n);
    if (cfg->optimizer == TRAIN_SGD)
        return &sgd_new(params, n, cfg->sgd)->base;
    return &adamw_new(params, n, cfg->adamw)->base;
}

Trainer *trainer_new(const TrainerConfig *cfg)
{
    Trainer *t = calloc(1, sizeof *t);
    if (!t)
        tensor_fatal("out of memory for a trainer");
    t->cfg = *cfg;
    t->model = gpt_new(&cfg->model, cfg->seed);
    t->optim = make_optimizer(cfg, t->model);
    t->tape = tape_new();
    t->data_rng = rng_new(cfg->seed, RNG_STREAM_DATA);
    return t;
}

void trainer_free(Trainer *t)
{
    if (!t)
        return;
    tape_free(t->tape);
    optim_free(t->optim);
    gpt_free(t->model);
    free(t);
}

/* The stages of a step ----------------------------------------------------------------------- */

static Tensor *stage_forward(Trainer *t, const int *tokens, const int *targets, int B, int T)
{
    return gpt_loss(t->model, t->tape, tokens, targets, B, T);
}

static void stage_backward(Trainer *t, Tensor *loss)
{
    tape_backward(t->tape, loss);
}

/* The norm is measured whether or not clipping is on: it is the first thing to look at when a
 * run diverges. */
static double stage_clip(Trainer *t)
{
    Optim *o = t->optim;
    if (t->cfg.clip > 0.0)
        return clip_grad_norm_to(o->params, o->n, t->cfg.clip);
    return clip_grad_norm(o->params, o->n);
}

static bool stage_update(Trainer *t, double lr, double grad_norm)
{
    if (!isfinite(grad_norm))
        return false;
    optim_step(t->optim, lr);
    return true;
}

static void stage_release(Trainer *t)
{
    optim_zero_grad(t->optim);
    tape_reset(t->tape);
}

TrainStepResult trainer_step(Trainer *t, const int *tokens, const int *targets, int B, int T,
                             double lr)
{
    TrainStepResult r;
    Tensor *loss = stage_forward(t, tokens, targets, B, T);
    r.loss = loss->data[0];
    stage_backward(t, loss);
    r.grad_norm = stage_clip(t);
    r.updated = stage_update(t, lr, r.grad_norm);
    stage_release(t);
    t->step++;
    return r;
}

/* Evaluation ------------------------------------------------------------------------------- */

Tensor *trainer_eval(Trainer *t, const int *tokens, const int *targets, int B, int T,
                     double *loss)
{
    t->tape->recording = false;
    Tensor *logits = gpt_forward(t->model, t->tape, tokens, B, T);
    if (targets)
        *loss = op_cross_entropy(t->tape, logits, targets)->data[0];
    return logits;
}

void trainer_eval_done(Trainer *t)
{
    tape_reset(t->tape);
    t->tape->recording = true;
}

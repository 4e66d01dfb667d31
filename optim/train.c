#include "optim/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/offload.h"
#include "optim/step.h"

const char *const TRAIN_OPTIMIZER_NAMES[] = { "adamw", "sgd", "adam8bit", "adafactor", NULL };
enum { N_OPTIMIZERS = 4 };
const char *const TRAIN_OFFLOAD_NAMES[] = { "none", "optimizer", NULL };

TrainerConfig trainer_config_default(void)
{
    AdafactorConfig af = adafactor_defaults();
    af.relative_step = false;
    af.scale_parameter = false;
    TrainerConfig c = { .model = gpt_config_default(), .seed = 1, .optimizer = TRAIN_ADAMW,
                        .adamw = adamw_defaults(), .sgd = sgd_defaults(), .adafactor = af,
                        .clip = 1.0, .loss_scale = loss_scale_defaults(),
                        .adam8bit_rounding = adam8bit_defaults().rounding };
    policy_preset("fp32", &c.policy);
    return c;
}

bool trainer_config_check(const TrainerConfig *c, char *why, size_t len)
{
    char sub[200];
    if (!gpt_config_check(&c->model, sub, sizeof sub)) {
        snprintf(why, len, "the model is invalid: %s", sub);
        return false;
    }
    if (!schema_check(&TRAINER_SCHEMA, NULL, c, why, len))
        return false;
    if (!loss_scale_check(&c->loss_scale, sub, sizeof sub)) {
        snprintf(why, len, "loss scaling: %s", sub);
        return false;
    }
    return true;
}

const char *trainer_optimizer_name(TrainOptimizer o)
{
    return (unsigned)o < N_OPTIMIZERS ? TRAIN_OPTIMIZER_NAMES[o] : "?";
}

bool trainer_optimizer_parse(const char *name, TrainOptimizer *out)
{
    for (int i = 0; i < N_OPTIMIZERS; i++) {
        if (strcmp(name, TRAIN_OPTIMIZER_NAMES[i]) == 0) {
            *out = (TrainOptimizer)i;
            return true;
        }
    }
    return false;
}

/* 8-bit Adam's stochastic rounding draws from a hash of its seed (optim/adam8bit.h): a stream
 * of the run's seed of its own, so two seeds round differently and a snapshot, which keeps
 * train.seed, resumes with the same bits. */
static uint64_t adam8bit_seed(uint64_t seed)
{
    Rng r = rng_new(seed, RNG_STREAM_OPTIM);
    uint64_t hi = rng_u32(&r);
    return hi << 32 | rng_u32(&r);
}

Optim *trainer_make_optimizer(const TrainerConfig *cfg, Tensor *const *params, int n)
{
    switch (cfg->optimizer) {
    case TRAIN_SGD: return &sgd_new(params, n, cfg->sgd)->base;
    case TRAIN_ADAM8BIT: {
        Adam8bitConfig c = adam8bit_defaults();
        c.adam = cfg->adamw;
        c.rounding = cfg->adam8bit_rounding;
        c.seed = adam8bit_seed(cfg->seed);
        return &adam8bit_new(params, n, c)->base;
    }
    case TRAIN_ADAFACTOR: return &adafactor_new(params, n, cfg->adafactor)->base;
    case TRAIN_ADAMW: break;
    }
    return &adamw_new(params, n, cfg->adamw)->base;
}

Optim *trainer_new_optimizer(const TrainerConfig *cfg, Tensor *const *params, int n)
{
    bool host = cfg->local.offload == TRAIN_OFFLOAD_OPTIMIZER;
    unsigned old = mem_host_categories(host ? 1u << MEM_OPTIM : MEM_HOST_NONE);
    Optim *o = trainer_make_optimizer(cfg, params, n);
    optim_use_policy(o, &cfg->policy);
    if (host)
        optim_offload(o);
    mem_host_categories(old);
    return o;
}

void trainer_offload(Trainer *t)
{
    t->cfg.local.offload = TRAIN_OFFLOAD_OPTIMIZER;
    if (t->optim)
        optim_offload(t->optim);
}

Trainer *trainer_new(const TrainerConfig *cfg) { return trainer_new_part(cfg, NULL, NULL); }

Trainer *trainer_new_part(const TrainerConfig *cfg, TrainerKeepFn keep, void *ctx)
{
    return trainer_new_around(cfg, gpt_new(&cfg->model, cfg->seed), keep, ctx);
}

Trainer *trainer_new_around(const TrainerConfig *cfg, Gpt *model, TrainerKeepFn keep, void *ctx)
{
    Trainer *t = calloc(1, sizeof *t);
    if (!t)
        tensor_fatal("out of memory for a trainer");
    t->cfg = *cfg;
    t->model = model;
    int n;
    Tensor *const *params = gpt_params(t->model, &n);
    Tensor **kept = malloc((size_t)n * sizeof *kept);
    if (!kept)
        tensor_fatal("out of memory for a trainer");
    int n_kept = 0;
    for (int i = 0; i < n; i++)
        if (!keep || keep(params[i]->name, ctx))
            kept[n_kept++] = params[i];
    /* Nothing kept: no optimizer yet (trainer_new_lora makes the adapters' own). */
    t->optim = n_kept > 0 ? trainer_new_optimizer(cfg, kept, n_kept) : NULL;
    free(kept);
    t->tape = tape_new();
    t->tape->flops = &t->flops;
    /* The tape points at the trainer's own copy, which lives as long as the tape. */
    if (!policy_is_fp32(&t->cfg.policy))
        t->tape->policy = &t->cfg.policy;
    t->scaler = loss_scale_new(&cfg->loss_scale);
    t->data_rng = rng_new(cfg->seed, RNG_STREAM_DATA);
    return t;
}

void trainer_free(Trainer *t)
{
    if (!t)
        return;
    tape_free(t->tape);
    optim_free(t->optim);
    gpt_lora_discard(t->lora);  /* the model goes next: no fp32 base made back for it */
    gpt_free(t->model);
    free(t);
}

/* Under a policy the base is packed already (trainer_new did it) and, frozen, keeps no master:
 * the old optimizer's go with it. The adapters get masters in the new one. */
void trainer_use_lora(Trainer *t, const LoraConfig *cfg, uint64_t seed)
{
    t->lora = gpt_lora_new(t->model, cfg, seed);
    int n;
    Tensor *const *params = gpt_lora_params(t->lora, &n);
    optim_free(t->optim);
    t->optim = trainer_new_optimizer(&t->cfg, params, n);
}

/* The step: optim/step.c's driver with no strategy -------------------------------------------- */

double trainer_accumulate(Trainer *t, const int *tokens, const int *targets, int B, int T,
                          int K)
{
    return step_accumulate(t, NULL, tokens, targets, B, T, K);
}

TrainStepResult trainer_step_accum(Trainer *t, const int *tokens, const int *targets, int B,
                                   int T, int K, double lr)
{
    return step_run(t, NULL, tokens, targets, B, T, K, lr);
}

TrainStepResult trainer_step(Trainer *t, const int *tokens, const int *targets, int B, int T,
                             double lr)
{
    return step_run(t, NULL, tokens, targets, B, T, 1, lr);
}

/* Evaluation ------------------------------------------------------------------------------- */

Tensor *trainer_eval(Trainer *t, const int *tokens, const int *targets, int B, int T,
                     double *loss)
{
    t->tape->recording = false;
    t->tape->flops = NULL;      /* training compute only */
    Tensor *logits = gpt_forward(t->model, t->tape, tokens, B, T);
    if (targets)
        *loss = op_cross_entropy(t->tape, logits, targets)->data[0];
    return logits;
}

void trainer_eval_done(Trainer *t)
{
    tape_reset(t->tape);
    t->tape->recording = true;
    t->tape->flops = &t->flops;
}

/* Fine-tuning measured: the training loop (pretraining and every method share it), greedy
 * evaluation, and one run from the base file to the final scores (finetune.h). */
#include "analysis/finetune.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gpt_lora.h"
#include "nn/gpt_snapshot.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/schedule.h"

enum { LOSS_WINDOW = 50, EVAL_BATCH = 100 };

static const char *const method_names[] = { "full", "lora", "qlora", "base" };

const char *finetune_method_name(FinetuneMethod m) { return method_names[m]; }

const char *finetune_run_name(FinetuneMethod m, int rank, char *buf, size_t len)
{
    if (rank > 0)
        snprintf(buf, len, "%s r=%d", method_names[m], rank);
    else
        snprintf(buf, len, "%s", method_names[m]);
    return buf;
}

/* Token arrays are the loop's, not tensor storage: plain malloc, uncounted. Running out of
 * memory for them is not a state a measurement can go on from. */
static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "finetune: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

typedef struct {
    SchedConfig sched;          /* the learning rate of every step, and the number of steps */
    double      weight_decay;
    Rng         data;
    const char *label;
    long        eval_every;     /* the watch's scores every so many steps; 0: never */
    int         eval_examples;  /* for those scores */
    const FinetuneWatch *watch;
} LoopConfig;

static double val_scores(const Gpt *m, const Task *task, int eval_examples, double *exact);

typedef struct {
    double ms_fastest, final_loss;
    size_t peak[MEM_NCAT];
} LoopStats;

/* AdamW (b2 0.99, as train_gpt) over params at the rates of c.sched, gradients clipped to
 * norm 1. The peaks of every category are read before anything is freed: they are
 * the training's own (the caller resets them once the model is ready). */
static LoopStats train_loop(const Gpt *m, Tensor *const *params, int n, const Task *task,
                            LoopConfig c)
{
    AdamWConfig ac = adamw_defaults();
    ac.beta2 = 0.99;
    ac.weight_decay = c.weight_decay;
    AdamW *opt = adamw_new(params, n, ac);
    Tape *tape = tape_new();
    int B = c.sched.batch, T = task_seq_len(task);
    int *tokens = xmalloc((size_t)B * T * sizeof *tokens);
    int *targets = xmalloc((size_t)B * T * sizeof *targets);
    long steps = c.sched.total_steps;
    double loss_sum = 0.0, fastest = INFINITY;
    const FinetuneWatch *w = c.watch;
    if (w && w->begin)
        w->begin(w->ctx, steps);
    for (long step = 1; step <= steps; step++) {
        double t0 = omp_get_wtime();
        task_train_batch(task, &c.data, B, tokens, targets);
        Tensor *loss = gpt_loss(m, tape, tokens, targets, B, T);
        double value = loss->data[0];
        tape_backward(tape, loss);
        if (isfinite(clip_grad_norm_to(params, n, 1.0)))
            optim_step(&opt->base, sched_lr(&c.sched, step - 1));
        optim_zero_grad(&opt->base);
        tape_reset(tape);
        fastest = fmin(fastest, 1000.0 * (omp_get_wtime() - t0));
        if (step > steps - LOSS_WINDOW)
            loss_sum += value;
        if (w && w->step)
            w->step(w->ctx, step, value, (long long)B * T, c.label);
        if (c.eval_every > 0 && step % c.eval_every == 0 && w && w->scores) {
            /* Teacher-forced, so cheap; the same exact match as greedy decoding (tasks.h).
             * It reads the model only: the run's numbers are those without it. */
            double exact, vloss = val_scores(m, task, c.eval_examples, &exact);
            w->scores(w->ctx, c.label, step, value, vloss, exact);
        }
    }
    if (w && w->end)
        w->end(w->ctx);
    LoopStats s = { .ms_fastest = fastest,
                    .final_loss = loss_sum / (double)(steps < LOSS_WINDOW ? steps : LOSS_WINDOW) };
    for (int k = 0; k < MEM_NCAT; k++)
        s.peak[k] = mem_peak((MemCategory)k);
    free(tokens);
    free(targets);
    tape_free(tape);
    optim_free(&opt->base);
    return s;
}

/* A gradual warmup over the first tenth of the steps (at most 100), then `decay`. */
static SchedConfig schedule(double lr, long steps, int batch, SchedDecay decay)
{
    SchedConfig s = sched_defaults();
    s.base_lr = lr;
    s.base_batch = s.batch = batch;
    s.warmup = SCHED_WARMUP_GRADUAL;
    s.warmup_steps = steps / 10 < 100 ? steps / 10 : 100;
    s.decay = decay;
    s.total_steps = steps;
    return s;
}

void finetune_pretrain(Gpt *model, const Task *task, const FinetunePretrain *p,
                       const FinetuneWatch *watch)
{
    int n;
    Tensor *const *params = gpt_params(model, &n);
    LoopConfig c = { .sched = schedule(p->lr, p->steps, p->batch, (SchedDecay)p->decay),
                     .weight_decay = 0.1, .data = rng_new((uint64_t)p->seed, RNG_STREAM_DATA),
                     .label = "pretrain", .eval_every = p->eval_every,
                     .eval_examples = p->eval_examples, .watch = watch };
    train_loop(model, params, n, task, c);
}

/* Greedy decoding ---------------------------------------------------------------------------- */

typedef struct {
    const Gpt *model;
    Tape      *tape;
} Predictor;

static void predict_next(void *ctx, const int *tokens, int B, int len, int *next)
{
    Predictor *p = ctx;
    int V = p->model->cfg.vocab_size;
    Tensor *logits = gpt_forward(p->model, p->tape, tokens, B, len);
    for (int b = 0; b < B; b++)
        next[b] = task_argmax(&logits->data[((size_t)b * len + (size_t)len - 1) * V], V);
    tape_reset(p->tape);
}

double finetune_greedy_accuracy(const Gpt *m, const Task *task, int eval_examples)
{
    Predictor p = { m, tape_new() };
    p.tape->recording = false;
    double acc = task_accuracy_greedy(task, predict_next, &p, EVAL_BATCH,
                                      eval_examples).accuracy;
    tape_free(p.tape);
    return acc;
}

/* Mean cross-entropy over the answer tokens of the first eval_examples validation examples
 * (teacher-forced): unlike exact match it also shows a partial loss of skill. With exact, also
 * the share of those examples whose every answer token is the argmax (task_count_exact). */
static double val_scores(const Gpt *m, const Task *task, int eval_examples, double *exact)
{
    int T = task_seq_len(task), V = m->cfg.vocab_size, total = task_val_count(task);
    total = eval_examples < total ? eval_examples : total;
    int *tokens = xmalloc((size_t)EVAL_BATCH * T * sizeof *tokens);
    int *targets = xmalloc((size_t)EVAL_BATCH * T * sizeof *targets);
    Tape *tape = tape_new();
    tape->recording = false;
    double sum = 0.0;
    long counted = 0, right = 0;
    for (int first = 0; first < total; first += EVAL_BATCH) {
        task_val_batch(task, first, EVAL_BATCH, tokens, targets);
        int n = 0;
        for (int i = 0; i < EVAL_BATCH * T; i++) {
            if (i / T >= total - first)
                targets[i] = -1;    /* rows past eval_examples are left out */
            n += targets[i] >= 0;
        }
        if (exact) {
            Tensor *logits = gpt_forward(m, tape, tokens, EVAL_BATCH, T);
            right += task_count_exact(logits->data, targets, EVAL_BATCH, T, V);
            tape_reset(tape);
        }
        sum += gpt_loss(m, tape, tokens, targets, EVAL_BATCH, T)->data[0] * n;
        counted += n;
        tape_reset(tape);
    }
    tape_free(tape);
    free(tokens);
    free(targets);
    if (exact)
        *exact = total > 0 ? (double)right / (double)total : 0.0;
    return counted ? sum / (double)counted : 0.0;
}

double finetune_validation_loss(const Gpt *m, const Task *task, int eval_examples)
{
    return val_scores(m, task, eval_examples, NULL);
}

/* One run ------------------------------------------------------------------------------------ */

static size_t fp32_bytes(const Gpt *m)
{
    int n;
    Tensor *const *params = gpt_params(m, &n);
    size_t bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += mem_size(params[i]->data);
    return bytes;
}

static Gpt *load_base(const char *base_path, char *err, size_t errlen)
{
    SnapshotError serr;
    Gpt *m = gpt_snapshot_load(base_path, &serr);
    if (!m)
        snprintf(err, errlen, "%s", serr.message);
    return m;
}

bool finetune_base(const char *base_path, const Task *task, const Task *old, int eval_examples,
                   FinetuneResult *r, char *err, size_t errlen)
{
    Gpt *m = load_base(base_path, err, errlen);
    if (!m)
        return false;
    *r = (FinetuneResult){ .method = FINETUNE_BASE, .params = gpt_n_params(m),
                           .base_fp32_bytes = fp32_bytes(m), .ms_per_step = NAN,
                           .final_loss = NAN, .acc_old_off = NAN };
    r->acc_new = finetune_greedy_accuracy(m, task, eval_examples);
    r->acc_old = finetune_greedy_accuracy(m, old, eval_examples);
    r->loss_old = finetune_validation_loss(m, old, eval_examples);
    gpt_free(m);
    return true;
}

bool finetune_run(const char *base_path, FinetuneMethod method, int rank, const Task *task,
                  const Task *old, const FinetuneConfig *c, const FinetuneWatch *watch,
                  FinetuneResult *r, char *err, size_t errlen)
{
    Gpt *m = load_base(base_path, err, errlen);
    if (!m)
        return false;
    *r = (FinetuneResult){ .method = method, .rank = rank, .params = gpt_n_params(m),
                           .base_fp32_bytes = fp32_bytes(m) };
    GptLora *lora = NULL;
    if (method != FINETUNE_FULL) {
        LoraConfig lc = { .rank = rank, .alpha = (float)c->alpha, .targets = c->targets,
                          .qlora = method == FINETUNE_QLORA };
        if (!lora_config_check(&lc, &m->cfg, err, errlen)) {
            gpt_free(m);
            return false;
        }
        /* A seed other than the base's: A must not replay the base's initial random numbers. */
        lora = gpt_lora_new(m, &lc, (uint64_t)c->seed + 2);
    }
    int n;
    Tensor *const *params = lora ? gpt_lora_params(lora, &n) : gpt_params(m, &n);
    r->trainable = lora ? gpt_lora_n_trainable(lora) : r->params;
    if (lora) {
        LoraBaseBytes b = gpt_lora_base_bytes(lora);
        r->frozen_bytes = b.quant_bytes + b.fp32_bytes;
    }
    char label[32];
    finetune_run_name(method, rank, label, sizeof label);
    double lr = method == FINETUNE_FULL ? c->lr_full : c->lr_lora;
    LoopConfig lc = { .sched = schedule(lr, c->steps, c->batch, SCHED_DECAY_COSINE),
                      .weight_decay = method == FINETUNE_FULL ? 0.1 : 0.0,
                      .data = rng_new((uint64_t)c->seed + 1, RNG_STREAM_DATA), .label = label,
                      .watch = watch };
    mem_reset_peaks();
    LoopStats s = train_loop(m, params, n, task, lc);
    memcpy(r->peak, s.peak, sizeof r->peak);
    r->ms_per_step = s.ms_fastest;
    r->final_loss = s.final_loss;
    r->acc_new = finetune_greedy_accuracy(m, task, c->eval_examples);
    r->acc_old = finetune_greedy_accuracy(m, old, c->eval_examples);
    r->loss_old = finetune_validation_loss(m, old, c->eval_examples);
    gpt_lora_free(lora);
    r->acc_old_off = lora ? finetune_greedy_accuracy(m, old, c->eval_examples) : NAN;
    gpt_free(m);
    return true;
}

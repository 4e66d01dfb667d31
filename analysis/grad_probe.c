/* The gradient probe (analysis/grad_probe.h): an fp32 run to probe_step, one batch's activation
 * gradients kept, and the same batch again under the fp16 policy at each scale asked for; the
 * underflow file of those measurements and their printed table. */
#include "analysis/grad_probe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tsv.h"
#include "optim/schedule.h"

static TrainerConfig trainer_config(const GradProbeConfig *c, const Dataset *ds)
{
    TrainerConfig t = trainer_config_default();
    t.model = (GptConfig){ .vocab_size = dataset_vocab_size(ds),
                           .max_seq = dataset_seq_len(ds), .n_layer = c->layers,
                           .n_head = c->heads, .n_embd = c->embd, .tied = true,
                           .fused_qkv = true };
    t.seed = (uint64_t)c->seed;
    t.adamw.beta2 = c->beta2;
    t.adamw.weight_decay = c->weight_decay;
    t.clip = c->clip;
    return t;
}

static SchedConfig schedule(const GradProbeConfig *c)
{
    SchedConfig s = sched_defaults();
    s.base_lr = c->lr;
    s.batch = s.base_batch = c->batch;
    s.warmup = SCHED_WARMUP_GRADUAL;
    s.warmup_steps = c->warmup;
    s.decay = SCHED_DECAY_COSINE;
    s.total_steps = c->steps;
    return s;
}

/* The gradient node k's output got, or NULL when it is not an activation gradient to count:
 * the last node's output is the loss, whose gradient is the seed (the loss scale itself,
 * which the tape keeps in fp32, as mixed-precision training computes the loss in fp32). */
static const float *node_grad(const Tape *tape, int k)
{
    const Tensor *out = tape->nodes[k].out;
    if (k == tape->n_nodes - 1 || !out->grad || out->is_param || !out->owns_data)
        return NULL;
    return out->grad;
}

/* Every node's output gradient, concatenated in tape order. */
static bool collect(GradProbe *p, const Tape *tape, char *err, size_t errlen)
{
    size_t total = 0;
    for (int k = 0; k < tape->n_nodes; k++)
        if (node_grad(tape, k))
            total += tape->nodes[k].out->size;
    p->grads = malloc(total * sizeof(float));
    if (!p->grads) {
        snprintf(err, errlen, "out of memory for %zu gradient values", total);
        return false;
    }
    for (int k = 0; k < tape->n_nodes; k++) {
        const float *g = node_grad(tape, k);
        if (!g)
            continue;
        memcpy(p->grads + p->n_grads, g, tape->nodes[k].out->size * sizeof(float));
        p->n_grads += tape->nodes[k].out->size;
        p->n_tensors++;
    }
    for (size_t i = 0; i < p->n_grads; i++)
        p->amax = fabsf(p->grads[i]) > p->amax ? fabsf(p->grads[i]) : p->amax;
    grad_hist_add(&p->hist, p->grads, p->n_grads);
    return true;
}

/* The measured batch through forward and backward on a tape of its own, gradients kept. */
static Tape *backward_pass(GradProbe *p, const PrecisionPolicy *policy, float seed)
{
    Tape *tape = tape_new();
    tape->policy = policy;
    tape->keep_grads = true;
    Tensor *loss = gpt_loss(p->tr->model, tape, p->tokens, p->targets, p->B, p->T);
    if (!policy)
        p->loss = loss->data[0];
    tape_backward_seeded(tape, loss, &seed);
    return tape;
}

static void train(GradProbe *p, const GradProbeConfig *c, const GradProbeWatch *watch)
{
    SchedConfig s = schedule(c);
    for (long step = 1; step <= c->probe_step; step++) {
        dataset_train_batch(p->ds, &p->tr->data_rng, p->B, p->tokens, p->targets);
        TrainStepResult r = trainer_step(p->tr, p->tokens, p->targets, p->B, p->T,
                                         sched_lr(&s, step - 1));
        if (watch && watch->step && (step % 100 == 0 || step == c->probe_step))
            watch->step(watch->ctx, step, c->probe_step, r.loss);
    }
}

GradProbeConfig grad_probe_defaults(long steps, long probe_step, long seed)
{
    return (GradProbeConfig){ .batch = 64, .layers = 2, .heads = 4, .embd = 128,
                              .warmup = steps / 10 < 100 ? steps / 10 : 100, .lr = 1e-3,
                              .beta2 = 0.99, .weight_decay = 0.1, .clip = 1.0, .steps = steps,
                              .probe_step = probe_step, .seed = seed };
}

GradProbe *grad_probe_new(const GradProbeConfig *c, const GradProbeWatch *watch, char *err,
                          size_t errlen)
{
    GradProbe *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    TaskSpec spec = { .name = "add" };
    p->ds = dataset_open_task(&spec, err, errlen);
    if (!p->ds) {
        grad_probe_free(p);
        return NULL;
    }
    TrainerConfig cfg = trainer_config(c, p->ds);
    p->tr = trainer_new(&cfg);
    p->B = c->batch;
    p->T = dataset_seq_len(p->ds);
    p->tokens = malloc((size_t)p->B * p->T * sizeof *p->tokens);
    p->targets = malloc((size_t)p->B * p->T * sizeof *p->targets);
    if (!p->tokens || !p->targets) {
        snprintf(err, errlen, "out of memory");
        grad_probe_free(p);
        return NULL;
    }
    train(p, c, watch);
    /* The next batch of the run: step probe_step + 1's. */
    dataset_train_batch(p->ds, &p->tr->data_rng, p->B, p->tokens, p->targets);
    Tape *tape = backward_pass(p, NULL, 1.0f);
    bool ok = collect(p, tape, err, errlen);
    tape_free(tape);
    gpt_zero_grad(p->tr->model);
    if (!ok) {
        grad_probe_free(p);
        return NULL;
    }
    return p;
}

void grad_probe_free(GradProbe *p)
{
    if (!p)
        return;
    trainer_free(p->tr);
    dataset_free(p->ds);
    free(p->tokens);
    free(p->targets);
    free(p->grads);
    free(p);
}

/* The fp16 pass against the fp32 gradients, node for node (both tapes record the same ops in
 * the same order: a policy changes how tensors are stored, not which ops run). */
static bool compare_pass(const GradProbe *p, const Tape *tape, GradProbeResult *r, char *err,
                         size_t errlen)
{
    size_t off = 0;
    for (int k = 0; k < tape->n_nodes; k++) {
        const float *g = node_grad(tape, k);
        if (!g)
            continue;
        size_t n = tape->nodes[k].out->size;
        if (off + n > p->n_grads) {
            snprintf(err, errlen, "the fp16 tape does not match the fp32 one at node %d (%s)",
                     k, tape->nodes[k].op);
            return false;
        }
        for (size_t i = 0; i < n; i++) {
            r->pass_zero += g[i] == 0.0f && p->grads[off + i] != 0.0f;
            r->pass_nonfinite += !isfinite(g[i]);
        }
        off += n;
    }
    if (off != p->n_grads) {
        snprintf(err, errlen, "the fp16 tape kept %zu gradient values, the fp32 one %zu", off,
                 p->n_grads);
        return false;
    }
    return true;
}

bool grad_probe_measure(GradProbe *p, float scale, const char *rule, GradProbeResult *r,
                        char *err, size_t errlen)
{
    *r = (GradProbeResult){ .scale = scale, .rule = rule };
    r->rounded = grad_rounding(p->grads, p->n_grads, FMT_FP16, scale);
    PrecisionPolicy fp16;
    policy_preset("fp16", &fp16);
    Tape *tape = backward_pass(p, &fp16, scale);
    bool ok = compare_pass(p, tape, r, err, errlen);
    tape_free(tape);
    gpt_zero_grad(p->tr->model);
    return ok;
}

static const char *const UNDERFLOW_COLUMNS[] = {
    "scale_rule", "scale", "log2_scale", "values", "nonzero", "rounded_zero", "rounded_fraction",
    "rounded_overflow", "pass_zero", "pass_fraction", "pass_nonfinite", NULL,
};

bool grad_probe_write_underflow(const char *path, const GradProbe *p, const GradProbeResult *r,
                                int n, char *err, size_t errlen)
{
    TsvWriter *w = tsv_open(path, UNDERFLOW_COLUMNS, err, errlen);
    if (!w)
        return false;
    for (int i = 0; i < n; i++) {
        double nonzero = (double)r[i].rounded.nonzero;
        tsv_str(w, r[i].rule);
        tsv_num(w, r[i].scale);
        tsv_int(w, grad_hist_exponent(r[i].scale));
        tsv_int(w, (long long)p->n_grads);
        tsv_int(w, r[i].rounded.nonzero);
        tsv_int(w, r[i].rounded.underflow);
        tsv_num(w, r[i].rounded.underflow / nonzero);
        tsv_int(w, r[i].rounded.overflow);
        tsv_int(w, r[i].pass_zero);
        tsv_num(w, r[i].pass_zero / nonzero);
        tsv_int(w, r[i].pass_nonfinite);
        tsv_end_row(w);
    }
    return tsv_close(w, err, errlen);
}

void grad_probe_print(const GradProbe *p, const GradProbeResult *r, int n, FILE *out)
{
    const GradHist *h = &p->hist;
    int lo, hi;
    grad_hist_range(h, &lo, &hi);
    fprintf(out, "  exactly zero %lld (%.2f%%), largest |g| %.4g (bin 2^%d), smallest nonzero "
            "in bin 2^%d\n", h->zeros, 100.0 * h->zeros / h->total, (double)p->amax,
            grad_hist_exponent(p->amax), lo);
    fprintf(out, "  fp16: smallest subnormal 2^-24 = %.3g, smallest normal 2^-14 = %.3g, "
            "largest 65504; below 2^-25 a value rounds to 0\n\n", 0x1p-24, 0x1p-14);
    fprintf(out, "| loss scale | chosen as | nonzero gradients | become 0 in fp16 (rounded) | "
            "become 0 in an fp16 backward pass | overflow (rounded / pass) |\n");
    fprintf(out, "|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        double nz = (double)r[i].rounded.nonzero;
        fprintf(out, "| 2^%d | %s | %lld | %lld (%.3f%%) | %lld (%.3f%%) | %lld / %lld |\n",
                grad_hist_exponent(r[i].scale), r[i].rule, r[i].rounded.nonzero,
                r[i].rounded.underflow, 100.0 * r[i].rounded.underflow / nz, r[i].pass_zero,
                100.0 * r[i].pass_zero / nz, r[i].rounded.overflow, r[i].pass_nonfinite);
    }
}

/* Part 1: the gradients a mixed-precision run would have to store. The model of train_gpt's
 * default run is trained in fp32 for a few hundred steps (in this process, with train_gpt's
 * settings, seed and batches: the same weights its fp32 run has at that step, thread count
 * permitting), then one more batch goes forward and backward with tape->keep_grads set, and
 * every activation gradient (each node's output gradient, a "b node") is copied out.
 *
 * Two ways to see what fp16 does to them at a loss scale S:
 *   rounded  each fp32 gradient times S, rounded to fp16 (grad_rounding): the paper's analysis
 *   pass     the same batch through a backward pass under the fp16 policy seeded with S, where
 *            the tape rounds every gradient to fp16 as it goes (autograd/tape.c), compared
 *            with the fp32 pass value by value. Rounding errors compound there (a gradient
 *            is made from rounded gradients), so the two need not agree exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/cli.h"
#include "examples/loss_scaling/loss_scaling.h"
#include "optim/schedule.h"

static TrainerConfig trainer_config(const Options *o, const Dataset *ds)
{
    RunSettings rs = runs_settings(o);
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = dataset_vocab_size(ds),
                           .max_seq = dataset_seq_len(ds), .n_layer = rs.layers,
                           .n_head = rs.heads, .n_embd = rs.embd, .tied = true,
                           .fused_qkv = true };
    c.seed = (uint64_t)o->seed;
    c.adamw.beta2 = rs.beta2;
    c.adamw.weight_decay = rs.weight_decay;
    c.clip = rs.clip;
    return c;
}

static SchedConfig schedule(const Options *o)
{
    RunSettings rs = runs_settings(o);
    SchedConfig s = sched_defaults();
    s.base_lr = rs.lr;
    s.batch = s.base_batch = rs.batch;
    s.warmup = SCHED_WARMUP_GRADUAL;
    s.warmup_steps = rs.warmup;
    s.decay = SCHED_DECAY_COSINE;
    s.total_steps = o->steps;
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
static void collect(Probe *p, const Tape *tape)
{
    size_t total = 0;
    for (int k = 0; k < tape->n_nodes; k++)
        if (node_grad(tape, k))
            total += tape->nodes[k].out->size;
    p->grads = malloc(total * sizeof(float));
    if (!p->grads)
        cli_die(1, "out of memory for %zu gradient values", total);
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
}

/* The measured batch through forward and backward on a tape of its own, gradients kept. */
static Tape *backward_pass(Probe *p, const PrecisionPolicy *policy, float seed)
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

static void train(Probe *p, const Options *o)
{
    SchedConfig s = schedule(o);
    for (long step = 1; step <= o->probe_step; step++) {
        dataset_train_batch(p->ds, &p->tr->data_rng, p->B, p->tokens, p->targets);
        TrainStepResult r = trainer_step(p->tr, p->tokens, p->targets, p->B, p->T,
                                         sched_lr(&s, step - 1));
        if (step % 100 == 0 || step == o->probe_step)
            fprintf(stderr, "probe: fp32 step %ld/%ld, loss %.4f\n", step, o->probe_step,
                    r.loss);
    }
}

Probe *probe_new(const Options *o)
{
    Probe *p = calloc(1, sizeof *p);
    if (!p)
        cli_die(1, "out of memory");
    char err[512];
    TaskSpec spec = { .name = "add" };
    p->ds = dataset_open_task(&spec, err, sizeof err);
    if (!p->ds)
        cli_die(1, "%s", err);
    TrainerConfig cfg = trainer_config(o, p->ds);
    p->tr = trainer_new(&cfg);
    p->B = runs_settings(o).batch;
    p->T = dataset_seq_len(p->ds);
    p->tokens = malloc((size_t)p->B * p->T * sizeof *p->tokens);
    p->targets = malloc((size_t)p->B * p->T * sizeof *p->targets);
    if (!p->tokens || !p->targets)
        cli_die(1, "out of memory");
    train(p, o);
    /* The next batch of the run: step probe_step + 1's. */
    dataset_train_batch(p->ds, &p->tr->data_rng, p->B, p->tokens, p->targets);
    Tape *tape = backward_pass(p, NULL, 1.0f);
    collect(p, tape);
    tape_free(tape);
    gpt_zero_grad(p->tr->model);
    return p;
}

void probe_free(Probe *p)
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
static void compare_pass(const Probe *p, const Tape *tape, ProbeResult *r)
{
    size_t off = 0;
    for (int k = 0; k < tape->n_nodes; k++) {
        const float *g = node_grad(tape, k);
        if (!g)
            continue;
        size_t n = tape->nodes[k].out->size;
        if (off + n > p->n_grads)
            cli_die(1, "the fp16 tape does not match the fp32 one at node %d (%s)", k,
                    tape->nodes[k].op);
        for (size_t i = 0; i < n; i++) {
            r->pass_zero += g[i] == 0.0f && p->grads[off + i] != 0.0f;
            r->pass_nonfinite += !isfinite(g[i]);
        }
        off += n;
    }
    if (off != p->n_grads)
        cli_die(1, "the fp16 tape kept %zu gradient values, the fp32 one %zu", off, p->n_grads);
}

ProbeResult probe_measure(Probe *p, float scale, const char *rule)
{
    ProbeResult r = { .scale = scale, .rule = rule };
    r.rounded = grad_rounding(p->grads, p->n_grads, FMT_FP16, scale);
    PrecisionPolicy fp16;
    policy_preset("fp16", &fp16);
    Tape *tape = backward_pass(p, &fp16, scale);
    compare_pass(p, tape, &r);
    tape_free(tape);
    gpt_zero_grad(p->tr->model);
    return r;
}

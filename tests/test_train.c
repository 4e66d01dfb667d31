/* The training step and training snapshots: the step's stages in the right order (the norm is
 * measured before clipping, clipping acts before the update), evaluation on the same numbers as
 * training, exact resumption through a snapshot (N steps straight and N/2 + save + load + N/2
 * give bit-identical losses and weights, for AdamW and for SGD with momentum, and under bf16 and
 * fp16 with master weights and dynamic loss scaling), clear errors for damaged or mismatched
 * snapshots, and no system allocation inside the step loop after the first step.
 *
 * Loss scaling in the step: a power-of-two scale cancels exactly in fp32 (the same bits as an
 * unscaled run, clipping included, since the norm is taken after unscaling), one check and one
 * scaler update per optimizer step whatever the accumulation, and an overflow (fp16) or a NaN
 * skips the step without touching a weight and halves a dynamic scale. */
#include "tests/snapshot_test_helpers.h"

#include <inttypes.h>

#include "nn/gpt_snapshot.h"
#include "optim/clip.h"
#include "optim/train.h"
#include "optim/train_snapshot.h"

enum { V = 11, T = 8, B = 3, N_STEPS = 10 };

static TrainerConfig tiny_config(TrainOptimizer optimizer)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = V, .max_seq = T, .n_layer = 2, .n_head = 2,
                           .n_embd = 16, .tied = true, .fused_qkv = true };
    c.seed = 7;
    c.optimizer = optimizer;
    c.sgd.momentum = 0.9;
    c.sgd.weight_decay = 0.01;
    c.adamw.weight_decay = 0.1;
    c.clip = 0.5;     /* small enough to clip on some steps, so clipping is part of the test */
    return c;
}

/* A batch drawn with the trainer's data RNG: the next token is the sum of the two before it,
 * mod V, and the first two positions have no target (as a task's prompt). */
static void draw_batch(Rng *rng, int *tokens, int *targets)
{
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++)
            tokens[b * T + t] = (int)rng_below(rng, V);
        for (int t = 0; t < T; t++)
            targets[b * T + t] = t < 2 ? -1 : (tokens[b * T + t] + tokens[b * T + t - 1]) % V;
    }
}

/* A schedule that changes every step, so a resumed run must also pick up the step number. */
static double lr_at(long step) { return 0.01 * (double)(step + 1) / N_STEPS; }

static double run_step(Trainer *tr)
{
    int tokens[B * T], targets[B * T];
    draw_batch(&tr->data_rng, tokens, targets);
    return trainer_step(tr, tokens, targets, B, T, lr_at(tr->step)).loss;
}

static Trainer *load_file(const char *path, SnapshotError *err)
{
    SnapshotReader *r = snapshot_open(path, err);
    if (!r)
        return NULL;
    Trainer *tr = train_snapshot_load(r, path, err);
    snapshot_close(r);
    return tr;
}

/* The same bits in every parameter: the fp32 data, or the packed bytes and the fp32 masters. */
static bool same_params(const Trainer *a, const Trainer *b)
{
    int n, m;
    Tensor *const *pa = gpt_params(a->model, &n), *const *pb = gpt_params(b->model, &m);
    if (n != m)
        return false;
    for (int i = 0; i < n; i++) {
        if (pa[i]->dtype != pb[i]->dtype)
            return false;
        if (pa[i]->dtype == DTYPE_F32) {
            if (memcmp(pa[i]->data, pb[i]->data, pa[i]->size * sizeof(float)) != 0)
                return false;
            continue;
        }
        if (memcmp(pa[i]->packed, pb[i]->packed, tensor_bytes(pa[i])) != 0 ||
            memcmp(optim_master(a->optim, i), optim_master(b->optim, i),
                   pa[i]->size * sizeof(float)) != 0)
            return false;
    }
    return true;
}

/* Field by field: the structs have padding. */
static bool same_policy(const PrecisionPolicy *a, const PrecisionPolicy *b)
{
    return strcmp(a->name, b->name) == 0 && a->param == b->param && a->act == b->act &&
           a->grad == b->grad && a->compute == b->compute &&
           a->grad_compute == b->grad_compute && a->accumulate_low == b->accumulate_low &&
           a->fp8_scaling == b->fp8_scaling && a->fp8_window == b->fp8_window;
}

static bool same_scaling(const LossScaleConfig *a, const LossScaleConfig *b)
{
    return a->mode == b->mode && a->init_scale == b->init_scale &&
           a->growth_factor == b->growth_factor && a->backoff_factor == b->backoff_factor &&
           a->growth_interval == b->growth_interval;
}

static LossScaleConfig scaling(const char *spec)
{
    LossScaleConfig c;
    char err[160];
    if (!loss_scale_parse(spec, &c, err, sizeof err)) {
        print_error("%s\n", err);
        fail();
    }
    return c;
}

static PrecisionPolicy precision(const char *name)
{
    PrecisionPolicy p;
    assert_true(policy_preset(name, &p));
    return p;
}

/* ---- the step ------------------------------------------------------------------------------- */

/* With plain SGD (no momentum, no decay) the update is -lr times the clipped gradient, so the
 * change of the weights shows the clipped gradient, whose global norm must be the clip value;
 * the reported norm must be the one before clipping, measured here by an independent backward
 * pass on a twin model. */
static void test_step_clips_after_measuring(void **state)
{
    (void)state;
    TrainerConfig c = tiny_config(TRAIN_SGD);
    c.sgd.momentum = 0.0;
    c.sgd.weight_decay = 0.0;
    c.clip = 0.05;
    Trainer *tr = trainer_new(&c), *twin = trainer_new(&c);
    int tokens[B * T], targets[B * T];
    draw_batch(&tr->data_rng, tokens, targets);

    Tensor *loss = gpt_loss(twin->model, twin->tape, tokens, targets, B, T);
    tape_backward(twin->tape, loss);
    int n;
    Tensor *const *p = gpt_params(twin->model, &n);
    double norm = clip_grad_norm(p, n);
    assert_true(norm > 4 * c.clip);   /* so clipping really happens */

    const double lr = 0.5;
    TrainStepResult r = trainer_step(tr, tokens, targets, B, T, lr);
    assert_true(r.updated);
    assert_true(r.loss == loss->data[0]);
    assert_true(r.grad_norm == norm);
    Tensor *const *q = gpt_params(tr->model, &n);
    double sum = 0.0, worst = 0.0;
    for (int i = 0; i < n; i++) {
        for (size_t j = 0; j < p[i]->size; j++) {
            double g = ((double)p[i]->data[j] - (double)q[i]->data[j]) / lr;
            double expected = p[i]->grad[j] * (c.clip / (norm + 1e-6));
            sum += g * g;
            /* float weights of size ~0.02-1 carry the update with error ~1 ulp of the weight */
            double err = fabs(g - expected);
            worst = err > worst ? err : worst;
            assert_true(q[i]->grad == NULL || q[i]->grad[j] == 0.0f);   /* grads zeroed */
        }
    }
    print_message("norm before clipping %.6f, after %.6f (clip %.2f), worst element error "
                  "%.2e\n", norm, sqrt(sum), c.clip, worst);
    assert_true(fabs(sqrt(sum) - c.clip) < 1e-3 * c.clip);
    assert_true(worst < 1e-5);
    assert_int_equal(tr->step, 1);
    assert_int_equal(tr->optim->step, 1);
    assert_int_equal(tr->tape->n_nodes, 0);
    trainer_free(tr);
    trainer_free(twin);
}

/* Evaluation runs the same forward pass without recording: the same loss, to the bit. */
static void test_eval_matches_training_loss(void **state)
{
    (void)state;
    TrainerConfig c = tiny_config(TRAIN_ADAMW);
    Trainer *tr = trainer_new(&c);
    int tokens[B * T], targets[B * T];
    draw_batch(&tr->data_rng, tokens, targets);
    size_t act = mem_current(MEM_ACT);
    double eval_loss = 0.0;
    Tensor *logits = trainer_eval(tr, tokens, targets, B, T, &eval_loss);
    assert_int_equal(logits->shape[0], B);
    assert_int_equal(logits->shape[2], V);
    assert_int_equal(tr->tape->n_nodes, 0);   /* nothing recorded */
    trainer_eval_done(tr);
    assert_int_equal(mem_current(MEM_ACT), act);
    TrainStepResult r = trainer_step(tr, tokens, targets, B, T, 1e-3);
    print_message("eval loss %.9g, training loss %.9g\n", eval_loss, r.loss);
    assert_true(eval_loss == r.loss);
    assert_true(eval_loss > 1.5 && eval_loss < 3.5);   /* about log V = 2.40 at the start */
    trainer_free(tr);
}

/* A non-finite gradient skips the update: the step counts, the optimizer does not move. */
static void test_nonfinite_gradient_skips_update(void **state)
{
    (void)state;
    TrainerConfig c = tiny_config(TRAIN_ADAMW);
    Trainer *tr = trainer_new(&c), *twin = trainer_new(&c);
    gpt_param(tr->model, "ln_f.weight")->data[0] = NAN;
    gpt_param(twin->model, "ln_f.weight")->data[0] = NAN;
    int tokens[B * T], targets[B * T];
    draw_batch(&tr->data_rng, tokens, targets);
    TrainStepResult r = trainer_step(tr, tokens, targets, B, T, 1e-2);
    assert_false(r.updated);
    assert_true(isnan(r.grad_norm));
    assert_int_equal(tr->step, 1);
    assert_int_equal(tr->optim->step, 0);
    assert_true(isnan(gpt_param(tr->model, "ln_f.weight")->data[0]));
    gpt_param(tr->model, "ln_f.weight")->data[0] = 0.0f;   /* NaN != NaN: compare the rest */
    gpt_param(twin->model, "ln_f.weight")->data[0] = 0.0f;
    assert_true(same_params(tr, twin));
    trainer_free(tr);
    trainer_free(twin);
}

/* ---- loss scaling in the step ----------------------------------------------------------------- */

/* N steps of two fp32 trainers on the same batches, one scaled: the same losses, norms and
 * weights, bit for bit. tiny_config's clip of 0.5 is active (on every step here; checked on at
 * least one), so the
 * equal norms and weights also show that clipping saw the unscaled gradients: clipping the
 * scaled ones would have shrunk the update by S. */
static void check_scaling_cancels(const char *spec, CkptStrategy ckpt, int K)
{
    TrainerConfig plain = tiny_config(TRAIN_ADAMW), scaled = plain;
    scaled.loss_scale = scaling(spec);
    scaled.loss_scale.growth_interval = 4;
    scaled.local.checkpoint = ckpt;
    Trainer *a = trainer_new(&plain), *b = trainer_new(&scaled);
    int tokens[4 * B * T], targets[4 * B * T];
    int clipped = 0;
    for (int step = 0; step < N_STEPS; step++) {
        for (int k = 0; k < K; k++)
            draw_batch(&a->data_rng, tokens + k * B * T, targets + k * B * T);
        TrainStepResult ra = trainer_step_accum(a, tokens, targets, B, T, K, lr_at(step));
        TrainStepResult rb = trainer_step_accum(b, tokens, targets, B, T, K, lr_at(step));
        assert_true(ra.loss == rb.loss);
        assert_true(ra.grad_norm == rb.grad_norm);
        assert_true(rb.updated && !rb.skipped);
        assert_true(ra.loss_scale == 1.0);
        clipped += ra.grad_norm > plain.clip;
        if (step == 0)
            assert_true(rb.loss_scale == scaled.loss_scale.init_scale);
    }
    print_message("%s, K %d: %d of %d steps clipped, final scale %g; weights identical: %s\n",
                  spec, K, clipped, N_STEPS, (double)b->scaler.scale,
                  same_params(a, b) ? "yes" : "NO");
    assert_true(clipped > 0);
    assert_true(same_params(a, b));
    trainer_free(a);
    trainer_free(b);
}

static void test_power_of_two_scale_cancels(void **state)
{
    (void)state;
    CkptStrategy vanilla = { .kind = CKPT_VANILLA }, sqrt_ckpt;
    char err[100];
    assert_true(ckpt_parse("sqrt", &sqrt_ckpt, err, sizeof err));
    check_scaling_cancels("static:1024", vanilla, 1);
    check_scaling_cancels("static:0.25", vanilla, 1);
    /* dynamic, growing every 4 clean steps: S changes during the run, the weights do not */
    check_scaling_cancels("dynamic:4096", vanilla, 1);
    check_scaling_cancels("static:65536", vanilla, 4);
    check_scaling_cancels("static:65536", sqrt_ckpt, 2);
}

/* The seed really is S: after trainer_accumulate a scaled trainer's gradients are exactly S
 * times an unscaled one's. */
static void test_backward_is_seeded_with_the_scale(void **state)
{
    (void)state;
    TrainerConfig plain = tiny_config(TRAIN_SGD), scaled = plain;
    scaled.loss_scale = scaling("static:8192");
    Trainer *a = trainer_new(&plain), *b = trainer_new(&scaled);
    int tokens[2 * B * T], targets[2 * B * T];
    draw_batch(&a->data_rng, tokens, targets);
    draw_batch(&a->data_rng, tokens + B * T, targets + B * T);
    trainer_accumulate(a, tokens, targets, B, T, 2);
    trainer_accumulate(b, tokens, targets, B, T, 2);
    int n;
    Tensor *const *pa = gpt_params(a->model, &n), *const *pb = gpt_params(b->model, &n);
    size_t nonzero = 0;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < pa[i]->size; j++) {
            assert_true(pb[i]->grad[j] == 8192.0f * pa[i]->grad[j]);
            nonzero += pa[i]->grad[j] != 0.0f;
        }
    assert_true(nonzero > 1000);
    trainer_free(a);
    trainer_free(b);
}

/* K = 4 micro-batches per step: 3 steps are 3 checks and 3 scaler updates, not 12. With a
 * growth interval of 2 the scale doubles once in 3 clean steps (it would have doubled 6 times
 * had every micro-batch counted). */
static void test_one_check_per_optimizer_step(void **state)
{
    (void)state;
    enum { KM = 4, STEPS = 3 };
    TrainerConfig c = tiny_config(TRAIN_ADAMW);
    c.loss_scale = scaling("dynamic:1024");
    c.loss_scale.growth_interval = 2;
    Trainer *tr = trainer_new(&c);
    int tokens[KM * B * T], targets[KM * B * T];
    for (int step = 0; step < STEPS; step++) {
        for (int k = 0; k < KM; k++)
            draw_batch(&tr->data_rng, tokens + k * B * T, targets + k * B * T);
        TrainStepResult r = trainer_step_accum(tr, tokens, targets, B, T, KM, 1e-3);
        assert_true(r.loss_scale == (step < 2 ? 1024.0 : 2048.0));
        assert_int_equal(tr->scaler.checks, step + 1);
    }
    print_message("%d steps of %d micro-batches: %ld checks, scale %g, growth count %ld\n",
                  STEPS, KM, tr->scaler.checks, (double)tr->scaler.scale,
                  tr->scaler.growth_tracker);
    assert_int_equal(tr->scaler.checks, STEPS);
    assert_true(tr->scaler.scale == 2048.0f);
    assert_int_equal(tr->scaler.growth_tracker, 1);
    assert_int_equal(tr->optim->step, STEPS);
    trainer_free(tr);
}

/* An overflow skips the step: the weights (packed and master) and the optimizer's moments
 * keep every bit, the optimizer's step count stays 0, and a dynamic scale halves. Real
 * overflow needs fp16: this model's fp32 gradients stay finite even at S = 2^127 (the largest
 * float power of two), while fp16 tops out at 65504, so S = 2^24 overflows the fp16-rounded
 * gradients; the steps that follow halve S until the gradients fit, then train. */
static void test_overflow_skips_and_halves(void **state)
{
    (void)state;
    TrainerConfig c = tiny_config(TRAIN_ADAMW);
    c.policy = precision("fp16");
    c.loss_scale = scaling("dynamic:16777216");     /* 2^24 */
    Trainer *tr = trainer_new(&c), *twin = trainer_new(&c);
    int tokens[B * T], targets[B * T];
    draw_batch(&tr->data_rng, tokens, targets);
    TrainStepResult r = trainer_step(tr, tokens, targets, B, T, 1e-2);
    assert_true(r.loss_scale == 16777216.0);
    assert_true(r.skipped && !r.updated);
    assert_false(isfinite(r.grad_norm));
    assert_true(tr->scaler.scale == 8388608.0f);
    assert_int_equal(tr->scaler.skipped, 1);
    assert_int_equal(tr->optim->step, 0);
    assert_true(same_params(tr, twin));
    for (int i = 0; i < optim_state_count(tr->optim); i++) {
        const Tensor *m = optim_state_tensor(tr->optim, i);
        for (size_t j = 0; j < m->size; j++)
            assert_true(m->data[j] == 0.0f);
    }
    int skipped = 1;
    while (trainer_step(tr, tokens, targets, B, T, 1e-2).skipped)
        skipped++;
    print_message("fp16 from 2^24: %d steps skipped, training resumed at scale 2^%d\n",
                  skipped, (int)log2(tr->scaler.scale));
    assert_true(skipped > 1 && skipped < 24);
    assert_true(tr->scaler.scale == ldexpf(1.0f, 24 - skipped));
    assert_int_equal(tr->optim->step, 1);
    assert_false(same_params(tr, twin));
    trainer_free(tr);
    trainer_free(twin);
}

/* A poisoned gradient in fp32 (a NaN weight makes NaN gradients): skipped and halved too. */
static void test_nan_gradient_halves_a_dynamic_scale(void **state)
{
    (void)state;
    TrainerConfig c = tiny_config(TRAIN_SGD);
    c.loss_scale = scaling("dynamic");
    Trainer *tr = trainer_new(&c);
    gpt_param(tr->model, "blocks.0.ln1.bias")->data[3] = NAN;
    for (int k = 1; k <= 3; k++) {
        int tokens[B * T], targets[B * T];
        draw_batch(&tr->data_rng, tokens, targets);
        TrainStepResult r = trainer_step(tr, tokens, targets, B, T, 1e-2);
        assert_true(r.skipped);
        assert_true(tr->scaler.scale == ldexpf(1.0f, 16 - k));
    }
    assert_int_equal(tr->optim->step, 0);
    trainer_free(tr);
}

/* The policy reaches the tape and the optimizer: bf16 packs the parameters (2 bytes each) and
 * keeps fp32 masters in the optim category; tf32 only changes the matmuls (no masters); fp32
 * is no policy at all. */
static void test_policy_in_the_trainer(void **state)
{
    (void)state;
    const char *names[] = { "fp32", "tf32", "bf16", "fp16", "fp8" };
    for (int k = 0; k < 5; k++) {
        TrainerConfig c = tiny_config(TRAIN_ADAMW);
        c.policy = precision(names[k]);
        size_t optim0 = mem_current(MEM_OPTIM), param0 = mem_current(MEM_PARAM);
        Trainer *tr = trainer_new(&c);
        bool packed = c.policy.param != DTYPE_F32;
        size_t n_values = gpt_n_params(tr->model);
        assert_true(tr->tape->policy == (k == 0 ? NULL : &tr->cfg.policy));
        assert_true((optim_master(tr->optim, 0) != NULL) == packed);
        assert_int_equal(mem_current(MEM_PARAM) - param0, n_values * (packed ? 2 : 4));
        assert_int_equal(mem_current(MEM_OPTIM) - optim0, n_values * (packed ? 3 : 2) * 4);
        run_step(tr);
        trainer_free(tr);
    }
}

/* ---- exact resumption ----------------------------------------------------------------------- */

static void check_resume_config(TrainerConfig c)
{
    TrainOptimizer optimizer = c.optimizer;
    double straight[N_STEPS], resumed[N_STEPS];
    Trainer *a = trainer_new(&c);
    for (int k = 0; k < N_STEPS; k++)
        straight[k] = run_step(a);

    char path[512];
    in_dir(path, sizeof path, "resume.safetensors");
    Trainer *b = trainer_new(&c);
    for (int k = 0; k < N_STEPS / 2; k++)
        resumed[k] = run_step(b);
    const char *keys[] = { "data.kind" }, *values[] = { "test" };
    SnapshotError err;
    assert_true(train_snapshot_save(b, path, keys, values, 1, &err));
    trainer_free(b);

    Trainer *r = load_file(path, &err);
    if (!r)
        print_error("%s\n", err.message);
    assert_non_null(r);
    assert_int_equal(r->step, N_STEPS / 2);
    assert_int_equal(r->optim->step, N_STEPS / 2);
    assert_string_equal(r->optim->kind, trainer_optimizer_name(optimizer));
    for (int k = N_STEPS / 2; k < N_STEPS; k++)
        resumed[k] = run_step(r);

    for (int k = 0; k < N_STEPS; k++)
        print_message("step %2d  straight %.9g  resumed %.9g\n", k + 1, straight[k], resumed[k]);
    assert_memory_equal(straight, resumed, sizeof straight);
    assert_true(straight[N_STEPS - 1] < straight[0]);   /* it learns: the test is not vacuous */
    assert_true(same_params(a, r));
    for (int i = 0; i < optim_state_count(a->optim); i++) {
        const Tensor *sa = optim_state_tensor(a->optim, i), *sr = optim_state_tensor(r->optim, i);
        assert_memory_equal(sa->data, sr->data, sa->size * sizeof(float));
    }
    assert_memory_equal(&a->data_rng, &r->data_rng, sizeof a->data_rng);
    assert_true(r->tape->policy == (policy_is_fp32(&c.policy) ? NULL : &r->cfg.policy));
    assert_true(same_policy(&r->cfg.policy, &c.policy));
    assert_true(same_scaling(&r->cfg.loss_scale, &c.loss_scale));
    assert_true(same_scaling(&r->scaler.cfg, &c.loss_scale));
    print_message("scale %g, growth count %ld, %ld checks, %ld skipped\n",
                  (double)r->scaler.scale, r->scaler.growth_tracker, r->scaler.checks,
                  r->scaler.skipped);
    assert_true(a->scaler.scale == r->scaler.scale);
    assert_int_equal(a->scaler.growth_tracker, r->scaler.growth_tracker);
    assert_int_equal(a->scaler.checks, r->scaler.checks);
    assert_int_equal(a->scaler.skipped, r->scaler.skipped);
    trainer_free(a);
    trainer_free(r);
}

static void check_resume(TrainOptimizer optimizer)
{
    check_resume_config(tiny_config(optimizer));
}

/* Under a policy with packed parameters the file holds the fp32 masters and the loaded trainer
 * repacks them; the dynamic scaler's scale and growth count come back too (a growth interval
 * of 3 puts the save in the middle of a count, and the scale grows twice in the run). */
static void check_resume_precision(const char *policy)
{
    TrainerConfig c = tiny_config(TRAIN_ADAMW);
    c.policy = precision(policy);
    c.loss_scale = scaling("dynamic:256");
    c.loss_scale.growth_interval = 3;
    check_resume_config(c);
}

static void test_resume_is_exact_bf16(void **state)
{
    (void)state;
    check_resume_precision("bf16");
}

static void test_resume_is_exact_fp16(void **state)
{
    (void)state;
    check_resume_precision("fp16");
}

static void test_resume_is_exact_adamw(void **state)
{
    (void)state;
    check_resume(TRAIN_ADAMW);
}

static void test_resume_is_exact_sgd(void **state)
{
    (void)state;
    check_resume(TRAIN_SGD);
}

/* The file holds what train_snapshot.h promises, under those names. */
static void test_snapshot_contents(void **state)
{
    (void)state;
    TrainerConfig c = tiny_config(TRAIN_ADAMW);
    c.model.tied = false;
    Trainer *tr = trainer_new(&c);
    run_step(tr);
    char path[512];
    in_dir(path, sizeof path, "contents.safetensors");
    SnapshotError err;
    assert_true(train_snapshot_save(tr, path, NULL, NULL, 0, &err));
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    int n;
    gpt_params(tr->model, &n);
    assert_int_equal(snapshot_count(r), 3 * n);   /* parameters, m, v */
    assert_non_null(snapshot_find(r, "head.weight"));
    assert_non_null(snapshot_find(r, "adamw.v.blocks.1.mlp.proj.weight"));
    assert_string_equal(snapshot_meta(r, "model.tied"), "false");
    assert_string_equal(snapshot_meta(r, "model.n_embd"), "16");
    assert_string_equal(snapshot_meta(r, "optim.kind"), "adamw");
    assert_string_equal(snapshot_meta(r, "optim.decay_rule"), "matrices");
    assert_string_equal(snapshot_meta(r, "train.step"), "1");
    char rng_state[32];
    snprintf(rng_state, sizeof rng_state, "%" PRIu64, tr->data_rng.state);
    assert_string_equal(snapshot_meta(r, "train.data_rng.state"), rng_state);
    TrainerConfig back;
    assert_true(train_snapshot_config(r, path, &back, &err));
    assert_memory_equal(&back.model, &c.model, sizeof c.model);
    assert_true(back.adamw.beta2 == c.adamw.beta2 && back.adamw.eps == c.adamw.eps);
    assert_true(back.clip == c.clip && back.seed == c.seed);
    snapshot_close(r);
    trainer_free(tr);
}

/* Under bf16 the parameters are in the file as their fp32 masters (read back as an fp32 model
 * by nn/gpt_snapshot.h), the masters are not stored twice, and the policy and the scaler are
 * in the metadata. */
static void test_snapshot_contents_bf16(void **state)
{
    (void)state;
    TrainerConfig c = tiny_config(TRAIN_ADAMW);
    c.policy = precision("bf16");
    c.loss_scale = scaling("dynamic:512");
    Trainer *tr = trainer_new(&c);
    run_step(tr);
    char path[512];
    in_dir(path, sizeof path, "bf16.safetensors");
    SnapshotError err;
    assert_true(train_snapshot_save(tr, path, NULL, NULL, 0, &err));
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    int n;
    Tensor *const *params = gpt_params(tr->model, &n);
    assert_int_equal(snapshot_count(r), 3 * n);   /* parameters, m, v: no master.* */
    assert_null(snapshot_find(r, "master.wte.weight"));
    assert_int_equal(snapshot_find(r, "wte.weight")->dtype, SNAPSHOT_F32);
    assert_string_equal(snapshot_meta(r, "precision.policy"), "bf16");
    assert_string_equal(snapshot_meta(r, "precision.act"), "bf16");
    assert_string_equal(snapshot_meta(r, "precision.compute"), "bf16");
    assert_string_equal(snapshot_meta(r, "loss_scale.mode"), "dynamic");
    assert_string_equal(snapshot_meta(r, "loss_scale.scale"), "512");
    assert_string_equal(snapshot_meta(r, "loss_scale.growth_tracker"), "1");
    snapshot_close(r);

    Gpt *plain = gpt_snapshot_load(path, &err);
    assert_non_null(plain);
    Tensor *const *fp32 = gpt_params(plain, &n);
    size_t differ = 0;
    for (int i = 0; i < n; i++) {
        assert_int_equal(fp32[i]->dtype, DTYPE_F32);
        assert_memory_equal(fp32[i]->data, optim_master(tr->optim, i),
                            fp32[i]->size * sizeof(float));
        /* the masters hold more than the bf16 working copy: the point of keeping them */
        const float *w = tensor_unpack(params[i]);
        for (size_t j = 0; j < fp32[i]->size; j++)
            differ += w[j] != fp32[i]->data[j];
        tensor_release(params[i]);
    }
    print_message("%zu of %zu master values are not bf16 numbers\n", differ,
                  gpt_n_params(tr->model));
    assert_true(differ > gpt_n_params(tr->model) / 2);
    gpt_free(plain);
    trainer_free(tr);
}

/* ---- damaged and mismatched snapshots ------------------------------------------------------ */

/* A saved tiny trainer at dir/good.safetensors; its path in path. */
static void save_good(char *path, size_t len)
{
    TrainerConfig c = tiny_config(TRAIN_ADAMW);
    Trainer *tr = trainer_new(&c);
    run_step(tr);
    in_dir(path, len, "good.safetensors");
    SnapshotError err;
    assert_true(train_snapshot_save(tr, path, NULL, NULL, 0, &err));
    trainer_free(tr);
}

static void expect_load_fails(const char *path, const char *needle)
{
    SnapshotError err = { { 0 } };
    Trainer *tr = load_file(path, &err);
    if (tr) {
        trainer_free(tr);
        print_error("%s loaded; expected an error containing \"%s\"\n", path, needle);
        fail();
    }
    print_message("%s\n", err.message);
    expect_message(err.message, path, needle);
}

static void test_truncated_snapshot(void **state)
{
    (void)state;
    char good[512], cut[512];
    save_good(good, sizeof good);
    in_dir(cut, sizeof cut, "cut.safetensors");
    size_t len;
    unsigned char *bytes = slurp(good, &len);
    const size_t lengths[] = { 0, 7, 8, 100, len / 2, len - 4, len - 1 };
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        spit(cut, bytes, lengths[i]);
        expect_load_fails(cut, "truncated");
    }
    free(bytes);
}

/* Copies src to dst through a reader and a writer, with one edit: tensor `drop` left out,
 * tensor `grow` given one more element in its last dimension, an `extra` tensor added, or
 * metadata `meta_key` set to `meta_value` (NULL: removed). */
typedef struct {
    const char *drop, *grow, *extra, *meta_key, *meta_value;
} Edit;

static void rewrite(const char *src, const char *dst, Edit e)
{
    SnapshotError err;
    SnapshotReader *r = snapshot_open(src, &err);
    assert_non_null(r);
    SnapshotWriter *w = snapshot_writer_new();
    int n = snapshot_count(r);
    float **bufs = calloc((size_t)n + 1, sizeof *bufs);
    for (int i = 0; i < n; i++) {
        const SnapshotEntry *en = snapshot_entry(r, i);
        if (e.drop && strcmp(en->name, e.drop) == 0)
            continue;
        size_t bytes = (size_t)(en->end - en->begin);
        int64_t shape[SNAPSHOT_MAX_DIMS];
        memcpy(shape, en->shape, sizeof shape);
        bufs[i] = calloc(1, bytes + 64 * sizeof(float));
        assert_true(snapshot_read(r, en->name, en->dtype, en->ndim, en->shape, bufs[i], &err));
        if (e.grow && strcmp(en->name, e.grow) == 0)
            shape[en->ndim - 1] += 1;
        assert_true(snapshot_add(w, en->name, en->dtype, en->ndim, shape, bufs[i], &err));
    }
    static const float extra[4] = { 1, 2, 3, 4 };
    if (e.extra)
        assert_true(snapshot_add(w, e.extra, SNAPSHOT_F32, 1, (int64_t[]){ 4 }, extra, &err));
    for (int i = 0; i < snapshot_meta_count(r); i++) {
        const char *key = snapshot_meta_key(r, i), *value = snapshot_meta(r, key);
        if (e.meta_key && strcmp(key, e.meta_key) == 0)
            value = e.meta_value;
        if (value)
            assert_true(snapshot_add_meta(w, key, value, &err));
    }
    assert_true(snapshot_write(w, dst, &err));
    snapshot_writer_free(w);
    snapshot_close(r);
    for (int i = 0; i < n; i++)
        free(bufs[i]);
    free(bufs);
}

static void test_mismatched_snapshots(void **state)
{
    (void)state;
    char good[512], bad[512];
    save_good(good, sizeof good);
    in_dir(bad, sizeof bad, "bad.safetensors");
    const struct {
        Edit        edit;
        const char *needle;
    } cases[] = {
        { { .grow = "blocks.1.ln2.bias" },
          "shape of 'blocks.1.ln2.bias' is [17] in the file, [16] expected" },
        { { .grow = "adamw.m.wte.weight" },
          "shape of 'adamw.m.wte.weight' is [11, 17] in the file, [11, 16] expected" },
        { { .drop = "adamw.v.wpe.weight" }, "missing tensor 'adamw.v.wpe.weight'" },
        { { .drop = "blocks.0.attn.qkv.bias" }, "missing tensor 'blocks.0.attn.qkv.bias'" },
        { { .extra = "blocks.2.ln1.weight" }, "unknown tensor 'blocks.2.ln1.weight'" },
        { { .meta_key = "model.n_layer", .meta_value = "3" }, "missing tensor 'blocks.2." },
        { { .meta_key = "model.tied", .meta_value = "false" }, "missing tensor 'head.weight'" },
        { { .meta_key = "model.n_embd", .meta_value = "15" },
          "n_embd (C) = 15 is not a multiple of n_head (H) = 2" },
        { { .meta_key = "model.n_head", .meta_value = "0" }, "'model.n_head' is 0, not in 1.." },
        { { .meta_key = "model.fused_qkv", .meta_value = "yes" },
          "'model.fused_qkv' is 'yes', not true or false" },
        { { .meta_key = "optim.kind", .meta_value = "lion" }, "'optim.kind' is 'lion'" },
        { { .meta_key = "optim.kind", .meta_value = "sgd" }, "missing metadata 'optim.momentum'" },
        { { .meta_key = "train.data_rng.inc" }, "missing metadata 'train.data_rng.inc'" },
        { { .meta_key = "optim.step", .meta_value = "99" }, "inconsistent" },
        { { .meta_key = "format" }, "not a training snapshot" },
        { { .meta_key = "precision.policy", .meta_value = "fp64" },
          "'precision.policy' is 'fp64', not fp32|tf32|bf16|fp16|fp8" },
        { { .meta_key = "precision.act", .meta_value = "fp12" },
          "'precision.act' is 'fp12', which this version does not know" },
        { { .meta_key = "precision.fp8_window" }, "missing metadata 'precision.fp8_window'" },
        { { .meta_key = "loss_scale.mode", .meta_value = "adaptive" },
          "'loss_scale.mode' is 'adaptive'" },
        { { .meta_key = "loss_scale.scale", .meta_value = "0.1" },
          "'loss_scale.scale' = 0.1 is not a positive float" },
        { { .meta_key = "loss_scale.skipped", .meta_value = "2" },
          "the loss scaler's counters are inconsistent" },
        { { .meta_key = "loss_scale.checks" }, "missing metadata 'loss_scale.checks'" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rewrite(good, bad, cases[i].edit);
        expect_load_fails(bad, cases[i].needle);
    }
    rewrite(good, bad, (Edit){ 0 });   /* the copy itself is fine */
    SnapshotError err;
    Trainer *tr = load_file(bad, &err);
    assert_non_null(tr);
    trainer_free(tr);
}

/* A save that fails (here: a caller key that collides with the trainer's) leaves the earlier
 * file as it was. */
static void test_failed_save_keeps_old_file(void **state)
{
    (void)state;
    char good[512];
    save_good(good, sizeof good);
    size_t len_before, len_after;
    unsigned char *before = slurp(good, &len_before);
    TrainerConfig c = tiny_config(TRAIN_SGD);
    Trainer *tr = trainer_new(&c);
    const char *keys[] = { "train.step" }, *values[] = { "0" };
    SnapshotError err;
    assert_false(train_snapshot_save(tr, good, keys, values, 1, &err));
    print_message("%s\n", err.message);
    assert_non_null(strstr(err.message, "'train.step' added twice"));
    unsigned char *after = slurp(good, &len_after);
    assert_int_equal(len_before, len_after);
    assert_memory_equal(before, after, len_before);
    free(before);
    free(after);
    trainer_free(tr);
}

/* ---- memory --------------------------------------------------------------------------------- */

/* After the first step (and the first evaluation), every allocation of the loop is served by
 * the allocator's cache: the count of system allocations stays where it was. (Tensor headers
 * are still malloc'ed per op by autograd/tensor.c; they are not tensor storage and not counted.) */
static void test_no_system_allocation_after_first_step(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    skip();   /* the cache is off under AddressSanitizer */
#endif
    TrainerConfig c = tiny_config(TRAIN_ADAMW);
    Trainer *tr = trainer_new(&c);
    int tokens[B * T], targets[B * T];
    double loss;
    size_t after_first = 0, requests_first = 0;
    int cap_nodes = 0, cap_owned = 0;
    for (int k = 1; k <= 20; k++) {
        run_step(tr);
        draw_batch(&tr->data_rng, tokens, targets);
        if (k % 5 == 1) {
            trainer_eval(tr, tokens, targets, B, T, &loss);
            trainer_eval_done(tr);
        }
        MemStats s = mem_stats();
        if (k == 1) {
            after_first = s.system_allocations;
            requests_first = s.requests;
            cap_nodes = tr->tape->cap_nodes;
            cap_owned = tr->tape->cap_owned;
        }
        assert_int_equal(s.system_allocations, after_first);
        /* The tape keeps its arrays across tape_reset: no realloc after the first step either. */
        assert_int_equal(tr->tape->cap_nodes, cap_nodes);
        assert_int_equal(tr->tape->cap_owned, cap_owned);
    }
    MemStats s = mem_stats();
    print_message("%zu system allocations by the end of step 1; %zu requests since, all served "
                  "from the cache\n", after_first, s.requests - requests_first);
    assert_true(s.requests - requests_first > 19 * 50);   /* the loop did allocate, a lot */
    trainer_free(tr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_clips_after_measuring),
        cmocka_unit_test(test_eval_matches_training_loss),
        cmocka_unit_test(test_nonfinite_gradient_skips_update),
        cmocka_unit_test(test_power_of_two_scale_cancels),
        cmocka_unit_test(test_backward_is_seeded_with_the_scale),
        cmocka_unit_test(test_one_check_per_optimizer_step),
        cmocka_unit_test(test_overflow_skips_and_halves),
        cmocka_unit_test(test_nan_gradient_halves_a_dynamic_scale),
        cmocka_unit_test(test_policy_in_the_trainer),
        cmocka_unit_test(test_resume_is_exact_adamw),
        cmocka_unit_test(test_resume_is_exact_sgd),
        cmocka_unit_test(test_resume_is_exact_bf16),
        cmocka_unit_test(test_resume_is_exact_fp16),
        cmocka_unit_test(test_snapshot_contents),
        cmocka_unit_test(test_snapshot_contents_bf16),
        cmocka_unit_test(test_truncated_snapshot),
        cmocka_unit_test(test_mismatched_snapshots),
        cmocka_unit_test(test_failed_save_keeps_old_file),
        cmocka_unit_test(test_no_system_allocation_after_first_step),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}

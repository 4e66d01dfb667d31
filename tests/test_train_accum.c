/* Gradient accumulation and the memory-saving optimizers in the trainer (optim/train.h):
 * K micro-batches give the gradient of one batch K times larger (fp32, within 1e-6 relative),
 * while the activation memory stays that of one micro-batch (measured); 8-bit Adam and
 * Adafactor train, and resume from a snapshot bit for bit (their U8 and F32 buffers go through
 * the file). */
#include "tests/snapshot_test_helpers.h"

#include "optim/train.h"
#include "optim/train_snapshot.h"

enum { V = 13, T = 8, MICRO = 3, K = 4, N_STEPS = 8 };

static TrainerConfig tiny_config(TrainOptimizer optimizer)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = V, .max_seq = T, .n_layer = 2, .n_head = 2,
                           .n_embd = 16, .tied = true, .fused_qkv = true };
    c.seed = 5;
    c.optimizer = optimizer;
    c.clip = 0.0;
    return c;
}

/* rows rows of a task-like batch: the first two positions are prompt (no target), so every row
 * counts T - 2 targets and micro-batch means average to the mean over all rows. */
static void draw_rows(Rng *rng, int rows, int *tokens, int *targets)
{
    for (int b = 0; b < rows; b++) {
        for (int t = 0; t < T; t++)
            tokens[b * T + t] = (int)rng_below(rng, V);
        for (int t = 0; t < T; t++)
            targets[b * T + t] = t < 2 ? -1 : (3 * tokens[b * T + t] + 1) % V;
    }
}

/* ||a - b||_inf / ||b||_inf over every parameter gradient of two models. */
static double grad_relative_diff(const Trainer *a, const Trainer *b)
{
    int n;
    Tensor *const *pa = gpt_params(a->model, &n), *const *pb = gpt_params(b->model, &n);
    double diff = 0.0, scale = 0.0;
    for (int i = 0; i < n; i++) {
        assert_non_null(pa[i]->grad);
        for (size_t j = 0; j < pa[i]->size; j++) {
            diff = fmax(diff, fabs((double)pa[i]->grad[j] - pb[i]->grad[j]));
            scale = fmax(scale, fabs((double)pb[i]->grad[j]));
        }
    }
    return diff / scale;
}

/* K = 4 micro-batches of 3 rows against one batch of the same 12 rows: the gradients agree to
 * 1e-6 relative (the difference is float rounding in another order), and so do the losses. */
static void test_accumulated_gradient_is_the_big_batch_gradient(void **state)
{
    (void)state;
    TrainerConfig c = tiny_config(TRAIN_SGD);
    Trainer *acc = trainer_new(&c), *big = trainer_new(&c);
    int tokens[K * MICRO * T], targets[K * MICRO * T];
    draw_rows(&acc->data_rng, K * MICRO, tokens, targets);
    double loss_acc = trainer_accumulate(acc, tokens, targets, MICRO, T, K);
    double loss_big = trainer_accumulate(big, tokens, targets, K * MICRO, T, 1);
    double rel = grad_relative_diff(acc, big);
    print_message("accumulated K=%d x %d rows vs one batch of %d: max |dg| / max |g| = %.2e "
                  "(tolerance 1e-6); losses %.9g and %.9g\n", K, MICRO, K * MICRO, rel, loss_acc,
                  loss_big);
    assert_true(rel <= 1e-6);
    assert_true(fabs(loss_acc - loss_big) <= 1e-6 * fabs(loss_big));
    /* Without dividing by K the sum would be K times the mean gradient: the test can tell. */
    optim_zero_grad(acc->optim);
    for (int k = 0; k < K; k++)
        trainer_accumulate(acc, tokens + k * MICRO * T, targets + k * MICRO * T, MICRO, T, 1);
    assert_true(grad_relative_diff(acc, big) > 1.0);
    trainer_free(acc);
    trainer_free(big);
}

/* One update of the accumulated gradient moves the weights as one update of the big batch:
 * plain SGD, so the weights differ by lr times the gradient difference, at most. */
static void test_accumulated_step_is_the_big_batch_step(void **state)
{
    (void)state;
    TrainerConfig c = tiny_config(TRAIN_SGD);
    c.sgd.momentum = 0.0;
    Trainer *acc = trainer_new(&c), *big = trainer_new(&c);
    int tokens[K * MICRO * T], targets[K * MICRO * T];
    draw_rows(&acc->data_rng, K * MICRO, tokens, targets);
    TrainStepResult ra = trainer_step_accum(acc, tokens, targets, MICRO, T, K, 0.5);
    TrainStepResult rb = trainer_step(big, tokens, targets, K * MICRO, T, 0.5);
    if (!(fabs(ra.grad_norm - rb.grad_norm) <= 1e-6 * rb.grad_norm))
        fail_msg("gradient norm: expected %.9g (one batch of %d rows), got %.9g (%d x %d)",
                 rb.grad_norm, K * MICRO, ra.grad_norm, K, MICRO);
    int n;
    Tensor *const *pa = gpt_params(acc->model, &n), *const *pb = gpt_params(big->model, &n);
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < pa[i]->size; j++)
            if (!(fabs(pa[i]->data[j] - pb[i]->data[j]) <= 1e-6))
                fail_msg("%s[%zu] after the step: expected %.9g (one batch), got %.9g "
                         "(accumulated)", pa[i]->name, j, (double)pb[i]->data[j],
                         (double)pa[i]->data[j]);
    assert_int_equal(acc->step, 1);
    assert_int_equal(acc->optim->step, 1);
    trainer_free(acc);
    trainer_free(big);
}

/* The peak of the act category during an accumulated step is that of one micro-batch's step
 * (the 1/K rides on the backward's seed: nothing more is recorded), while its compute is K
 * micro-batches'; the big batch holds about K times as much. */
static size_t peak_act_of_step(Trainer *tr, const int *tokens, const int *targets, int B, int k,
                               int64_t *matmul_flops)
{
    size_t before = mem_current(MEM_ACT);
    mem_reset_peaks();
    tr->flops = (TapeFlops){ 0 };
    trainer_step_accum(tr, tokens, targets, B, T, k, 1e-3);
    *matmul_flops = tr->flops.forward.matmul + tr->flops.backward.matmul;
    return mem_peak(MEM_ACT) - before;
}

static void test_peak_act_is_one_micro_batch(void **state)
{
    (void)state;
    TrainerConfig c = tiny_config(TRAIN_ADAMW);
    Trainer *tr = trainer_new(&c);
    int tokens[K * MICRO * T], targets[K * MICRO * T];
    draw_rows(&tr->data_rng, K * MICRO, tokens, targets);
    int64_t f_micro, f_accum, f_big;
    size_t micro = peak_act_of_step(tr, tokens, targets, MICRO, 1, &f_micro);
    size_t accum = peak_act_of_step(tr, tokens, targets, MICRO, K, &f_accum);
    size_t big = peak_act_of_step(tr, tokens, targets, K * MICRO, 1, &f_big);
    print_message("peak act: one micro-batch of %d rows %zu B, %d accumulated %zu B, one batch "
                  "of %d rows %zu B\n", MICRO, micro, K, accum, K * MICRO, big);
    assert_int_equal(accum, micro);
    assert_true(big > (size_t)(K - 1) * micro);
    /* Every micro-batch ran: the products of K micro-batches, the big batch's. */
    assert_true(f_micro > 0);
    assert_int_equal(f_accum, K * f_micro);
    assert_int_equal(f_accum, f_big);
    trainer_free(tr);
}

/* ---- the memory-saving optimizers in the trainer -------------------------------------------- */

static double run_step(Trainer *tr)
{
    int tokens[2 * MICRO * T], targets[2 * MICRO * T];
    draw_rows(&tr->data_rng, 2 * MICRO, tokens, targets);
    return trainer_step_accum(tr, tokens, targets, MICRO, T, 2, 3e-3).loss;
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

/* N steps straight, and N/2 + save + load + N/2, give identical losses, weights and buffers; the
 * loss goes down; the state is in the optim category. */
static void check_resume(TrainOptimizer optimizer)
{
    TrainerConfig c = tiny_config(optimizer);
    c.adafactor.beta1 = optimizer == TRAIN_ADAFACTOR ? 0.9 : 0.0;   /* every buffer kind */
    double straight[N_STEPS], resumed[N_STEPS];
    Trainer *a = trainer_new(&c);
    assert_string_equal(a->optim->kind, trainer_optimizer_name(optimizer));
    assert_true(optim_buffer_count(a->optim) > 0);
    for (int k = 0; k < N_STEPS; k++)
        straight[k] = run_step(a);
    Trainer *b = trainer_new(&c);
    for (int k = 0; k < N_STEPS / 2; k++)
        resumed[k] = run_step(b);
    char path[512];
    in_dir(path, sizeof path, "resume.safetensors");
    SnapshotError err;
    assert_true(train_snapshot_save(b, path, NULL, NULL, 0, &err));
    trainer_free(b);
    Trainer *r = load_file(path, &err);
    if (!r)
        print_error("%s\n", err.message);
    assert_non_null(r);
    for (int k = N_STEPS / 2; k < N_STEPS; k++)
        resumed[k] = run_step(r);
    assert_memory_equal(straight, resumed, sizeof straight);
    assert_true(straight[N_STEPS - 1] < straight[0]);
    for (int i = 0; i < optim_buffer_count(a->optim); i++) {
        const OptimBuffer *x = optim_buffer(a->optim, i), *y = optim_buffer(r->optim, i);
        assert_string_equal(x->name, y->name);
        assert_memory_equal(x->data, y->data, optim_buffer_bytes(x));
    }
    print_message("%s: losses %.4f -> %.4f, identical after a snapshot; state %zu bytes\n",
                  trainer_optimizer_name(optimizer), straight[0], straight[N_STEPS - 1],
                  optim_state_bytes(a->optim));
    trainer_free(a);
    trainer_free(r);
}

static void test_resume_adam8bit(void **state)
{
    (void)state;
    check_resume(TRAIN_ADAM8BIT);
}

static void test_resume_adafactor(void **state)
{
    (void)state;
    check_resume(TRAIN_ADAFACTOR);
}

/* The snapshot records the optimizer's settings, and a U8 buffer is stored as U8. */
static void test_snapshot_records_the_optimizer(void **state)
{
    (void)state;
    TrainerConfig c = tiny_config(TRAIN_ADAFACTOR);
    c.adafactor.clip_threshold = 0.5;
    Trainer *tr = trainer_new(&c);
    char path[512];
    in_dir(path, sizeof path, "adafactor.safetensors");
    SnapshotError err;
    assert_true(train_snapshot_save(tr, path, NULL, NULL, 0, &err));
    SnapshotReader *r = snapshot_open(path, &err);
    TrainerConfig back;
    assert_true(train_snapshot_config(r, path, &back, &err));
    assert_true(back.optimizer == TRAIN_ADAFACTOR);
    const AdafactorConfig *x = &back.adafactor, *y = &c.adafactor;
    assert_true(x->beta1 == y->beta1 && x->decay_exponent == y->decay_exponent &&
                x->eps1 == y->eps1 && x->eps2 == y->eps2 &&
                x->clip_threshold == y->clip_threshold && x->relative_step == y->relative_step &&
                x->scale_parameter == y->scale_parameter && x->factored == y->factored &&
                x->weight_decay == y->weight_decay && x->decay_rule == y->decay_rule);
    assert_non_null(snapshot_find(r, "adafactor.row.blocks.0.mlp.fc.weight"));
    snapshot_close(r);
    trainer_free(tr);

    c = tiny_config(TRAIN_ADAM8BIT);
    c.model.n_embd = 32;    /* an fc weight of 32 x 128 = 4096 elements: 8-bit state */
    tr = trainer_new(&c);
    assert_true(train_snapshot_save(tr, path, NULL, NULL, 0, &err));
    r = snapshot_open(path, &err);
    const SnapshotEntry *e = snapshot_find(r, "adam8bit.m.blocks.0.mlp.fc.weight");
    assert_non_null(e);
    assert_int_equal(e->dtype, SNAPSHOT_U8);
    assert_int_equal(e->shape[0], 4096);
    snapshot_close(r);
    trainer_free(tr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accumulated_gradient_is_the_big_batch_gradient),
        cmocka_unit_test(test_accumulated_step_is_the_big_batch_step),
        cmocka_unit_test(test_peak_act_is_one_micro_batch),
        cmocka_unit_test(test_resume_adam8bit),
        cmocka_unit_test(test_resume_adafactor),
        cmocka_unit_test(test_snapshot_records_the_optimizer),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}

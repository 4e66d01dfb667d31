/* Training snapshots written by older versions still load (optim/snapshot_keys.c's
 * snapshot_keys_migrate): two files in tests/fixtures written by the code of earlier commits
 * with tests/fixtures/old_snapshot_gen.c (it says how).
 *
 * train_snapshot_68a4683: the first layout, before mixed precision, loss scaling and 8-bit
 * Adam's rounding: it loads as an fp32 run without loss scaling, with the counters it saved,
 * and resumes to the losses and gradient norms that code logged for the steps after the save
 * (within 1e-5: they also depend on the BLAS kernels and the compiler).
 *
 * train_snapshot_cf93f6f_fp8: fp8 delayed scaling and a dynamic loss scaler, saved before the
 * amax history was kept: it loads with the policy and the scaler's state it saved and a fresh
 * history (that code's resume started one too), trains, and its next snapshot keeps the
 * history.
 *
 * train_snapshot_ddf9e69_fp8: the same run saved by ddf9e69, between d41c5fc (the history kept,
 * its column counter under the key precision.amax_history_resets) and 4504ada (the counter
 * renamed precision.amax_history_steps): it loads with its history and counter and resumes to
 * the losses and norms that code logged. */
#include "tests/snapshot_test_helpers.h"

#include <math.h>

#include "optim/train.h"
#include "optim/snapshot_keys.h"
#include "optim/train_snapshot.h"

enum { B = 4, T = 8, V = 13 };

/* As tests/fixtures/old_snapshot_gen.c draws them. */
static void draw_batch(Rng *rng, int *tokens, int *targets)
{
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++)
            tokens[b * T + t] = (int)rng_below(rng, V);
        for (int t = 0; t < T; t++)
            targets[b * T + t] = t < 2 ? -1 : (tokens[b * T + t] + tokens[b * T + t - 1]) % V;
    }
}

static TrainStepResult step(Trainer *tr)
{
    int tokens[B * T], targets[B * T];
    draw_batch(&tr->data_rng, tokens, targets);
    return trainer_step(tr, tokens, targets, B, T, 0.01 * (double)(tr->step + 1));
}

static const char *fixture(const char *name, char *buf, size_t len)
{
    const char *here = __FILE__, *slash = strrchr(here, '/');
    snprintf(buf, len, "%.*sfixtures/%s", slash ? (int)(slash - here + 1) : 0, here, name);
    return buf;
}

static Trainer *load(const char *name, TrainerConfig *cfg)
{
    char path[512];
    SnapshotError err;
    SnapshotReader *r = snapshot_open(fixture(name, path, sizeof path), &err);
    if (!r)
        print_error("%s\n", err.message);
    assert_non_null(r);
    bool ok = train_snapshot_config(r, path, cfg, &err);
    Trainer *t = ok ? train_snapshot_load(r, path, &err) : NULL;
    if (!t)
        print_error("%s\n", err.message);
    assert_non_null(t);
    snapshot_close(r);
    return t;
}

static void test_first_layout(void **state)
{
    (void)state;
    TrainerConfig c;
    Trainer *t = load("train_snapshot_68a4683.safetensors", &c);
    assert_int_equal(c.optimizer, TRAIN_ADAMW);
    assert_true(c.adamw.weight_decay == 0.1 && c.clip == 0.5 && c.seed == 3);
    assert_string_equal(c.policy.name, "fp32");
    assert_true(policy_is_fp32(&c.policy));
    assert_int_equal(c.loss_scale.mode, LOSS_SCALE_NONE);
    assert_int_equal(t->step, 3);
    assert_int_equal(t->optim->step, 3);
    assert_true(t->scaler.scale == 1.0f);
    assert_int_equal(t->scaler.checks, 0);
    /* What 68a4683 logged for steps 4 to 6 after saving at step 3. */
    static const struct { double loss, grad_norm; } want[] = {
        { 2.5517604351043701, 1.0098494384671832 },
        { 2.5089473724365234, 1.0706426322029068 },
        { 2.7896051406860352, 2.4310091295349556 },
    };
    for (int k = 0; k < 3; k++) {
        TrainStepResult r = step(t);
        print_message("step %d  loss %.17g (then %.17g)  grad_norm %.17g (then %.17g)\n", k + 4,
                      r.loss, want[k].loss, r.grad_norm, want[k].grad_norm);
        assert_true(fabs(r.loss - want[k].loss) <= 1e-5 * want[k].loss);
        assert_true(fabs(r.grad_norm - want[k].grad_norm) <= 1e-5 * want[k].grad_norm);
    }
    trainer_free(t);
}

static void test_history_counter_renamed(void **state)
{
    (void)state;
    TrainerConfig c;
    Trainer *t = load("train_snapshot_ddf9e69_fp8.safetensors", &c);
    assert_int_equal(c.policy.fp8_scaling, POLICY_FP8_DELAYED);
    assert_int_equal(t->step, 3);
    assert_int_equal(t->tape->history_slots, 64);
    assert_int_equal(t->tape->history_steps, 3);
    /* The history's rows hold the amax of the three steps, the fourth column none yet. */
    float first = t->tape->amax_history[0], unused = t->tape->amax_history[3];
    assert_true(first > 0.0f && unused == 0.0f);
    /* What ddf9e69 logged for step 4 after saving at step 3: the forward reads the weights and
     * the delayed scales the file kept, so the loss is that code's (to 1e-5, for the BLAS
     * kernels). The backward is today's: fp8's parameter gradients became e5m2 after ddf9e69
     * (issue 18), so the norm and the steps after it part from that log by about 0.3%. */
    TrainStepResult r = step(t);
    print_message("step 4  loss %.17g (then 2.5447995662689209)  grad_norm %.17g (then "
                  "1.4907499561239128)\n", r.loss, r.grad_norm);
    assert_true(fabs(r.loss - 2.5447995662689209) <= 1e-5 * 2.5447995662689209);
    assert_true(fabs(r.grad_norm - 1.4907499561239128) <= 1e-2 * 1.4907499561239128);
    assert_int_equal(t->tape->history_steps, 4);
    trainer_free(t);
}

/* A text's rows got a key of their own (run.seq), apart from the model's T, when a LoRA run on
 * a base of a longer T needed one: every file before it had rows of the model's T, which the
 * migration gives the key; a file that has the key keeps its own. */
static void test_rows_are_the_model_t_before_run_seq(void **state)
{
    (void)state;
    char path[512];
    SnapshotError err;
    SnapshotReader *r = snapshot_open(fixture("train_snapshot_68a4683.safetensors", path,
                                              sizeof path), &err);
    assert_non_null(r);
    assert_null(snapshot_meta(r, "run.seq"));
    SnapshotKeyView v;
    snapshot_keys_migrate(&v, r, path);
    const char *t = snapshot_keys_value(&v, "model.max_seq");
    const char *rows = snapshot_keys_value(&v, "run.seq");
    assert_non_null(rows);
    assert_string_equal(rows, t);
    assert_int_equal(atoi(rows), T);
    snapshot_close(r);
}

static void test_before_the_amax_history(void **state)
{
    (void)state;
    TrainerConfig c;
    Trainer *t = load("train_snapshot_cf93f6f_fp8.safetensors", &c);
    assert_string_equal(c.policy.name, "fp8");
    assert_int_equal(c.policy.fp8_scaling, POLICY_FP8_DELAYED);
    assert_int_equal(c.policy.fp8_window, 4);
    assert_int_equal(c.loss_scale.mode, LOSS_SCALE_DYNAMIC);
    assert_true(c.loss_scale.init_scale == 256.0);
    assert_int_equal(c.loss_scale.growth_interval, 2);
    assert_int_equal(t->step, 3);
    assert_true(t->scaler.scale == 512.0f);
    assert_int_equal(t->scaler.growth_tracker, 1);
    assert_int_equal(t->scaler.checks, 3);
    assert_int_equal(t->tape->history_slots, 0);
    assert_int_equal(t->tape->history_steps, 0);
    for (int k = 0; k < 3; k++)
        assert_true(isfinite(step(t).loss));
    assert_true(t->tape->history_slots > 0);
    assert_int_equal(t->tape->history_steps, 3);
    /* The next snapshot is today's layout: the history is in it. */
    char dir[] = "/tmp/tapegrad_layouts_XXXXXX", path[600];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/again.safetensors", dir);
    SnapshotError err;
    assert_true(train_snapshot_save(t, path, NULL, NULL, 0, &err));
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    assert_string_equal(snapshot_meta(r, "precision.amax_history_steps"), "3");
    assert_non_null(snapshot_find(r, "precision.amax_history"));
    Trainer *again = train_snapshot_load(r, path, &err);
    assert_non_null(again);
    assert_int_equal(again->tape->history_slots, t->tape->history_slots);
    assert_memory_equal(again->tape->amax_history, t->tape->amax_history,
                        (size_t)t->tape->history_slots * 4 * sizeof(float));
    trainer_free(again);
    snapshot_close(r);
    remove(path);
    rmdir(dir);
    trainer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_layout),
        cmocka_unit_test(test_before_the_amax_history),
        cmocka_unit_test(test_history_counter_renamed),
        cmocka_unit_test(test_rows_are_the_model_t_before_run_seq),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The training step and training snapshots: the step's stages in the right order (the norm is
 * measured before clipping, clipping acts before the update), evaluation on the same numbers as
 * training, exact resumption through a snapshot (N steps straight and N/2 + save + load + N/2
 * give bit-identical losses and weights, for AdamW and for SGD with momentum), clear errors for
 * damaged or mismatched snapshots, and no system allocation inside the step loop after the
 * first step. */
#include "tests/snapshot_test_helpers.h"

#include <inttypes.h>

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

static bool same_params(const Trainer *a, const Trainer *b)
{
    int n, m;
    Tensor *const *pa = gpt_params(a->model, &n), *const *pb = gpt_params(b->model, &m);
    if (n != m)
        return false;
    for (int i = 0; i < n; i++)
        if (memcmp(pa[i]->data, pb[i]->data, pa[i]->size * sizeof(float)) != 0)
            return false;
    return true;
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

/* ---- exact resumption ----------------------------------------------------------------------- */

static void check_resume(TrainOptimizer optimizer)
{
    TrainerConfig c = tiny_config(optimizer);
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
    trainer_free(a);
    trainer_free(r);
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
        cmocka_unit_test(test_resume_is_exact_adamw),
        cmocka_unit_test(test_resume_is_exact_sgd),
        cmocka_unit_test(test_snapshot_contents),
        cmocka_unit_test(test_truncated_snapshot),
        cmocka_unit_test(test_mismatched_snapshots),
        cmocka_unit_test(test_failed_save_keeps_old_file),
        cmocka_unit_test(test_no_system_allocation_after_first_step),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}

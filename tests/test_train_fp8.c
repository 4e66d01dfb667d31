/* fp8 in the trainer and its snapshots. Under delayed scaling each stored activation's scale
 * comes from the amax history on the tape (autograd/tape.h), so the history is training state:
 * N steps straight and N/2 + save + load + N/2 give bit-identical losses, weights and history
 * only because the snapshot holds it (a resumed run that starts from a fresh history parts from
 * the straight one, which the test also shows). The file holds the history under the names
 * optim/train_snapshot.h gives, and a history whose shape disagrees with its metadata is
 * refused. The dynamic loss scaler's factors come back from the file too. Evaluations between
 * steps leave the history alone (they use current scaling), so they change no training step.
 *
 * Master weights of fp8 parameters (no preset stores parameters in fp8, a policy can): after an
 * update that makes the weights grow, the packed copy takes the masters' new scale instead of
 * saturating at the old one. */
#include "tests/snapshot_test_helpers.h"

#include "optim/sgd.h"
#include "optim/train.h"
#include "optim/train_snapshot.h"

enum { V = 11, T = 8, B = 3, N_STEPS = 10, WINDOW = 4 };

/* A tiny GPT under the fp8 preset with delayed scaling over WINDOW steps, and a dynamic loss
 * scaler whose every factor differs from GradScaler's default. */
static TrainerConfig fp8_config(void)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = V, .max_seq = T, .n_layer = 2, .n_head = 2,
                           .n_embd = 16, .tied = true, .fused_qkv = true };
    c.seed = 3;
    c.clip = 0.5;
    assert_true(policy_preset("fp8", &c.policy));
    c.policy.fp8_scaling = POLICY_FP8_DELAYED;
    c.policy.fp8_window = WINDOW;
    c.loss_scale = loss_scale_defaults();
    c.loss_scale.mode = LOSS_SCALE_DYNAMIC;
    c.loss_scale.init_scale = 256.0;
    c.loss_scale.growth_interval = 3;
    c.loss_scale.growth_factor = 4.0;
    c.loss_scale.backoff_factor = 0.25;
    return c;
}

/* Each target is its token plus one, mod V: learnt in a few steps. The batches are drawn with
 * the trainer's data RNG, as a program does. */
static double step(Trainer *tr)
{
    int tokens[B * T], targets[B * T];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            tokens[b * T + t] = (int)rng_below(&tr->data_rng, V);
    for (int i = 0; i < B * T; i++)
        targets[i] = (tokens[i] + 1) % V;
    double lr = 0.03 * (double)(tr->step + 1) / N_STEPS;
    return trainer_step(tr, tokens, targets, B, T, lr).loss;
}

static Trainer *load(const char *path)
{
    SnapshotError err;
    SnapshotReader *r = snapshot_open(path, &err);
    Trainer *tr = r ? train_snapshot_load(r, path, &err) : NULL;
    snapshot_close(r);
    if (!tr)
        fail_msg("%s", err.message);
    return tr;
}

static const char *save(const Trainer *tr, const char *name, char *path, size_t len)
{
    SnapshotError err;
    in_dir(path, len, name);
    if (!train_snapshot_save(tr, path, NULL, NULL, 0, &err))
        fail_msg("%s", err.message);
    return path;
}

static size_t history_bytes(const Tape *tape)
{
    return (size_t)tape->history_slots * WINDOW * sizeof(float);
}

static void test_resume_is_exact_under_delayed_scaling(void **state)
{
    (void)state;
    TrainerConfig c = fp8_config();
    double straight[N_STEPS], resumed[N_STEPS], fresh[N_STEPS];
    Trainer *a = trainer_new(&c), *b = trainer_new(&c);
    for (int k = 0; k < N_STEPS; k++)
        straight[k] = step(a);
    for (int k = 0; k < N_STEPS / 2; k++)
        resumed[k] = fresh[k] = step(b);
    char path[512];
    save(b, "delayed.safetensors", path, sizeof path);
    trainer_free(b);

    Trainer *r = load(path), *f = load(path);
    /* f is what loading did before the history was saved: the same file, an empty history. */
    free(f->tape->amax_history);
    f->tape->amax_history = NULL;
    f->tape->history_slots = 0;
    f->tape->history_steps = 0;
    assert_true(r->tape->history_slots > 0);
    for (int k = N_STEPS / 2; k < N_STEPS; k++) {
        resumed[k] = step(r);
        fresh[k] = step(f);
    }
    int parted = 0;
    for (int k = 0; k < N_STEPS; k++) {
        print_message("step %2d  straight %.9g  resumed %.9g  fresh history %.9g\n", k + 1,
                      straight[k], resumed[k], fresh[k]);
        parted += fresh[k] != straight[k];
    }
    assert_memory_equal(straight, resumed, sizeof straight);
    assert_true(parted > 0);
    assert_true(straight[N_STEPS - 1] < straight[0]);
    int n;
    Tensor *const *pa = gpt_params(a->model, &n), *const *pr = gpt_params(r->model, &n);
    for (int i = 0; i < n; i++) {
        assert_memory_equal(pa[i]->packed, pr[i]->packed, tensor_bytes(pa[i]));
        assert_memory_equal(optim_master(a->optim, i), optim_master(r->optim, i),
                            pa[i]->size * sizeof(float));
    }
    assert_int_equal(a->tape->history_slots, r->tape->history_slots);
    assert_int_equal(a->tape->history_steps, r->tape->history_steps);
    assert_memory_equal(a->tape->amax_history, r->tape->amax_history, history_bytes(a->tape));
    /* The scaler: every factor from the file, and the state (it grew at steps 3, 6 and 9). */
    const LossScaleConfig *s = &r->scaler.cfg;
    assert_true(s->mode == LOSS_SCALE_DYNAMIC && s->init_scale == 256.0);
    assert_true(s->growth_factor == 4.0 && s->backoff_factor == 0.25);
    assert_int_equal(s->growth_interval, 3);
    assert_true(r->scaler.scale == 256.0f * 64.0f && a->scaler.scale == r->scaler.scale);
    assert_int_equal(r->scaler.growth_tracker, a->scaler.growth_tracker);
    assert_true(r->cfg.policy.fp8_scaling == POLICY_FP8_DELAYED);
    assert_int_equal(r->cfg.policy.fp8_window, WINDOW);
    trainer_free(a);
    trainer_free(r);
    trainer_free(f);
}

/* The history is a [slots, WINDOW] F32 tensor holding the tape's bytes, with its row count and
 * the tape's step count in the metadata; a fresh trainer saves no rows and loads back; current
 * scaling saves none of it. */
static void test_snapshot_holds_the_history(void **state)
{
    (void)state;
    TrainerConfig c = fp8_config();
    Trainer *tr = trainer_new(&c);
    char path[512];
    SnapshotError err;
    save(tr, "fresh.safetensors", path, sizeof path);
    SnapshotReader *rd = snapshot_open(path, &err);
    assert_string_equal(snapshot_meta(rd, "precision.amax_history_slots"), "0");
    assert_null(snapshot_find(rd, "precision.amax_history"));
    snapshot_close(rd);
    Trainer *back = load(path);
    assert_int_equal(back->tape->history_slots, 0);
    trainer_free(back);

    for (int k = 0; k < 3; k++)
        step(tr);
    save(tr, "three.safetensors", path, sizeof path);
    rd = snapshot_open(path, &err);
    const SnapshotEntry *e = snapshot_find(rd, "precision.amax_history");
    assert_non_null(e);
    assert_int_equal(e->dtype, SNAPSHOT_F32);
    assert_int_equal(e->ndim, 2);
    assert_int_equal(e->shape[0], tr->tape->history_slots);
    assert_int_equal(e->shape[1], WINDOW);
    char slots[32];
    snprintf(slots, sizeof slots, "%d", tr->tape->history_slots);
    assert_string_equal(snapshot_meta(rd, "precision.amax_history_slots"), slots);
    assert_string_equal(snapshot_meta(rd, "precision.amax_history_steps"), "3");
    float *h = malloc(history_bytes(tr->tape));
    assert_true(snapshot_read(rd, "precision.amax_history", SNAPSHOT_F32, 2, e->shape, h,
                              &err));
    assert_memory_equal(h, tr->tape->amax_history, history_bytes(tr->tape));
    /* Three steps wrote columns 0, 1, 2 of the first row (the first stored activation, the
     * embedding's output, whose amax is positive); column 3 is still empty. */
    assert_true(h[0] > 0.0f && h[1] > 0.0f && h[2] > 0.0f && h[3] == 0.0f);
    free(h);
    snapshot_close(rd);
    trainer_free(tr);

    c.policy.fp8_scaling = POLICY_FP8_CURRENT;
    tr = trainer_new(&c);
    step(tr);
    save(tr, "current.safetensors", path, sizeof path);
    rd = snapshot_open(path, &err);
    assert_null(snapshot_meta(rd, "precision.amax_history_slots"));
    assert_null(snapshot_find(rd, "precision.amax_history"));
    snapshot_close(rd);
    trainer_free(tr);
}

/* The file's bytes with the first occurrence of from replaced by to, of the same length (so the
 * header keeps its length), written to dir/name. */
static const char *edited(const char *src, const char *from, const char *to, const char *name,
                          char *path, size_t len)
{
    size_t n;
    unsigned char *bytes = slurp(src, &n);
    bytes[n] = '\0';
    char *at = strstr((char *)bytes + 8, from);
    assert_non_null(at);
    assert_int_equal(strlen(from), strlen(to));
    memcpy(at, to, strlen(to));
    spit(in_dir(path, len, name), bytes, n);
    free(bytes);
    return path;
}

static void expect_refused(const char *path, const char *needle)
{
    SnapshotError err = { { 0 } };
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    Trainer *tr = train_snapshot_load(r, path, &err);
    snapshot_close(r);
    if (tr) {
        trainer_free(tr);
        fail_msg("%s loaded; expected an error containing \"%s\"", path, needle);
    }
    expect_message(err.message, path, needle);
}

/* One row more than the tensor has, or none at all while the tensor is there: refused, with
 * the tensor named. */
static void test_history_disagreeing_with_its_metadata(void **state)
{
    (void)state;
    TrainerConfig c = fp8_config();
    Trainer *tr = trainer_new(&c);
    step(tr);
    char good[512], bad[512], from[64], to[64];
    save(tr, "one.safetensors", good, sizeof good);
    int slots = tr->tape->history_slots;
    assert_true(slots >= 10 && slots <= 98);    /* two digits, so "+1" keeps the length */
    snprintf(from, sizeof from, "\"precision.amax_history_slots\":\"%d\"", slots);
    snprintf(to, sizeof to, "\"precision.amax_history_slots\":\"%d\"", slots + 1);
    expect_refused(edited(good, from, to, "more.safetensors", bad, sizeof bad),
                   "precision.amax_history");
    snprintf(to, sizeof to, "\"precision.amax_history_slots\":\"00\"");
    expect_refused(edited(good, from, to, "none.safetensors", bad, sizeof bad),
                   "unknown tensor 'precision.amax_history'");
    trainer_free(tr);
}

/* A parameter stored in e4m3 whose weights grow 16-fold in one update: packed again with the
 * new amax's scale, every value decodes within half an e4m3 spacing at the top, 1/28 of the
 * amax (the amax lands on 448, and from 256 to 448 the spacing is 32). Kept at the old scale,
 * the grown values would saturate at the old amax, 15/16 of the new one away. */
/* A forward that does not record (evaluation) stores other tensors than a training step (no saved
 * extras), so it must not read or write the history: it uses current scaling, and training with
 * evaluations between its steps is bit for bit training without them. */
static double eval_loss(Trainer *tr)
{
    int tokens[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (5 * i + 1) % V;
        targets[i] = (tokens[i] + 1) % V;
    }
    double loss;
    trainer_eval(tr, tokens, targets, B, T, &loss);
    trainer_eval_done(tr);
    return loss;
}

static void test_evaluation_leaves_the_history_alone(void **state)
{
    (void)state;
    TrainerConfig c = fp8_config();
    Trainer *a = trainer_new(&c), *b = trainer_new(&c);
    for (int k = 0; k < N_STEPS; k++) {
        double la = step(a);
        double delayed = eval_loss(b);
        b->cfg.policy.fp8_scaling = POLICY_FP8_CURRENT;    /* the tape reads the trainer's */
        double current = eval_loss(b);
        b->cfg.policy.fp8_scaling = POLICY_FP8_DELAYED;
        assert_true(delayed == current);
        assert_true(la == step(b));
    }
    assert_int_equal(a->tape->history_steps, N_STEPS);
    assert_int_equal(b->tape->history_steps, N_STEPS);
    assert_int_equal(a->tape->history_slots, b->tape->history_slots);
    assert_memory_equal(a->tape->amax_history, b->tape->amax_history, history_bytes(a->tape));
    trainer_free(a);
    trainer_free(b);
}

static void test_fp8_parameters_follow_their_masters(void **state)
{
    (void)state;
    Tensor *p = tensor_param("w", 1, (int[]){ 64 });
    Rng rng = rng_new(9, 0);
    for (size_t j = 0; j < p->size; j++)
        p->data[j] = rng_normal(&rng);
    Sgd *sgd = sgd_new(&p, 1, sgd_defaults());
    Optim *o = &sgd->base;
    optim_use_master_weights(o, DTYPE_E4M3);
    assert_int_equal(p->dtype, DTYPE_E4M3);
    optim_expose_masters(o);
    for (size_t j = 0; j < p->size; j++)
        p->data[j] *= 16.0f;
    optim_pack_masters(o);
    const float *master = optim_master(o, 0), *w = tensor_unpack(p);
    float amax = 0.0f, worst = 0.0f;
    for (size_t j = 0; j < p->size; j++) {
        amax = fmaxf(amax, fabsf(master[j]));
        worst = fmaxf(worst, fabsf(w[j] - master[j]));
    }
    print_message("amax %g, largest error %g (%.4f of amax)\n", (double)amax, (double)worst,
                  (double)(worst / amax));
    assert_true(worst <= amax / 28.0f * 1.0001f);
    tensor_release(p);
    optim_free(o);
    tensor_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_is_exact_under_delayed_scaling),
        cmocka_unit_test(test_snapshot_holds_the_history),
        cmocka_unit_test(test_history_disagreeing_with_its_metadata),
        cmocka_unit_test(test_evaluation_leaves_the_history_alone),
        cmocka_unit_test(test_fp8_parameters_follow_their_masters),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}

/* Loss scaling (optim/loss_scale.h), rule by rule, against GradScaler's documented behaviour:
 * the scale halves on an inf and on a NaN and the step is skipped; it doubles exactly at the
 * 2000th clean step in a row, not the 1999th, and an overflow restarts the count; a static
 * scale never moves; every factor can be set; the flag's syntax and its errors; unscaling by a
 * power of two gives back the unscaled gradients bit for bit.
 *
 * The factors in a training run (what train_gpt's --scale-* flags set): with a growth interval
 * of 10 the scale a step's backward is seeded with doubles after steps 10, 20 and 30 of a clean
 * fp16 run; with a backoff factor of 1/4 each overflowing step divides it by 4. */
#include "tests/test_helpers.h"

#include <float.h>
#include <string.h>

#include "optim/loss_scale.h"
#include "optim/optim.h"
#include "optim/train.h"

/* A scale compared exactly, and a step that must be skipped: on failure both say what was
 * expected and what came. */
#define assert_scale(s, want)                                                                   \
    do {                                                                                        \
        float got_ = loss_scale_value(s), want_ = (float)(want);                                \
        if (got_ != want_)                                                                      \
            fail_msg("loss scale: expected %g, got %g", (double)want_, (double)got_);           \
    } while (0)
#define assert_skipped(s, found)                                                                \
    do {                                                                                        \
        if (!loss_scale_update(s, found))                                                       \
            fail_msg("loss_scale_update(found_inf = %s) returned false: a step with an inf or " \
                     "NaN gradient must be skipped", (found) ? "true" : "false");              \
    } while (0)

static LossScaler dynamic_scaler(void)
{
    LossScaleConfig c = loss_scale_defaults();
    c.mode = LOSS_SCALE_DYNAMIC;
    return loss_scale_new(&c);
}

/* n clean steps; the return values must all say "do not skip". */
static void clean_steps(LossScaler *s, long n)
{
    for (long i = 0; i < n; i++)
        assert_false(loss_scale_update(s, false));
}

static void test_defaults_are_gradscalers(void **state)
{
    (void)state;
    LossScaleConfig c = loss_scale_defaults();
    assert_int_equal(c.mode, LOSS_SCALE_NONE);
    assert_true(c.init_scale == 65536.0 && c.growth_factor == 2.0 && c.backoff_factor == 0.5);
    assert_int_equal(c.growth_interval, 2000);
    LossScaler none = loss_scale_new(&c);
    assert_scale(&none, 1.0f);
    LossScaler dyn = dynamic_scaler();
    assert_scale(&dyn, 65536.0f);
}

/* An inf, a -inf or a NaN anywhere: found, the step skipped, the scale halved, and the count of
 * clean steps back to 0. */
static void test_overflow_halves_and_skips(void **state)
{
    (void)state;
    const float poison[] = { INFINITY, -INFINITY, NAN };
    for (int k = 0; k < 3; k++) {
        LossScaler s = dynamic_scaler();
        clean_steps(&s, 10);
        assert_int_equal(s.growth_tracker, 10);
        float a[5] = { 1, 2, 3, 4, 5 }, b[3] = { 6, 7, 8 };
        b[k] = poison[k];
        float *grads[] = { a, NULL, b };
        size_t counts[] = { 5, 100, 3 };
        bool found = loss_scale_unscale(&s, grads, counts, 3);
        assert_true(found);
        assert_skipped(&s, found);
        assert_scale(&s, 32768.0f);
        assert_int_equal(s.growth_tracker, 0);
        assert_int_equal(s.skipped, 1);
        assert_skipped(&s, true);
        assert_scale(&s, 16384.0f);
        assert_int_equal(s.skipped, 2);
    }
}

/* The 1999th clean step changes nothing, the 2000th doubles, and the count restarts. */
static void test_growth_at_exactly_the_interval(void **state)
{
    (void)state;
    LossScaler s = dynamic_scaler();
    clean_steps(&s, 1999);
    assert_scale(&s, 65536.0f);
    assert_int_equal(s.growth_tracker, 1999);
    clean_steps(&s, 1);
    assert_scale(&s, 131072.0f);
    assert_int_equal(s.growth_tracker, 0);
    clean_steps(&s, 1999);
    assert_scale(&s, 131072.0f);
    clean_steps(&s, 1);
    assert_scale(&s, 262144.0f);
    assert_int_equal(s.skipped, 0);
}

/* 1999 clean steps, an overflow, 1999 more: no growth (the count restarted at the overflow);
 * the 2000th after it grows. */
static void test_overflow_restarts_the_count(void **state)
{
    (void)state;
    LossScaler s = dynamic_scaler();
    clean_steps(&s, 1999);
    assert_skipped(&s, true);
    assert_scale(&s, 32768.0f);
    clean_steps(&s, 1999);
    assert_scale(&s, 32768.0f);
    clean_steps(&s, 1);
    assert_scale(&s, 65536.0f);
}

/* A static scale skips the bad steps too, but neither halves nor grows. */
static void test_static_never_changes(void **state)
{
    (void)state;
    LossScaleConfig c;
    char err[160];
    assert_true(loss_scale_parse("static:1024", &c, err, sizeof err));
    LossScaler s = loss_scale_new(&c);
    for (int i = 0; i < 5000; i++) {
        bool bad = i % 7 == 3;
        assert_true(loss_scale_update(&s, bad) == bad);
        assert_scale(&s, 1024.0f);
    }
    assert_int_equal(s.skipped, 5000 / 7 + (5000 % 7 > 3));
    /* none: scale 1 always, and a bad step is still skipped */
    LossScaleConfig n = loss_scale_defaults();
    LossScaler ns = loss_scale_new(&n);
    assert_skipped(&ns, true);
    clean_steps(&ns, 4000);
    assert_scale(&ns, 1.0f);
}

/* growth 4, backoff 0.25, interval 3, init 10: 10 -> (3 clean) 40 -> (inf) 10 -> (2 clean) 10
 * -> (1 clean) 40. A growth that would overflow to inf keeps the scale. */
static void test_factors_are_settable(void **state)
{
    (void)state;
    LossScaleConfig c = loss_scale_defaults();
    c.mode = LOSS_SCALE_DYNAMIC;
    c.init_scale = 10.0;
    c.growth_factor = 4.0;
    c.backoff_factor = 0.25;
    c.growth_interval = 3;
    LossScaler s = loss_scale_new(&c);
    assert_scale(&s, 10.0f);
    clean_steps(&s, 2);
    assert_scale(&s, 10.0f);
    clean_steps(&s, 1);
    assert_scale(&s, 40.0f);
    assert_skipped(&s, true);
    assert_scale(&s, 10.0f);
    clean_steps(&s, 2);
    assert_scale(&s, 10.0f);
    clean_steps(&s, 1);
    assert_scale(&s, 40.0f);

    c.init_scale = ldexp(1.0, 127);
    c.growth_factor = 2.0;
    c.growth_interval = 1;
    LossScaler top = loss_scale_new(&c);
    clean_steps(&top, 3);
    assert_scale(&top, ldexpf(1.0f, 127));
    assert_int_equal(top.growth_tracker, 0);
}

static void test_parse(void **state)
{
    (void)state;
    char err[200], buf[64];
    LossScaleConfig c;
    assert_true(loss_scale_parse("none", &c, err, sizeof err));
    assert_int_equal(c.mode, LOSS_SCALE_NONE);
    assert_true(loss_scale_parse("static:1024", &c, err, sizeof err));
    assert_int_equal(c.mode, LOSS_SCALE_STATIC);
    assert_true(c.init_scale == 1024.0);
    assert_true(loss_scale_parse("static:0.125", &c, err, sizeof err));
    assert_true(c.init_scale == 0.125);
    assert_true(loss_scale_parse("dynamic", &c, err, sizeof err));
    assert_int_equal(c.mode, LOSS_SCALE_DYNAMIC);
    assert_true(c.init_scale == 65536.0 && c.growth_factor == 2.0);
    assert_true(loss_scale_parse("dynamic:128", &c, err, sizeof err));
    assert_true(c.init_scale == 128.0);
    assert_string_equal(loss_scale_format(&c, buf, sizeof buf), "dynamic:128");
    LossScaleConfig back;
    assert_true(loss_scale_parse(buf, &back, err, sizeof err));
    assert_int_equal(back.mode, c.mode);   /* field by field: the struct has padding */
    assert_true(back.init_scale == c.init_scale && back.growth_factor == c.growth_factor &&
                back.backoff_factor == c.backoff_factor);
    assert_int_equal(back.growth_interval, c.growth_interval);

    const struct {
        const char *in, *needle;
    } bad[] = {
        { "", "'' is not a loss scaling: expected none, static:S or dynamic" },
        { "dyn", "'dyn' is not a loss scaling" },
        { "dynamics", "'dynamics' is not a loss scaling" },
        { "static", "'static' needs its scale: static:S" },
        { "static:", "'static:': '' is not a positive number" },
        { "static:abc", "'static:abc': 'abc' is not a positive number" },
        { "static:0", "'0' is not a positive number" },
        { "static:-8", "'-8' is not a positive number" },
        { "static:1e39", "'1e39' is not a positive number a float can hold" },
        { "static:inf", "'inf' is not a positive number" },
        { "static:12x", "'12x' is not a positive number" },
        { "dynamic:nan", "'nan' is not a positive number" },
        { "none:1", "'none:1': none takes no value" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        assert_false(loss_scale_parse(bad[i].in, &c, err, sizeof err));
        if (!strstr(err, bad[i].needle)) {
            print_error("'%s': got \"%s\", expected \"%s\"\n", bad[i].in, err, bad[i].needle);
            fail();
        }
    }
}

static void test_check(void **state)
{
    (void)state;
    char err[160];
    LossScaleConfig c = loss_scale_defaults();
    c.mode = LOSS_SCALE_DYNAMIC;
    assert_true(loss_scale_check(&c, err, sizeof err));
    LossScaleConfig g = c, b = c, i = c, s = c;
    g.growth_factor = 1.0;
    b.backoff_factor = 1.0;
    i.growth_interval = 0;
    s.init_scale = 0.0;
    assert_false(loss_scale_check(&g, err, sizeof err));
    assert_non_null(strstr(err, "growth factor 1 is not above 1"));
    assert_false(loss_scale_check(&b, err, sizeof err));
    assert_non_null(strstr(err, "backoff factor 1 is not in (0, 1)"));
    assert_false(loss_scale_check(&i, err, sizeof err));
    assert_non_null(strstr(err, "growth interval 0"));
    assert_false(loss_scale_check(&s, err, sizeof err));
    assert_non_null(strstr(err, "initial scale 0"));
}

/* Gradients scaled by 2^k (an exact product: the values stay normal) come back bit for bit,
 * in buffers long enough to be split over the threads; a non-power-of-two S multiplies by the
 * float nearest 1/S. Each call is one check. */
static void test_unscale_is_exact(void **state)
{
    (void)state;
    enum { N = 3 * OPTIM_PARALLEL_MIN + 17, M = 1000 };
    Rng rng = rng_new(11, 1);
    float *truth = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
    float small_truth[M], small[M];
    for (int j = 0; j < N; j++)
        truth[j] = ldexpf(rng_normal(&rng), (int)rng_below(&rng, 40) - 30);
    for (int j = 0; j < M; j++)
        small_truth[j] = rng_normal(&rng);
    const double scales[] = { 65536.0, 1.0, 0.125, ldexp(1.0, 40), 1000.0 };
    for (int k = 0; k < 5; k++) {
        LossScaleConfig c = loss_scale_defaults();
        c.mode = LOSS_SCALE_STATIC;
        c.init_scale = scales[k];
        LossScaler s = loss_scale_new(&c);
        float S = loss_scale_value(&s);
        for (int j = 0; j < N; j++)
            g[j] = truth[j] * S;
        for (int j = 0; j < M; j++)
            small[j] = small_truth[j] * S;
        float *grads[] = { g, small };
        size_t counts[] = { N, M };
        assert_false(loss_scale_unscale(&s, grads, counts, 2));
        assert_int_equal(s.checks, 1);
        if (k < 4) {
            assert_memory_equal(g, truth, N * sizeof(float));
            assert_memory_equal(small, small_truth, M * sizeof(float));
        } else {
            float inv = (float)(1.0 / 1000.0);
            for (int j = 0; j < N; j++)
                assert_true(g[j] == (truth[j] * 1000.0f) * inv);
        }
    }
    /* one inf at the very end of the long buffer, where the last thread looks */
    LossScaler s = dynamic_scaler();
    memcpy(g, truth, N * sizeof(float));
    g[N - 1] = INFINITY;
    float *grads[] = { g };
    size_t counts[] = { N };
    assert_true(loss_scale_unscale(&s, grads, counts, 1));
    assert_true(g[N - 2] == truth[N - 2] / 65536.0f);
    /* a finite value that overflows only once unscaled by S < 1 is found too */
    LossScaleConfig c;
    char err[160];
    assert_true(loss_scale_parse("static:0.5", &c, err, sizeof err));
    LossScaler half = loss_scale_new(&c);
    float big[2] = { 1.0f, FLT_MAX };
    float *bg[] = { big };
    assert_true(loss_scale_unscale(&half, bg, (size_t[]){ 2 }, 1));
    free(truth);
    free(g);
}

/* The tensor form: gradients of parameters, one without any. */
static void test_unscale_grads_of_tensors(void **state)
{
    (void)state;
    Tensor *a = tensor_param("a", 1, (int[]){ 4 }), *b = tensor_param("b", 1, (int[]){ 3 });
    float *ga = tensor_grad(a);
    for (int j = 0; j < 4; j++)
        ga[j] = 1024.0f * (float)(j + 1);
    LossScaleConfig c;
    char err[160];
    assert_true(loss_scale_parse("static:1024", &c, err, sizeof err));
    LossScaler s = loss_scale_new(&c);
    Tensor *params[] = { a, b };
    assert_false(loss_scale_unscale_grads(&s, params, 2));
    for (int j = 0; j < 4; j++)
        assert_true(ga[j] == (float)(j + 1));
    assert_null(b->grad);
    ga[2] = NAN;
    assert_true(loss_scale_unscale_grads(&s, params, 2));
    assert_int_equal(s.checks, 2);
    tensor_free(a);
    tensor_free(b);
}

/* ---- in the trainer ----------------------------------------------------------------------- */

enum { V = 7, T = 6, B = 2 };

/* A tiny GPT under fp16 (where overflow is real) with dynamic scaling from init. */
static Trainer *fp16_trainer(double init, long interval, double backoff)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = V, .max_seq = T, .n_layer = 1, .n_head = 2,
                           .n_embd = 8, .tied = true, .fused_qkv = true };
    assert_true(policy_preset("fp16", &c.policy));
    c.loss_scale.mode = LOSS_SCALE_DYNAMIC;
    c.loss_scale.init_scale = init;
    c.loss_scale.growth_interval = interval;
    c.loss_scale.backoff_factor = backoff;
    return trainer_new(&c);
}

/* One step on a batch from the trainer's RNG: each target is the token before it (mod V). */
static TrainStepResult train_one(Trainer *tr)
{
    int tokens[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++)
        tokens[i] = (int)rng_below(&tr->data_rng, V);
    for (int i = 0; i < B * T; i++)
        targets[i] = i % T == 0 ? -1 : tokens[i - 1];
    return trainer_step(tr, tokens, targets, B, T, 1e-3);
}

/* Step k's backward is seeded with 2^8 x 2^floor((k - 1) / 10): the scale grows after the
 * 10th, 20th and 30th clean steps, as --scale-growth-interval 10 asks. */
static void test_growth_interval_in_training(void **state)
{
    (void)state;
    Trainer *tr = fp16_trainer(256.0, 10, 0.5);
    for (long k = 1; k <= 31; k++) {
        TrainStepResult r = train_one(tr);
        assert_false(r.skipped);
        if (r.loss_scale != ldexp(256.0, (int)((k - 1) / 10)))
            fail_msg("step %ld seeded with %g", k, r.loss_scale);
    }
    assert_true(loss_scale_value(&tr->scaler) == 256.0f * 8.0f);
    assert_int_equal(tr->scaler.growth_tracker, 1);
    trainer_free(tr);
}

/* From 2^24, which overflows fp16's gradients here (test_train.c), a backoff factor of 1/4
 * divides the scale by 4 on every skipped step until one fits: the first clean step is seeded
 * with 2^(24 - 2 x skipped). */
static void test_backoff_factor_in_training(void **state)
{
    (void)state;
    Trainer *tr = fp16_trainer(ldexp(1.0, 24), 2000, 0.25);
    int skipped = 0;
    TrainStepResult r;
    while ((r = train_one(tr)).skipped) {
        skipped++;
        assert_true(r.loss_scale == ldexp(1.0, 26 - 2 * skipped));
        assert_true(loss_scale_value(&tr->scaler) == ldexpf(1.0f, 24 - 2 * skipped));
        assert_true(skipped < 12);
    }
    print_message("%d steps skipped; the first clean one seeded with 2^%d\n", skipped,
                  (int)log2(r.loss_scale));
    assert_true(skipped >= 1);
    assert_true(r.loss_scale == ldexp(1.0, 24 - 2 * skipped));
    assert_int_equal(tr->scaler.skipped, skipped);
    trainer_free(tr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_gradscalers),
        cmocka_unit_test(test_overflow_halves_and_skips),
        cmocka_unit_test(test_growth_at_exactly_the_interval),
        cmocka_unit_test(test_overflow_restarts_the_count),
        cmocka_unit_test(test_static_never_changes),
        cmocka_unit_test(test_factors_are_settable),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_unscale_is_exact),
        cmocka_unit_test(test_unscale_grads_of_tensors),
        cmocka_unit_test(test_growth_interval_in_training),
        cmocka_unit_test(test_backoff_factor_in_training),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

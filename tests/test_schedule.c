/* Learning-rate schedules: every combination of scaling rule, warmup and decay against values
 * worked by hand at the boundaries (step 0, W - 1, W, the start of the cooldown S - D, the last
 * step S - 1), the floor, the effective batch, and refused configurations.
 *
 * The setting throughout: base_lr 0.1 at base batch 32, micro-batch 32 with 4 accumulation
 * steps (k = 4: peaks 0.1, 0.4, 0.2 for none, linear, sqrt), S = 100, W = 10, D = 20. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "optim/schedule.h"

enum { S = 100, W = 10, D = 20, N_CHECKED = 5 };
static const long CHECKED[N_CHECKED] = { 0, W - 1, W, S - D, S - 1 };

static SchedConfig setting(SchedRule rule, SchedWarmup warmup, SchedDecay decay,
                           SchedCooldown shape)
{
    SchedConfig c = sched_defaults();
    c.base_lr = 0.1;
    c.base_batch = 32;
    c.batch = 32;
    c.accum = 4;
    c.rule = rule;
    c.warmup = warmup;
    c.warmup_steps = W;
    c.decay = decay;
    c.total_steps = S;
    c.cooldown_steps = D;
    c.cooldown = shape;
    return c;
}

/* The multiplier of the peak at the checked steps, by hand (cos and sqrt values to 15 digits,
 * from a calculator):
 *   cosine after W = 10 warmup steps, u = (s - 10) / 90:
 *       s = 10: 1;  s = 80: (1 + cos(7 pi / 9)) / 2 = 0.116977778440511;
 *       s = 99: (1 + cos(89 pi / 90)) / 2 = 0.000304586490452
 *   cosine without warmup, u = s / 100:
 *       s = 0: 1;  s = 9: (1 + cos(0.09 pi)) / 2 = 0.980146842838472;
 *       s = 10: (1 + cos(0.1 pi)) / 2 = 0.975528258147577;
 *       s = 80: (1 + cos(0.8 pi)) / 2 = 0.095491502812526;
 *       s = 99: (1 + cos(0.99 pi)) / 2 = 0.000246719817134
 *   wsd: 1 up to and including s = S - D = 80 (u = 0 there); s = 99 is u = 19/20:
 *       linear 1 - 0.95 = 0.05;  1-sqrt 1 - sqrt(0.95) = 0.025320565519104
 *   warmup: constant 0.1 at s = 0 and 9; gradual 1/10 at s = 0 and 10/10 at s = 9. */
typedef struct {
    SchedWarmup   warmup;
    SchedDecay    decay;
    SchedCooldown shape;
    double        factor[N_CHECKED];
} Expected;

static const Expected EXPECTED[] = {
    { SCHED_WARMUP_NONE, SCHED_DECAY_CONSTANT, SCHED_COOLDOWN_LINEAR, { 1, 1, 1, 1, 1 } },
    { SCHED_WARMUP_CONSTANT, SCHED_DECAY_CONSTANT, SCHED_COOLDOWN_LINEAR, { 0.1, 0.1, 1, 1, 1 } },
    { SCHED_WARMUP_GRADUAL, SCHED_DECAY_CONSTANT, SCHED_COOLDOWN_LINEAR, { 0.1, 1, 1, 1, 1 } },
    { SCHED_WARMUP_NONE, SCHED_DECAY_COSINE, SCHED_COOLDOWN_LINEAR,
      { 1, 0.980146842838472, 0.975528258147577, 0.095491502812526, 0.000246719817134 } },
    { SCHED_WARMUP_CONSTANT, SCHED_DECAY_COSINE, SCHED_COOLDOWN_LINEAR,
      { 0.1, 0.1, 1, 0.116977778440511, 0.000304586490452 } },
    { SCHED_WARMUP_GRADUAL, SCHED_DECAY_COSINE, SCHED_COOLDOWN_LINEAR,
      { 0.1, 1, 1, 0.116977778440511, 0.000304586490452 } },
    { SCHED_WARMUP_NONE, SCHED_DECAY_WSD, SCHED_COOLDOWN_LINEAR, { 1, 1, 1, 1, 0.05 } },
    { SCHED_WARMUP_CONSTANT, SCHED_DECAY_WSD, SCHED_COOLDOWN_LINEAR, { 0.1, 0.1, 1, 1, 0.05 } },
    { SCHED_WARMUP_GRADUAL, SCHED_DECAY_WSD, SCHED_COOLDOWN_LINEAR, { 0.1, 1, 1, 1, 0.05 } },
    { SCHED_WARMUP_NONE, SCHED_DECAY_WSD, SCHED_COOLDOWN_1SQRT,
      { 1, 1, 1, 1, 0.025320565519104 } },
    { SCHED_WARMUP_CONSTANT, SCHED_DECAY_WSD, SCHED_COOLDOWN_1SQRT,
      { 0.1, 0.1, 1, 1, 0.025320565519104 } },
    { SCHED_WARMUP_GRADUAL, SCHED_DECAY_WSD, SCHED_COOLDOWN_1SQRT,
      { 0.1, 1, 1, 1, 0.025320565519104 } },
};

static const double PEAK[3] = { 0.1, 0.4, 0.2 };   /* none, linear (x4), sqrt (x2) */

static void test_every_combination_at_the_boundaries(void **state)
{
    (void)state;
    int checked = 0;
    for (int r = 0; r < 3; r++) {
        for (size_t e = 0; e < sizeof EXPECTED / sizeof EXPECTED[0]; e++) {
            const Expected *x = &EXPECTED[e];
            SchedConfig c = setting((SchedRule)r, x->warmup, x->decay, x->shape);
            char err[160];
            assert_true(sched_check(&c, err, sizeof err));
            assert_true(fabs(sched_peak_lr(&c) - PEAK[r]) <= 1e-15);
            for (int i = 0; i < N_CHECKED; i++) {
                double want = PEAK[r] * x->factor[i], got = sched_lr(&c, CHECKED[i]);
                if (fabs(got - want) > 1e-14) {
                    printf("%s/%s/%s/%s step %ld: %.17g, want %.17g\n", SCHED_RULE_NAMES[r],
                           SCHED_WARMUP_NAMES[x->warmup], SCHED_DECAY_NAMES[x->decay],
                           SCHED_COOLDOWN_NAMES[x->shape], CHECKED[i], got, want);
                    fail();
                }
                checked++;
            }
            /* Past the end: the last step's rate. */
            assert_true(sched_lr(&c, S) == sched_lr(&c, S - 1));
            assert_true(sched_lr(&c, 10 * S) == sched_lr(&c, S - 1));
        }
    }
    printf("schedule: %d boundary values of 36 combinations within 1e-14\n", checked);
}

/* Between the boundaries: a gradual ramp is linear (step 4 of 10 is 5/10 of peak), the middle of
 * the cosine is half the peak, the middle of a cooldown is 1/2 (linear) or 1 - sqrt(1/2). */
static void test_inside_the_stages(void **state)
{
    (void)state;
    SchedConfig c = setting(SCHED_RULE_NONE, SCHED_WARMUP_GRADUAL, SCHED_DECAY_COSINE,
                            SCHED_COOLDOWN_LINEAR);
    assert_true(fabs(sched_lr(&c, 4) - 0.05) <= 1e-15);
    assert_true(fabs(sched_lr(&c, W + (S - W) / 2) - 0.05) <= 1e-15);
    c.decay = SCHED_DECAY_WSD;
    assert_true(fabs(sched_lr(&c, S - D / 2) - 0.05) <= 1e-15);
    assert_true(sched_lr(&c, S - D - 1) == 0.1);
    c.cooldown = SCHED_COOLDOWN_1SQRT;
    assert_true(fabs(sched_lr(&c, S - D / 2) - 0.1 * 0.292893218813452) <= 1e-15);
}

/* A floor of 0.2 x peak: every decaying value v becomes 0.2 + 0.8 v (of the peak). */
static void test_floor(void **state)
{
    (void)state;
    SchedConfig c = setting(SCHED_RULE_LINEAR, SCHED_WARMUP_NONE, SCHED_DECAY_WSD,
                            SCHED_COOLDOWN_LINEAR);
    c.final_fraction = 0.2;
    assert_true(fabs(sched_lr(&c, S - 1) - 0.4 * (0.2 + 0.8 * 0.05)) <= 1e-15);
    assert_true(fabs(sched_lr(&c, S - D) - 0.4) <= 1e-15);
    c.decay = SCHED_DECAY_COSINE;
    assert_true(fabs(sched_lr(&c, S / 2) - 0.4 * 0.6) <= 1e-15);
}

/* Scaling sees the effective batch only: 128 x 1 and 32 x 4 and 16 x 8 give the same rates. A
 * constant warmup of its own fraction runs at that fraction of the peak. */
static void test_effective_batch(void **state)
{
    (void)state;
    SchedConfig a = setting(SCHED_RULE_SQRT, SCHED_WARMUP_CONSTANT, SCHED_DECAY_COSINE,
                            SCHED_COOLDOWN_LINEAR);
    SchedConfig b = a, d = a;
    b.batch = 128;
    b.accum = 1;
    d.batch = 16;
    d.accum = 8;
    assert_int_equal(sched_effective_batch(&a), 128);
    for (long s = 0; s < S; s++)
        assert_true(sched_lr(&a, s) == sched_lr(&b, s) && sched_lr(&a, s) == sched_lr(&d, s));
    a.warmup_fraction = 0.25;
    assert_true(fabs(sched_lr(&a, 3) - 0.05) <= 1e-15);
    /* Without warmup, warmup_steps is ignored: step 0 is already the decay's. */
    a.warmup = SCHED_WARMUP_NONE;
    assert_true(sched_lr(&a, 0) == 0.2);
}

static void check_refused(SchedConfig c, const char *words)
{
    char err[160] = "";
    assert_false(sched_check(&c, err, sizeof err));
    if (!strstr(err, words)) {
        printf("message '%s' lacks '%s'\n", err, words);
        fail();
    }
}

static void test_bad_configs(void **state)
{
    (void)state;
    SchedConfig ok = setting(SCHED_RULE_NONE, SCHED_WARMUP_GRADUAL, SCHED_DECAY_WSD,
                             SCHED_COOLDOWN_LINEAR);
    SchedConfig c = ok;
    c.base_lr = 0.0;
    check_refused(c, "learning rate");
    c = ok;
    c.accum = 0;
    check_refused(c, "accumulation");
    c = ok;
    c.cooldown_steps = 91;
    check_refused(c, "exceed");
    c = ok;
    c.cooldown_steps = 0;
    check_refused(c, "cooldown step");
    c = ok;
    c.warmup_fraction = 1.5;
    check_refused(c, "fractions");
    /* W + D = S exactly is allowed; without warmup W does not count. */
    c = ok;
    c.cooldown_steps = 90;
    char err[160];
    assert_true(sched_check(&c, err, sizeof err));
    c.warmup = SCHED_WARMUP_NONE;
    c.cooldown_steps = 100;
    assert_true(sched_check(&c, err, sizeof err));
    assert_true(sched_lr(&c, 0) == 0.1);
}

static void negative_step(void *arg)
{
    (void)arg;
    SchedConfig c = sched_defaults();
    sched_lr(&c, -1);
}

static void test_negative_step_aborts(void **state)
{
    (void)state;
    assert_true(test_aborts(negative_step, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_combination_at_the_boundaries),
        cmocka_unit_test(test_inside_the_stages),
        cmocka_unit_test(test_floor),
        cmocka_unit_test(test_effective_batch),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_negative_step_aborts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

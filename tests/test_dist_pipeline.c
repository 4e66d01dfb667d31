/* Pipeline parallelism (dist/pipeline.h): schedules as data, the split, and the run on up to 4
 * ranks against one process accumulating the same micro-batches (trainer_accumulate,
 * trainer_step_accum): gradients and updated parameters bit for bit, in fp32, under bf16 and
 * with checkpointing inside a stage; the act memory of GPipe and 1F1B on the first stage. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "autograd/mem.h"
#include "dist/pipeline.h"
#include "tests/dist_test.h"

static void assert_close(double a, double b, double tol)
{
    assert_true(fabs(a - b) <= tol);
}

static void test_schedules_as_data(void **state)
{
    (void)state;
    char buf[256];
    PipeSchedule s = pipe_schedule_new(PIPE_1F1B, 4, 8);
    assert_string_equal(pipe_stage_string(&s, 0, buf, sizeof buf),
                        "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
    assert_string_equal(pipe_stage_string(&s, 3, buf, sizeof buf),
                        "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
    for (int st = 0; st < 4; st++)
        assert_int_equal(pipe_max_in_flight(&s, st), 4 - st);
    pipe_schedule_free(&s);
    s = pipe_schedule_new(PIPE_GPIPE, 4, 8);
    assert_string_equal(pipe_stage_string(&s, 2, buf, sizeof buf),
                        "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7");
    assert_int_equal(pipe_max_in_flight(&s, 0), 8);
    pipe_schedule_free(&s);
    s = pipe_schedule_new(PIPE_NAIVE, 4, 3);
    assert_string_equal(pipe_stage_string(&s, 1, buf, sizeof buf), "F0 B0 F1 B1 F2 B2");
    assert_int_equal(pipe_max_in_flight(&s, 1), 1);
    pipe_schedule_free(&s);
    /* 1F1B with fewer micro-batches than stages: warm-up is cut at m. */
    s = pipe_schedule_new(PIPE_1F1B, 4, 2);
    assert_string_equal(pipe_stage_string(&s, 0, buf, sizeof buf), "F0 F1 B0 B1");
    pipe_schedule_free(&s);
}

/* Played with F = 1, B = 2: GPipe and 1F1B take (m + p - 1) 3 time units, naive m p 3. */
static void test_simulated_bubble_is_the_formula(void **state)
{
    (void)state;
    for (int p = 1; p <= 4; p++) {
        for (int m = 1; m <= 9; m += 4) {
            for (int k = 0; k < PIPE_NSCHED; k++) {
                PipeSchedule s = pipe_schedule_new((PipeSchedKind)k, p, m);
                double busy[4];
                double span = pipe_simulate(&s, NULL, NULL, busy);
                double want = k == PIPE_NAIVE ? 3.0 * m * p : 3.0 * (m + p - 1);
                assert_close(span, want, 1e-12);
                for (int st = 0; st < p; st++)
                    assert_close(1.0 - busy[st] / span,
                                        pipe_bubble_formula((PipeSchedKind)k, p, m), 1e-12);
                pipe_schedule_free(&s);
            }
        }
    }
    /* p = 4, m = 8: 3/11 = 27.3%. */
    assert_close(pipe_bubble_formula(PIPE_GPIPE, 4, 8), 3.0 / 11.0, 1e-15);
}

static void test_split(void **state)
{
    (void)state;
    int first[5];
    char err[200];
    assert_true(pipe_split_parse(NULL, 4, 2, first, err, sizeof err));
    assert_int_equal(first[1], 2);
    assert_true(pipe_split_parse("2,1,1", 4, 3, first, err, sizeof err));
    assert_int_equal(first[1], 2);
    assert_int_equal(first[2], 3);
    assert_int_equal(first[3], 4);
    assert_false(pipe_split_parse(NULL, 4, 3, first, err, sizeof err));
    assert_non_null(strstr(err, "do not divide"));
    assert_false(pipe_split_parse("2,1", 4, 3, first, err, sizeof err));
    assert_non_null(strstr(err, "2 entries for 3 ranks"));
    assert_false(pipe_split_parse("2,2,0", 4, 3, first, err, sizeof err));
    assert_false(pipe_split_parse("1,1,1", 4, 3, first, err, sizeof err));
    assert_non_null(strstr(err, "counts 3 blocks"));
    assert_false(pipe_split_parse("2,1,1,", 4, 3, first, err, sizeof err));
    assert_false(pipe_split_parse("2,x,1", 4, 3, first, err, sizeof err));
}

/* A bad split is found by every rank from the same arguments, with the same sentence, before
 * any message: train_gpt prints it on every rank and exits, nobody waits. */
static void test_bad_split_same_error_on_every_rank(void **state)
{
    (void)state;
    DistComm *w = dist_world();
    int first[5];
    char err[200] = "", root[200] = "";
    bool failed = !pipe_split_parse("3,1,x", 4, w->size, first, err, sizeof err);
    memcpy(root, err, sizeof root);
    dist_broadcast(w, root, sizeof root, 0);
    assert_true(dist_test_all(failed && strcmp(err, root) == 0 && strstr(err, "--stages")));
}

/* A tiny model, 4 blocks, cut over the first min(4, world) ranks. */
enum { B = 2, T = 8, M = 3 };

static TrainerConfig tiny(bool tied, const char *policy)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = 11, .max_seq = T, .n_layer = 4, .n_head = 2,
                           .n_embd = 8, .tied = tied, .fused_qkv = true };
    c.clip = 0.0;
    c.seed = 7;
    policy_preset(policy, &c.policy);
    return c;
}

static void batch(int *tokens, int *targets, int m, uint64_t seed)
{
    Rng r = rng_new(seed, RNG_STREAM_DATA);
    for (int i = 0; i < m * B * T; i++) {
        tokens[i] = (int)rng_below(&r, 11);
        targets[i] = (int)rng_below(&r, 11);
    }
}

static DistComm *pipe_comm(int *first)
{
    int p = dist_world()->size < 4 ? dist_world()->size : 4;
    DistComm *c = dist_test_comm(p);
    const char *split = p == 3 ? "2,1,1" : NULL;
    char err[200];
    if (c && !pipe_split_parse(split, 4, p, first, err, sizeof err))
        fail_msg("%s", err);
    return c;
}

/* Every owned parameter's values (unpacked) and gradients equal the reference's, bitwise; or
 * within tol (relative to the largest) when tol > 0. */
static bool same_tensors(Pipeline *pp, Trainer *ref, bool grads, double tol)
{
    int n;
    Tensor *const *mine = gpt_params(pipe_trainer(pp)->model, &n);
    Tensor *const *want = gpt_params(ref->model, &n);
    bool ok = true;
    for (int i = 0; i < n; i++) {
        if (!pipe_owns(pp, mine[i]->name))
            continue;
        size_t sz = mine[i]->size;
        /* The reference's gradients are packed (bf16: optim_use_master_weights), the stages'
         * fp32 (optim_keep_fp32_grads): the same values. */
        float *ga = NULL, *gb = NULL;
        const float *a = grads ? tensor_grad_read(mine[i], &ga) : tensor_unpack(mine[i]);
        const float *b = grads ? tensor_grad_read(want[i], &gb) : tensor_unpack(want[i]);
        if (!a || !b) {
            ok = ok && a == b;
        } else if (tol == 0.0) {
            ok = ok && memcmp(a, b, sz * sizeof *a) == 0;
        } else {
            double big = 0.0;
            for (size_t j = 0; j < sz; j++)
                big = fmax(big, fabs(b[j]));
            for (size_t j = 0; j < sz; j++) {
                if (!(fabs(a[j] - b[j]) <= tol * big)) {
                    if (getenv("PIPE_DEBUG"))
                        fprintf(stderr, "%s %s [%zu]: %g vs %g\n", grads ? "grad" : "value",
                                mine[i]->name, j, a[j], b[j]);
                    ok = false;
                    break;
                }
            }
        }
        mem_free(ga);
        mem_free(gb);
        if (!grads) {
            tensor_release(mine[i]);
            tensor_release(want[i]);
        }
    }
    return ok;
}

/* Gradients of one accumulation and parameters after two steps, against one process. */
static void check_against_one_process(bool tied, const char *policy, const char *ckpt,
                                      double tol)
{
    int first[5], tokens[M * B * T], targets[M * B * T];
    DistComm *c = pipe_comm(first);
    bool ok = true;
    if (c) {
        TrainerConfig cfg = tiny(tied, policy);
        char err[200];
        if (ckpt && !ckpt_parse(ckpt, &cfg.local.checkpoint, err, sizeof err))
            fail_msg("%s", err);
        TrainerConfig rcfg = cfg;
        rcfg.local.checkpoint = (CkptStrategy){ CKPT_VANILLA, 0 };
        for (int k = 0; k < PIPE_NSCHED; k++) {
            Pipeline *pp = pipe_new(&cfg, c, (PipeSchedKind)k, M, first);
            Trainer *ref = trainer_new(&rcfg);
            batch(tokens, targets, M, 1);
            double l1 = pipe_accumulate(pp, tokens, targets, B, T);
            double l2 = trainer_accumulate(ref, tokens, targets, B, T, M);
            ok = ok && fabs(l1 - l2) <= tol * fabs(l2) && same_tensors(pp, ref, true, tol);
            optim_zero_grad(pipe_trainer(pp)->optim);
            optim_zero_grad(ref->optim);
            tape_reset(ref->tape);
            for (int step = 0; step < 2; step++) {
                batch(tokens, targets, M, 2 + (uint64_t)step);
                TrainStepResult a = pipe_step(pp, tokens, targets, B, T, 1e-2);
                TrainStepResult b = trainer_step_accum(ref, tokens, targets, B, T, M, 1e-2);
                ok = ok && fabs(a.loss - b.loss) <= tol * fabs(b.loss) && a.updated == b.updated;
                ok = ok && fabs(a.grad_norm - b.grad_norm) <= fmax(1e-9, tol) * b.grad_norm;
            }
            ok = ok && same_tensors(pp, ref, false, 10 * tol);
            trainer_free(ref);
            pipe_free(pp);
        }
        dist_comm_free(c);
    }
    assert_true(dist_test_all(ok));
}

static void test_fp32_untied_bit_for_bit(void **state)
{
    (void)state;
    check_against_one_process(false, "fp32", NULL, 0.0);
}

static void test_bf16_untied_bit_for_bit(void **state)
{
    (void)state;
    check_against_one_process(false, "bf16", NULL, 0.0);
}

static void test_checkpointed_stages_bit_for_bit(void **state)
{
    (void)state;
    check_against_one_process(false, "fp32", "memory-poor", 0.0);
}

/* A tied head's two terms are added in another order: equal to rounding. */
static void test_tied_within_rounding(void **state)
{
    (void)state;
    check_against_one_process(true, "fp32", NULL, 1e-5);
}

/* Peak act bytes on stage 0: GPipe's grow with m, 1F1B's stay at p micro-batches' worth, at
 * most p/m of GPipe's. */
static size_t stage0_peak(DistComm *c, const int *first, PipeSchedKind kind, int m)
{
    int *tokens = malloc((size_t)m * B * T * sizeof *tokens);
    int *targets = malloc((size_t)m * B * T * sizeof *targets);
    batch(tokens, targets, m, 3);
    TrainerConfig cfg = tiny(false, "fp32");
    Pipeline *pp = pipe_new(&cfg, c, kind, m, first);
    mem_reset_peaks();
    pipe_accumulate(pp, tokens, targets, B, T);
    size_t peak = mem_peak(MEM_ACT);
    pipe_free(pp);
    free(tokens);
    free(targets);
    return peak;
}

static void test_act_memory_gpipe_grows_1f1b_bounded(void **state)
{
    (void)state;
    int first[5];
    DistComm *c = pipe_comm(first);
    bool ok = true;
    if (c) {
        int p = c->size;
        size_t g4 = stage0_peak(c, first, PIPE_GPIPE, 4), g8 = stage0_peak(c, first, PIPE_GPIPE, 8);
        size_t o4 = stage0_peak(c, first, PIPE_1F1B, 4), o8 = stage0_peak(c, first, PIPE_1F1B, 8);
        if (c->rank == 0) {
            ok = g8 == 2 * g4;                          /* m micro-batches held */
            ok = ok && o8 == o4 && p <= 4;              /* p of them, whatever m */
            ok = ok && (double)o8 <= (double)p / 8.0 * (double)g8 + 0.5;
        }
        dist_comm_free(c);
    }
    assert_true(dist_test_all(ok));
}

int main(int argc, char **argv)
{
    dist_test_init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedules_as_data),
        cmocka_unit_test(test_simulated_bubble_is_the_formula),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_bad_split_same_error_on_every_rank),
        cmocka_unit_test(test_fp32_untied_bit_for_bit),
        cmocka_unit_test(test_bf16_untied_bit_for_bit),
        cmocka_unit_test(test_checkpointed_stages_bit_for_bit),
        cmocka_unit_test(test_tied_within_rounding),
        cmocka_unit_test(test_act_memory_gpipe_grows_1f1b_bounded),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dist_finalize();
    return failed;
}

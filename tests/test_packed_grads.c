/* Parameter gradients stored packed (autograd/tensor.h, "packed gradients"): a step under a
 * 16-bit policy measures 2 bytes of gradient per parameter, the lecture's 16 Psi of model state
 * with AdamW (2 + 2 + 12), and trains to the same bits as fp32 gradient buffers holding the same
 * rounded values; and the scratch of a step under any policy is at most fp32's. Every byte here
 * is measured by autograd/mem on a real step. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "examples/common/memcalc.h"
#include "optim/train.h"

/* ---- memory ---------------------------------------------------------------------------------- */

/* train_gpt's default model and batch (V 40, T 12, L 2, H 4, C 128, B 64): what
 * memory_calculator measures. */
static GptConfig default_model(void)
{
    return (GptConfig){ .vocab_size = 40, .max_seq = 12, .n_layer = 2, .n_head = 4,
                        .n_embd = 128, .tied = true, .fused_qkv = true };
}

static McPeaks step_peaks(const char *policy, const char *strategy, McOptimizer o)
{
    GptConfig cfg = default_model();
    PrecisionPolicy p;
    assert_true(policy_preset(policy, &p));
    McRun run = { .B = 64, .T = cfg.max_seq, .threads = 2, .policy = &p };
    char err[80];
    assert_true(ckpt_parse(strategy, &run.strategy, err, sizeof err));
    McPeaks m = memcalc_measure(&cfg, &run, o, 1);
    /* The predictor counts the same allocations. */
    McPeaks q = memcalc_predict(&cfg, &run, o);
    for (int c = 0; c < MEM_NCAT; c++)
        assert_true(q.bytes[c] == m.bytes[c]);
    return m;
}

/* AdamW under bf16: weights 2 Psi, gradients 2 Psi, optimizer 12 Psi (fp32 master, m, v), to the
 * byte; fp32 the same 16 Psi as 4 + 4 + 8. Psi = 403 456. */
static void test_sixteen_psi(void **state)
{
    (void)state;
    GptConfig cfg = default_model();
    double psi = (double)gpt_config_n_params(&cfg);
    assert_true(psi == 403456.0);
    McPeaks b = step_peaks("bf16", "vanilla", MC_ADAMW);
    assert_true(b.bytes[MEM_PARAM] == 2.0 * psi);
    assert_true(b.bytes[MEM_GRAD] == 2.0 * psi);
    assert_true(b.bytes[MEM_OPTIM] == 12.0 * psi);
    McPeaks f = step_peaks("fp32", "vanilla", MC_ADAMW);
    assert_true(f.bytes[MEM_PARAM] == 4.0 * psi && f.bytes[MEM_GRAD] == 4.0 * psi);
    assert_true(f.bytes[MEM_OPTIM] == 8.0 * psi);
    /* fp16 and fp8 (bf16 parameters) keep 2-byte gradients too. */
    assert_true(step_peaks("fp16", "vanilla", MC_SGD).bytes[MEM_GRAD] == 2.0 * psi);
    assert_true(step_peaks("fp8", "vanilla", MC_SGD).bytes[MEM_GRAD] == 2.0 * psi);
    printf("16 Psi: bf16 %.0f + %.0f + %.0f bytes, fp32 %.0f + %.0f + %.0f\n",
           b.bytes[MEM_PARAM], b.bytes[MEM_GRAD], b.bytes[MEM_OPTIM], f.bytes[MEM_PARAM],
           f.bytes[MEM_GRAD], f.bytes[MEM_OPTIM]);
}

/* Scratch under a policy at most fp32's, vanilla and checkpointed: packed inputs are decoded a
 * chunk at a time (gelu) or freed before the gradient that would sit beside them (matmul), and
 * a gradient to be rounded for a product is rounded in place (tf32). */
static void temp_at_most_fp32(const char *policy)
{
    const char *strategies[] = { "vanilla", "sqrt", "memory-poor" };
    for (int s = 0; s < 3; s++) {
        double fp32 = step_peaks("fp32", strategies[s], MC_ADAMW).bytes[MEM_TEMP];
        double mine = step_peaks(policy, strategies[s], MC_ADAMW).bytes[MEM_TEMP];
        printf("%-4s %-11s temp %8.0f, fp32 %8.0f\n", policy, strategies[s], mine, fp32);
        assert_true(mine <= fp32);
    }
}

static void test_temp_fp32(void **state) { (void)state; temp_at_most_fp32("fp32"); }
static void test_temp_bf16(void **state) { (void)state; temp_at_most_fp32("bf16"); }
static void test_temp_fp16(void **state) { (void)state; temp_at_most_fp32("fp16"); }
static void test_temp_fp8(void **state) { (void)state; temp_at_most_fp32("fp8"); }
/* tf32 stores fp32 and rounds a product's operands to tf32 in copies: dY, the largest (the fc
 * layer's output gradient, 4 N C), is rounded where it lies instead (ops_matmul.c). */
static void test_temp_tf32(void **state) { (void)state; temp_at_most_fp32("tf32"); }

/* ---- the same training, bit for bit ---------------------------------------------------------- */

enum { V = 13, T = 8, ROWS = 4, K = 2, STEPS = 4 };

static TrainerConfig tiny(const char *policy, TrainOptimizer o, LossScaleMode mode, double s)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = V, .max_seq = T, .n_layer = 2, .n_head = 2,
                           .n_embd = 16, .tied = true, .fused_qkv = true };
    c.seed = 3;
    c.optimizer = o;
    c.clip = 0.05;      /* small: clipping scales every step's gradients */
    assert_true(policy_preset(policy, &c.policy));
    c.loss_scale.mode = mode;
    c.loss_scale.init_scale = s;
    return c;
}

static void batch(Rng *rng, int *tokens, int *targets)
{
    for (int i = 0; i < K * ROWS * T; i++) {
        tokens[i] = (int)rng_below(rng, V);
        targets[i] = (tokens[i] * 5 + 2) % V;
    }
}

/* A trainer with packed gradients against one whose gradients stay fp32 buffers of the same
 * rounded values (optim_keep_fp32_grads, as before packing): losses, norms and every master
 * weight and parameter code equal, bitwise, over STEPS updates of K micro-batches, with
 * clipping on and the loss scale's 1/S pending. */
static void same_bits(const char *policy, TrainOptimizer o, LossScaleMode mode, double s)
{
    TrainerConfig cfg = tiny(policy, o, mode, s);
    Trainer *packed = trainer_new(&cfg), *plain = trainer_new(&cfg);
    optim_keep_fp32_grads(plain->optim);
    Rng rng = rng_new(11, RNG_STREAM_DATA);
    int tokens[K * ROWS * T], targets[K * ROWS * T];
    for (int step = 0; step < STEPS; step++) {
        batch(&rng, tokens, targets);
        TrainStepResult a = trainer_step_accum(packed, tokens, targets, ROWS, T, K, 1e-2);
        TrainStepResult b = trainer_step_accum(plain, tokens, targets, ROWS, T, K, 1e-2);
        assert_true(memcmp(&a.loss, &b.loss, sizeof a.loss) == 0);
        assert_true(memcmp(&a.grad_norm, &b.grad_norm, sizeof a.grad_norm) == 0);
        assert_true(a.grad_norm > cfg.clip);    /* the clip did scale */
        assert_int_equal(a.updated, b.updated);
    }
    int n;
    Tensor *const *pa = gpt_params(packed->model, &n), *const *pb = gpt_params(plain->model, &n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(tensor_bytes(pa[i]), tensor_bytes(pb[i]));
        assert_memory_equal(pa[i]->packed, pb[i]->packed, tensor_bytes(pa[i]));
        assert_memory_equal(optim_master(packed->optim, i), optim_master(plain->optim, i),
                            pa[i]->size * sizeof(float));
        assert_true(pa[i]->grad_dtype == pa[i]->dtype && pb[i]->grad_dtype == DTYPE_F32);
    }
    printf("%s: %d steps of %d micro-batches, packed and fp32 gradients the same bits\n",
           policy, STEPS, K);
    trainer_free(packed);
    trainer_free(plain);
}

static void test_bf16_adamw_same_bits(void **state)
{
    (void)state;
    same_bits("bf16", TRAIN_ADAMW, LOSS_SCALE_NONE, 1.0);
}

/* A static scale of 1000 is no power of two: 1/S changes the mantissa, and rounding g / S back
 * into fp16 would lose bits (and subnormals); pending, it does not. */
static void test_fp16_static_scale_same_bits(void **state)
{
    (void)state;
    same_bits("fp16", TRAIN_ADAMW, LOSS_SCALE_STATIC, 1000.0);
}

static void test_fp16_dynamic_adafactor_same_bits(void **state)
{
    (void)state;
    same_bits("fp16", TRAIN_ADAFACTOR, LOSS_SCALE_DYNAMIC, 65536.0);
}

static void test_fp8_sgd_same_bits(void **state)
{
    (void)state;
    same_bits("fp8", TRAIN_SGD, LOSS_SCALE_NONE, 1.0);
}

static void test_bf16_adam8bit_same_bits(void **state)
{
    (void)state;
    same_bits("bf16", TRAIN_ADAM8BIT, LOSS_SCALE_NONE, 1.0);
}

/* ---- the tensor API by hand ------------------------------------------------------------------- */

/* bf16 storage: 2 bytes each in grad; a working copy in temp holds the decoded values; pending
 * factors apply on every read, in order, and a store folds them in. */
static void test_packed_grad_by_hand(void **state)
{
    (void)state;
    size_t grad0 = mem_current(MEM_GRAD), temp0 = mem_current(MEM_TEMP);
    Tensor *w = tensor_param("w", 1, (int[]){ 4 });
    tensor_set_grad_dtype(w, DTYPE_BF16);
    assert_false(tensor_has_grad(w));
    float *g = tensor_grad(w);                              /* zero working copy, in temp */
    assert_int_equal(mem_current(MEM_TEMP) - temp0, 16);
    const float v[4] = { 1.0f, -2.5f, 1.00390625f, 3.0f };  /* 1 + 2^-8 is no bf16: ties to 1 */
    for (int i = 0; i < 4; i++)
        g[i] += v[i];
    tensor_grad_pack(w, 1.0f);
    assert_null(w->grad);
    assert_int_equal(mem_current(MEM_GRAD) - grad0, 8);
    assert_int_equal(mem_current(MEM_TEMP), temp0);
    float *scratch;
    const float *r = tensor_grad_read(w, &scratch);
    assert_non_null(scratch);
    assert_true(r[0] == 1.0f && r[1] == -2.5f && r[2] == 1.0f && r[3] == 3.0f);
    mem_free(scratch);
    /* Pending: 1/3 then 3 is not the identity in float, and the read shows exactly that. */
    tensor_grad_scale(w, 1.0f / 3.0f);
    tensor_grad_scale(w, 3.0f);
    r = tensor_grad_read(w, &scratch);
    float third = 1.0f / 3.0f;
    for (int i = 0; i < 4; i++) {
        float want = (i == 2 ? 1.0f : v[i]) * third;
        want *= 3.0f;
        assert_true(r[i] == want);
    }
    mem_free(scratch);
    tensor_zero_grad(w);
    r = tensor_grad_read(w, &scratch);
    for (int i = 0; i < 4; i++)
        assert_true(r[i] == 0.0f);
    mem_free(scratch);
    tensor_free(w);
    assert_int_equal(mem_current(MEM_GRAD), grad0);
    assert_int_equal(mem_current(MEM_TEMP), temp0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_grad_by_hand),
        cmocka_unit_test(test_sixteen_psi),
        cmocka_unit_test(test_temp_fp32),
        cmocka_unit_test(test_temp_bf16),
        cmocka_unit_test(test_temp_fp16),
        cmocka_unit_test(test_temp_fp8),
        cmocka_unit_test(test_temp_tf32),
        cmocka_unit_test(test_bf16_adamw_same_bits),
        cmocka_unit_test(test_fp16_static_scale_same_bits),
        cmocka_unit_test(test_fp16_dynamic_adafactor_same_bits),
        cmocka_unit_test(test_fp8_sgd_same_bits),
        cmocka_unit_test(test_bf16_adam8bit_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

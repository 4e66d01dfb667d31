/* Optimizer offload (optim/offload.h): a run with the masters, the state and the update on the
 * host equals the same run without, bit for bit (losses, norms, weights, masters and state
 * after a few steps, under fp32, bf16, fp16 with dynamic loss scaling and fp8), its device
 * bytes are the run's without exactly the optim category, and the bytes that cross each way per
 * update are the formula: Psi x the gradient format's bytes down, Psi x the parameter format's
 * up, as mem_transfer counts them. */
#include "tests/test_helpers.h"

#include <string.h>

#include "optim/offload.h"
#include "optim/train.h"
#include "plan/memcalc.h"

enum { V = 13, T = 8, B = 3, K = 2, STEPS = 4 };

static TrainerConfig tiny_config(const char *precision, bool offload)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = V, .max_seq = T, .n_layer = 2, .n_head = 2,
                           .n_embd = 16, .tied = true, .fused_qkv = true };
    c.seed = 7;
    assert_true(policy_preset(precision, &c.policy));
    if (strcmp(precision, "fp16") == 0)
        c.loss_scale.mode = LOSS_SCALE_DYNAMIC;
    c.local.offload = offload ? TRAIN_OFFLOAD_OPTIMIZER : TRAIN_OFFLOAD_NONE;
    return c;
}

/* What a run measured: each step's loss and norm, the peaks of the steps above what was in use
 * before the trainer was made (device and host), and each update's bytes each way. */
typedef struct {
    Trainer *t;
    double   loss[STEPS], norm[STEPS];
    size_t   peak[MEM_NCAT + 1], host[MEM_NCAT + 1];
    size_t   down[STEPS], up[STEPS];        /* mem_stats' counts over each step */
} Run;

static Run run(const char *precision, bool offload)
{
    Run r = { 0 };
    size_t base[MEM_NCAT + 1], host_base[MEM_NCAT + 1];
    for (int c = 0; c <= MEM_NCAT; c++) {
        base[c] = mem_current((MemCategory)c);
        host_base[c] = mem_host_current((MemCategory)c);
    }
    TrainerConfig c = tiny_config(precision, offload);
    r.t = trainer_new(&c);
    /* The set-up's transients (a parameter packed beside its fp32 values) are not a step's. */
    mem_reset_peaks();
    int tokens[K * B * T], targets[K * B * T];
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < K * B * T; i++) {
            tokens[i] = (int)rng_below(&r.t->data_rng, V);
            targets[i] = (tokens[i] * 5 + 2) % V;
        }
        MemStats before = mem_stats();
        TrainStepResult res = trainer_step_accum(r.t, tokens, targets, B, T, K, 3e-3);
        MemStats after = mem_stats();
        assert_true(res.updated);
        r.loss[s] = res.loss;
        r.norm[s] = res.grad_norm;
        r.down[s] = after.to_host_bytes - before.to_host_bytes;
        r.up[s] = after.to_device_bytes - before.to_device_bytes;
    }
    for (int k = 0; k <= MEM_NCAT; k++) {
        r.peak[k] = mem_peak((MemCategory)k) - base[k];
        r.host[k] = mem_host_peak((MemCategory)k) - host_base[k];
    }
    return r;
}

/* The parameters' stored bytes (packed, or fp32), the masters and every state tensor and
 * buffer of a and b are the same bytes. */
static void assert_same_weights(const Trainer *a, const Trainer *b)
{
    const Optim *oa = a->optim, *ob = b->optim;
    assert_int_equal(oa->n, ob->n);
    for (int i = 0; i < oa->n; i++) {
        const Tensor *pa = oa->params[i], *pb = ob->params[i];
        size_t bytes = tensor_bytes(pa);
        assert_int_equal(bytes, tensor_bytes(pb));
        assert_true(pa->scale == pb->scale);
        assert_memory_equal(pa->dtype == DTYPE_F32 ? (void *)pa->data : pa->packed,
                            pb->dtype == DTYPE_F32 ? (void *)pb->data : pb->packed, bytes);
    }
    for (int i = 0; i < optim_state_count(oa); i++)
        assert_memory_equal(oa->state[i]->data, ob->state[i]->data,
                            oa->state[i]->size * sizeof(float));
    assert_int_equal(optim_buffer_count(oa), optim_buffer_count(ob));
    for (int i = 0; i < optim_buffer_count(oa); i++)
        assert_memory_equal(optim_buffer(oa, i)->data, optim_buffer(ob, i)->data,
                            optim_buffer_bytes(optim_buffer(oa, i)));
}

static void check_precision(const char *precision, size_t grad_bytes, size_t param_bytes)
{
    Run plain = run(precision, false);
    Run off = run(precision, true);
    const Optim *o = off.t->optim;
    assert_true(optim_is_offloaded(o));
    assert_false(optim_is_offloaded(plain.t->optim));

    /* Bit for bit. */
    for (int s = 0; s < STEPS; s++) {
        assert_true(off.loss[s] == plain.loss[s]);
        assert_true(off.norm[s] == plain.norm[s]);
    }
    assert_true(plain.loss[STEPS - 1] < plain.loss[0]);     /* it trained */
    assert_same_weights(off.t, plain.t);

    /* The device: the same bytes in every category but optim, which is on the host. */
    size_t state = optim_state_bytes(o);
    assert_int_equal(state, optim_state_bytes(plain.t->optim));
    assert_true(state > 0);
    assert_int_equal(plain.peak[MEM_OPTIM], state);
    assert_int_equal(off.peak[MEM_OPTIM], 0);
    for (int c = 0; c < MEM_NCAT; c++)
        if (c != MEM_OPTIM)
            assert_int_equal(off.peak[c], plain.peak[c]);
    assert_int_equal(off.peak[MEM_ALL], plain.peak[MEM_ALL] - state);
    assert_int_equal(mem_current(MEM_OPTIM), state);        /* plain's, still alive */

    /* The host: the state and masters, the fp32 copies under fp32, the gradients' buffers and
     * the packed values' (offload.h's list); a run without offload has none. */
    size_t psi = 0, largest = 0;
    for (int i = 0; i < o->n; i++) {
        psi += o->params[i]->size;
        largest = o->params[i]->size > largest ? o->params[i]->size : largest;
    }
    assert_int_equal(plain.host[MEM_ALL], 0);
    bool packed = param_bytes < 4;
    assert_int_equal(off.host[MEM_OPTIM], state + (packed ? 0 : 4 * psi));
    assert_int_equal(off.host[MEM_GRAD], grad_bytes * psi);
    assert_int_equal(off.host[MEM_PARAM], packed ? param_bytes * psi : 0);
    /* The update's scratch, on the host too: a packed gradient decoded, one tensor at a time
     * (AdamW reads an fp32 gradient in place). */
    assert_int_equal(off.host[MEM_TEMP], grad_bytes < 4 ? 4 * largest : 0);

    /* The traffic: the formula, per update, as the code that moves the bytes counts it; the
     * first update also takes the fp32 copies (the set-up's, not an update's). */
    OptimOffloadTraffic tr = optim_offload_traffic(o);
    assert_int_equal(tr.updates, STEPS);
    assert_int_equal(tr.to_host, grad_bytes * psi);
    assert_int_equal(tr.to_device, param_bytes * psi);
    assert_int_equal(tr.to_host_total, STEPS * grad_bytes * psi);
    assert_int_equal(tr.to_device_total, STEPS * param_bytes * psi);
    assert_int_equal(tr.sync, packed ? 0 : 4 * psi);
    for (int s = 0; s < STEPS; s++) {
        assert_int_equal(off.down[s], grad_bytes * psi + (s == 0 ? tr.sync : 0));
        assert_int_equal(off.up[s], param_bytes * psi);
        assert_int_equal(plain.down[s], 0);
        assert_int_equal(plain.up[s], 0);
    }
    trainer_free(off.t);
    trainer_free(plain.t);
}

static void test_fp32(void **state) { (void)state; check_precision("fp32", 4, 4); }
static void test_bf16(void **state) { (void)state; check_precision("bf16", 2, 2); }
static void test_fp16_loss_scaled(void **state) { (void)state; check_precision("fp16", 2, 2); }
/* bf16 parameters, e5m2 gradients: 1 Psi down, 2 Psi up. */
static void test_fp8(void **state) { (void)state; check_precision("fp8", 1, 2); }

/* Every optimizer's state goes to the host: 8-bit Adam's codes and constants, Adafactor's
 * statistics and its scratch; the run is the same bits. */
static void test_other_optimizers(void **state)
{
    (void)state;
    const TrainOptimizer opts[] = { TRAIN_SGD, TRAIN_ADAM8BIT, TRAIN_ADAFACTOR };
    for (int k = 0; k < 3; k++) {
        TrainerConfig ca = tiny_config("bf16", false), cb = tiny_config("bf16", true);
        ca.optimizer = cb.optimizer = opts[k];
        ca.sgd.momentum = cb.sgd.momentum = 0.9;
        Trainer *a = trainer_new(&ca), *b = trainer_new(&cb);
        size_t device = mem_current(MEM_OPTIM);
        int tokens[B * T], targets[B * T];
        for (int s = 0; s < 3; s++) {
            for (int i = 0; i < B * T; i++) {
                tokens[i] = (int)rng_below(&a->data_rng, V);
                targets[i] = (tokens[i] + 1) % V;
            }
            TrainStepResult ra = trainer_step(a, tokens, targets, B, T, 1e-2);
            TrainStepResult rb = trainer_step(b, tokens, targets, B, T, 1e-2);
            assert_true(ra.loss == rb.loss);
        }
        assert_same_weights(b, a);
        assert_int_equal(device, optim_state_bytes(a->optim));  /* b's are all on the host */
        trainer_free(a);
        trainer_free(b);
    }
}

/* A resumed run's optimizer is made on the device and offloaded afterwards: its state and
 * masters move to the host (counted as the set-up's traffic) and the run goes on with the same
 * bits as one never offloaded. */
static void test_offload_after_steps(void **state)
{
    (void)state;
    TrainerConfig c = tiny_config("bf16", false);
    Trainer *a = trainer_new(&c), *b = trainer_new(&c);
    size_t device = mem_current(MEM_OPTIM), bytes = optim_state_bytes(b->optim);
    int tokens[B * T], targets[B * T];
    for (int s = 0; s < 4; s++) {
        if (s == 2) {
            optim_offload(b->optim);
            assert_int_equal(mem_current(MEM_OPTIM), device - bytes);
            assert_int_equal(optim_offload_traffic(b->optim).sync, bytes);
        }
        for (int i = 0; i < B * T; i++) {
            tokens[i] = (int)rng_below(&a->data_rng, V);
            targets[i] = (tokens[i] + 2) % V;
        }
        TrainStepResult ra = trainer_step(a, tokens, targets, B, T, 1e-2);
        TrainStepResult rb = trainer_step(b, tokens, targets, B, T, 1e-2);
        assert_true(ra.loss == rb.loss);
    }
    assert_same_weights(b, a);
    assert_int_equal(optim_offload_traffic(b->optim).updates, 2);
    trainer_free(a);
    trainer_free(b);
}

/* The memory calculator's prediction with offload (plan/memcalc.h) equals the
 * step measured, category by category, on the device and on the host, and so does the traffic;
 * the device's prediction is the one without offload less the optim category (and Adafactor's
 * scratch, which goes with the update when it was the temp peak). */
static void test_calculator_predicts_offload(void **state)
{
    (void)state;
    const GptConfig cfg = { .vocab_size = 29, .max_seq = 8, .n_layer = 3, .n_head = 2,
                            .n_embd = 32, .tied = true, .fused_qkv = true };
    const char *policies[] = { "fp32", "bf16", "fp8" };
    const McOptimizer opts[] = { MC_ADAMW, MC_ADAFACTOR, MC_ADAM8BIT };
    const char *strategies[] = { "vanilla", "sqrt" };
    for (int p = 0; p < 3; p++)
        for (int k = 0; k < 3; k++)
            for (int s = 0; s < 2; s++) {
                PrecisionPolicy policy;
                assert_true(policy_preset(policies[p], &policy));
                McRun run = { .B = 4, .T = cfg.max_seq, .threads = par_threads(),
                              .policy = &policy, .offload = true };
                char err[80];
                assert_true(ckpt_parse(strategies[s], &run.strategy, err, sizeof err));
                McPeaks pred = memcalc_predict(&cfg, &run, opts[k]);
                McPeaks meas = memcalc_measure(&cfg, &run, opts[k], 3);
                for (int c = 0; c < MEM_NCAT; c++) {
                    if (pred.bytes[c] != meas.bytes[c] || pred.host[c] != meas.host[c])
                        printf("%s %s %s %s: device %.0f / %.0f, host %.0f / %.0f\n",
                               policies[p], MC_OPTIMIZER_NAMES[opts[k]], strategies[s],
                               mem_category_name((MemCategory)c), pred.bytes[c], meas.bytes[c],
                               pred.host[c], meas.host[c]);
                    assert_true(pred.bytes[c] == meas.bytes[c]);
                    assert_true(pred.host[c] == meas.host[c]);
                }
                assert_true(pred.to_host == meas.to_host && pred.to_host > 0);
                assert_true(pred.to_device == meas.to_device && pred.to_device > 0);
                run.offload = false;
                McPeaks on = memcalc_predict(&cfg, &run, opts[k]);
                assert_true(pred.bytes[MEM_OPTIM] == 0 && on.bytes[MEM_OPTIM] > 0);
                for (int c = 0; c < MEM_NCAT; c++)
                    if (c != MEM_OPTIM && c != MEM_TEMP)
                        assert_true(pred.bytes[c] == on.bytes[c]);
                assert_true(pred.bytes[MEM_TEMP] <= on.bytes[MEM_TEMP]);
                if (opts[k] != MC_ADAFACTOR)
                    assert_true(pred.bytes[MEM_TEMP] == on.bytes[MEM_TEMP]);
            }
}

/* The host pool is outside the device's budget and its caching model: a host block larger than
 * either is served, and the device reserves nothing for it. */
static void test_host_outside_budget_and_device(void **state)
{
    (void)state;
    size_t before = mem_current(MEM_ALL);
    mem_set_budget(MEM_ALL, before + 4096);
    assert_true(mem_device_begin(1 << 16, 1 << 12));
    unsigned old = mem_host_categories(1u << MEM_OPTIM);
    void *h = mem_try_alloc(MEM_OPTIM, 1 << 20);
    mem_host_categories(old);
    assert_non_null(h);
    assert_true(mem_is_host(h));
    assert_int_equal(mem_device_stats().reserved, 0);
    assert_int_equal(mem_current(MEM_ALL), before);
    assert_int_equal(mem_host_current(MEM_OPTIM), 1 << 20);
    assert_null(mem_try_alloc(MEM_OPTIM, 1 << 20));             /* the device's is refused */
    mem_free(h);
    assert_int_equal(mem_host_current(MEM_OPTIM), 0);
    assert_true(mem_device_end());
    mem_set_budget(MEM_ALL, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_fp16_loss_scaled),
        cmocka_unit_test(test_fp8),
        cmocka_unit_test(test_other_optimizers),
        cmocka_unit_test(test_offload_after_steps),
        cmocka_unit_test(test_calculator_predicts_offload),
        cmocka_unit_test(test_host_outside_budget_and_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* LoRA and QLoRA under a precision policy (docs/lora.md, "Precision"), on a tiny GPT through the
 * trainer: at step 0 the adapted model's logits are the bf16 base's bit for bit; the frozen base
 * takes 2 bytes per value in param, with no gradient, no optimizer state and no master, while
 * the adapters have fp32 masters; a few steps under bf16 and under fp16 with dynamic loss
 * scaling lower the loss and change no bit of the base; the adapters' gradients agree with the
 * fp32 run's; the adapter op's stored activations and values under bf16; an adapter file saved
 * from the masters. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "autograd/ops.h"
#include "nn/gpt_lora.h"
#include "nn/lora_snapshot.h"
#include "optim/train.h"

enum { TB = 2, TT = 6, V = 11 };
static const int tokens[TB * TT] = { 3, 0, 6, 2, 10, 9, 5, 5, 1, 4, 7, 8 };
static const int targets[TB * TT] = { 0, 6, 2, -1, 9, 1, 5, 1, 4, 3, 8, 2 };

/* Adds noise to what the trainer's optimizer updates (the whole model before trainer_use_lora,
 * the adapters after), through the fp32 masters when there are some: the same fp32 values
 * under every policy, whose packed working copies are then made from them. */
static void perturb_trained(Trainer *tr, float scale, uint64_t seed)
{
    optim_expose_masters(tr->optim);
    test_perturb(tr->optim->params, tr->optim->n, scale, seed);
    optim_pack_masters(tr->optim);
}

/* A trainer of a tiny model with separate q, k, v under the preset `precision`, its base
 * perturbed (so no weight is 0 or tiny); LoRA on every target at r 4 when lora. */
static Trainer *tiny_trainer(const char *precision, LossScaleMode scaling, bool lora, bool qlora)
{
    TrainerConfig cfg = trainer_config_default();
    cfg.model = (GptConfig){ .vocab_size = V, .max_seq = TT, .n_layer = 2, .n_head = 2,
                             .n_embd = 16, .tied = true, .fused_qkv = false };
    assert_true(policy_preset(precision, &cfg.policy));
    cfg.loss_scale.mode = scaling;
    if (scaling == LOSS_SCALE_STATIC)
        cfg.loss_scale.init_scale = 1024.0;
    Trainer *tr = trainer_new(&cfg);
    perturb_trained(tr, 0.3f, 4);
    if (lora) {
        LoraConfig lc = lora_config_default();
        lc.rank = 4;
        lc.targets = LORA_TARGET_ALL;
        lc.qlora = qlora;
        trainer_use_lora(tr, &lc, 5);
    }
    return tr;
}

static float *eval_logits(Trainer *tr)
{
    double unused;
    Tensor *y = trainer_eval(tr, tokens, NULL, TB, TT, &unused);
    float *out = malloc(y->size * sizeof *out);
    memcpy(out, y->data, y->size * sizeof *out);
    trainer_eval_done(tr);
    return out;
}

/* The loss of a recording forward (activations packed as in training), gradients dropped. */
static double recorded_loss(Trainer *tr)
{
    double loss = trainer_accumulate(tr, tokens, targets, TB, TT, 1);
    optim_zero_grad(tr->optim);
    tape_reset(tr->tape);
    return loss;
}

enum { N_LOGITS = TB * TT * V };

static bool bits_equal(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

/* B = 0 adds exact zeros to outputs already rounded to bf16, so the adapted model is the bf16
 * base bit for bit, in evaluation (outputs rounded in place) and in a recording forward
 * (outputs packed). Both halves of the comparison can fail: bf16 is not fp32 here, and a
 * nonzero B moves the logits. */
static void test_bf16_step0_bit_identical(void **state)
{
    (void)state;
    Trainer *tr = tiny_trainer("bf16", LOSS_SCALE_NONE, false, false);
    Trainer *ref = tiny_trainer("fp32", LOSS_SCALE_NONE, false, false);
    float *base = eval_logits(tr), *fp32 = eval_logits(ref);
    double base_loss = recorded_loss(tr);
    LoraConfig lc = lora_config_default();
    lc.rank = 4;
    lc.targets = LORA_TARGET_ALL;
    trainer_use_lora(tr, &lc, 5);
    float *adapted = eval_logits(tr);
    double adapted_loss = recorded_loss(tr);
    double vs_fp32 = test_max_abs_diff(base, fp32, N_LOGITS);
    perturb_trained(tr, 0.1f, 6);
    float *moved = eval_logits(tr);
    double by_b = test_max_abs_diff(moved, base, N_LOGITS);
    printf("bf16 base vs fp32 logits: %.3g apart; LoRA at step 0 vs bf16 base: %s; loss %.9g "
           "vs %.9g; a nonzero B moves the logits by %.3g\n", vs_fp32,
           bits_equal(adapted, base, N_LOGITS) ? "same bits" : "DIFFERENT", adapted_loss,
           base_loss, by_b);
    assert_true(bits_equal(adapted, base, N_LOGITS));
    assert_true(adapted_loss == base_loss);
    assert_true(vs_fp32 > 1e-3);
    assert_true(by_b > 1e-2);
    free(base);
    free(fp32);
    free(adapted);
    free(moved);
    trainer_free(tr);
    trainer_free(ref);
}

/* The frozen base under bf16: 2 bytes per value in param, measured by the allocator (param
 * grows by 2 bytes per base and adapter value, against 4 under fp32); after a step no base
 * tensor has a gradient, grad holds the adapters' 4 bytes per value and optim AdamW's two
 * moments plus one fp32 master per adapter value, and each master holds the fp32 values the
 * fp32 run's adapters start from, which the packed copy rounds. */
static void test_bf16_base_bytes(void **state)
{
    (void)state;
    size_t param0 = mem_current(MEM_PARAM), grad0 = mem_current(MEM_GRAD);
    size_t optim0 = mem_current(MEM_OPTIM);
    Trainer *tr = tiny_trainer("bf16", LOSS_SCALE_NONE, true, false);
    size_t n_base = gpt_n_params(tr->model), n_ad = gpt_lora_n_trainable(tr->lora);
    size_t param = mem_current(MEM_PARAM) - param0;
    Trainer *ref = tiny_trainer("fp32", LOSS_SCALE_NONE, true, false);
    size_t param32 = mem_current(MEM_PARAM) - param0 - param;
    LoraBaseBytes b = gpt_lora_base_bytes(tr->lora), b32 = gpt_lora_base_bytes(ref->lora);
    printf("param bytes: bf16 %zu (base %zu), fp32 %zu (base %zu) for %zu base and %zu adapter "
           "values\n", param, b.packed_bytes, param32, b32.fp32_bytes, n_base, n_ad);
    assert_int_equal(param, 2 * (n_base + n_ad));
    assert_int_equal(param32, 4 * (n_base + n_ad));
    assert_int_equal(b.packed_values, n_base);
    assert_int_equal(b.fp32_values, 0);
    assert_int_equal(2 * b.packed_bytes, b32.fp32_bytes);
    trainer_free(ref);

    trainer_step(tr, tokens, targets, TB, TT, 1e-2);
    int n;
    Tensor *const *base = gpt_params(tr->model, &n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(base[i]->dtype, DTYPE_BF16);
        assert_false(base[i]->requires_grad);
        assert_null(base[i]->grad);
    }
    /* The adapters' gradients are bf16 like the adapters: 2 bytes each (autograd/tensor.h). */
    assert_int_equal(mem_current(MEM_GRAD) - grad0, 2 * n_ad);
    assert_int_equal(mem_current(MEM_OPTIM) - optim0, 12 * n_ad);
    int n_lora;
    gpt_lora_params(tr->lora, &n_lora);
    assert_int_equal(tr->optim->n, n_lora);

    Trainer *fresh = tiny_trainer("bf16", LOSS_SCALE_NONE, true, false);
    ref = tiny_trainer("fp32", LOSS_SCALE_NONE, true, false);
    size_t rounded = 0;
    for (int i = 0; i < fresh->optim->n; i++) {
        Tensor *p = fresh->optim->params[i], *p32 = ref->optim->params[i];
        const float *master = optim_master(fresh->optim, i);
        assert_non_null(master);
        assert_int_equal(p->dtype, DTYPE_BF16);
        assert_true(bits_equal(master, p32->data, p->size));
        const float *work = tensor_unpack(p);
        for (size_t j = 0; j < p->size; j++)
            rounded += work[j] != master[j];
        tensor_release(p);
    }
    printf("%zu of %zu adapter values differ between the bf16 working copy and the master\n",
           rounded, n_ad);
    assert_true(rounded > n_ad / 4);    /* A is random: most of it is not bf16-exact */
    trainer_free(fresh);
    trainer_free(ref);
    trainer_free(tr);
    assert_int_equal(mem_current(MEM_PARAM), param0);
    assert_int_equal(mem_current(MEM_OPTIM), optim0);
}

/* Every byte the frozen base is stored in: the packed storage of its tensors and the NF4
 * storage of a quantized base, appended in a fixed order. */
static size_t base_storage(const Trainer *tr, unsigned char *out)
{
    size_t used = 0;
    int n;
    Tensor *const *p = gpt_params(tr->model, &n);
    for (int i = 0; i < n; i++) {
        const void *src = p[i]->dtype == DTYPE_F32 ? (const void *)p[i]->data : p[i]->packed;
        if (!src)
            continue;       /* a quantized weight: its bytes are the NF4 storage below */
        size_t bytes = mem_size(src);
        if (out)
            memcpy(out + used, src, bytes);
        used += bytes;
    }
    for (int i = 0; i < tr->lora->n_quant; i++) {
        size_t bytes = lora_quant_bytes(&tr->lora->quant[i]);
        if (out)
            memcpy(out + used, tr->lora->quant[i].storage, bytes);
        used += bytes;
    }
    return used;
}

/* Twenty AdamW steps on one batch under bf16, under fp16 with dynamic loss scaling, and QLoRA
 * under bf16: the loss falls below 0.8 of the first step's (fp32 LoRA gets to 0.06 of it in 50
 * steps, test_lora.c), every base byte is unchanged, and the adapters' masters moved. */
static void test_steps_change_no_base_bit(void **state)
{
    (void)state;
    const struct { const char *precision; LossScaleMode scaling; bool qlora; } runs[] = {
        { "bf16", LOSS_SCALE_NONE, false },
        { "fp16", LOSS_SCALE_DYNAMIC, false },
        { "bf16", LOSS_SCALE_NONE, true },
    };
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        Trainer *tr = tiny_trainer(runs[r].precision, runs[r].scaling, true, runs[r].qlora);
        size_t bytes = base_storage(tr, NULL);
        unsigned char *before = malloc(bytes), *after = malloc(bytes);
        base_storage(tr, before);
        float *b0 = malloc(tr->optim->params[1]->size * sizeof *b0);
        memcpy(b0, optim_master(tr->optim, 1), tr->optim->params[1]->size * sizeof *b0);
        TrainStepResult first = trainer_step(tr, tokens, targets, TB, TT, 1e-2), last = first;
        for (int k = 1; k < 20; k++)
            last = trainer_step(tr, tokens, targets, TB, TT, 1e-2);
        assert_int_equal(base_storage(tr, after), bytes);
        double moved = test_max_abs_diff(optim_master(tr->optim, 1), b0,
                                         tr->optim->params[1]->size);
        printf("%s%s%s: loss %.4f -> %.4f in 20 steps, %ld skipped, final scale %g; %zu base "
               "bytes %s; B of the first adapter moved by %.3g\n", runs[r].qlora ? "QLoRA " : "",
               runs[r].precision, runs[r].scaling == LOSS_SCALE_DYNAMIC ? " dynamic" : "",
               first.loss, last.loss, tr->scaler.skipped, last.loss_scale, bytes,
               memcmp(before, after, bytes) == 0 ? "unchanged" : "CHANGED", moved);
        assert_true(memcmp(before, after, bytes) == 0);
        assert_true(last.loss < 0.8 * first.loss);
        assert_true(moved > 1e-3);
        assert_true(tr->scaler.skipped < 5);
        free(before);
        free(after);
        free(b0);
        trainer_free(tr);
    }
}

/* Relative L2 distance ||g - ref|| / ||ref||. */
static double rel_l2(const float *g, const float *ref, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)g[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return sqrt(num / den);
}

/* The adapters' gradients under bf16 and fp16 (static scale 2^10, divided out) against fp32's,
 * at the same fp32 weights with B nonzero (at B = 0, dA is exactly 0 in every run). Under a
 * policy each gradient is the fp32 computation on rounded operands: the base weights, A and B,
 * every stored activation, every matmul input and every activation gradient, each rounded with
 * a relative error of at most u (2^-8 for bf16, 2^-11 for fp16), tens of them on each path of
 * this 2-block model, and attention's softmax amplifies what reaches q and k. The errors are
 * then proportional to u, which is what the test checks: every tensor within 20 u (7.8% for
 * bf16, 0.98% for fp16; the worst measured is about 13 u and 14 u), and the mean error in units
 * of u the same for both formats within a factor 2. A mistake in the adapter op (a dropped term,
 * a transposed factor, the wrong scale) would be off by order 1 in both, not by a multiple of u.
 * For comparison, the full model's own weight gradients at the same weights under bf16 are
 * 1.2% to 3.4% off fp32's. */
static void test_gradients_against_fp32(void **state)
{
    (void)state;
    Trainer *ref = tiny_trainer("fp32", LOSS_SCALE_NONE, true, false);
    perturb_trained(ref, 0.1f, 6);
    trainer_accumulate(ref, tokens, targets, TB, TT, 1);
    const struct { const char *precision; double u; } runs[] = {
        { "bf16", 1.0 / 256 }, { "fp16", 1.0 / 2048 },
    };
    double mean_in_u[2];
    for (size_t r = 0; r < 2; r++) {
        Trainer *tr = tiny_trainer(runs[r].precision, LOSS_SCALE_STATIC, true, false);
        perturb_trained(tr, 0.1f, 6);
        trainer_accumulate(tr, tokens, targets, TB, TT, 1);
        float inv = 1.0f / loss_scale_value(&tr->scaler);
        double worst = 0.0, sum = 0.0;
        for (int i = 0; i < tr->optim->n; i++) {
            Tensor *p = tr->optim->params[i], *p32 = ref->optim->params[i];
            tensor_grad(p);     /* a packed gradient's fp32 working copy, kept until freed */
            for (size_t j = 0; j < p->size; j++)
                p->grad[j] *= inv;
            double d = rel_l2(p->grad, p32->grad, p->size) / runs[r].u;
            assert_true(d < 20.0);
            worst = fmax(worst, d);
            sum += d;
            double norm = 0.0;
            for (size_t j = 0; j < p32->size; j++)
                norm += (double)p32->grad[j] * p32->grad[j];
            assert_true(sqrt(norm) > 1e-3);     /* a gradient, not zeros compared to zeros */
        }
        mean_in_u[r] = sum / tr->optim->n;
        printf("%s adapter gradients vs fp32 (relative L2): worst %.4f = %.1f u, mean %.1f u "
               "over %d tensors\n", runs[r].precision, worst * runs[r].u, worst, mean_in_u[r],
               tr->optim->n);
        trainer_free(tr);
    }
    assert_true(mean_in_u[0] < 2.0 * mean_in_u[1] && mean_in_u[1] < 2.0 * mean_in_u[0]);
    trainer_free(ref);
}

static float bf16(float v) { return fmt_round(FMT_BF16, v, (Rounding){ 0 }, 0); }

/* One Linear with its adapter under the bf16 policy: the op keeps s x A [M, r] and its output
 * [M, out] at 2 bytes each, and its output is y + bf16(s bf16(x) bf16(A)) bf16(B) rounded to
 * bf16. A double computation of the same formula reproduces it within 3 u (|y| + sum_q
 * |down_q B_qj|), u = 2^-8: u for the final rounding, and 2 u (one bf16 spacing) for each
 * down_q that the fp32 and the double sums round to neighbouring bf16 values. */
static void test_adapter_op_bf16(void **state)
{
    (void)state;
    enum { M = 6, IN = 8, OUT = 5, R = 3 };
    NnParams params = { 0 };
    Linear lin;
    nn_linear_init(&lin, &params, "lin", IN, OUT, true, 0.5f);
    LoraAdapter ad;
    lora_adapter_init(&ad, &params, "lin", IN, OUT, R, 1.5f);
    nn_params_init(&params, 5);
    test_perturb(params.tensors, params.n, 0.3f, 6);
    lin.weight->requires_grad = lin.bias->requires_grad = false;
    Rng rng = rng_new(7, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 2, (int[]){ M, IN });
    PrecisionPolicy p;
    policy_preset("bf16", &p);
    Tape *tape = tape_new();
    tape->policy = &p;
    Tensor *y = op_linear(tape, x, lin.weight, lin.bias);
    size_t act0 = mem_current(MEM_ACT);
    Tensor *out = lora_adapter_add(&ad, tape, x, y);
    op_sum(tape, out);      /* the next record stores what the adapter op saved */
    size_t kept = mem_current(MEM_ACT) - act0;
    /* and the sum, a scalar: an fp32 activation under every policy */
    assert_int_equal(kept, 2 * (size_t)M * (R + OUT) + sizeof(float));
    const float *yv = tensor_unpack(y), *ov = tensor_unpack(out);
    const float *A = ad.a->data, *B = ad.b->data;
    double worst = 0.0, adapter_size = 0.0;
    for (int i = 0; i < M; i++) {
        float down[R];
        for (int q = 0; q < R; q++) {
            double s = 0.0;
            for (int k = 0; k < IN; k++)
                s += (double)bf16(x->data[i * IN + k]) * bf16(A[k * R + q]);
            down[q] = bf16((float)(0.5 * s));       /* s = 1.5 / 3 */
        }
        for (int j = 0; j < OUT; j++) {
            double h = 0.0, h_abs = 0.0;
            for (int q = 0; q < R; q++) {
                h += (double)down[q] * bf16(B[q * OUT + j]);
                h_abs += fabs((double)down[q] * bf16(B[q * OUT + j]));
            }
            double want = yv[i * OUT + j] + h, got = ov[i * OUT + j];
            double size = fabs(yv[i * OUT + j]) + h_abs;
            worst = fmax(worst, fabs(got - want) / size);
            adapter_size = fmax(adapter_size, fabs(h) / size);
            assert_true(bf16((float)got) == (float)got);
        }
    }
    printf("adapter op under bf16: keeps %zu act bytes; output within %.3g u of the double "
           "formula; the adapter's term is up to %.3g of it\n", kept, worst * 256, adapter_size);
    assert_true(worst <= 3.0 / 256);
    assert_true(adapter_size > 0.05);
    tensor_release(y);
    tensor_release(out);
    tape_free(tape);
    tensor_free(x);
    nn_params_free(&params);
}

/* --save-adapter under a policy: the file holds the fp32 masters (F32 tensors), so loading it
 * gives back the masters bit for bit, not their bf16 working copies; saved without exposing
 * them, it holds the working copies decoded, and the scratch copies are released. */
static void test_adapter_file_from_masters(void **state)
{
    (void)state;
    char dir[] = "/tmp/tapegrad_lora_policy_XXXXXX", path[80];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/adapter.safetensors", dir);
    Trainer *tr = tiny_trainer("bf16", LOSS_SCALE_NONE, true, false);
    for (int k = 0; k < 3; k++)
        trainer_step(tr, tokens, targets, TB, TT, 1e-2);
    SnapshotError err;
    optim_expose_masters(tr->optim);
    assert_true(lora_snapshot_save(tr->lora, path, &err));
    optim_pack_masters(tr->optim);
    Trainer *fp32 = tiny_trainer("fp32", LOSS_SCALE_NONE, false, false);
    GptLora *loaded = lora_snapshot_load(fp32->model, path, &err);
    assert_non_null(loaded);
    int n;
    Tensor *const *got = gpt_lora_params(loaded, &n);
    size_t differ_from_work = 0;
    for (int i = 0; i < n; i++) {
        assert_true(bits_equal(got[i]->data, optim_master(tr->optim, i), got[i]->size));
        const float *work = tensor_unpack(tr->optim->params[i]);
        for (size_t j = 0; j < got[i]->size; j++)
            differ_from_work += work[j] != got[i]->data[j];
        tensor_release(tr->optim->params[i]);
    }
    assert_true(differ_from_work > 0);
    gpt_lora_free(loaded);

    size_t temp0 = mem_current(MEM_TEMP);
    assert_true(lora_snapshot_save(tr->lora, path, &err));
    assert_int_equal(mem_current(MEM_TEMP), temp0);
    loaded = lora_snapshot_load(fp32->model, path, &err);
    assert_non_null(loaded);
    got = gpt_lora_params(loaded, &n);
    for (int i = 0; i < n; i++) {
        const float *work = tensor_unpack(tr->optim->params[i]);
        assert_true(bits_equal(got[i]->data, work, got[i]->size));
        tensor_release(tr->optim->params[i]);
    }
    printf("adapter file: the masters back bit for bit (%zu values differ from the bf16 "
           "copies); saved unexposed, the bf16 copies\n", differ_from_work);
    gpt_lora_free(loaded);
    trainer_free(fp32);
    trainer_free(tr);
    remove(path);
    rmdir(dir);
}

int main(void)
{
    par_set_threads(2);
    par_set_split_always(true);    /* the small cases still take the threaded paths */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_step0_bit_identical),
        cmocka_unit_test(test_bf16_base_bytes),
        cmocka_unit_test(test_steps_change_no_base_bit),
        cmocka_unit_test(test_gradients_against_fp32),
        cmocka_unit_test(test_adapter_op_bf16),
        cmocka_unit_test(test_adapter_file_from_masters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

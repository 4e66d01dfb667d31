/* QLoRA: op_qmatmul (a product with a frozen NF4 weight, bf16 inputs, fp32 accumulation) against
 * a double-precision reference forward and backward, its gradient against finite differences,
 * the memory it keeps (nothing but its output) and frees (the dequantized weight); then the
 * quantized GPT: dequantized weights within the NF4 bound of the originals, the frozen base's
 * bytes equal to the storage formula, adapters adding exact zeros at step 0, gradients on the
 * adapters only, and an adapter file that brings its NF4 base back. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "autograd/ops.h"
#include "nn/gpt_lora.h"
#include "nn/gpt_snapshot.h"
#include "nn/lora_snapshot.h"

enum { M = 9, K = 70, N = 33 };    /* K * N = 2310: 37 blocks of 64, the last one short */

static QuantTensor *random_weight(Rng *rng, float *w)
{
    for (int i = 0; i < K * N; i++)
        w[i] = 0.05f * rng_normal(rng);
    QuantTensor *q = quant_new((QuantConfig){ QUANT_NF4, 64, false, true, 256 }, K * N);
    quant_quantize(q, w);
    return q;
}

static double bf16(float v) { return fmt_round(FMT_BF16, v, (Rounding){ 0 }, 0); }

/* Forward and backward in bf16 against the formulas computed in double from the same rounded
 * inputs (the bias is added in fp32 and its gradient is the column sum of dy): only the fp32
 * accumulation differs. */
static void test_qmatmul_reference(void **state)
{
    (void)state;
    Rng rng = rng_new(1, 1);
    float w[K * N], deq[K * N];
    QuantTensor *q = random_weight(&rng, w);
    quant_dequantize(q, deq);
    Tensor *x = test_leaf(&rng, 1.0f, 2, (int[]){ M, K });
    Tensor *bias = test_leaf(&rng, 1.0f, 1, (int[]){ N });
    Tape *tape = tape_new();
    Tensor *y = op_qmatmul(tape, x, q, bias, K, N, FMT_BF16);
    float seed[M * N];
    for (int i = 0; i < M * N; i++)
        seed[i] = rng_normal(&rng);
    tape_backward_seeded(tape, y, seed);
    double worst_y = 0.0, worst_dx = 0.0, worst_db = 0.0, rounding_effect = 0.0;
    for (int j = 0; j < N; j++) {
        double db = 0.0;
        for (int i = 0; i < M; i++)
            db += seed[i * N + j];
        worst_db = fmax(worst_db, fabs(db - bias->grad[j]));
    }
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double ref = bias->data[j], exact = bias->data[j];
            for (int k = 0; k < K; k++) {
                ref += bf16(x->data[i * K + k]) * bf16(deq[k * N + j]);
                exact += (double)x->data[i * K + k] * deq[k * N + j];
            }
            worst_y = fmax(worst_y, fabs(ref - y->data[i * N + j]));
            rounding_effect = fmax(rounding_effect, fabs(exact - y->data[i * N + j]));
        }
        for (int k = 0; k < K; k++) {
            double ref = 0.0;
            for (int j = 0; j < N; j++)
                ref += bf16(seed[i * N + j]) * bf16(deq[k * N + j]);
            worst_dx = fmax(worst_dx, fabs(ref - x->grad[i * K + k]));
        }
    }
    printf("qmatmul bf16: y within %.3g, dx within %.3g and db within %.3g of the double "
           "reference; bf16 rounding moves y by up to %.3g\n", worst_y, worst_dx, worst_db,
           rounding_effect);
    assert_true(worst_y < 1e-6);
    assert_true(worst_dx < 1e-6);
    assert_true(worst_db < 1e-5);
    assert_true(rounding_effect > 1e-4);    /* the inputs really were rounded */
    tape_free(tape);
    tensor_free(x);
    tensor_free(bias);
    quant_free(q);
}

static Tensor *f_qmatmul(Tape *tape, Tensor *const *in, void *ctx)
{
    return op_qmatmul(tape, in[0], ctx, in[1], K, N, FMT_FP32);
}

/* With fp32 compute the op is linear in x with the dequantized weight: finite differences
 * are exact up to fp32 rounding. (bf16 inputs would make the loss a step function of x.) */
static void test_qmatmul_gradcheck(void **state)
{
    (void)state;
    Rng rng = rng_new(2, 1);
    float w[K * N];
    QuantTensor *q = random_weight(&rng, w);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 3, 3, K });
    Tensor *bias = test_leaf(&rng, 1.0f, 1, (int[]){ N });
    test_gradcheck("qmatmul", f_qmatmul, (Tensor *[]){ x, bias }, 2, q, gradcheck_defaults());
    tensor_free(x);
    tensor_free(bias);
    quant_free(q);
}

/* The op keeps its output and nothing else (no fp32 weight, no rounded copy of x), and every
 * temp buffer, the dequantized weight included, is gone when forward and backward return. */
static void test_qmatmul_memory(void **state)
{
    (void)state;
    Rng rng = rng_new(3, 1);
    float w[K * N];
    QuantTensor *q = random_weight(&rng, w);
    Tensor *x = test_leaf(&rng, 1.0f, 2, (int[]){ M, K });
    size_t act0 = mem_current(MEM_ACT), temp0 = mem_current(MEM_TEMP);
    mem_reset_peaks();
    Tape *tape = tape_new();
    Tensor *y = op_qmatmul(tape, x, q, NULL, K, N, FMT_BF16);
    assert_int_equal(mem_current(MEM_ACT) - act0, (size_t)M * N * sizeof(float));
    assert_int_equal(mem_current(MEM_TEMP), temp0);
    assert_true(mem_peak(MEM_TEMP) - temp0 >= (size_t)K * N * sizeof(float));
    tape_backward(tape, op_sum(tape, y));
    tape_free(tape);
    assert_int_equal(mem_current(MEM_TEMP), temp0 + (size_t)M * K * sizeof(float));  /* dx */
    tensor_free(x);
    quant_free(q);
}

/* The tiny GPT with QLoRA ------------------------------------------------------------------ */

enum { TB = 2, TT = 6 };
static const int tokens[TB * TT] = { 3, 0, 6, 2, 10, 9, 5, 5, 1, 4, 7, 8 };
static const int targets[TB * TT] = { 0, 6, 2, -1, 9, 1, 5, 1, 4, 3, 8, 2 };

/* GPT-2's initial weights (0.02) make a tiny model almost linear; N(0, 0.3^2) on top of every
 * parameter gives gradients worth checking and weights worth quantizing. */
static Gpt *tiny_gpt(uint64_t seed)
{
    GptConfig cfg = { .vocab_size = 11, .max_seq = 6, .n_layer = 2, .n_head = 2, .n_embd = 32,
                      .tied = true, .fused_qkv = false };
    Gpt *m = gpt_new(&cfg, seed);
    int n;
    Tensor *const *p = gpt_params(m, &n);
    test_perturb(p, n, 0.3f, seed);
    return m;
}

static LoraConfig qlora_cfg(unsigned targets)
{
    LoraConfig c = lora_config_default();
    c.rank = 4;
    c.targets = targets;
    c.qlora = true;
    return c;
}

static float *logits_of(const Gpt *m)
{
    Tape *tape = tape_new();
    tape->recording = false;
    Tensor *y = gpt_forward(m, tape, tokens, TB, TT);
    float *out = malloc(y->size * sizeof *out);
    memcpy(out, y->data, y->size * sizeof *out);
    tape_free(tape);
    return out;
}

/* Bytes of n values as NF4 in blocks of 64 with double-quantized constants, written out:
 * codes n/2 (rounded up), one e4m3 code per block, one fp32 constant per 256 blocks, one fp32
 * mean. */
static size_t nf4_bytes(size_t n)
{
    size_t blocks = (n + 63) / 64, dq = (blocks + 255) / 256;
    return (n + 1) / 2 + blocks + 4 * dq + 4;
}

/* Every weight of every block is NF4: its fp32 storage gone (data NULL), its values within
 * the NF4 rounding bound of the original (half the gap between the two levels around it,
 * times the block's scale, plus whatever the double-quantized scale falls short of the
 * absmax), and the param category holding exactly the formula's bytes for it. */
static void test_quantized_base(void **state)
{
    (void)state;
    Gpt *m = tiny_gpt(1);
    int n;
    Tensor *const *params = gpt_params(m, &n);
    size_t param0 = mem_current(MEM_PARAM), fp32_total = 0, fp32_kept = 0, quant_formula = 0;
    for (int i = 0; i < n; i++)
        fp32_total += params[i]->size * sizeof(float);
    /* keep the originals to compare with */
    float *orig[64];
    for (int i = 0; i < n; i++) {
        orig[i] = malloc(params[i]->size * sizeof(float));
        memcpy(orig[i], params[i]->data, params[i]->size * sizeof(float));
    }
    LoraConfig lc = qlora_cfg(LORA_TARGET_Q | LORA_TARGET_V);
    GptLora *lora = gpt_lora_new(m, &lc, 2);
    assert_int_equal(lora->n_quant, 2 * 6);
    const float *levels = quant_nf4_codebook();
    double worst_excess = 0.0;
    for (int s = 0; s < lora->n_quant; s++) {
        const LoraQuant *lq = &lora->quant[s];
        Tensor *w = lora->quant_sites[s]->weight;
        assert_null(w->data);
        assert_ptr_equal(lora->quant_sites[s]->quant, lq);
        int i = 0;
        while (params[i] != w)
            i++;
        float *deq = malloc(w->size * sizeof *deq);
        lora_quant_dequantize(lq, deq);
        for (size_t j = 0; j < w->size; j++) {
            float scale = quant_block_scale(&lq->q, j / 64);
            int c = quant_code_at(&lq->q, j);
            double gap = fmax(c > 0 ? levels[c] - levels[c - 1] : 0.0,
                              c < 15 ? levels[c + 1] - levels[c] : 0.0);
            double bound = 0.5 * scale * gap + fmax(0.0, fabs(orig[i][j]) - scale);
            double err = fabs((double)orig[i][j] - deq[j]);
            assert_true(deq[j] == levels[c] * scale);
            assert_true(err <= bound * (1 + 1e-6));
            worst_excess = fmax(worst_excess, err / bound);
        }
        free(deq);
        assert_int_equal(lora_quant_bytes(lq), nf4_bytes(w->size));
        quant_formula += nf4_bytes(w->size);
    }
    for (int i = 0; i < n; i++)
        if (params[i]->data)
            fp32_kept += params[i]->size * sizeof(float);
    LoraBaseBytes b = gpt_lora_base_bytes(lora);
    assert_int_equal(b.quant_bytes, quant_formula);
    assert_int_equal(b.fp32_bytes, fp32_kept);
    size_t adapters = gpt_lora_n_trainable(lora) * sizeof(float);
    /* What the allocator measures: kept fp32 + NF4 storage + the adapters, nothing else. */
    assert_int_equal(mem_current(MEM_PARAM) - param0 + fp32_total,
                     fp32_kept + quant_formula + adapters);
    printf("QLoRA base: %zu weights in %zu bytes (%.4f bits each), %zu bytes fp32; base %.4f "
           "of its fp32 bytes; worst error / bound %.3f\n", b.quant_values, b.quant_bytes,
           8.0 * b.quant_bytes / b.quant_values, b.fp32_bytes,
           (double)(b.quant_bytes + b.fp32_bytes) / fp32_total, worst_excess);

    /* Freed, the adapter leaves the NF4 values behind as fp32. */
    const LoraQuant *first = &lora->quant[0];
    float *deq0 = malloc(first->q.n * sizeof *deq0);
    lora_quant_dequantize(first, deq0);
    Tensor *w0 = lora->quant_sites[0]->weight;
    gpt_lora_free(lora);
    assert_non_null(w0->data);
    assert_true(test_max_abs_diff(w0->data, deq0, w0->size) == 0.0);
    assert_int_equal(mem_current(MEM_PARAM), param0);
    free(deq0);
    for (int i = 0; i < n; i++)
        free(orig[i]);
    gpt_free(m);
}

/* Two QLoRA models of the same base with different targets agree exactly at step 0 (the
 * adapters add zeros on the NF4 path too). Against an fp32 model holding the dequantized
 * weights they differ by the bf16 rounding of the products only, and by fp32 rounding once the
 * compute format is fp32 (none at all when the bias is added as op_linear adds it). */
static void test_qlora_step0(void **state)
{
    (void)state;
    Gpt *a = tiny_gpt(3), *b = tiny_gpt(3), *ref = tiny_gpt(3);
    LoraConfig la = qlora_cfg(LORA_TARGET_Q | LORA_TARGET_V), lb = qlora_cfg(LORA_TARGET_O);
    GptLora *qa = gpt_lora_new(a, &la, 4), *qb = gpt_lora_new(b, &lb, 5);
    for (int s = 0; s < qa->n_quant; s++) {
        Tensor *w = gpt_param(ref, qa->quant_sites[s]->weight->name);
        lora_quant_dequantize(&qa->quant[s], w->data);
    }
    float *ya = logits_of(a), *yb = logits_of(b), *yr = logits_of(ref);
    size_t n = (size_t)TB * TT * 11;
    assert_true(test_max_abs_diff(ya, yb, n) == 0.0);
    double d_bf16 = test_max_abs_diff(ya, yr, n), biggest = 0.0;
    for (size_t i = 0; i < n; i++)
        biggest = fmax(biggest, fabs(yr[i]));
    for (int s = 0; s < qa->n_quant; s++)
        qa->quant[s].compute = FMT_FP32;
    float *y32 = logits_of(a);
    double d_fp32 = test_max_abs_diff(y32, yr, n);
    printf("QLoRA logits vs fp32 with the NF4 weights: %.3g with bf16 products, %.3g with fp32 "
           "(logits up to %.3g)\n", d_bf16, d_fp32, biggest);
    assert_true(d_bf16 > 0.0 && d_bf16 < 0.05 * biggest);
    assert_true(d_fp32 < 1e-5 * biggest);     /* fp32 rounding only */
    free(ya);
    free(yb);
    free(yr);
    free(y32);
    gpt_lora_free(qa);
    gpt_lora_free(qb);
    gpt_free(a);
    gpt_free(b);
    gpt_free(ref);
}

static Tensor *f_loss(Tape *tape, Tensor *const *in, void *ctx)
{
    (void)in;
    return gpt_loss(ctx, tape, tokens, targets, TB, TT);
}

/* Gradients reach the adapters through NF4 products (compute switched to fp32 so finite
 * differences see a smooth loss) and nothing else. */
static void test_qlora_gradients(void **state)
{
    (void)state;
    Gpt *m = tiny_gpt(6);
    LoraConfig lc = qlora_cfg(LORA_TARGET_ALL);
    GptLora *lora = gpt_lora_new(m, &lc, 7);
    for (int i = 0; i < lora->n_quant; i++)
        lora->quant[i].compute = FMT_FP32;
    int n;
    Tensor *const *p = gpt_lora_params(lora, &n);
    Rng rng = rng_new(8, 1);
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < p[i]->size; j++)
            p[i]->data[j] += 0.5f * rng_normal(&rng);
    GradcheckOptions opt = { .h = 1e-3, .atol = 5e-4, .rtol = 1e-3, .seed = 99 };
    const int check[] = { 0, 1, 7, 9, 10 };       /* q.A, q.B, o.B, fc.B, proj.A of block 0 */
    for (int k = 0; k < 5; k++) {
        Tensor *t = p[check[k]];
        test_gradcheck(t->name, f_loss, &t, 1, m, opt);
    }
    int nb;
    Tensor *const *base = gpt_params(m, &nb);
    for (int i = 0; i < nb; i++)
        assert_null(base[i]->grad);
    gpt_lora_free(lora);
    gpt_free(m);
}

static void merge_quantized(void *arg) { gpt_lora_merge(arg); }

/* An adapter trained on the NF4 base says so in its file and quantizes the fresh fp32 base it
 * is loaded onto: the logits come back exactly. Merging into NF4 is refused. */
static void test_qlora_adapter_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/tapegrad_qlora_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/adapter.safetensors", dir);
    Gpt *m = tiny_gpt(9);
    LoraConfig lc = qlora_cfg(LORA_TARGET_Q | LORA_TARGET_V);
    GptLora *lora = gpt_lora_new(m, &lc, 10);
    int n;
    Tensor *const *p = gpt_lora_params(lora, &n);
    Rng rng = rng_new(11, 1);
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < p[i]->size; j++)
            p[i]->data[j] += 0.1f * rng_normal(&rng);
    float *want = logits_of(m);
    SnapshotError err;
    assert_true(lora_snapshot_save(lora, path, &err));
    assert_true(test_aborts(merge_quantized, lora));
    /* The NF4 base is not a base file: refused, with the reason. */
    char base_path[80];
    snprintf(base_path, sizeof base_path, "%s/base.safetensors", dir);
    assert_false(gpt_snapshot_save(m, base_path, &err));
    assert_non_null(strstr(err.message, "quantized"));
    assert_int_equal(access(base_path, F_OK), -1);

    Gpt *fresh = tiny_gpt(9);
    GptLora *loaded = lora_snapshot_load(fresh, path, &err);
    assert_non_null(loaded);
    assert_true(loaded->cfg.qlora);
    assert_int_equal(loaded->n_quant, 12);
    float *got = logits_of(fresh);
    assert_true(test_max_abs_diff(got, want, (size_t)TB * TT * 11) == 0.0);
    free(want);
    free(got);
    gpt_lora_free(loaded);
    gpt_free(fresh);
    gpt_lora_free(lora);
    gpt_free(m);
    remove(path);
    rmdir(dir);
}

int main(void)
{
    par_set_threads(2);
    par_set_split_always(true);    /* the small cases still take the threaded paths */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qmatmul_reference),
        cmocka_unit_test(test_qmatmul_gradcheck),
        cmocka_unit_test(test_qmatmul_memory),
        cmocka_unit_test(test_quantized_base),
        cmocka_unit_test(test_qlora_step0),
        cmocka_unit_test(test_qlora_gradients),
        cmocka_unit_test(test_qlora_adapter_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

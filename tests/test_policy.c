/* Mixed precision in the engine: packed tensors, what the tape stores under a policy, how
 * gradients are rounded, matmul compute formats, low-precision accumulation, fp8 scaling and
 * the optimizer's master weights. Every expected value is computed independently, through
 * precision/format.h's scalar functions. */
#include "tests/test_helpers.h"

#include <math.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/policy.h"
#include "nn/gpt.h"
#include "optim/sgd.h"

static const Rounding rne = { 0 };

static PrecisionPolicy preset(const char *name)
{
    PrecisionPolicy p;
    assert_true(policy_preset(name, &p));
    return p;
}

/* Packing really halves (bf16, fp16) or quarters (fp8) the bytes, and unpacking gives the
 * format's rounding of every value, bit for bit; the scratch copy lives in temp. */
static void test_pack_roundtrip(void **state)
{
    (void)state;
    const Dtype dtypes[] = { DTYPE_BF16, DTYPE_F16, DTYPE_E4M3, DTYPE_E5M2 };
    const size_t bytes_per[] = { 2, 2, 1, 1 };
    Rng rng = rng_new(3, 1);
    for (int d = 0; d < 4; d++) {
        size_t act0 = mem_current(MEM_ACT);
        Tensor *t = tensor_new2(MEM_ACT, 37, 301);      /* several pack chunks, a ragged end */
        float *ref = malloc(t->size * sizeof(float));
        for (size_t i = 0; i < t->size; i++)
            ref[i] = t->data[i] = 3.0f * rng_normal(&rng);
        Format f = tensor_dtype_format(dtypes[d]);
        float scale = d >= 2 ? 0.75f : 1.0f;
        tensor_pack(t, dtypes[d], scale);
        assert_null(t->data);
        assert_int_equal(mem_current(MEM_ACT) - act0, t->size * bytes_per[d]);
        assert_int_equal(tensor_bytes(t), t->size * bytes_per[d]);
        size_t temp0 = mem_current(MEM_TEMP);
        const float *x = tensor_unpack(t);
        assert_int_equal(mem_current(MEM_TEMP) - temp0, t->size * sizeof(float));
        Rounding r = { .saturate = d >= 2 };
        for (size_t i = 0; i < t->size; i++)
            assert_true(x[i] == fmt_round(f, ref[i] * scale, r, 0) / scale);
        tensor_release(t);
        assert_int_equal(mem_current(MEM_TEMP), temp0);
        tensor_free(t);
        free(ref);
        assert_int_equal(mem_current(MEM_ACT), act0);
    }
}

/* Under bf16 the tape keeps each op's output as bf16 (2 bytes), its value the bf16 rounding of
 * the fp32 result computed from the (decoded) inputs; a scalar loss stays fp32. */
static void test_tape_stores_activations(void **state)
{
    (void)state;
    PrecisionPolicy p = preset("bf16");
    Rng rng = rng_new(4, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 2, (int[]){ 16, 40 });
    Tape *tape = tape_new();
    tape->policy = &p;
    size_t act0 = mem_current(MEM_ACT);
    Tensor *g = op_gelu(tape, x);
    assert_int_equal(g->dtype, DTYPE_BF16);
    assert_int_equal(mem_current(MEM_ACT) - act0, x->size * 2);
    Tensor *y = op_mul(tape, g, g);
    Tensor *loss = op_sum(tape, y);
    assert_int_equal(loss->dtype, DTYPE_F32);

    /* gelu in fp32 on x, then rounded: compare against an fp32 tape's gelu. */
    Tape *ref_tape = tape_new();
    Tensor *g_ref = op_gelu(ref_tape, x);
    const float *gv = tensor_unpack(g);
    for (size_t i = 0; i < x->size; i++)
        assert_true(gv[i] == fmt_round(FMT_BF16, g_ref->data[i], rne, 0));
    /* y = g * g from the stored (rounded) g, rounded again. */
    const float *yv = tensor_unpack(y);
    for (size_t i = 0; i < x->size; i++)
        assert_true(yv[i] == fmt_round(FMT_BF16, gv[i] * gv[i], rne, 0));
    tensor_release(g);
    tensor_release(y);

    /* Backward: dy = 1 and dg = 2 g dy are bf16-exact; the gradient reaching x is the bf16
     * rounding of gelu'(x) * dg, x being a leaf that is not a parameter. */
    tape_backward(tape, loss);
    Tensor *xs = tensor_new2(MEM_TEMP, 16, 40);
    memcpy(xs->data, x->data, x->size * sizeof(float));
    xs->requires_grad = true;
    Tape *t2 = tape_new();
    Tensor *g2 = op_gelu(t2, xs);
    float *seed = malloc(x->size * sizeof(float));
    for (size_t i = 0; i < x->size; i++)
        seed[i] = fmt_round(FMT_BF16, 2.0f * fmt_round(FMT_BF16, g2->data[i], rne, 0), rne, 0);
    tape_backward_seeded(t2, g2, seed);
    for (size_t i = 0; i < x->size; i++)
        assert_true(x->grad[i] == fmt_round(FMT_BF16, xs->grad[i], rne, 0));
    free(seed);
    tape_free(t2);
    tape_free(ref_tape);
    tape_free(tape);
    assert_int_equal(mem_current(MEM_ACT), act0);
    tensor_free(xs);
    tensor_free(x);
}

/* The reason for loss scaling: a gradient of 1e-8 is below fp16's smallest subnormal (2^-24,
 * about 6e-8) and becomes 0; bf16 keeps it (its range is fp32's); scaled by 2^10 it survives
 * fp16 too (a seed of 2^16 would itself overflow fp16, whose max is 65504). */
static void test_fp16_gradient_underflow(void **state)
{
    (void)state;
    const char *names[] = { "fp16", "bf16", "fp16" };
    const float seeds[] = { 1.0f, 1.0f, 1024.0f };
    for (int c = 0; c < 3; c++) {
        PrecisionPolicy p = preset(names[c]);
        Tensor *x = tensor_new1(MEM_TEMP, 8);
        tensor_fill(x, 1.0f);
        x->requires_grad = true;
        Tape *tape = tape_new();
        tape->policy = &p;
        Tensor *loss = op_sum(tape, op_scale(tape, x, 1e-8f));
        tape_backward_seeded(tape, loss, &seeds[c]);
        float expect = fmt_round(p.grad == DTYPE_F16 ? FMT_FP16 : FMT_BF16, seeds[c] * 1e-8f,
                                 rne, 0);
        assert_true(x->grad[0] == expect);
        if (c == 0)
            assert_true(x->grad[0] == 0.0f);
        else
            assert_true(x->grad[0] > 0.0f);
        tape_free(tape);
        tensor_free(x);
    }
}

/* tf32 compute: a matmul's output equals fp32 sgemm on tf32-rounded inputs, bit for bit, and
 * differs from plain fp32's. */
static void test_tf32_matmul(void **state)
{
    (void)state;
    PrecisionPolicy p = preset("tf32");
    Rng rng = rng_new(5, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 2, (int[]){ 9, 33 });
    Tensor *w = test_leaf(&rng, 1.0f, 2, (int[]){ 33, 7 });
    Tape *tape = tape_new();
    tape->policy = &p;
    Tensor *y = op_matmul(tape, x, w, false);
    float xr[9 * 33], wr[33 * 7], ref[9 * 7];
    fmt_round_array(FMT_TF32, x->data, xr, x->size, rne, 0);
    fmt_round_array(FMT_TF32, w->data, wr, w->size, rne, 0);
    par_sgemm(false, false, 9, 7, 33, 1.0f, xr, 33, wr, 7, 0.0f, ref, 7);
    assert_memory_equal(y->data, ref, sizeof ref);
    Tape *plain = tape_new();
    Tensor *y32 = op_matmul(plain, x, w, false);
    assert_true(test_max_abs_diff(y32->data, ref, 9 * 7) > 0.0);
    tape_free(plain);
    tape_free(tape);
    tensor_free(x);
    tensor_free(w);
}

/* tf32 backward of a linear layer: dX = dY W^T and dW = X^T dY are fp32 sgemm on tf32-rounded
 * operands, db the sum of dY as it is, bit for bit, whether dY is rounded where it lies (the tape
 * frees it after the node) or in a copy (keep_grads: the kept dY keeps its fp32 values). */
static void test_tf32_linear_backward(void **state)
{
    (void)state;
    enum { M = 9, K = 33, N = 7 };
    PrecisionPolicy p = preset("tf32");
    Rng rng = rng_new(6, 1);
    float dy[M * N], dyr[M * N], xr[M * K], wr[K * N];
    for (int i = 0; i < M * N; i++)
        dy[i] = rng_normal(&rng);
    for (int keep = 0; keep < 2; keep++) {
        Rng init = rng_new(7, 1);
        Tensor *x = test_leaf(&init, 1.0f, 2, (int[]){ M, K });
        Tensor *w = test_leaf(&init, 1.0f, 2, (int[]){ K, N });
        Tensor *b = test_leaf(&init, 1.0f, 1, (int[]){ N });
        Tape *tape = tape_new();
        tape->policy = &p;
        tape->keep_grads = keep;
        Tensor *y = op_linear(tape, x, w, b);
        tape_backward_seeded(tape, y, dy);
        fmt_round_array(FMT_TF32, dy, dyr, M * N, rne, 0);
        fmt_round_array(FMT_TF32, x->data, xr, x->size, rne, 0);
        fmt_round_array(FMT_TF32, w->data, wr, w->size, rne, 0);
        float dx[M * K] = { 0 }, dw[K * N] = { 0 }, db[N] = { 0 };
        par_sgemm(false, true, M, K, N, 1.0f, dyr, N, wr, N, 1.0f, dx, K);
        par_sgemm(true, false, K, N, M, 1.0f, xr, K, dyr, N, 1.0f, dw, N);
        par_sum_rows(dy, M, N, db);
        assert_memory_equal(x->grad, dx, sizeof dx);
        assert_memory_equal(w->grad, dw, sizeof dw);
        assert_memory_equal(b->grad, db, sizeof db);
        if (keep)
            assert_memory_equal(y->grad, dy, sizeof dy);
        else
            assert_null(y->grad);
        tape_free(tape);
        tensor_free(x);
        tensor_free(w);
        tensor_free(b);
    }
}

/* Summing 4096 ones: fp32 accumulation gives 4096; fp16 accumulation sticks at 2048, where
 * the spacing of fp16 is 2 and 2048 + 1 rounds back to 2048 (ties to even). */
static void test_low_precision_accumulation(void **state)
{
    (void)state;
    enum { K = 4096 };
    PrecisionPolicy p = preset("fp16");
    Tensor *x = tensor_new2(MEM_TEMP, 1, K), *w = tensor_new2(MEM_TEMP, K, 1);
    tensor_fill(x, 1.0f);
    tensor_fill(w, 1.0f);
    for (int low = 0; low < 2; low++) {
        p.accumulate_low = low;
        Tape *tape = tape_new();
        tape->policy = &p;
        tape->recording = false;            /* the output is rounded in place, not packed */
        Tensor *y = op_matmul(tape, x, w, false);
        assert_true(y->size == 1 && y->data[0] == (low ? 2048.0f : 4096.0f));
        tape_free(tape);
    }
    tensor_free(x);
    tensor_free(w);
}

/* fp8 current scaling maps each tensor's amax onto the format's max (448 for e4m3). Delayed
 * scaling uses the largest amax of the last steps: after a step with amax 1, a tensor with
 * amax 4 saturates at 1 (448 / scale), and the next step (history now 4) keeps it. */
static void test_fp8_scaling(void **state)
{
    (void)state;
    PrecisionPolicy p = preset("fp8");
    for (int delayed = 0; delayed < 2; delayed++) {
        p.fp8_scaling = delayed ? POLICY_FP8_DELAYED : POLICY_FP8_CURRENT;
        Tape *tape = tape_new();
        tape->policy = &p;
        Tensor *x = tensor_new1(MEM_TEMP, 4);
        x->requires_grad = true;
        const float amax[3] = { 1.0f, 4.0f, 4.0f };
        for (int step = 0; step < 3; step++) {
            float v[4] = { amax[step], -0.3f, 0.01f, 0.5f };
            memcpy(x->data, v, sizeof v);
            Tensor *y = op_scale(tape, x, 1.0f);
            assert_int_equal(y->dtype, DTYPE_E4M3);
            float expect_scale = 448.0f / (delayed && step == 1 ? 1.0f : amax[step]);
            assert_true(y->scale == expect_scale);
            const float *yv = tensor_unpack(y);
            Rounding sat = { .saturate = true };
            for (int i = 0; i < 4; i++)
                assert_true(yv[i] == fmt_round(FMT_E4M3, v[i] * expect_scale, sat, 0) /
                                         expect_scale);
            if (delayed && step == 1)
                assert_true(yv[0] == 1.0f);        /* saturated at the old amax */
            tensor_release(y);
            tape_reset(tape);
        }
        tape_free(tape);
        tensor_free(x);
    }
}

/* Master weights: the parameter shrinks to 2 bytes per element, the optimizer holds 4 more;
 * updates far below bf16's resolution accumulate in the master and reach the working copy
 * once they add up (which updating the bf16 copy directly would never do). */
static void test_master_weights(void **state)
{
    (void)state;
    Tensor *w = tensor_param("w", 1, (int[]){ 64 });
    tensor_fill(w, 1.0f);
    size_t param0 = mem_current(MEM_PARAM);
    SgdConfig cfg = sgd_defaults();
    cfg.momentum = 0.0;
    cfg.weight_decay = 0.0;
    Sgd *sgd = sgd_new((Tensor *[]){ w }, 1, cfg);
    Optim *o = &sgd->base;
    size_t optim0 = mem_current(MEM_OPTIM);
    optim_use_master_weights(o, DTYPE_BF16);
    assert_int_equal(param0 - mem_current(MEM_PARAM), 64 * 2);
    assert_int_equal(mem_current(MEM_OPTIM) - optim0, 64 * 4);
    /* lr * grad = 1e-3 per step: bf16's spacing just below 1 is 2^-8 = 3.9e-3. */
    for (int step = 1; step <= 10; step++) {
        float *g = tensor_grad(w);
        for (int i = 0; i < 64; i++)
            g[i] = 1.0f;
        optim_step(o, 1e-3);
        float master = optim_master(o, 0)[0];
        float expect = 1.0f;
        for (int s = 0; s < step; s++)
            expect -= 1e-3f;
        assert_true(master == expect);
        const float *wv = tensor_unpack(w);
        assert_true(wv[0] == fmt_round(FMT_BF16, master, rne, 0));
        if (step == 1)
            assert_true(wv[0] == 1.0f);            /* the step alone rounds away */
        tensor_release(w);
    }
    const float *wv = tensor_unpack(w);
    assert_true(wv[0] < 1.0f);                     /* 0.99 rounds to 0.98828125 */
    tensor_release(w);
    optim_free(o);
    tensor_free(w);
}

/* A whole GPT step under bf16 against fp32, same weights and batch: the loss within 1% and
 * every parameter's gradient within 3% (relative L2), the stored activations at most 0.55x
 * fp32's (the target; only per-row statistics and token ids stay 4 bytes). */
static double gpt_step(Gpt *m, const PrecisionPolicy *p, const int *tok, const int *tgt, int B,
                       int T, size_t *peak_act)
{
    Tape *tape = tape_new();
    tape->policy = p;
    gpt_zero_grad(m);
    mem_reset_peaks();
    size_t act0 = mem_current(MEM_ACT);
    Tensor *loss = gpt_loss(m, tape, tok, tgt, B, T);
    double value = loss->data[0];
    tape_backward(tape, loss);
    *peak_act = mem_peak(MEM_ACT) - act0;
    tape_free(tape);
    return value;
}

static void test_gpt_bf16(void **state)
{
    (void)state;
    enum { B = 4, T = 16 };
    GptConfig cfg = { .vocab_size = 20, .max_seq = T, .n_layer = 2, .n_head = 2, .n_embd = 32,
                      .tied = true, .fused_qkv = true };
    Gpt *m = gpt_new(&cfg, 7);
    int tok[B * T], tgt[B * T];
    Rng rng = rng_new(8, 1);
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int)rng_below(&rng, 20);
        tgt[i] = (int)rng_below(&rng, 20);
    }
    int n;
    Tensor *const *params = gpt_params(m, &n);
    size_t act32, act16;
    double loss32 = gpt_step(m, NULL, tok, tgt, B, T, &act32);
    float **g32 = malloc((size_t)n * sizeof *g32);
    for (int k = 0; k < n; k++) {
        g32[k] = malloc(params[k]->size * sizeof(float));
        memcpy(g32[k], params[k]->grad, params[k]->size * sizeof(float));
    }
    /* The parameters stay fp32 here (no optimizer): activations and gradients are bf16. */
    PrecisionPolicy p = preset("bf16");
    p.param = DTYPE_F32;
    double loss16 = gpt_step(m, &p, tok, tgt, B, T, &act16);
    assert_true(fabs(loss16 - loss32) < 0.01 * loss32);
    double ratio = (double)act16 / (double)act32;
    print_message("peak act bytes: fp32 %zu, bf16 %zu: %.4f\n", act32, act16, ratio);
    assert_true(ratio <= 0.55 && ratio > 0.45);
    for (int k = 0; k < n; k++) {
        double num = 0, den = 0;
        for (size_t i = 0; i < params[k]->size; i++) {
            double d = (double)params[k]->grad[i] - g32[k][i];
            num += d * d;
            den += (double)g32[k][i] * g32[k][i];
        }
        if (sqrt(num) > 0.03 * sqrt(den) + 1e-12)
            fail_msg("%s: gradient off by %.3g relative", params[k]->name, sqrt(num / den));
        free(g32[k]);
    }
    free(g32);
    gpt_free(m);
}

/* The loss is a scalar and stays fp32, and so does its gradient: a loss scale of 2^17 divided
 * over 2 micro-batches (op_scale 0.5) gives the scalar below it a gradient of 2^16, above
 * fp16's max, which must not become inf. The tensor gradients below, 2^16 x 1e-3 = 65.5, are
 * fp16. */
static void test_scalar_gradient_stays_fp32(void **state)
{
    (void)state;
    PrecisionPolicy p = preset("fp16");
    Tensor *x = tensor_new1(MEM_TEMP, 4);
    tensor_fill(x, 1.0f);
    x->requires_grad = true;
    Tape *tape = tape_new();
    tape->policy = &p;
    Tensor *loss = op_scale(tape, op_scale(tape, op_sum(tape, x), 1e-3f), 0.5f);
    float seed = 131072.0f;
    tape_backward_seeded(tape, loss, &seed);
    assert_true(x->grad[0] == fmt_round(FMT_FP16, 65536.0f * 1e-3f, rne, 0));
    tape_free(tape);
    tensor_free(x);
}

/* Exposing the masters twice (a snapshot inside a step's bookkeeping) must not free them. */
static void test_expose_twice(void **state)
{
    (void)state;
    Tensor *w = tensor_param("w", 1, (int[]){ 8 });
    tensor_fill(w, 0.5f);
    Sgd *sgd = sgd_new((Tensor *[]){ w }, 1, sgd_defaults());
    Optim *o = &sgd->base;
    optim_use_master_weights(o, DTYPE_F16);
    optim_expose_masters(o);
    optim_expose_masters(o);
    assert_true(w->data == optim_master(o, 0) && w->data[7] == 0.5f);
    optim_pack_masters(o);
    assert_null(w->data);
    optim_free(o);
    tensor_free(w);
}

/* An exposed parameter borrows its master: releasing it (as the tape releases an op's inputs,
 * or a user would after reading it) used to free the optimizer's buffer, which the next step
 * then wrote into (use after free) and optim_free freed again; freeing the parameter did too.
 * Now both leave the master, which keeps its values and is freed once, by optim_free. */
static void test_release_keeps_master(void **state)
{
    (void)state;
    Tensor *w = tensor_param("w", 1, (int[]){ 8 });
    tensor_fill(w, 0.5f);
    Sgd *sgd = sgd_new((Tensor *[]){ w }, 1, sgd_defaults());
    Optim *o = &sgd->base;
    optim_use_master_weights(o, DTYPE_BF16);
    size_t optim_bytes = mem_current(MEM_OPTIM);
    optim_expose_masters(o);
    tensor_release(w);
    assert_true(w->data == optim_master(o, 0));
    assert_true(w->data[3] == 0.5f);
    assert_int_equal(mem_current(MEM_OPTIM), optim_bytes);
    w->grad = mem_calloc(MEM_GRAD, 8 * sizeof(float));
    w->grad[0] = 1.0f;
    optim_step(o, 0.25);            /* exposes, updates the master, packs */
    assert_null(w->data);
    assert_true(optim_master(o, 0)[0] == 0.25f && optim_master(o, 0)[1] == 0.5f);
    assert_true(tensor_unpack(w)[0] == 0.25f);
    tensor_release(w);
    optim_expose_masters(o);
    tensor_free(w);                 /* frees the packed storage, not the master */
    assert_int_equal(mem_current(MEM_OPTIM), optim_bytes);
    assert_true(optim_master(o, 0)[1] == 0.5f);
    optim_free(o);
}

/* Every op under bf16, in one graph: backward decodes what each op's backward reads (and only
 * that), so a missing decode would crash here; the gradients of the three leaves stay within
 * 5% (relative L2) of fp32's. x [2, 8, 16] -> q, k, v by separate products, both attention
 * forms, split/merge heads with a causal softmax and bmm, transpose, relu, mul, softmax,
 * layernorm, bias, reshape, embedding rows added, cross-entropy. */
static Tensor *every_op(Tape *t, Tensor *x, Tensor *w, Tensor *table)
{
    static const int ids[16] = { 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3 };
    static const int targets[16] = { 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4 };
    Tensor *q = op_matmul(t, x, w, false), *k = op_matmul(t, x, w, true);
    Tensor *v = op_relu(t, x);
    Tensor *a1 = op_attention(t, q, k, v, 2);
    Tensor *a2 = op_attention_tiled(t, q, k, v, 2);
    Tensor *qh = op_split_heads(t, q, 2), *kh = op_split_heads(t, k, 2);
    Tensor *s = op_causal_softmax(t, op_bmm(t, qh, kh, true), 0.25f);
    Tensor *a3 = op_merge_heads(t, op_bmm(t, s, op_split_heads(t, v, 2), false));
    Tensor *h = op_add(t, op_mul(t, a1, a2), a3);
    Tensor *tt = op_transpose(t, op_softmax(t, h), 0, 1);
    Tensor *g = op_gelu(t, op_reshape(t, tt, 3, (int[]){ 2, 8, 16 }));
    Tensor *ln = op_layernorm(t, g, table, table, 1e-5f);
    Tensor *e = op_embedding(t, op_reshape(t, op_scale(t, w, 0.5f), 2, (int[]){ 16, 16 }), ids,
                             2, 8);
    Tensor *y = op_bias_add(t, op_add(t, ln, e), table);
    return op_cross_entropy(t, op_reshape(t, y, 2, (int[]){ 16, 16 }), targets);
}

static void test_every_op_bf16(void **state)
{
    (void)state;
    Rng rng = rng_new(9, 1);
    Tensor *in[3] = { test_leaf(&rng, 1.0f, 3, (int[]){ 2, 8, 16 }),
                      test_leaf(&rng, 0.3f, 2, (int[]){ 16, 16 }),
                      test_leaf(&rng, 1.0f, 1, (int[]){ 16 }) };
    float *ref[3];
    PrecisionPolicy p = preset("bf16");
    for (int pass = 0; pass < 2; pass++) {
        Tape *tape = tape_new();
        tape->policy = pass ? &p : NULL;
        tape_backward(tape, every_op(tape, in[0], in[1], in[2]));
        for (int k = 0; k < 3; k++) {
            if (pass == 0) {
                ref[k] = malloc(in[k]->size * sizeof(float));
                memcpy(ref[k], in[k]->grad, in[k]->size * sizeof(float));
            } else {
                double num = 0, den = 0;
                for (size_t i = 0; i < in[k]->size; i++) {
                    double d = (double)in[k]->grad[i] - ref[k][i];
                    num += d * d;
                    den += (double)ref[k][i] * ref[k][i];
                }
                assert_true(den > 0 && sqrt(num / den) < 0.05);
                free(ref[k]);
            }
            tensor_free_grad(in[k]);
        }
        tape_free(tape);
    }
    for (int k = 0; k < 3; k++)
        tensor_free(in[k]);
}

static void test_presets(void **state)
{
    (void)state;
    PrecisionPolicy p;
    assert_false(policy_preset("fp12", &p));
    assert_true(policy_is_fp32(&(PrecisionPolicy){ .compute = FMT_FP32 }));
    p = preset("tf32");
    assert_false(policy_is_fp32(&p));
    p = preset("fp8");
    assert_int_equal(p.act, DTYPE_E4M3);
    assert_int_equal(p.grad, DTYPE_E5M2);
    assert_true(policy_fp8_scale(FMT_E5M2, 2.0f) == 57344.0f / 2.0f);
    assert_true(policy_fp8_scale(FMT_BF16, 2.0f) == 1.0f);
    assert_true(policy_fp8_scale(FMT_E4M3, 0.0f) == 1.0f);
    assert_true(isnan(policy_amax((float[]){ 1.0f, NAN, 2.0f }, 3)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_roundtrip),
        cmocka_unit_test(test_tape_stores_activations),
        cmocka_unit_test(test_fp16_gradient_underflow),
        cmocka_unit_test(test_tf32_matmul),
        cmocka_unit_test(test_tf32_linear_backward),
        cmocka_unit_test(test_low_precision_accumulation),
        cmocka_unit_test(test_fp8_scaling),
        cmocka_unit_test(test_master_weights),
        cmocka_unit_test(test_gpt_bf16),
        cmocka_unit_test(test_every_op_bf16),
        cmocka_unit_test(test_scalar_gradient_stays_fp32),
        cmocka_unit_test(test_expose_twice),
        cmocka_unit_test(test_release_keeps_master),
        cmocka_unit_test(test_presets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

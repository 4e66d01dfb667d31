/* FLOPs counted by the tape (docs/autograd.md, "Counting FLOPs"): one op at a time against
 * counts worked out by hand, then the whole GPT, whose products per token of a training step
 * are 6N + 12LTC exactly (N = 12LC^2 + VC: the weights that enter a product, a tied wte once,
 * as the head), and checkpointing, whose recomputed block forwards land in recompute. The
 * counts do not depend on the thread count, the precision policy or the attention kernel's
 * products. */
#include "tests/test_helpers.h"

#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "tests/gpt_pass_test.h"
#include "optim/train.h"

/* A tape that counts into *f, from zero. */
static Tape *counting_tape(TapeFlops *f)
{
    *f = (TapeFlops){ 0 };
    Tape *tape = tape_new();
    tape->flops = f;
    return tape;
}

static void assert_count(FlopCount c, int64_t matmul, int64_t other)
{
    assert_int_equal(c.matmul, matmul);
    assert_int_equal(c.other, other);
}

/* One layer ------------------------------------------------------------------------------- */

/* Y = X W, X [M, K], W [K, N]: 2MNK forward; backward 2MNK for dX and 2MNK for dW. */
static void test_matmul_counts(void **state)
{
    (void)state;
    enum { M = 5, K = 7, N = 3 };
    Rng rng = rng_new(1, RNG_STREAM_DATA);
    Tensor *x = test_leaf(&rng, 1.0f, 2, (int[]){ M, K });
    Tensor *w = test_leaf(&rng, 1.0f, 2, (int[]){ K, N });
    TapeFlops f;
    Tape *tape = counting_tape(&f);
    tape_backward(tape, op_sum(tape, op_matmul(tape, x, w, false)));
    /* The sum: M N adds forward, nothing backward (dy passed on to every element). */
    assert_count(f.forward, 2 * M * N * K, M * N);
    assert_count(f.backward, 2 * 2 * M * N * K, 0);
    assert_count(f.recompute, 0, 0);

    /* Only the gradients computed count: W alone (x a constant input) is one product. */
    tape_reset(tape);
    f = (TapeFlops){ 0 };
    x->requires_grad = false;
    tape_backward(tape, op_sum(tape, op_matmul(tape, x, w, false)));
    assert_count(f.backward, 2 * M * N * K, 0);

    /* The transposed form (a tied head) counts the same. */
    tape_reset(tape);
    f = (TapeFlops){ 0 };
    x->requires_grad = true;
    Tensor *wt = test_leaf(&rng, 1.0f, 2, (int[]){ N, K });
    tape_backward(tape, op_sum(tape, op_matmul(tape, x, wt, true)));
    assert_count(f.forward, 2 * M * N * K, M * N);
    assert_count(f.backward, 4 * M * N * K, 0);
    tape_free(tape);
    tensor_free(x);
    tensor_free(w);
    tensor_free(wt);
}

/* Y = X W + b: the product as above, plus M N adds for the bias forward and M N for db. */
static void test_linear_counts(void **state)
{
    (void)state;
    enum { M = 6, K = 4, N = 9 };
    Rng rng = rng_new(2, RNG_STREAM_DATA);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 3, K });
    Tensor *w = test_leaf(&rng, 1.0f, 2, (int[]){ K, N });
    Tensor *b = test_leaf(&rng, 1.0f, 1, (int[]){ N });
    TapeFlops f;
    Tape *tape = counting_tape(&f);
    Tensor *y = op_linear(tape, x, w, b);
    assert_count(f.forward, 2 * M * N * K, M * N);
    tape_backward(tape, op_sum(tape, y));
    assert_count(f.forward, 2 * M * N * K, 2 * M * N);
    assert_count(f.backward, 4 * M * N * K, M * N);
    tape_free(tape);
    tensor_free(x);
    tensor_free(w);
    tensor_free(b);
}

/* Elementwise and row ops, from the counts written beside their math. */
static void test_elementwise_counts(void **state)
{
    (void)state;
    enum { R = 6, C = 10, n = R * C };
    Rng rng = rng_new(3, RNG_STREAM_DATA);
    Tensor *x = test_leaf(&rng, 1.0f, 2, (int[]){ R, C });
    Tensor *g = test_leaf(&rng, 1.0f, 1, (int[]){ C });
    Tensor *b = test_leaf(&rng, 1.0f, 1, (int[]){ C });
    TapeFlops f;
    Tape *tape = counting_tape(&f);

    /* gelu: 9 per element forward (6 multiplies, 2 adds, a tanh), 19 backward. */
    Tensor *y = op_gelu(tape, x);
    assert_count(f.forward, 0, 9 * n);
    tape_backward(tape, op_sum(tape, y));
    assert_count(f.backward, 0, 19 * n);

    /* layernorm: 8C + 5 per row forward; 13C + 2 (dx) + 4C (dgamma) + C (dbeta) backward. */
    tape_reset(tape);
    f = (TapeFlops){ 0 };
    y = op_layernorm(tape, x, g, b, 1e-5f);
    assert_count(f.forward, 0, R * (8 * C + 5));
    tape_backward(tape, op_sum(tape, y));
    assert_count(f.backward, 0, R * (13 * C + 2 + 4 * C + C));

    /* softmax: 5C + 1 per row forward, 4C backward. */
    tape_reset(tape);
    f = (TapeFlops){ 0 };
    y = op_softmax(tape, x);
    assert_count(f.forward, 0, R * (5 * C + 1));
    tape_backward(tape, op_sum(tape, op_mul(tape, y, x)));
    /* mul: 1 forward, 1 per input gradient backward (both are x's: 2). */
    assert_count(f.forward, 0, R * (5 * C + 1) + n + n);
    assert_count(f.backward, 0, R * 4 * C + 2 * n);

    /* cross-entropy over the rows whose target counts (two of six are ignored):
     * 4C + 4 per counted row and the mean's division forward, 3C + 1 and one backward. */
    tape_reset(tape);
    f = (TapeFlops){ 0 };
    int targets[R] = { 1, -1, 3, 0, -1, 9 };
    tape_backward(tape, op_cross_entropy(tape, x, targets));
    assert_count(f.forward, 0, 4 * (4 * C + 4) + 1);
    assert_count(f.backward, 0, 4 * (3 * C + 1) + 1);

    /* Without recording, a pass counts its forward all the same; without a counter, nothing. */
    tape_reset(tape);
    f = (TapeFlops){ 0 };
    tape->recording = false;
    op_gelu(tape, x);
    assert_count(f.forward, 0, 9 * n);
    tape_reset(tape);
    tape->flops = NULL;
    op_gelu(tape, x);
    assert_count(f.forward, 0, 9 * n);
    tape_free(tape);
    tensor_free(x);
    tensor_free(g);
    tensor_free(b);
}

/* Attention: each product counted as the dense T x T one, 2 T^2 D per (b, h); QK^T and PV
 * forward, dP, dQ, dK, dV backward: per token 4TC forward and 8TC backward per layer. */
static void test_attention_counts(void **state)
{
    (void)state;
    enum { B = 2, T = 7, H = 3, D = 4, C = H * D };
    Rng rng = rng_new(4, RNG_STREAM_DATA);
    Tensor *qkv = test_leaf(&rng, 1.0f, 3, (int[]){ B, T, 3 * C });
    const int64_t E = T * (T + 1) / 2, pairs = B * H;
    for (int tiled = 0; tiled <= 1; tiled++) {
        TapeFlops f;
        Tape *tape = counting_tape(&f);
        Tensor *o = tiled ? op_attention_qkv_tiled(tape, qkv, H) : op_attention_qkv(tape, qkv, H);
        tape_backward(tape, op_sum(tape, o));
        assert_int_equal(f.forward.matmul, pairs * 2 * 2 * T * T * D);
        assert_int_equal(f.backward.matmul, pairs * 4 * 2 * T * T * D);
        if (!tiled) {
            /* The causal softmax rows: 7n + 1 forward, 5n backward, n = 1 .. T entries. */
            assert_int_equal(f.forward.other, pairs * (7 * E + T) + B * T * C);
            assert_int_equal(f.backward.other, pairs * 5 * E);
            assert_count(f.recompute, 0, 0);
        } else {
            /* The backward recomputes S = QK^T, and P from it: 3 per unmasked score. */
            assert_count(f.recompute, pairs * 2 * T * T * D, pairs * 3 * E);
        }
        tape_free(tape);
    }
    tensor_free(qkv);
}

/* The whole GPT ----------------------------------------------------------------------------- */

static GptConfig small_config(void)
{
    return (GptConfig){ .vocab_size = 11, .max_seq = 8, .n_layer = 2, .n_head = 2,
                        .n_embd = 16, .tied = true, .fused_qkv = true };
}

static void fill_batch(int V, int n, int *tokens, int *targets)
{
    Rng rng = rng_new(9, RNG_STREAM_DATA);
    for (int i = 0; i < n; i++) {
        tokens[i] = (int)rng_below(&rng, (uint32_t)V);
        targets[i] = i % 4 == 1 ? -1 : (int)rng_below(&rng, (uint32_t)V);
    }
}

/* One forward + backward of gpt_loss on one tape (policy may be NULL). */
static TapeFlops gpt_step_flops(const Gpt *m, const PrecisionPolicy *policy, int B, int T)
{
    int tokens[256], targets[256];
    fill_batch(m->cfg.vocab_size, B * T, tokens, targets);
    TapeFlops f;
    Tape *tape = counting_tape(&f);
    tape->policy = policy;
    tape_backward(tape, gpt_loss(m, tape, tokens, targets, B, T));
    tape_free(tape);
    return f;
}

/* 6N + 12LTC per token, N = 12LC^2 + VC. For V=11 L=2 C=16: N = 6144 + 176 = 6320, and at
 * T = 8 the attention adds 12 * 2 * 8 * 16 = 3072: 40992 per token, 983808 for 3 x 8 tokens.
 * Forward is a third: 2N + 4LTC = 13664 per token. */
static void test_gpt_products_are_6n_plus_12ltc(void **state)
{
    (void)state;
    GptConfig cfg = small_config();
    enum { B = 3, T = 8 };
    Gpt *m = gpt_new(&cfg, 1);
    TapeFlops f = gpt_step_flops(m, NULL, B, T);
    assert_int_equal(f.forward.matmul, B * T * 13664);
    assert_int_equal(f.forward.matmul + f.backward.matmul, 983808);
    assert_int_equal(f.forward.matmul + f.backward.matmul, B * T * (6 * 6320 + 3072));
    assert_count(f.recompute, 0, 0);
    assert_true(f.forward.other > 0 && f.backward.other > 0);

    /* Untied (wte is then a lookup only, the head its own [V, C]) and separate q, k, v: the
     * same products. Shorter rows: T is the rows' length, not max_seq. */
    TapeFlops tied = f;
    GptConfig other = cfg;
    other.tied = false;
    other.fused_qkv = false;
    Gpt *u = gpt_new(&other, 1);
    f = gpt_step_flops(u, NULL, B, T);
    assert_int_equal(f.forward.matmul, tied.forward.matmul);
    assert_int_equal(f.backward.matmul, tied.backward.matmul);
    f = gpt_step_flops(m, NULL, B, 5);
    assert_int_equal(f.forward.matmul + f.backward.matmul,
                     B * 5 * (6 * 6320 + 12 * 2 * 5 * 16));
    /* The library's estimate (nn/gpt.h) is the count, tied or not. */
    assert_true(gpt_product_weights(&cfg) == 6320.0 && gpt_product_weights(&other) == 6320.0);
    assert_true(gpt_flops_per_token(&cfg, 5) * B * 5 ==
                (double)(f.forward.matmul + f.backward.matmul));
    gpt_free(u);
    gpt_free(m);
}

/* The benchmark model, V=65 T=64 L=4 H=4 C=128, one row: N = 786432 + 8320 = 794752,
 * 6N + 12LTC = 4768512 + 393216 = 5161728 FLOPs of products per token. */
static void test_default_model_per_token(void **state)
{
    (void)state;
    GptConfig cfg = gpt_config_default();
    Gpt *m = gpt_new(&cfg, 1);
    TapeFlops f = gpt_step_flops(m, NULL, 1, 64);
    assert_int_equal(f.forward.matmul + f.backward.matmul, 64 * 5161728LL);
    assert_true(gpt_flops_per_token(&cfg, 64) == 5161728.0);
    gpt_free(m);
}

/* Whatever the threads and the precision policy, the same counts: the ops count their shapes,
 * not their values. */
static void test_counts_do_not_depend_on_threads_or_policy(void **state)
{
    (void)state;
    GptConfig cfg = small_config();
    Gpt *m = gpt_new(&cfg, 1);
    par_set_threads(1);
    TapeFlops one = gpt_step_flops(m, NULL, 2, 8);
    par_set_threads(2);
    TapeFlops two = gpt_step_flops(m, NULL, 2, 8);
    par_set_threads(1);
    assert_memory_equal(&one, &two, sizeof one);
    const char *presets[] = { "tf32", "bf16", "fp16", "fp8" };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        PrecisionPolicy p;
        assert_true(policy_preset(presets[i], &p));
        TapeFlops f = gpt_step_flops(m, &p, 2, 8);
        assert_memory_equal(&one, &f, sizeof one);
    }
    /* Tiled attention: the same model FLOPs of products; its scores recomputed in backward. */
    gpt_set_tiled_attention(m, true);
    TapeFlops tiled = gpt_step_flops(m, NULL, 2, 8);
    assert_int_equal(tiled.forward.matmul, one.forward.matmul);
    assert_int_equal(tiled.backward.matmul, one.backward.matmul);
    /* L B H 2 T^2 D = 2 L B T^2 C. */
    assert_int_equal(tiled.recompute.matmul, 2 * 2 * 2 * 8 * 8 * 16);
    gpt_free(m);
}

/* Checkpointing ----------------------------------------------------------------------------- */

/* The FLOPs of one block's forward on x [B, T, C]. */
static FlopCount block_forward_flops(const Gpt *m, int B, int T)
{
    Rng rng = rng_new(5, RNG_STREAM_DATA);
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ B, T, m->cfg.n_embd });
    TapeFlops f;
    Tape *tape = counting_tape(&f);
    gpt_block(m, 0, tape, x);
    tape_free(tape);
    tensor_free(x);
    return f.forward;
}

/* Every strategy: forward and backward exactly vanilla's, and recompute (forwards - L) block
 * forwards, products and the rest. */
static void test_checkpointing_counts_its_recompute(void **state)
{
    (void)state;
    GptConfig cfg = small_config();
    cfg.n_layer = 4;
    enum { B = 2, T = 8 };
    Gpt *m = gpt_new(&cfg, 1);
    int tokens[B * T], targets[B * T];
    fill_batch(cfg.vocab_size, B * T, tokens, targets);
    TapeFlops plain = gpt_step_flops(m, NULL, B, T);
    FlopCount block = block_forward_flops(m, B, T);
    /* Products of a block's forward per token: 2 * 12C^2 + 4TC. */
    assert_int_equal(block.matmul, B * T * (24 * 16 * 16 + 4 * T * 16));
    const char *names[] = { "vanilla", "memory-poor", "sqrt", "every:1", "every:3", "budget:2" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        CkptStrategy s;
        char err[160];
        assert_true(ckpt_parse(names[i], &s, err, sizeof err));
        CkptStats st;
        pass_on_new_tape(m, s, NULL, tokens, targets, B, T, 1.0f, &st);
        assert_memory_equal(&st.flops.forward, &plain.forward, sizeof plain.forward);
        assert_memory_equal(&st.flops.backward, &plain.backward, sizeof plain.backward);
        long again = ckpt_formula_total(s, cfg.n_layer) - cfg.n_layer;
        assert_int_equal(st.flops.recompute.matmul, again * block.matmul);
        assert_int_equal(st.flops.recompute.other, again * block.other);
    }
    gpt_free(m);
}

/* Per-block checkpointing (every:1) of the benchmark model: blocks 0..L-2 run forward twice
 * (the last one's first forward is the recorded one), so per token the products are
 *     6N + 12LTC + (L - 1)(24C^2 + 4TC) = 5161728 + 3 * 425984 = 6439680,
 * about 8.1N (8N = 6358016): the lecture's "one extra forward", less the head's and one block's. */
static void test_per_block_checkpointing_default_model(void **state)
{
    (void)state;
    GptConfig cfg = gpt_config_default();
    Gpt *m = gpt_new(&cfg, 1);
    int tokens[64], targets[64];
    fill_batch(cfg.vocab_size, 64, tokens, targets);
    CkptStrategy s = { CKPT_EVERY, 1 };
    CkptStats st;
    pass_on_new_tape(m, s, NULL, tokens, targets, 1, 64, 1.0f, &st);
    FlopCount *fw = &st.flops.forward, *bw = &st.flops.backward, *re = &st.flops.recompute;
    assert_int_equal(fw->matmul + bw->matmul, 64 * 5161728LL);
    assert_int_equal(re->matmul, 64 * 3 * 425984LL);
    assert_int_equal(fw->matmul + bw->matmul + re->matmul, 64 * 6439680LL);
    gpt_free(m);
}

/* The trainer ------------------------------------------------------------------------------- */

/* A step adds one forward + backward; evaluation adds nothing; a checkpointed trainer adds the
 * same model FLOPs and its recompute. */
static void test_trainer_counts_training_only(void **state)
{
    (void)state;
    enum { B = 2, T = 8 };
    TrainerConfig cfg = trainer_config_default();
    cfg.model = small_config();
    int tokens[B * T], targets[B * T];
    fill_batch(cfg.model.vocab_size, B * T, tokens, targets);
    Trainer *tr = trainer_new(&cfg);
    TapeFlops one = gpt_step_flops(tr->model, NULL, B, T);
    gpt_zero_grad(tr->model);
    trainer_step(tr, tokens, targets, B, T, 1e-3);
    assert_memory_equal(&tr->flops, &one, sizeof one);
    double loss;
    trainer_eval(tr, tokens, targets, B, T, &loss);
    trainer_eval_done(tr);
    trainer_step(tr, tokens, targets, B, T, 1e-3);
    assert_int_equal(tr->flops.forward.matmul, 2 * one.forward.matmul);
    assert_int_equal(tr->flops.backward.other, 2 * one.backward.other);
    trainer_free(tr);

    cfg.local.checkpoint = (CkptStrategy){ CKPT_EVERY, 1 };
    tr = trainer_new(&cfg);
    trainer_step(tr, tokens, targets, B, T, 1e-3);
    assert_memory_equal(&tr->flops.forward, &one.forward, sizeof one.forward);
    assert_memory_equal(&tr->flops.backward, &one.backward, sizeof one.backward);
    FlopCount block = block_forward_flops(tr->model, B, T);
    assert_int_equal(tr->flops.recompute.matmul, (cfg.model.n_layer - 1) * block.matmul);
    trainer_free(tr);
}

int main(void)
{
    par_set_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_counts),
        cmocka_unit_test(test_linear_counts),
        cmocka_unit_test(test_elementwise_counts),
        cmocka_unit_test(test_attention_counts),
        cmocka_unit_test(test_gpt_products_are_6n_plus_12ltc),
        cmocka_unit_test(test_default_model_per_token),
        cmocka_unit_test(test_counts_do_not_depend_on_threads_or_policy),
        cmocka_unit_test(test_checkpointing_counts_its_recompute),
        cmocka_unit_test(test_per_block_checkpointing_default_model),
        cmocka_unit_test(test_trainer_counts_training_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

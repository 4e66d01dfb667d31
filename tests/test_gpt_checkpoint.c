/* GPT training steps with checkpointed blocks: loss and every parameter gradient equal to
 * gpt_loss + tape_backward on one tape, bit for bit, for every strategy (and with a loss scale,
 * as accumulation uses); block forwards equal the documented counts; a checkpointed step holds
 * fewer activation bytes than vanilla. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "autograd/parallel.h"
#include "tests/gpt_pass_test.h"

static CkptStrategy parsed(const char *text)
{
    CkptStrategy s;
    char err[160];
    assert_true(ckpt_parse(text, &s, err, sizeof err));
    return s;
}

/* GPT-2 init gives tiny gradients; perturbed weights make every term count (as test_gpt.c). */
static Gpt *perturbed_model(GptConfig cfg)
{
    Gpt *m = gpt_new(&cfg, 1);
    int n;
    Tensor *const *p = gpt_params(m, &n);
    test_perturb(p, n, 0.3f, 2);
    return m;
}

/* Every parameter gradient, in gpt_params order, copied into one buffer. */
static float *all_grads(const Gpt *m, size_t *count)
{
    int n;
    Tensor *const *p = gpt_params(m, &n);
    size_t total = 0;
    for (int k = 0; k < n; k++)
        total += p[k]->size;
    float *g = malloc(total * sizeof *g), *at = g;
    for (int k = 0; k < n; k++) {
        assert_non_null(p[k]->grad);
        memcpy(at, p[k]->grad, p[k]->size * sizeof *at);
        at += p[k]->size;
    }
    *count = total;
    return g;
}

/* Every strategy against gpt_loss + tape_backward on one tape; with scale != 1 the reference
 * backprops op_scale(loss, scale), as gradient accumulation does. */
static void check_strategies(GptConfig cfg, int B, int T, float scale)
{
    Gpt *m = perturbed_model(cfg);
    int *tokens = malloc((size_t)B * T * sizeof *tokens);
    int *targets = malloc((size_t)B * T * sizeof *targets);
    Rng rng = rng_new(7, RNG_STREAM_DATA);
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (int)rng_below(&rng, (uint32_t)cfg.vocab_size);
        targets[i] = i % 5 == 3 ? -1 : (int)rng_below(&rng, (uint32_t)cfg.vocab_size);
    }

    gpt_zero_grad(m);
    Tape *tape = tape_new();
    Tensor *loss = gpt_loss(m, tape, tokens, targets, B, T);
    float ref_loss = loss->data[0];
    tape_backward(tape, scale != 1.0f ? op_scale(tape, loss, scale) : loss);
    tape_free(tape);
    size_t count;
    float *ref = all_grads(m, &count);

    const char *names[] = { "vanilla", "none", "memory-poor", "sqrt", "every:1", "every:2",
                            "every:3", "budget:1", "budget:2", "budget:3", "budget:9" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        CkptStrategy s = parsed(names[i]);
        gpt_zero_grad(m);
        CkptStats st;
        float l = pass_on_new_tape(m, s, NULL, tokens, targets, B, T, scale, &st);
        size_t got_count;
        float *got = all_grads(m, &got_count);
        double diff = test_max_abs_diff(got, ref, count);
        if (diff != 0.0 || memcmp(&l, &ref_loss, sizeof l) != 0)
            printf("L %d %s: loss %.9g vs %.9g, max gradient difference %g\n", cfg.n_layer,
                   names[i], l, ref_loss, diff);
        assert_memory_equal(&l, &ref_loss, sizeof l);
        assert_int_equal(got_count, count);
        assert_memory_equal(got, ref, count * sizeof *got);
        assert_int_equal(st.forwards, ckpt_formula_total(s, cfg.n_layer));
        free(got);
    }
    free(ref);
    free(tokens);
    free(targets);
    gpt_free(m);
}

static void test_tiny_gpt_bit_identical(void **state)
{
    (void)state;
    GptConfig cfg = { .vocab_size = 7, .max_seq = 4, .n_layer = 5, .n_head = 2, .n_embd = 8,
                      .tied = true, .fused_qkv = true };
    check_strategies(cfg, 2, 4, 1.0f);
    /* One of K = 3 accumulated micro-batches. */
    check_strategies(cfg, 2, 4, 1.0f / 3.0f);
    cfg.tied = false;
    cfg.fused_qkv = false;
    cfg.n_layer = 1;
    check_strategies(cfg, 3, 3, 1.0f);
}

/* Big enough that par_sgemm splits rows over two threads. */
static void test_threaded_gpt_bit_identical(void **state)
{
    (void)state;
    par_set_threads(2);
    GptConfig cfg = { .vocab_size = 11, .max_seq = 16, .n_layer = 4, .n_head = 4, .n_embd = 64,
                      .tied = true, .fused_qkv = true };
    check_strategies(cfg, 4, 16, 1.0f);
    par_set_threads(1);
}

/* Peak activation bytes of a step, measured, for a strategy. */
static size_t peak_act(const Gpt *m, CkptStrategy s, const int *tokens, int B, int T)
{
    size_t act0 = mem_current(MEM_ACT);
    mem_reset_peaks();
    pass_on_new_tape(m, s, NULL, tokens, tokens, B, T, 1.0f, NULL);
    assert_int_equal(mem_current(MEM_ACT), act0);
    return mem_peak(MEM_ACT) - act0;
}

/* With 9 blocks, vanilla holds 9 blocks' activations; sqrt holds 3 blocks' and 2 inputs;
 * memory-poor one block's and one working copy. The blocks dominate, so the order is strict. */
static void test_checkpointing_saves_memory(void **state)
{
    (void)state;
    GptConfig cfg = { .vocab_size = 7, .max_seq = 8, .n_layer = 9, .n_head = 2, .n_embd = 16,
                      .tied = true, .fused_qkv = true };
    Gpt *m = gpt_new(&cfg, 3);
    int tokens[2 * 8];
    for (int i = 0; i < 16; i++)
        tokens[i] = i % 7;
    size_t vanilla = peak_act(m, parsed("vanilla"), tokens, 2, 8);
    size_t sq = peak_act(m, parsed("sqrt"), tokens, 2, 8);
    size_t poor = peak_act(m, parsed("memory-poor"), tokens, 2, 8);
    printf("L 9 peak act bytes: vanilla %zu, sqrt %zu, memory-poor %zu\n", vanilla, sq, poor);
    assert_true(sq < vanilla / 2);
    assert_true(poor < sq);
    gpt_free(m);
}

int main(void)
{
    par_set_threads(1);
    par_set_split_always(true);    /* the small cases still take the threaded paths */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_gpt_bit_identical),
        cmocka_unit_test(test_threaded_gpt_bit_identical),
        cmocka_unit_test(test_checkpointing_saves_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

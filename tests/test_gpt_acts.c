/* nn/gpt_acts.h's table against the model: the shapes count what they say, the table sums to
 * the closed form docs/memory.md quotes, and a forward pass recorded on one tape holds exactly
 * the table's bytes in the act category, part by part (embedding, each block, head), under
 * fp32, bf16 and fp8, for fused and separate q, k, v and for standard and tiled attention. A
 * block run by a pass that does not record (the checkpoint runner's ADVANCE) holds the table's
 * outputs only. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "nn/gpt_acts.h"

static const GptAct *row(const char *name)
{
    for (int i = 0; i < GPT_N_ACTS; i++)
        if (strcmp(GPT_ACTS[i].name, name) == 0)
            return &GPT_ACTS[i];
    fail_msg("no row %s", name);
    return NULL;
}

/* B 2, T 3, C 8, H 2, V 5: each shape by hand. */
static void test_shapes_by_hand(void **state)
{
    (void)state;
    GptConfig c = { .vocab_size = 5, .max_seq = 3, .n_layer = 1, .n_head = 2, .n_embd = 8,
                    .tied = true, .fused_qkv = true };
    const struct { const char *name; size_t numel; } hand[] = {
        { "wte.ids", 6 },          { "x0", 48 },           { "ln1.stats", 12 },
        { "attn.qkv.out", 144 },   { "attn.P", 36 },       { "attn.lse", 12 },
        { "mlp.fc.out", 192 },     { "logits", 30 },       { "loss.record", 24 },
        { "loss", 1 },
    };
    for (size_t i = 0; i < sizeof hand / sizeof hand[0]; i++)
        assert_int_equal(gpt_act_numel(row(hand[i].name), &c, 2, 3), hand[i].numel);
    /* Every row parses, is described, and has a name of its own. */
    for (int i = 0; i < GPT_N_ACTS; i++) {
        assert_true(gpt_act_numel(&GPT_ACTS[i], &c, 2, 3) >= 1);
        assert_true(GPT_ACTS[i].op[0] != '\0' && GPT_ACTS[i].what[0] != '\0');
        for (int j = 0; j < i; j++)
            assert_true(strcmp(GPT_ACTS[i].name, GPT_ACTS[j].name) != 0);
    }
}

static void count_bad_shape(void *arg)
{
    GptConfig c = gpt_config_default();
    gpt_act_numel(arg, &c, 1, 1);
}

static void test_bad_shapes_abort(void **state)
{
    (void)state;
    const char *bad[] = { "B, T]", "[B, T", "[B,T]", "[B, X]", "[, T]", "[3B T]" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        GptAct a = { .name = "bad", .shape = bad[i] };
        assert_true(test_aborts(count_bad_shape, &a));
    }
}

/* fp32: a recorded block is 18 N C + 4 N + B H T^2 floats (N = B T; tiled: B H T in place of
 * B H T^2), a bare one 18 N C, the embedding 3 N C floats and 2 N ids, the head
 * N C + 2 N + N V + 2 N + 1 floats and a 24-byte record. Under bf16 (2 bytes) and fp8 (1 byte)
 * the tensors shrink and the raw buffers do not; the loss leaves act. */
static void test_sums_closed_form(void **state)
{
    (void)state;
    PrecisionPolicy bf16, fp8;
    assert_true(policy_preset("bf16", &bf16) && policy_preset("fp8", &fp8));
    const PrecisionPolicy *policies[] = { NULL, &bf16, &fp8 };
    const double s[] = { 4.0, 2.0, 1.0 };
    GptConfig c = { .vocab_size = 50, .max_seq = 16, .n_layer = 3, .n_head = 4, .n_embd = 24,
                    .tied = false, .fused_qkv = false };
    double B = 3, T = 7, N = B * T, C = 24, V = 50, H = 4;
    for (int q = 0; q < 3; q++)
        for (int tiled = 0; tiled < 2; tiled++) {
            GptActRun run = { .B = 3, .T = 7, .policy = policies[q], .tiled = tiled };
            GptActBytes b = gpt_acts_bytes(&c, &run);
            double attn = tiled ? 4.0 * B * H * T : s[q] * B * H * T * T;
            assert_true(b.block == s[q] * 18.0 * N * C + 4.0 * 4.0 * N + attn);
            assert_true(b.block_bare == s[q] * 18.0 * N * C);
            assert_true(b.copy == s[q] * N * C);
            assert_true(b.embed == s[q] * 3.0 * N * C + 4.0 * 2.0 * N);
            /* the loss: a scalar, fp32 in act under every policy */
            assert_true(b.head == s[q] * (N * C + N * V) + 4.0 * 4.0 * N + 4.0 + 24.0);
            assert_true(gpt_acts_forward_bytes(&c, &run) == b.embed + 3.0 * b.block + b.head);
        }
}

static double act_now(size_t base) { return (double)mem_current(MEM_ACT) - (double)base; }

/* One model, one policy: gpt_loss's parts on one recording tape, the act bytes measured after
 * each against the table's running sum; then one block on a tape that does not record but
 * packs, as ADVANCE runs it. */
static void check_forward(GptConfig cfg, bool tiled, const char *policy_name)
{
    PrecisionPolicy p;
    assert_true(policy_preset(policy_name, &p));
    const PrecisionPolicy *policy = policy_is_fp32(&p) ? NULL : &p;
    int B = 2, T = cfg.max_seq;
    GptActRun run = { .B = B, .T = T, .policy = policy, .tiled = tiled };
    GptActBytes want = gpt_acts_bytes(&cfg, &run);

    Gpt *model = gpt_new(&cfg, 3);
    gpt_set_tiled_attention(model, tiled);
    int tokens[2 * 9], targets[2 * 9];
    assert_true(B * T <= 2 * 9);
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (i * 7) % cfg.vocab_size;
        targets[i] = (i * 5 + 1) % cfg.vocab_size;
    }
    size_t base = mem_current(MEM_ACT);
    mem_reset_peaks();
    Tape *tape = tape_new();
    tape->policy = policy;
    Tensor *x = gpt_embed(model, tape, tokens, B, T);
    assert_true(act_now(base) == want.embed);
    for (int l = 0; l < cfg.n_layer; l++) {
        x = gpt_block(model, l, tape, x);
        assert_true(act_now(base) == want.embed + (l + 1) * want.block);
    }
    Tensor *loss = op_cross_entropy(tape, gpt_head(model, tape, x), targets);
    double total = gpt_acts_forward_bytes(&cfg, &run);
    printf("%-4s %-8s %-8s act measured %8.0f table %8.0f\n", policy_name,
           cfg.fused_qkv ? "fused" : "separate", tiled ? "tiled" : "standard", act_now(base),
           total);
    assert_true(act_now(base) == total);
    assert_true((double)mem_peak(MEM_ACT) - (double)base == total);

    /* The bare block: its input is x (the last block's output, still on the tape). */
    Tape *advance = tape_new();
    advance->recording = false;
    advance->packs_unrecorded = true;
    advance->policy = policy;
    size_t before = mem_current(MEM_ACT);
    gpt_block(model, 0, advance, x);
    assert_true(act_now(before) == want.block_bare);
    tape_free(advance);

    tape_backward(tape, loss);
    tape_free(tape);
    assert_true(mem_current(MEM_ACT) == base);
    gpt_free(model);
}

static void test_recorded_forward_matches_table(void **state)
{
    (void)state;
    GptConfig fused = { .vocab_size = 11, .max_seq = 9, .n_layer = 2, .n_head = 2,
                        .n_embd = 16, .tied = true, .fused_qkv = true };
    GptConfig separate = fused;
    separate.fused_qkv = false;
    separate.tied = false;
    separate.n_layer = 3;
    const char *policies[] = { "fp32", "bf16", "fp8" };
    for (int q = 0; q < 3; q++)
        for (int tiled = 0; tiled < 2; tiled++) {
            check_forward(fused, tiled, policies[q]);
            check_forward(separate, tiled, policies[q]);
        }
}

/* The page: the table for gpt_config_default at B 64 under bf16, as TSV, one line per
 * applicable row (docs/memory.md shows it). */
static void test_tsv_lists_the_rows(void **state)
{
    (void)state;
    GptConfig c = gpt_config_default();
    PrecisionPolicy bf16;
    assert_true(policy_preset("bf16", &bf16));
    GptActRun run = { .B = 64, .T = c.max_seq, .policy = &bf16 };
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    gpt_acts_write_tsv(f, &c, &run);
    fclose(f);
    fputs(text, stdout);
    int lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    /* A header, then every row but the separate q, k, v and tiled L. */
    assert_int_equal(lines, 1 + GPT_N_ACTS - 4);
    assert_non_null(strstr(text, "block\tattn.P\t[B, H, T, T]\t1048576\t2097152\tsaved tensor\t"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes_by_hand),
        cmocka_unit_test(test_bad_shapes_abort),
        cmocka_unit_test(test_sums_closed_form),
        cmocka_unit_test(test_recorded_forward_matches_table),
        cmocka_unit_test(test_tsv_lists_the_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

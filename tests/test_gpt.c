/* The tiny GPT: gradients of the whole model against finite differences, parameter names and
 * counts, initialisation statistics, the equivalences the options promise (fused vs separate
 * q/k/v, tied vs an untied copy, one tape vs one tape per block), and config validation. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "autograd/ops.h"
#include "nn/gpt.h"

static GptConfig tiny_config(bool tied, bool fused)
{
    return (GptConfig){ .vocab_size = 7, .max_seq = 4, .n_layer = 2, .n_head = 2, .n_embd = 8,
                        .tied = tied, .fused_qkv = fused };
}

enum { TB = 2, TT = 4 };
/* Two sequences of the tiny config; one target of -1 is ignored by the loss. */
static const int tiny_tokens[TB * TT] = { 3, 0, 6, 2, 5, 5, 1, 4 };
static const int tiny_targets[TB * TT] = { 0, 6, 2, -1, 5, 1, 4, 3 };

/* N(0, 0.3^2) on every parameter (test_perturb says why). */
static void perturb_params(Gpt *m, uint64_t seed)
{
    int n;
    Tensor *const *p = gpt_params(m, &n);
    test_perturb(p, n, 0.3f, seed);
}

static Tensor *f_loss(Tape *tape, Tensor *const *in, void *ctx)
{
    (void)in;   /* the inputs are the model's own parameters: the model reads them */
    return gpt_loss(ctx, tape, tiny_tokens, tiny_targets, TB, TT);
}

/* Checks d loss / d param for each named parameter, every element.
 * Step and tolerances, measured: the loss (about 2) is computed in fp32 through ~60 ops, so it
 * carries rounding noise of a few 1e-7, about 1e-4 once divided by 2h = 2e-3 (0.5-1.3e-4 seen
 * on every parameter). The truncation error h^2/6 f''' matters for the embeddings: they enter a
 * LayerNorm of a residual stream of norm ~1, which is strongly curved; at h = 3e-3 the untied
 * wte was off by 1.6e-3, falling as h^2 to 2.5e-4 at h = 1e-3. So h = 1e-3 with atol 5e-4 and
 * rtol 1e-3: twice the worst error seen, while the gradients checked reach 1e-2 to 1 and a
 * wrong or missing term moves them by far more. */
static void check_params(bool tied, bool fused, uint64_t seed, const char *const *names,
                         int n_names)
{
    GptConfig cfg = tiny_config(tied, fused);
    Gpt *m = gpt_new(&cfg, seed);
    perturb_params(m, seed + 1);
    GradcheckOptions opt = { .h = 1e-3, .atol = 5e-4, .rtol = 1e-3, .seed = 99 };
    for (int k = 0; k < n_names; k++) {
        Tensor *p = gpt_param(m, names[k]);
        assert_non_null(p);
        test_gradcheck(names[k], f_loss, &p, 1, m, opt);
        /* The check is only meaningful if the gradient is not negligible. */
        float biggest = 0.0f;
        for (size_t i = 0; i < p->size; i++)
            biggest = fmaxf(biggest, fabsf(p->grad[i]));
        assert_true(biggest > 1e-2f);
    }
    gpt_free(m);
}

static void test_gradcheck_tied_fused(void **state)
{
    (void)state;
    /* wte gets two gradients, from the embedding lookup and from the tied head. */
    const char *names[] = { "wte.weight", "wpe.weight", "blocks.0.ln1.weight",
                            "blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias",
                            "blocks.1.attn.proj.weight", "blocks.1.ln2.bias",
                            "blocks.1.mlp.fc.weight", "blocks.0.mlp.proj.bias", "ln_f.weight",
                            "ln_f.bias" };
    check_params(true, true, 1, names, (int)(sizeof names / sizeof names[0]));
}

static void test_gradcheck_untied_separate(void **state)
{
    (void)state;
    const char *names[] = { "head.weight", "wte.weight", "blocks.0.attn.q.weight",
                            "blocks.1.attn.k.weight", "blocks.0.attn.v.bias",
                            "blocks.1.mlp.proj.weight" };
    check_params(false, false, 3, names, (int)(sizeof names / sizeof names[0]));
}

/* The expected names, in order, for the tiny config; q/k/v or qkv by option. */
static int expected_names(bool tied, bool fused, char names[][TENSOR_NAME_LEN])
{
    static const char *const block_fused[] = { "ln1.weight", "ln1.bias", "attn.qkv.weight",
                                               "attn.qkv.bias", NULL };
    static const char *const block_sep[] = { "ln1.weight", "ln1.bias", "attn.q.weight",
                                             "attn.q.bias", "attn.k.weight", "attn.k.bias",
                                             "attn.v.weight", "attn.v.bias", NULL };
    static const char *const block_rest[] = { "attn.proj.weight", "attn.proj.bias",
                                              "ln2.weight", "ln2.bias", "mlp.fc.weight",
                                              "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias",
                                              NULL };
    int n = 0;
    snprintf(names[n++], TENSOR_NAME_LEN, "wte.weight");
    snprintf(names[n++], TENSOR_NAME_LEN, "wpe.weight");
    for (int l = 0; l < 2; l++) {
        for (const char *const *s = fused ? block_fused : block_sep; *s; s++)
            snprintf(names[n++], TENSOR_NAME_LEN, "blocks.%d.%s", l, *s);
        for (const char *const *s = block_rest; *s; s++)
            snprintf(names[n++], TENSOR_NAME_LEN, "blocks.%d.%s", l, *s);
    }
    snprintf(names[n++], TENSOR_NAME_LEN, "ln_f.weight");
    snprintf(names[n++], TENSOR_NAME_LEN, "ln_f.bias");
    if (!tied)
        snprintf(names[n++], TENSOR_NAME_LEN, "head.weight");
    return n;
}

static void test_names_order_and_count(void **state)
{
    (void)state;
    for (int variant = 0; variant < 4; variant++) {
        bool tied = variant & 1, fused = variant & 2;
        GptConfig cfg = tiny_config(tied, fused);
        Gpt *m = gpt_new(&cfg, 5);
        char want[64][TENSOR_NAME_LEN];
        int n_want = expected_names(tied, fused, want), n;
        Tensor *const *p = gpt_params(m, &n);
        assert_int_equal(n, n_want);
        size_t total = 0;
        for (int k = 0; k < n; k++) {
            assert_string_equal(p[k]->name, want[k]);
            assert_ptr_equal(gpt_param(m, want[k]), p[k]);
            assert_true(p[k]->is_param && p[k]->requires_grad);
            total += p[k]->size;
        }
        assert_ptr_equal(m->head, tied ? m->wte : gpt_param(m, "head.weight"));
        assert_null(gpt_param(m, fused ? "blocks.0.attn.q.weight" : "blocks.0.attn.qkv.weight"));
        /* V C + T C + L (12 C^2 + 13 C) + 2 C (+ V C untied), counted independently. */
        const size_t V = 7, T = 4, L = 2, C = 8;
        size_t formula = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C + (tied ? 0 : V * C);
        assert_int_equal(gpt_n_params(m), formula);
        assert_int_equal(total, formula);
        assert_int_equal(gpt_config_n_params(&cfg), formula);
        gpt_free(m);
    }
}

static void check_normal(const Tensor *t, double std)
{
    double s1 = 0.0, s2 = 0.0;
    for (size_t i = 0; i < t->size; i++) {
        s1 += t->data[i];
        s2 += (double)t->data[i] * t->data[i];
    }
    double mean = s1 / t->size, sd = sqrt(s2 / t->size - mean * mean);
    /* With n >= 8192 samples the sample sd is within 3 sigma = 3 std / sqrt(2n) < 2.4%. */
    printf("  %-26s n %6zu  sd %.5f (want %.5f)  mean %+.5f\n", t->name, t->size, sd, std, mean);
    assert_true(fabs(sd / std - 1.0) < 0.03);
    assert_true(fabs(mean) < 4.0 * std / sqrt((double)t->size));
}

static void check_constant(const Tensor *t, float value)
{
    for (size_t i = 0; i < t->size; i++)
        assert_true(t->data[i] == value);
}

static void test_init_statistics(void **state)
{
    (void)state;
    GptConfig cfg = { .vocab_size = 128, .max_seq = 128, .n_layer = 3, .n_head = 2,
                      .n_embd = 128, .tied = true, .fused_qkv = true };
    Gpt *m = gpt_new(&cfg, 11);
    double proj_std = 0.02 / sqrt(2.0 * cfg.n_layer);
    check_normal(gpt_param(m, "wte.weight"), 0.02);
    check_normal(m->wpe, 0.02);
    check_normal(gpt_param(m, "blocks.1.attn.qkv.weight"), 0.02);
    check_normal(gpt_param(m, "blocks.2.mlp.fc.weight"), 0.02);
    check_normal(gpt_param(m, "blocks.0.attn.proj.weight"), proj_std);
    check_normal(gpt_param(m, "blocks.2.mlp.proj.weight"), proj_std);
    check_constant(gpt_param(m, "blocks.0.attn.qkv.bias"), 0.0f);
    check_constant(gpt_param(m, "blocks.2.mlp.proj.bias"), 0.0f);
    check_constant(gpt_param(m, "blocks.1.ln2.weight"), 1.0f);
    check_constant(gpt_param(m, "blocks.1.ln2.bias"), 0.0f);
    check_constant(gpt_param(m, "ln_f.weight"), 1.0f);

    /* The same seed gives the same model bit for bit; another seed another model. */
    Gpt *same = gpt_new(&cfg, 11), *other = gpt_new(&cfg, 12);
    int n;
    Tensor *const *a = gpt_params(m, &n), *const *b = gpt_params(same, &n);
    Tensor *const *c = gpt_params(other, &n);
    for (int k = 0; k < n; k++)
        assert_memory_equal(a[k]->data, b[k]->data, a[k]->size * sizeof(float));
    assert_memory_not_equal(a[0]->data, c[0]->data, a[0]->size * sizeof(float));
    gpt_free(m);
    gpt_free(same);
    gpt_free(other);
}

/* Copies every parameter of src that dst has by name; returns how many. */
static int copy_params(Gpt *dst, const Gpt *src)
{
    int n, copied = 0;
    Tensor *const *p = gpt_params(src, &n);
    for (int k = 0; k < n; k++) {
        Tensor *t = gpt_param(dst, p[k]->name);
        if (t) {
            tensor_copy_data(t, p[k]);
            copied++;
        }
    }
    return copied;
}

/* Separate q, k, v holding the three column blocks of the fused weight compute the same. */
static void test_fused_equals_separate(void **state)
{
    (void)state;
    GptConfig cf = tiny_config(true, true), cs = tiny_config(true, false);
    Gpt *fused = gpt_new(&cf, 21), *sep = gpt_new(&cs, 22);
    perturb_params(fused, 23);
    assert_int_equal(copy_params(sep, fused), 28 - 2 * 2);   /* all but qkv.weight/.bias */
    const int C = cf.n_embd;
    for (int l = 0; l < cf.n_layer; l++) {
        char name[TENSOR_NAME_LEN];
        snprintf(name, sizeof name, "blocks.%d.attn.qkv.weight", l);
        const Tensor *w = gpt_param(fused, name);
        snprintf(name, sizeof name, "blocks.%d.attn.qkv.bias", l);
        const Tensor *b = gpt_param(fused, name);
        const char *tags[3] = { "q", "k", "v" };
        for (int part = 0; part < 3; part++) {
            snprintf(name, sizeof name, "blocks.%d.attn.%s.weight", l, tags[part]);
            Tensor *wp = gpt_param(sep, name);
            snprintf(name, sizeof name, "blocks.%d.attn.%s.bias", l, tags[part]);
            Tensor *bp = gpt_param(sep, name);
            for (int i = 0; i < C; i++) {
                for (int j = 0; j < C; j++)
                    wp->data[i * C + j] = w->data[i * 3 * C + part * C + j];
                bp->data[i] = b->data[part * C + i];
            }
        }
    }
    Tape *tape = tape_new();
    Tensor *lf = gpt_forward(fused, tape, tiny_tokens, TB, TT);
    Tensor *ls = gpt_forward(sep, tape, tiny_tokens, TB, TT);
    double diff = test_max_abs_diff(lf->data, ls->data, lf->size);
    printf("fused vs separate q/k/v: max |logit diff| %.3g\n", diff);
    assert_true(diff < 1e-5);
    tape_free(tape);
    gpt_free(fused);
    gpt_free(sep);
}

/* An untied model whose head is a copy of wte gives the same logits, and the tied model's
 * wte gradient is the sum of the untied model's wte and head gradients. */
/* Tiled attention is a different computation of the same function: the loss and every
 * parameter gradient agree with standard attention within fp32 rounding, in both layouts. */
static void test_tiled_attention_matches_standard(void **state)
{
    (void)state;
    for (int fused = 0; fused < 2; fused++) {
        GptConfig cfg = tiny_config(true, fused);
        Gpt *m = gpt_new(&cfg, 31);
        perturb_params(m, 32);
        int n;
        Tensor *const *params = gpt_params(m, &n);
        float *want[64];
        double loss[2];
        size_t act[2];
        for (int tiled = 0; tiled < 2; tiled++) {
            gpt_set_tiled_attention(m, tiled);
            gpt_zero_grad(m);
            Tape *tape = tape_new();
            size_t act0 = mem_current(MEM_ACT);
            Tensor *l = gpt_loss(m, tape, tiny_tokens, tiny_targets, TB, TT);
            act[tiled] = mem_current(MEM_ACT) - act0;
            loss[tiled] = l->data[0];
            tape_backward(tape, l);
            tape_free(tape);
            for (int i = 0; i < n; i++) {
                if (!tiled) {
                    want[i] = malloc(params[i]->size * sizeof(float));
                    memcpy(want[i], params[i]->grad, params[i]->size * sizeof(float));
                    continue;
                }
                double diff = test_max_abs_diff(want[i], params[i]->grad, params[i]->size);
                if (diff > 1e-5)
                    printf("tiled vs standard: %s differs by %.3g\n", params[i]->name, diff);
                assert_true(diff <= 1e-5);
                free(want[i]);
            }
        }
        printf("tiled vs standard attention (fused=%d): loss %.9g vs %.9g\n", fused, loss[1],
               loss[0]);
        assert_true(fabs(loss[1] - loss[0]) <= 1e-6 * fabs(loss[0]));
        /* The tiled op really ran: per layer it keeps B*H*T floats, not B*H*T*T. */
        printf("  act bytes: tiled %zu, standard %zu\n", act[1], act[0]);
        assert_int_equal(act[0] - act[1], cfg.n_layer * TB * 2 * (TT * TT - TT) * sizeof(float));
        gpt_free(m);
    }
}

static void test_tied_equals_untied_copy(void **state)
{
    (void)state;
    GptConfig ct = tiny_config(true, true), cu = tiny_config(false, true);
    Gpt *tied = gpt_new(&ct, 31), *untied = gpt_new(&cu, 32);
    perturb_params(tied, 33);
    assert_int_equal(copy_params(untied, tied), 28);
    tensor_copy_data(untied->head, tied->wte);
    Tape *tt = tape_new(), *tu = tape_new();
    Tensor *lt = gpt_loss(tied, tt, tiny_tokens, tiny_targets, TB, TT);
    Tensor *lu = gpt_loss(untied, tu, tiny_tokens, tiny_targets, TB, TT);
    assert_true(lt->data[0] == lu->data[0]);
    tape_backward(tt, lt);
    tape_backward(tu, lu);
    size_t size = tied->wte->size;
    float *sum = malloc(size * sizeof *sum);
    for (size_t i = 0; i < size; i++)
        sum[i] = untied->wte->grad[i] + untied->head->grad[i];
    double worst = test_max_abs_diff(tied->wte->grad, sum, size);
    free(sum);
    printf("tied wte grad vs untied wte + head grads: max |diff| %.3g\n", worst);
    assert_true(worst < 1e-6);
    tape_free(tt);
    tape_free(tu);
    gpt_free(tied);
    gpt_free(untied);
}

/* A copy of x as a leaf of the next segment: the boundary a checkpointed backward cuts at. */
static Tensor *segment_input(Tape *tape, const Tensor *x)
{
    Tensor *leaf = tape_own(tape, tensor_new(MEM_ACT, x->ndim, x->shape));
    tensor_copy_data(leaf, x);
    leaf->requires_grad = true;
    return leaf;
}

/* Running embed, each block and the head on tapes of their own, and passing the gradient of
 * each segment's input back as the seed of the previous segment's output, gives the same
 * parameter gradients as one tape: the contract gradient checkpointing builds on. */
static void test_segments_match_one_tape(void **state)
{
    (void)state;
    GptConfig cfg = tiny_config(true, true);
    Gpt *m = gpt_new(&cfg, 41);
    perturb_params(m, 42);
    int n;
    Tensor *const *p = gpt_params(m, &n);

    Tape *one = tape_new();
    Tensor *loss = gpt_loss(m, one, tiny_tokens, tiny_targets, TB, TT);
    tape_backward(one, loss);
    float *want[64];
    for (int k = 0; k < n; k++) {
        want[k] = malloc(p[k]->size * sizeof(float));
        memcpy(want[k], p[k]->grad, p[k]->size * sizeof(float));
    }
    gpt_zero_grad(m);

    enum { NSEG = 4 };   /* embed, block 0, block 1, head + loss */
    Tape *seg[NSEG];
    Tensor *in[NSEG] = { NULL }, *out[NSEG];
    for (int s = 0; s < NSEG; s++)
        seg[s] = tape_new();
    out[0] = gpt_embed(m, seg[0], tiny_tokens, TB, TT);
    for (int l = 0; l < cfg.n_layer; l++) {
        in[l + 1] = segment_input(seg[l + 1], out[l]);
        out[l + 1] = gpt_block(m, l, seg[l + 1], in[l + 1]);
    }
    in[3] = segment_input(seg[3], out[2]);
    out[3] = op_cross_entropy(seg[3], gpt_head(m, seg[3], in[3]), tiny_targets);
    assert_true(out[3]->data[0] == loss->data[0]);
    tape_backward(seg[3], out[3]);
    for (int s = NSEG - 2; s >= 0; s--)
        tape_backward_seeded(seg[s], out[s], in[s + 1]->grad);

    for (int k = 0; k < n; k++) {
        assert_memory_equal(p[k]->grad, want[k], p[k]->size * sizeof(float));
        free(want[k]);
    }
    for (int s = 0; s < NSEG; s++)
        tape_free(seg[s]);
    tape_free(one);
    gpt_free(m);
}

/* The loss against a cross-entropy computed here in double from the logits: the mean over the
 * rows whose target is not negative. */
static void test_loss_ignores_negative_targets(void **state)
{
    (void)state;
    GptConfig cfg = tiny_config(true, true);
    Gpt *m = gpt_new(&cfg, 51);
    perturb_params(m, 52);
    Tape *tape = tape_new();
    tape->recording = false;
    Tensor *logits = gpt_forward(m, tape, tiny_tokens, TB, TT);
    Tensor *loss = gpt_loss(m, tape, tiny_tokens, tiny_targets, TB, TT);
    const int V = cfg.vocab_size;
    double total = 0.0;
    int counted = 0;
    for (int r = 0; r < TB * TT; r++) {
        if (tiny_targets[r] < 0)
            continue;
        const float *z = logits->data + r * V;
        double sum = 0.0;
        for (int v = 0; v < V; v++)
            sum += exp((double)z[v]);
        total += log(sum) - z[tiny_targets[r]];
        counted++;
    }
    assert_int_equal(counted, TB * TT - 1);
    printf("loss %.7f, in double from the logits %.7f\n", loss->data[0], total / counted);
    assert_true(fabs(loss->data[0] - total / counted) < 1e-6 * (total / counted));
    tape_free(tape);
    gpt_free(m);
}

static void expect_invalid(GptConfig cfg, const char *fragment)
{
    char err[160] = "";
    assert_false(gpt_config_check(&cfg, err, sizeof err));
    printf("  rejected: %s\n", err);
    if (!strstr(err, fragment))
        fail_msg("message '%s' does not mention '%s'", err, fragment);
}

static void build_invalid(void *arg)
{
    gpt_new(arg, 1);
}

static void test_config_validation(void **state)
{
    (void)state;
    char err[160] = "untouched";
    GptConfig ok = gpt_config_default();
    assert_true(gpt_config_check(&ok, err, sizeof err));
    ok = tiny_config(false, false);
    assert_true(gpt_config_check(&ok, err, sizeof err));

    GptConfig c = tiny_config(true, true);
    c.n_head = 3;
    expect_invalid(c, "n_embd (C) = 8 is not a multiple of n_head (H) = 3");
    c = tiny_config(true, true);
    c.vocab_size = 0;
    expect_invalid(c, "vocab_size (V) = 0");
    c = tiny_config(true, true);
    c.max_seq = -4;
    expect_invalid(c, "max_seq (T) = -4");
    c = tiny_config(true, true);
    c.n_layer = 0;
    expect_invalid(c, "n_layer (L) = 0");
    c = tiny_config(true, true);
    c.n_head = 0;   /* caught as non-positive before the division by it */
    expect_invalid(c, "n_head (H) = 0");
    c = tiny_config(true, true);
    c.n_embd = 1 << 30;
    c.n_head = 1;
    expect_invalid(c, "too large");

    c = tiny_config(true, true);
    c.n_head = 3;
    assert_true(test_aborts(build_invalid, &c));
}

static void embed_too_long(void *arg)
{
    int tokens[5] = { 0 };
    Tape *tape = tape_new();
    gpt_embed(arg, tape, tokens, 1, 5);   /* max_seq is 4 */
}

static void block_out_of_range(void *arg)
{
    Tape *tape = tape_new();
    Tensor *x = tape_tensor(tape, 3, (int[]){ TB, TT, 8 });
    gpt_block(arg, 2, tape, x);
}

static void test_bad_calls_abort(void **state)
{
    (void)state;
    GptConfig cfg = tiny_config(true, true);
    Gpt *m = gpt_new(&cfg, 61);
    assert_true(test_aborts(embed_too_long, m));
    assert_true(test_aborts(block_out_of_range, m));
    gpt_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradcheck_tied_fused),
        cmocka_unit_test(test_gradcheck_untied_separate),
        cmocka_unit_test(test_names_order_and_count),
        cmocka_unit_test(test_init_statistics),
        cmocka_unit_test(test_fused_equals_separate),
        cmocka_unit_test(test_tiled_attention_matches_standard),
        cmocka_unit_test(test_tied_equals_untied_copy),
        cmocka_unit_test(test_segments_match_one_tape),
        cmocka_unit_test(test_loss_ignores_negative_targets),
        cmocka_unit_test(test_config_validation),
        cmocka_unit_test(test_bad_calls_abort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

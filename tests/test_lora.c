/* LoRA on the tiny GPT: the adapted model equals the base bit for bit at step 0, gradients reach
 * A and B only, the adapter path against finite differences, merge and unmerge, the trainable
 * count against its formula, targets and config checks, and the base and adapter snapshots
 * (round trip, and a clear error on a base of another shape). QLoRA is in test_qlora.c. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "autograd/ops.h"
#include "nn/gpt_lora.h"
#include "nn/gpt_snapshot.h"
#include "nn/lora_snapshot.h"
#include "optim/adamw.h"
#include "optim/train.h"

static GptConfig tiny_config(int C)
{
    return (GptConfig){ .vocab_size = 11, .max_seq = 6, .n_layer = 2, .n_head = 2, .n_embd = C,
                        .tied = true, .fused_qkv = false };
}

enum { TB = 2, TT = 6 };
static const int tokens[TB * TT] = { 3, 0, 6, 2, 10, 9, 5, 5, 1, 4, 7, 8 };
static const int targets[TB * TT] = { 0, 6, 2, -1, 9, 1, 5, 1, 4, 3, 8, 2 };

static Gpt *perturbed_gpt(int C, uint64_t seed)
{
    GptConfig cfg = tiny_config(C);
    Gpt *m = gpt_new(&cfg, seed);
    int n;
    Tensor *const *p = gpt_params(m, &n);
    test_perturb(p, n, 0.3f, seed + 1);
    return m;
}

static LoraConfig lora_cfg(int rank, unsigned targets)
{
    LoraConfig c = lora_config_default();
    c.rank = rank;
    c.targets = targets;
    return c;
}

/* The logits [TB, TT, V] into a new malloc'ed array. */
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

static size_t n_logits(const Gpt *m) { return (size_t)TB * TT * m->cfg.vocab_size; }

static void test_step0_logits_identical(void **state)
{
    (void)state;
    Gpt *m = perturbed_gpt(16, 1);
    float *base = logits_of(m);
    LoraConfig lc = lora_cfg(4, LORA_TARGET_ALL);
    GptLora *lora = gpt_lora_new(m, &lc, 7);
    float *adapted = logits_of(m);
    /* B = 0: every adapter adds exact zeros, so equality, not closeness. */
    for (size_t i = 0; i < n_logits(m); i++)
        if (adapted[i] != base[i])
            fail_msg("logit %zu with B = 0: expected %.9g (the base's), got %.9g", i,
                     (double)base[i], (double)adapted[i]);
    /* ...and the adapters are really on the path: a nonzero B changes the logits. */
    int n;
    Tensor *const *p = gpt_lora_params(lora, &n);
    test_perturb(p, n, 0.1f, 3);
    float *moved = logits_of(m);
    assert_true(test_max_abs_diff(moved, base, n_logits(m)) > 1e-3);
    gpt_lora_free(lora);
    /* Detached: the base again, exactly. */
    float *after = logits_of(m);
    assert_true(test_max_abs_diff(after, base, n_logits(m)) == 0.0);
    free(base);
    free(adapted);
    free(moved);
    free(after);
    gpt_free(m);
}

/* One backward: gradients exist on A and B only (W0 and every other base tensor keep grad
 * NULL), the grad category holds exactly the adapters' bytes, and at step 0 dA is exactly 0
 * (dA = s x^T dh B^T with B = 0) while dB is not. */
static void test_gradients_only_on_adapters(void **state)
{
    (void)state;
    Gpt *m = perturbed_gpt(16, 2);
    size_t grad_before = mem_current(MEM_GRAD);
    LoraConfig lc = lora_cfg(2, LORA_TARGET_Q | LORA_TARGET_V | LORA_TARGET_MLP);
    GptLora *lora = gpt_lora_new(m, &lc, 8);
    Tape *tape = tape_new();
    tape_backward(tape, gpt_loss(m, tape, tokens, targets, TB, TT));
    int n;
    Tensor *const *base = gpt_params(m, &n);
    for (int i = 0; i < n; i++) {
        assert_false(base[i]->requires_grad);
        assert_null(base[i]->grad);
    }
    Tensor *const *ad = gpt_lora_params(lora, &n);
    for (int i = 0; i < n; i += 2) {
        Tensor *a = ad[i], *b = ad[i + 1];
        assert_non_null(strstr(a->name, "lora_A"));
        assert_non_null(a->grad);
        assert_non_null(b->grad);
        float biggest_b = 0.0f;
        for (size_t j = 0; j < a->size; j++)
            assert_true(a->grad[j] == 0.0f);
        for (size_t j = 0; j < b->size; j++)
            biggest_b = fmaxf(biggest_b, fabsf(b->grad[j]));
        assert_true(biggest_b > 1e-4f);
    }
    assert_int_equal(mem_current(MEM_GRAD) - grad_before,
                     gpt_lora_n_trainable(lora) * sizeof(float));
    tape_free(tape);
    gpt_lora_free(lora);
    gpt_free(m);
}

static Tensor *f_loss(Tape *tape, Tensor *const *in, void *ctx)
{
    (void)in;   /* the inputs are the adapters' own tensors: the model reads them */
    return gpt_loss(ctx, tape, tokens, targets, TB, TT);
}

/* d loss / d A and d loss / d B of every adapter of every target, against central differences,
 * with A and B both nonzero so each gets a gradient. Step and tolerances as test_gpt's (h 1e-3,
 * fp32 loss noise of about 1e-4 after dividing by 2h). */
static void test_gradcheck_adapters(void **state)
{
    (void)state;
    Gpt *m = perturbed_gpt(8, 3);
    LoraConfig lc = lora_cfg(3, LORA_TARGET_ALL);
    lc.alpha = 6.0f;
    GptLora *lora = gpt_lora_new(m, &lc, 9);
    int n;
    Tensor *const *p = gpt_lora_params(lora, &n);
    test_perturb(p, n, 0.2f, 4);
    GradcheckOptions opt = { .h = 1e-3, .atol = 5e-4, .rtol = 1e-3, .seed = 99 };
    for (int i = 0; i < n; i++) {
        Tensor *t = p[i];
        test_gradcheck(t->name, f_loss, &t, 1, m, opt);
        float biggest = 0.0f;
        for (size_t j = 0; j < t->size; j++)
            biggest = fmaxf(biggest, fabsf(t->grad[j]));
        assert_true(biggest > 1e-3f);
    }
    gpt_lora_free(lora);
    gpt_free(m);
}

static Tensor *f_linear(Tape *tape, Tensor *const *in, void *ctx)
{
    return nn_linear_forward(ctx, tape, in[0]);
}

/* One Linear on its own: h = x W0 + b + s (x A) B against the formula in double, with s =
 * alpha / r (a wrong scale or a transposed factor shows); the activations the adapter keeps;
 * its gradients against finite differences. */
static void test_linear_adapter(void **state)
{
    (void)state;
    enum { M = 5, IN = 7, OUT = 4, R = 3 };
    NnParams params = { 0 };
    Linear lin;
    nn_linear_init(&lin, &params, "lin", IN, OUT, true, 0.5f);
    LoraAdapter ad;
    lora_adapter_init(&ad, &params, "lin", IN, OUT, R, 1.5f);
    nn_params_init(&params, 5);
    test_perturb(params.tensors, params.n, 0.3f, 6);
    lin.lora = &ad;
    Rng rng = rng_new(7, 1);
    Tensor *x = test_leaf(&rng, 1.0f, 2, (int[]){ M, IN });
    Tape *tape = tape_new();
    Tensor *y = nn_linear_forward(&lin, tape, x);
    const float *W = lin.weight->data, *b = lin.bias->data, *A = ad.a->data, *B = ad.b->data;
    double worst = 0.0;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < OUT; j++) {
            double h = b[j];
            for (int k = 0; k < IN; k++)
                h += (double)x->data[i * IN + k] * W[k * OUT + j];
            for (int q = 0; q < R; q++) {
                double xa = 0.0;
                for (int k = 0; k < IN; k++)
                    xa += (double)x->data[i * IN + k] * A[k * R + q];
                h += 0.5 * xa * B[q * OUT + j];     /* s = 1.5 / 3 */
            }
            worst = fmax(worst, fabs(h - y->data[i * OUT + j]));
        }
    }
    printf("linear with adapter vs double formula: max error %.3g\n", worst);
    assert_true(worst < 1e-5);
    tape_free(tape);

    /* The adapter op keeps s x A [M, r] and its output [M, out], nothing else. */
    lin.weight->requires_grad = lin.bias->requires_grad = false;
    tape = tape_new();
    Tensor *base = nn_linear_forward(&(Linear){ lin.weight, lin.bias, NULL, NULL }, tape, x);
    size_t act0 = mem_current(MEM_ACT);
    lora_adapter_add(&ad, tape, x, base);
    assert_int_equal(mem_current(MEM_ACT) - act0, (size_t)M * (R + OUT) * sizeof(float));
    tape_free(tape);

    /* Gradients of x, A and B through the op, W0 and b frozen. */
    Tensor *in[3] = { x, ad.a, ad.b };
    test_gradcheck("linear + adapter", f_linear, in, 3, &lin, gradcheck_defaults());
    assert_null(lin.weight->grad);
    assert_null(lin.bias->grad);
    tensor_free(x);
    nn_params_free(&params);
}

/* Merged and unmerged models compute the same logits within fp32 rounding; unmerging gives
 * back W0 within rounding; a merged Linear no longer adds its adapter. */
static void test_merge_unmerge(void **state)
{
    (void)state;
    Gpt *m = perturbed_gpt(16, 4);
    Tensor *wq = gpt_param(m, "blocks.1.attn.q.weight");
    float *w0 = malloc(wq->size * sizeof *w0);
    memcpy(w0, wq->data, wq->size * sizeof *w0);
    LoraConfig lc = lora_cfg(4, LORA_TARGET_ALL);
    GptLora *lora = gpt_lora_new(m, &lc, 10);
    int n;
    Tensor *const *p = gpt_lora_params(lora, &n);
    test_perturb(p, n, 0.2f, 5);
    float *unmerged = logits_of(m);
    gpt_lora_merge(lora);
    assert_null(m->blocks[1].attn.q.lora);
    float *merged = logits_of(m);
    double d_logits = test_max_abs_diff(merged, unmerged, n_logits(m));
    double moved = test_max_abs_diff(wq->data, w0, wq->size);
    gpt_lora_unmerge(lora);
    assert_non_null(m->blocks[1].attn.q.lora);
    double d_w = test_max_abs_diff(wq->data, w0, wq->size);
    float *again = logits_of(m);
    double d_again = test_max_abs_diff(again, unmerged, n_logits(m));
    printf("merge: logits differ by %.3g, W0 moved by %.3g and came back within %.3g; "
           "unmerged logits again within %.3g\n", d_logits, moved, d_w, d_again);
    assert_true(moved > 1e-2);          /* the merge did change W0 */
    assert_true(d_logits < 2e-5);
    assert_true(d_w < 1e-6);
    assert_true(d_again < 2e-5);
    free(w0);
    free(unmerged);
    free(merged);
    free(again);
    gpt_lora_free(lora);
    gpt_free(m);
}

/* L r (2C per attention target + 10C for mlp), counted independently of the code, and the
 * optimizer state AdamW makes for exactly those numbers (8 bytes each). */
static void test_trainable_count(void **state)
{
    (void)state;
    const struct { unsigned targets; int attn, mlp; } cases[] = {
        { LORA_TARGET_Q | LORA_TARGET_V, 2, 0 },
        { LORA_TARGET_O, 1, 0 },
        { LORA_TARGET_MLP, 0, 1 },
        { LORA_TARGET_ALL, 4, 1 },
    };
    const int ranks[] = { 1, 4, 16 };
    GptConfig cfg = tiny_config(32);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int k = 0; k < 3; k++) {
            Gpt *m = gpt_new(&cfg, 1);
            LoraConfig lc = lora_cfg(ranks[k], cases[c].targets);
            GptLora *lora = gpt_lora_new(m, &lc, 2);
            size_t L = 2, C = 32, r = (size_t)ranks[k];
            size_t want = L * r * (2 * C * (size_t)cases[c].attn + 10 * C * (size_t)cases[c].mlp);
            assert_int_equal(gpt_lora_n_trainable(lora), want);
            int n;
            Tensor *const *p = gpt_lora_params(lora, &n);
            size_t optim_before = mem_current(MEM_OPTIM);
            AdamW *opt = adamw_new(p, n, adamw_defaults());
            assert_int_equal(mem_current(MEM_OPTIM) - optim_before, 8 * want);
            optim_free(&opt->base);
            gpt_lora_free(lora);
            gpt_free(m);
        }
    }
}

static void test_targets_and_config(void **state)
{
    (void)state;
    unsigned t = 0;
    char err[256], buf[64];
    assert_true(lora_targets_parse("q,v", &t, err, sizeof err));
    assert_int_equal(t, LORA_TARGET_Q | LORA_TARGET_V);
    assert_true(lora_targets_parse("mlp,o,k", &t, err, sizeof err));
    assert_int_equal(t, LORA_TARGET_MLP | LORA_TARGET_O | LORA_TARGET_K);
    assert_string_equal(lora_targets_str(t, buf, sizeof buf), "k,o,mlp");
    assert_true(lora_targets_parse("all", &t, err, sizeof err));
    assert_int_equal(t, LORA_TARGET_ALL);
    assert_false(lora_targets_parse("q,x", &t, err, sizeof err));
    assert_non_null(strstr(err, "'x'"));
    assert_false(lora_targets_parse("v,v", &t, err, sizeof err));
    assert_non_null(strstr(err, "repeated"));
    assert_false(lora_targets_parse("q,", &t, err, sizeof err));

    GptConfig fused = tiny_config(16);
    fused.fused_qkv = true;
    LoraConfig lc = lora_config_default();
    assert_false(lora_config_check(&lc, &fused, err, sizeof err));
    assert_non_null(strstr(err, "separate q, k, v"));
    lc.targets = LORA_TARGET_O | LORA_TARGET_MLP;      /* no q/k/v: a fused base is fine */
    assert_true(lora_config_check(&lc, &fused, err, sizeof err));
    lc.rank = 17;
    assert_false(lora_config_check(&lc, &fused, err, sizeof err));
    assert_non_null(strstr(err, "rank 17"));
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Base and adapter in two files; a fresh base from the base file plus the adapter file gives
 * the adapted logits exactly; the adapter file is small; a base of another shape is refused
 * with a message naming the field, and leaves that base as it was. */
static void test_snapshots(void **state)
{
    (void)state;
    char dir[] = "/tmp/tapegrad_lora_XXXXXX", base_path[64], ad_path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(base_path, sizeof base_path, "%s/base.safetensors", dir);
    snprintf(ad_path, sizeof ad_path, "%s/adapter.safetensors", dir);
    SnapshotError err;
    Gpt *m = perturbed_gpt(32, 5);
    assert_true(gpt_snapshot_save(m, base_path, &err));
    LoraConfig lc = lora_cfg(2, LORA_TARGET_Q | LORA_TARGET_V);
    lc.alpha = 3.0f;
    GptLora *lora = gpt_lora_new(m, &lc, 11);
    int n;
    Tensor *const *p = gpt_lora_params(lora, &n);
    test_perturb(p, n, 0.1f, 6);
    float *want = logits_of(m);
    assert_true(lora_snapshot_save(lora, ad_path, &err));
    printf("base file %ld bytes, adapter file %ld bytes\n", file_size(base_path),
           file_size(ad_path));
    assert_true(file_size(ad_path) * 10 < file_size(base_path));

    Gpt *m2 = gpt_snapshot_load(base_path, &err);
    assert_non_null(m2);
    GptLora *l2 = lora_snapshot_load(m2, ad_path, &err);
    assert_non_null(l2);
    assert_int_equal(l2->cfg.rank, 2);
    assert_true(l2->cfg.alpha == 3.0f);
    assert_int_equal(l2->cfg.targets, LORA_TARGET_Q | LORA_TARGET_V);
    float *got = logits_of(m2);
    assert_true(test_max_abs_diff(got, want, n_logits(m)) == 0.0);

    /* Another width: refused, with the field named, and the base untouched (not frozen). */
    Gpt *other = perturbed_gpt(16, 5);
    float *other_before = logits_of(other);
    assert_null(lora_snapshot_load(other, ad_path, &err));
    printf("wrong base: %s\n", err.message);
    assert_non_null(strstr(err.message, "n_embd (C) 32 against 16"));
    assert_non_null(strstr(err.message, ad_path));
    assert_true(other->blocks[0].attn.q.weight->requires_grad);
    assert_null(other->blocks[0].attn.q.lora);
    float *other_after = logits_of(other);
    assert_true(test_max_abs_diff(other_after, other_before, n_logits(other)) == 0.0);
    /* Base weights into an existing model: of the same shape, exactly; of another, refused
     * with the field named and the model left as it was. */
    GptConfig same = tiny_config(32);
    Gpt *m3 = gpt_new(&same, 77);
    assert_true(gpt_snapshot_read_weights(m3, base_path, &err));
    float *base_logits = logits_of(m3);
    assert_false(gpt_snapshot_read_weights(other, base_path, &err));
    assert_non_null(strstr(err.message, "n_embd (C) 32 against 16"));
    float *other_again = logits_of(other);
    assert_true(test_max_abs_diff(other_again, other_before, n_logits(other)) == 0.0);
    /* ...and they are the base's: the adapted model with B back at 0 gives the same logits. */
    for (int i = 1; i < n; i += 2)
        tensor_fill(p[i], 0.0f);
    float *zero_b = logits_of(m);
    assert_true(test_max_abs_diff(zero_b, base_logits, n_logits(m)) == 0.0);
    free(base_logits);
    free(other_again);
    free(zero_b);
    gpt_free(m3);

    /* A base file is not an adapter, and an adapter is not a base. */
    assert_null(lora_snapshot_load(other, base_path, &err));
    assert_non_null(strstr(err.message, "not a LoRA adapter"));
    assert_null(gpt_snapshot_load(ad_path, &err));
    assert_non_null(strstr(err.message, "model.vocab_size"));
    /* An adapter holding a NaN is refused (issue 18: a NaN model evaluated to a NaN loss). */
    p[0]->data[3] = NAN;
    assert_true(lora_snapshot_save(lora, ad_path, &err));
    Gpt *m4 = gpt_snapshot_load(base_path, &err);
    assert_non_null(m4);
    assert_null(lora_snapshot_load(m4, ad_path, &err));
    printf("NaN adapter: %s\n", err.message);
    assert_non_null(strstr(err.message, "holds nan at element 3"));
    gpt_free(m4);

    free(want);
    free(got);
    free(other_before);
    free(other_after);
    gpt_lora_free(l2);
    gpt_free(m2);
    gpt_free(other);
    gpt_lora_free(lora);
    gpt_free(m);
    remove(base_path);
    remove(ad_path);
    rmdir(dir);
}

/* The trainer with LoRA: its optimizer holds state for the adapters alone (8 bytes per trained
 * number with AdamW), a step changes A and B and not one bit of the base, and a few steps on one
 * batch lower its loss. */
static void test_trainer_lora(void **state)
{
    (void)state;
    TrainerConfig cfg = trainer_config_default();
    cfg.model = tiny_config(16);
    size_t optim0 = mem_current(MEM_OPTIM);
    Trainer *tr = trainer_new(&cfg);
    int n;
    Tensor *const *base = gpt_params(tr->model, &n);
    test_perturb(base, n, 0.3f, 4);
    LoraConfig lc = lora_cfg(4, LORA_TARGET_ALL);
    trainer_use_lora(tr, &lc, 5);
    assert_int_equal(mem_current(MEM_OPTIM) - optim0, 8 * gpt_lora_n_trainable(tr->lora));
    float *before[64];
    for (int i = 0; i < n; i++) {
        before[i] = malloc(base[i]->size * sizeof(float));
        memcpy(before[i], base[i]->data, base[i]->size * sizeof(float));
    }
    double first = trainer_step(tr, tokens, targets, TB, TT, 1e-2).loss, last = first;
    for (int k = 0; k < 50; k++)
        last = trainer_step(tr, tokens, targets, TB, TT, 1e-2).loss;
    printf("trainer with LoRA: loss %.4f -> %.4f on one batch\n", first, last);
    assert_true(last < 0.8 * first);
    for (int i = 0; i < n; i++) {
        assert_true(test_max_abs_diff(base[i]->data, before[i], base[i]->size) == 0.0);
        free(before[i]);
    }
    Tensor *b0 = gpt_lora_params(tr->lora, &n)[1];
    float biggest = 0.0f;
    for (size_t j = 0; j < b0->size; j++)
        biggest = fmaxf(biggest, fabsf(b0->data[j]));
    assert_true(biggest > 0.0f);
    trainer_free(tr);
    assert_int_equal(mem_current(MEM_OPTIM), optim0);
}

int main(void)
{
    par_set_threads(2);
    par_set_split_always(true);    /* the small cases still take the threaded paths */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step0_logits_identical),
        cmocka_unit_test(test_gradients_only_on_adapters),
        cmocka_unit_test(test_gradcheck_adapters),
        cmocka_unit_test(test_linear_adapter),
        cmocka_unit_test(test_merge_unmerge),
        cmocka_unit_test(test_trainable_count),
        cmocka_unit_test(test_targets_and_config),
        cmocka_unit_test(test_snapshots),
        cmocka_unit_test(test_trainer_lora),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The tiny GPT against PyTorch 1.13: the same weights and batch give the same logits, loss,
 * parameter gradients, and the same losses and weights over 10 AdamW steps.
 *
 * The numbers come from tests/fixtures/gpt_reference.safetensors, written by
 * tests/reference/gpt_reference.py (torch in float32; what float32 itself costs, measured by
 * the same run in float64, is in the file's metadata and printed next to our errors). The
 * fixture is committed, so this test needs no Python. Weights are loaded by name
 * ("param.<name>"), so no random generator is shared with the script.
 *
 * Tolerances, with what was measured against them (torch fp32's own distance from float64 in
 * brackets). Both sides round to fp32 at every op; they differ in the order of float operations
 * (BLAS blocking, reductions), so the errors are a few fp32 ulps of the largest values,
 * amplified by the backward pass and compounded by the optimizer steps:
 *     logits            max |diff| <= 1e-5 max |logit| + 1e-6      measured 6.3e-7 (3.9e-7)
 *     loss              |diff| <= 1e-5 |loss|                      9.3e-8 (4.6e-8)
 *     each gradient     max |diff| <= 1e-5 max |grad| + 1e-6       worst tensor 1.4e-6 (8.6e-7)
 *     AdamW losses      |diff| <= 1e-5 |loss| at each of 10 steps  up to 9.0e-7 (2.5e-7)
 *     AdamW weights     max |diff| <= 2e-5 max |weight| + 1e-6     worst tensor 1.2e-6 (1.6e-6)
 * except the key biases, whose gradient is exactly 0 (see is_key_bias). The margins are 6x to
 * 100x; a wrong term anywhere (a missing bias, a transposed weight, the wrong decay set) costs
 * orders of magnitude more. The test prints the current figures; these are November 2026's. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/snapshot.h"
#include "nn/gpt.h"
#include "optim/adamw.h"

/* Next to this file, so the test runs from the repository root (as make test does). */
static const char *fixture_path(void)
{
    static char path[512];
    const char *here = __FILE__;
    const char *slash = strrchr(here, '/');
    int dir = slash ? (int)(slash - here + 1) : 0;
    snprintf(path, sizeof path, "%.*sfixtures/gpt_reference.safetensors", dir, here);
    return path;
}

typedef struct {
    SnapshotReader *r;
    GptConfig       cfg;
    int             B, T;
    int            *tokens, *targets;
    Gpt            *model;
} Fixture;

static int meta_int(const SnapshotReader *r, const char *key)
{
    uint64_t v = 0;
    SnapshotError err;
    if (!snapshot_meta_u64(r, key, &v, &err))
        fail_msg("%s", err.message);
    return (int)v;
}

static double meta_f64(const SnapshotReader *r, const char *key)
{
    double v = 0.0;
    SnapshotError err;
    if (!snapshot_meta_f64(r, key, &v, &err))
        fail_msg("%s", err.message);
    return v;
}

/* A new tensor holding the file's tensor of that name, which must have this shape. */
static Tensor *read_tensor(SnapshotReader *r, const char *name, int ndim, const int *shape)
{
    Tensor *t = tensor_new(MEM_TEMP, ndim, shape);
    SnapshotError err;
    if (!snapshot_read_tensor(r, name, t, &err))
        fail_msg("%s", err.message);
    return t;
}

static int *read_ids(SnapshotReader *r, const char *name, int B, int T)
{
    int *ids = malloc((size_t)B * T * sizeof *ids);
    SnapshotError err;
    if (!snapshot_read(r, name, SNAPSHOT_I32, 2, (int64_t[]){ B, T }, ids, &err))
        fail_msg("%s", err.message);
    return ids;
}

/* Loads every parameter of the model by name; the file must hold exactly those. */
static void load_params(Fixture *f)
{
    int n, in_file = 0;
    Tensor *const *p = gpt_params(f->model, &n);
    for (int k = 0; k < n; k++) {
        char name[TENSOR_NAME_LEN + 16];
        snprintf(name, sizeof name, "param.%s", p[k]->name);
        SnapshotError err;
        if (!snapshot_read_tensor(f->r, name, p[k], &err))
            fail_msg("%s", err.message);
    }
    for (int i = 0; i < snapshot_count(f->r); i++)
        in_file += strncmp(snapshot_entry(f->r, i)->name, "param.", 6) == 0;
    assert_int_equal(in_file, n);
}

static int setup(void **state)
{
    Fixture *f = calloc(1, sizeof *f);
    SnapshotError err;
    f->r = snapshot_open(fixture_path(), &err);
    if (!f->r) {
        fprintf(stderr, "%s (run the tests from the repository root)\n", err.message);
        free(f);
        return -1;
    }
    f->cfg = (GptConfig){ .vocab_size = meta_int(f->r, "vocab_size"),
                          .max_seq = meta_int(f->r, "max_seq"),
                          .n_layer = meta_int(f->r, "n_layer"),
                          .n_head = meta_int(f->r, "n_head"), .n_embd = meta_int(f->r, "n_embd"),
                          .tied = meta_int(f->r, "tied"), .fused_qkv = meta_int(f->r, "fused_qkv") };
    f->B = meta_int(f->r, "batch");
    f->T = f->cfg.max_seq;
    f->tokens = read_ids(f->r, "tokens", f->B, f->T);
    f->targets = read_ids(f->r, "targets", f->B, f->T);
    f->model = gpt_new(&f->cfg, 0);
    load_params(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    Fixture *f = *state;
    gpt_free(f->model);
    free(f->tokens);
    free(f->targets);
    snapshot_close(f->r);
    free(f);
    return 0;
}

static float max_abs(const float *a, size_t n)
{
    float m = 0.0f;
    for (size_t i = 0; i < n; i++)
        m = fmaxf(m, fabsf(a[i]));
    return m;
}

static void print_torch_fp32_error(const SnapshotReader *r, const char *what)
{
    char key[64];
    snprintf(key, sizeof key, "fp32_vs_fp64.%s", what);
    const char *v = snapshot_meta(r, key);
    printf("    (torch fp32 vs fp64, relative: %s)\n", v ? v : "?");
}

static void test_forward_matches_torch(void **state)
{
    Fixture *f = *state;
    Tape *tape = tape_new();
    tape->recording = false;
    Tensor *logits = gpt_forward(f->model, tape, f->tokens, f->B, f->T);
    Tensor *loss = op_cross_entropy(tape, logits, f->targets);
    Tensor *want = read_tensor(f->r, "logits", 3, logits->shape);
    Tensor *want_loss = read_tensor(f->r, "loss", 1, (int[]){ 1 });

    float scale = max_abs(want->data, want->size);
    double err = test_max_abs_diff(logits->data, want->data, want->size);
    printf("logits: max |diff| %.3g, max |logit| %.3g, relative %.3g\n", err, scale, err / scale);
    print_torch_fp32_error(f->r, "logits");
    assert_true(err <= 1e-5f * scale + 1e-6f);
    double rel = fabs((double)loss->data[0] - want_loss->data[0]) / fabs(want_loss->data[0]);
    printf("loss: ours %.8f torch %.8f, relative %.3g\n", loss->data[0], want_loss->data[0], rel);
    print_torch_fp32_error(f->r, "loss");
    assert_true(rel <= 1e-5);
    tensor_free(want);
    tensor_free(want_loss);
    tape_free(tape);
}

static void test_gradients_match_torch(void **state)
{
    Fixture *f = *state;
    gpt_zero_grad(f->model);
    Tape *tape = tape_new();
    tape_backward(tape, gpt_loss(f->model, tape, f->tokens, f->targets, f->B, f->T));
    int n, failed = 0, worst_k = 0;
    double worst = -1.0;
    Tensor *const *p = gpt_params(f->model, &n);
    for (int k = 0; k < n; k++) {
        char name[TENSOR_NAME_LEN + 16];
        snprintf(name, sizeof name, "grad.%s", p[k]->name);
        Tensor *want = read_tensor(f->r, name, p[k]->ndim, p[k]->shape);
        float scale = max_abs(want->data, want->size);
        double err = test_max_abs_diff(p[k]->grad, want->data, want->size);
        if (!(err <= 1e-5f * scale + 1e-6f)) {   /* written so that NaN fails */
            printf("  %-26s max |diff| %.3g over the tolerance (max |grad| %.3g)\n", p[k]->name,
                   err, scale);
            failed++;
        }
        if (!(err / scale <= worst)) {
            worst = err / scale;
            worst_k = k;
        }
        tensor_free(want);
    }
    printf("gradients of %d tensors: worst %s, max |diff| / max |grad| = %.3g\n", n,
           p[worst_k]->name, worst);
    print_torch_fp32_error(f->r, "grad");
    assert_int_equal(failed, 0);
    tape_free(tape);
}

/* The key bias of each fused qkv bias, elements [C, 2C): adding a constant vector to every key
 * adds q . b to every score of a row, which the softmax ignores, so its gradient is exactly 0 in
 * exact arithmetic and fp32 rounding noise (1e-9) in both implementations. Adam divides that
 * noise by its own magnitude and moves the weight by about lr per step in a random direction
 * (torch fp32 and float64 end up 0.05 apart). For these weights the test only bounds the
 * difference by 2 lr per step, what two such random walks can reach. */
static bool is_key_bias(const Fixture *f, const Tensor *t, size_t i)
{
    int C = f->cfg.n_embd;
    size_t len = strlen(t->name);
    return len > 13 && strcmp(t->name + len - 13, "attn.qkv.bias") == 0 && i >= (size_t)C &&
           i < 2 * (size_t)C;
}

static void test_adamw_matches_torch(void **state)
{
    Fixture *f = *state;
    load_params(f);   /* the previous tests read only, but start from the file regardless */
    gpt_zero_grad(f->model);
    int n;
    Tensor *const *p = gpt_params(f->model, &n);
    AdamWConfig cfg = adamw_defaults();
    cfg.beta1 = meta_f64(f->r, "beta1");
    cfg.beta2 = meta_f64(f->r, "beta2");
    cfg.eps = meta_f64(f->r, "eps");
    cfg.weight_decay = meta_f64(f->r, "weight_decay");
    cfg.decay_rule = OPTIM_DECAY_MATRICES;
    double lr = meta_f64(f->r, "lr");
    int steps = meta_int(f->r, "adamw_steps");
    AdamW *adam = adamw_new(p, n, cfg);

    Tensor *want = read_tensor(f->r, "adamw.losses", 1, (int[]){ steps });
    Tape *tape = tape_new();
    double worst_loss = 0.0;
    for (int s = 0; s < steps; s++) {
        Tensor *loss = gpt_loss(f->model, tape, f->tokens, f->targets, f->B, f->T);
        double rel = fabs((double)loss->data[0] - want->data[s]) / fabs(want->data[s]);
        printf("  step %2d  loss ours %.7f torch %.7f  relative %.2g\n", s, loss->data[0],
               want->data[s], rel);
        worst_loss = fmax(worst_loss, rel);
        tape_backward(tape, loss);
        optim_step(&adam->base, lr);
        optim_zero_grad(&adam->base);
        tape_reset(tape);
    }
    print_torch_fp32_error(f->r, "adamw.losses");
    assert_true(worst_loss <= 1e-5);

    double worst = 0.0;
    const char *worst_name = "";
    float key_bias = 0.0f;
    int failed = 0;
    for (int k = 0; k < n; k++) {
        char name[TENSOR_NAME_LEN + 16];
        snprintf(name, sizeof name, "adamw.param.%s", p[k]->name);
        Tensor *w = read_tensor(f->r, name, p[k]->ndim, p[k]->shape);
        float scale = max_abs(w->data, w->size), err = 0.0f;
        for (size_t i = 0; i < w->size; i++) {
            float d = fabsf(p[k]->data[i] - w->data[i]);
            if (d != d)
                d = INFINITY;   /* a NaN must fail, not vanish in a max */
            if (is_key_bias(f, p[k], i))
                key_bias = fmaxf(key_bias, d);
            else
                err = fmaxf(err, d);
        }
        failed += err > 2e-5f * scale + 1e-6f;
        if (err / scale > worst) {
            worst = err / scale;
            worst_name = p[k]->name;
        }
        tensor_free(w);
    }
    printf("weights after %d steps: worst %s, max |diff| / max |weight| = %.3g\n", steps,
           worst_name, worst);
    print_torch_fp32_error(f->r, "adamw.param");
    printf("key biases (gradient 0 + noise): max |diff| %.3g, lr x steps = %.3g\n", key_bias,
           lr * steps);
    failed += key_bias > 2.0 * lr * steps;
    assert_int_equal(failed, 0);
    tensor_free(want);
    tape_free(tape);
    optim_free(&adam->base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_matches_torch),
        cmocka_unit_test(test_gradients_match_torch),
        cmocka_unit_test(test_adamw_matches_torch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* Gradient checkpointing under a precision policy. Against one tape under the same policy,
 * every strategy gives the same loss and gradients, bit for bit: on the MLP chain and on a tiny
 * GPT (bf16, fp16, fp8 with current scaling, tf32; with a loss-scale seed), and through the
 * trainer with gradient accumulation and dynamic loss scaling. The checkpoints and the
 * recorded segments really are packed (exact byte ratios on the MLP chain; sqrt's peak on a
 * GPT), and fp8's delayed scaling is refused. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "analysis/mlp_chain.h"
#include "autograd/checkpoint.h"
#include "autograd/parallel.h"
#include "tests/gpt_pass_test.h"
#include "optim/train.h"

static const char *const STRATEGIES[] = { "vanilla", "memory-poor", "sqrt", "every:1",
                                          "every:2", "budget:1", "budget:2", "budget:3" };
enum { N_STRATEGIES = sizeof STRATEGIES / sizeof STRATEGIES[0] };

static const char *const POLICIES[] = { "bf16", "fp16", "fp8", "tf32" };
enum { N_POLICIES = sizeof POLICIES / sizeof POLICIES[0] };

static PrecisionPolicy preset(const char *name)
{
    PrecisionPolicy p;
    assert_true(policy_preset(name, &p));
    return p;
}

static CkptStrategy parsed(const char *text)
{
    CkptStrategy s;
    char err[160];
    assert_true(ckpt_parse(text, &s, err, sizeof err));
    return s;
}

/* Appends n floats to a growing buffer: gradients gathered in a fixed order. */
static float *gather(float *buf, size_t *len, const float *x, size_t n)
{
    buf = realloc(buf, (*len + n) * sizeof *buf);
    assert_non_null(buf);
    memcpy(buf + *len, x, n * sizeof *buf);
    *len += n;
    return buf;
}

/* Loss and gradients of one pass, to compare bit for bit. */
typedef struct {
    float  loss;
    float *grads;
    size_t n;
} Pass;

static void assert_same_pass(const Pass *got, const Pass *ref, const char *what)
{
    double diff = got->n == ref->n ? test_max_abs_diff(got->grads, ref->grads, ref->n) : -1.0;
    if (diff != 0.0 || memcmp(&got->loss, &ref->loss, sizeof got->loss) != 0)
        printf("%s: loss %.9g vs %.9g, max gradient difference %g\n", what, got->loss,
               ref->loss, diff);
    assert_memory_equal(&got->loss, &ref->loss, sizeof got->loss);
    assert_int_equal(got->n, ref->n);
    assert_memory_equal(got->grads, ref->grads, ref->n * sizeof *ref->grads);
}

/* ---- the MLP chain: the runner alone ------------------------------------------------------- */

static Pass mlp_grads(const MlpChain *m, float loss)
{
    Pass p = { .loss = loss };
    for (int j = 0; j < m->n; j++) {
        p.grads = gather(p.grads, &p.n, m->w[j]->grad, m->w[j]->size);
        p.grads = gather(p.grads, &p.n, m->b[j]->grad, m->b[j]->size);
    }
    p.grads = gather(p.grads, &p.n, m->x->grad, m->x->size);
    return p;
}

static Pass mlp_one_tape(MlpChain *m, const PrecisionPolicy *policy)
{
    mlp_chain_zero_grad(m);
    Tape *tape = tape_new();
    tape->policy = policy;
    Tensor *y = m->x;
    for (int j = 0; j < m->n; j++)
        y = mlp_chain_segment(tape, y, j, m);
    Tensor *loss = mlp_chain_loss(m, tape, y);
    tape_backward(tape, loss);
    Pass p = mlp_grads(m, loss->data[0]);
    tape_free(tape);
    return p;
}

/* The act bytes in use each time a segment is about to be reversed. */
typedef struct {
    size_t act0, bytes[64];
    int    calls;
} ActTrace;

static void trace_act(int segment, const char *nodes, void *ctx)
{
    (void)segment;
    (void)nodes;
    ActTrace *t = ctx;
    assert_true(t->calls < 64);
    t->bytes[t->calls++] = mem_current(MEM_ACT) - t->act0;
}

static Pass mlp_checkpointed(MlpChain *m, const PrecisionPolicy *policy, CkptStrategy s,
                             ActTrace *trace)
{
    mlp_chain_zero_grad(m);
    *trace = (ActTrace){ .act0 = mem_current(MEM_ACT) };
    CkptChain chain = { .fn = mlp_chain_segment, .ctx = m, .n = m->n, .observe = trace_act,
                        .observe_ctx = trace, .policy = policy };
    CkptRun *run = ckpt_run_new(&chain, s);
    Tape *head = tape_new();
    head->policy = policy;
    Tensor *loss = mlp_chain_loss(m, head, ckpt_forward(run, m->x));
    tape_backward(head, loss);
    float value = loss->data[0];
    tape_free(head);
    ckpt_backward(run);
    assert_int_equal(ckpt_stats(run).forwards, ckpt_formula_total(s, m->n));
    ckpt_run_free(run);
    assert_int_equal(mem_current(MEM_ACT), trace->act0);
    return mlp_grads(m, value);
}

static void test_mlp_chain_matches_one_tape(void **state)
{
    (void)state;
    MlpChain *m = mlp_chain_new(6, 24, 5, 11);
    for (int k = 0; k < N_POLICIES; k++) {
        PrecisionPolicy policy = preset(POLICIES[k]);
        Pass ref = mlp_one_tape(m, &policy);
        for (int i = 0; i < N_STRATEGIES; i++) {
            ActTrace trace;
            Pass got = mlp_checkpointed(m, &policy, parsed(STRATEGIES[i]), &trace);
            char what[80];
            snprintf(what, sizeof what, "MLP chain, %s, %s", POLICIES[k], STRATEGIES[i]);
            assert_same_pass(&got, &ref, what);
            free(got.grads);
        }
        /* The policy really changes the numbers: fp32's differ (bf16, fp16 and fp8 round). */
        if (policy.act != DTYPE_F32) {
            Pass fp32 = mlp_one_tape(m, NULL);
            assert_true(memcmp(fp32.grads, ref.grads, ref.n * sizeof *ref.grads) != 0);
            free(fp32.grads);
        }
        free(ref.grads);
    }
    mlp_chain_free(m);
}

/* Every act tensor of the chain (checkpoint copies, recorded products, biased products and
 * gelus) is B x W elements, so packed storage holds exactly 1/2 (bf16, fp16) or 1/4 (e4m3) of
 * fp32's bytes at every moment: at each reverse step the act bytes in use are fp32's divided
 * by 2 or 4, not one byte more (an fp32 checkpoint would add B W 2 or 3 B W bytes). */
static void test_checkpoints_are_packed(void **state)
{
    (void)state;
    MlpChain *m = mlp_chain_new(6, 24, 5, 11);
    const char *names[] = { "bf16", "fp16", "fp8" };
    const size_t divisor[] = { 2, 2, 4 };
    for (int i = 0; i < N_STRATEGIES; i++) {
        CkptStrategy s = parsed(STRATEGIES[i]);
        ActTrace fp32;
        free(mlp_checkpointed(m, NULL, s, &fp32).grads);
        assert_int_equal(fp32.calls, m->n);
        for (int k = 0; k < 3; k++) {
            PrecisionPolicy policy = preset(names[k]);
            ActTrace low;
            free(mlp_checkpointed(m, &policy, s, &low).grads);
            assert_int_equal(low.calls, fp32.calls);
            for (int c = 0; c < fp32.calls; c++) {
                if (low.bytes[c] * divisor[k] != fp32.bytes[c])
                    printf("%s %s, reverse step %d: %zu act bytes, fp32 %zu\n", names[k],
                           STRATEGIES[i], c, low.bytes[c], fp32.bytes[c]);
                assert_int_equal(low.bytes[c] * divisor[k], fp32.bytes[c]);
            }
        }
    }
    mlp_chain_free(m);
}

/* ---- the GPT ------------------------------------------------------------------------------- */

static const GptConfig TINY = { .vocab_size = 7, .max_seq = 4, .n_layer = 3, .n_head = 2,
                                .n_embd = 8, .tied = true, .fused_qkv = true };

/* GPT-2 init gives tiny gradients; perturbed weights make every term count. */
static Gpt *perturbed_model(GptConfig cfg)
{
    Gpt *m = gpt_new(&cfg, 1);
    int n;
    Tensor *const *p = gpt_params(m, &n);
    test_perturb(p, n, 0.3f, 2);
    return m;
}

static Pass gpt_grads(const Gpt *m, float loss)
{
    Pass p = { .loss = loss };
    int n;
    Tensor *const *params = gpt_params(m, &n);
    for (int k = 0; k < n; k++) {
        float *scratch;     /* packed under a policy (autograd/tensor.h) */
        const float *g = tensor_grad_read(params[k], &scratch);
        assert_non_null(g);
        p.grads = gather(p.grads, &p.n, g, params[k]->size);
        mem_free(scratch);
    }
    return p;
}

static void draw_tokens(Rng *rng, int V, int n, int *tokens, int *targets)
{
    for (int i = 0; i < n; i++) {
        tokens[i] = (int)rng_below(rng, (uint32_t)V);
        targets[i] = i % 5 == 3 ? -1 : (int)rng_below(rng, (uint32_t)V);
    }
}

/* seed != 1 backprops op_scale(loss, 1/K) from S, as the trainer does with K micro-batches
 * and a loss scale S; the checkpointed pass is seeded with S (1/K), the same float. */
static Pass gpt_one_tape(Gpt *m, const PrecisionPolicy *policy, const int *tokens,
                         const int *targets, int B, int T, float S, int K)
{
    gpt_zero_grad(m);
    Tape *tape = tape_new();
    tape->policy = policy;
    Tensor *loss = gpt_loss(m, tape, tokens, targets, B, T);
    Tensor *top = K > 1 ? op_scale(tape, loss, 1.0f / (float)K) : loss;
    tape_backward_seeded(tape, top, &S);
    Pass p = gpt_grads(m, loss->data[0]);
    tape_free(tape);
    return p;
}

static void check_gpt(GptConfig cfg, int B, int T, const char *policy_name, float S, int K)
{
    Gpt *m = perturbed_model(cfg);
    PrecisionPolicy policy = preset(policy_name);
    int *tokens = malloc((size_t)B * T * sizeof *tokens);
    int *targets = malloc((size_t)B * T * sizeof *targets);
    Rng rng = rng_new(7, RNG_STREAM_DATA);
    draw_tokens(&rng, cfg.vocab_size, B * T, tokens, targets);
    Pass ref = gpt_one_tape(m, &policy, tokens, targets, B, T, S, K);
    for (int i = 0; i < N_STRATEGIES; i++) {
        CkptStrategy s = parsed(STRATEGIES[i]);
        gpt_zero_grad(m);
        CkptStats st;
        float loss = pass_on_new_tape(m, s, &policy, tokens, targets, B,
                                                            T, S * (1.0f / (float)K), &st);
        Pass got = gpt_grads(m, loss);
        char what[80];
        snprintf(what, sizeof what, "GPT, %s, S %g, K %d, %s", policy_name, (double)S, K,
                 STRATEGIES[i]);
        assert_same_pass(&got, &ref, what);
        assert_int_equal(st.forwards, ckpt_formula_total(s, cfg.n_layer));
        free(got.grads);
    }
    free(ref.grads);
    free(tokens);
    free(targets);
    gpt_free(m);
}

static void test_gpt_matches_one_tape(void **state)
{
    (void)state;
    for (int k = 0; k < N_POLICIES; k++)
        check_gpt(TINY, 2, 4, POLICIES[k], 1.0f, 1);
    /* Loss scaling, and one of three accumulated micro-batches. */
    check_gpt(TINY, 2, 4, "fp16", 1024.0f, 3);
    check_gpt(TINY, 2, 4, "bf16", 1.0f, 3);
    check_gpt(TINY, 2, 4, "fp8", 256.0f, 2);
}

/* Big enough that products split rows over two threads and packing runs in several chunks. */
static void test_threaded_gpt_matches_one_tape(void **state)
{
    (void)state;
    par_set_threads(2);
    GptConfig cfg = { .vocab_size = 11, .max_seq = 16, .n_layer = 4, .n_head = 4,
                      .n_embd = 64, .tied = true, .fused_qkv = true };
    check_gpt(cfg, 4, 16, "bf16", 1.0f, 1);
    check_gpt(cfg, 4, 16, "fp8", 1.0f, 1);
    par_set_threads(1);
}

/* Peak act bytes of one checkpointed step, above what was in use before. */
static size_t peak_act(const Gpt *m, CkptStrategy s, const PrecisionPolicy *policy,
                       const int *tokens, int B, int T)
{
    size_t act0 = mem_current(MEM_ACT);
    mem_reset_peaks();
    pass_on_new_tape(m, s, policy, tokens, tokens, B, T, 1.0f, NULL);
    assert_int_equal(mem_current(MEM_ACT), act0);
    return mem_peak(MEM_ACT) - act0;
}

/* sqrt under bf16 holds about half of sqrt under fp32 (a few raw fp32 buffers remain:
 * layernorm's statistics, the loss's log-sum-exp, the token ids); vanilla's ratio is the same
 * within a few percent, so the checkpointed path packs as one tape does. */
static void test_gpt_sqrt_bf16_halves_act(void **state)
{
    (void)state;
    enum { B = 2, T = 16 };
    GptConfig cfg = { .vocab_size = 16, .max_seq = T, .n_layer = 4, .n_head = 2,
                      .n_embd = 32, .tied = true, .fused_qkv = true };
    Gpt *m = gpt_new(&cfg, 3);
    int tokens[B * T];
    for (int i = 0; i < B * T; i++)
        tokens[i] = (i * 7) % cfg.vocab_size;
    PrecisionPolicy bf16 = preset("bf16");
    CkptStrategy sq = parsed("sqrt"), vanilla = parsed("vanilla");
    double sqrt_ratio = (double)peak_act(m, sq, &bf16, tokens, B, T) /
                        (double)peak_act(m, sq, NULL, tokens, B, T);
    double vanilla_ratio = (double)peak_act(m, vanilla, &bf16, tokens, B, T) /
                           (double)peak_act(m, vanilla, NULL, tokens, B, T);
    printf("peak act, bf16 / fp32: sqrt %.4f, vanilla %.4f\n", sqrt_ratio, vanilla_ratio);
    assert_true(sqrt_ratio < 0.6);
    assert_true(fabs(sqrt_ratio - vanilla_ratio) < 0.05);
    gpt_free(m);
}

/* ---- the trainer: accumulation, loss scaling, master weights ------------------------------- */

static TrainerConfig trainer_config(const char *policy_name, const char *loss_scale)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = 11, .max_seq = 8, .n_layer = 3, .n_head = 2,
                           .n_embd = 16, .tied = true, .fused_qkv = true };
    c.seed = 5;
    c.clip = 0.5;
    c.policy = preset(policy_name);
    char err[160];
    assert_true(loss_scale_parse(loss_scale, &c.loss_scale, err, sizeof err));
    return c;
}

enum { TRAIN_STEPS = 6 };

/* Steps of K = 2 micro-batches for a vanilla trainer and a checkpointed one on the same
 * batches: the same loss, gradient norm, loss scale and skips at every step, then the same
 * gradients on one more accumulation (so the updates, and the weights, were the same).
 * Returns the steps skipped. */
static int check_trainer(const char *policy_name, const char *loss_scale, const char *ckpt)
{
    enum { B = 2, T = 8, K = 2, STEPS = TRAIN_STEPS };
    TrainerConfig cv = trainer_config(policy_name, loss_scale), cc = cv;
    cc.local.checkpoint = parsed(ckpt);
    Trainer *a = trainer_new(&cv), *b = trainer_new(&cc);
    int tokens[K * B * T], targets[K * B * T], skipped = 0;
    for (int step = 0; step <= STEPS; step++) {
        draw_tokens(&a->data_rng, cv.model.vocab_size, K * B * T, tokens, targets);
        if (step == STEPS) {
            Pass ga = { .loss = (float)trainer_accumulate(a, tokens, targets, B, T, K) };
            Pass gb = { .loss = (float)trainer_accumulate(b, tokens, targets, B, T, K) };
            Pass pa = gpt_grads(a->model, ga.loss), pb = gpt_grads(b->model, gb.loss);
            char what[80];
            snprintf(what, sizeof what, "trainer, %s, %s, %s", policy_name, loss_scale, ckpt);
            assert_same_pass(&pb, &pa, what);
            free(pa.grads);
            free(pb.grads);
            break;
        }
        TrainStepResult ra = trainer_step_accum(a, tokens, targets, B, T, K, 1e-2);
        TrainStepResult rb = trainer_step_accum(b, tokens, targets, B, T, K, 1e-2);
        assert_memory_equal(&ra.loss, &rb.loss, sizeof ra.loss);
        if (isfinite(ra.grad_norm))
            assert_memory_equal(&ra.grad_norm, &rb.grad_norm, sizeof ra.grad_norm);
        else
            assert_false(isfinite(rb.grad_norm));
        assert_true(ra.loss_scale == rb.loss_scale);
        assert_int_equal(ra.skipped, rb.skipped);
        skipped += ra.skipped;
    }
    print_message("%s %s %s: %d of %d steps skipped\n", policy_name, loss_scale, ckpt, skipped,
                  STEPS);
    trainer_free(a);
    trainer_free(b);
    return skipped;
}

static void test_trainer_accumulates_under_policy(void **state)
{
    (void)state;
    /* From 2^20 fp16 overflows: the first steps are skipped, the scale halves, and the
     * steps after them train. */
    int skipped = check_trainer("fp16", "dynamic:1048576", "budget:2");
    assert_true(skipped > 0 && skipped < TRAIN_STEPS);
    assert_int_equal(check_trainer("fp16", "dynamic", "sqrt"), 0);
    assert_int_equal(check_trainer("bf16", "none", "sqrt"), 0);
    assert_int_equal(check_trainer("bf16", "none", "memory-poor"), 0);
    assert_int_equal(check_trainer("fp8", "static:64", "every:2"), 0);
}

/* ---- fp8 delayed scaling ------------------------------------------------------------------- */

static void checkpoint_under_delayed_fp8(void *arg)
{
    (void)arg;
    PrecisionPolicy p = preset("fp8");
    p.fp8_scaling = POLICY_FP8_DELAYED;
    Gpt *m = gpt_new(&TINY, 1);
    int tokens[4] = { 1, 2, 3, 4 };
    pass_on_new_tape(m, parsed("sqrt"), &p, tokens, tokens, 1, 4, 1.0f,
                                           NULL);
    gpt_free(m);
}

static void test_delayed_fp8_refused(void **state)
{
    (void)state;
    assert_true(test_aborts(checkpoint_under_delayed_fp8, NULL));
}

int main(void)
{
    par_set_threads(1);
    par_set_split_always(true);    /* the small cases still take the threaded paths */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_chain_matches_one_tape),
        cmocka_unit_test(test_checkpoints_are_packed),
        cmocka_unit_test(test_gpt_matches_one_tape),
        cmocka_unit_test(test_threaded_gpt_matches_one_tape),
        cmocka_unit_test(test_gpt_sqrt_bf16_halves_act),
        cmocka_unit_test(test_trainer_accumulates_under_policy),
        cmocka_unit_test(test_delayed_fp8_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

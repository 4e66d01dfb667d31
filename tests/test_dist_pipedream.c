/* PipeDream, asynchronous 1F1B with weight stashing (dist/pipeline.h, kind PIPE_PIPEDREAM), on
 * up to 4 ranks against a single-process reference that applies the same stale weights:
 * before micro-batch n, the blocks (and ends) of stage s are set to the weights that stage had
 * after max(0, n - (p-1-s)) updates; one forward and backward seeded with S, the live weights
 * back, one update of every parameter. The stages' weights after the run (each stage p-1-s
 * updates behind, the micro-batches still in flight) and after pipe_drain are those of the
 * reference, bit for bit, in fp32 and under bf16; the losses each stage saw are the reference's;
 * the weight stash peaks at exactly p-1-s copies of the stage's weights, and the staleness is
 * p-1-s. Also: the window schedule as data and its simulated bubbles. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "autograd/mem.h"
#include "dist/pipeline.h"
#include "optim/step.h"
#include "tests/dist_test.h"

enum { B = 2, T = 8, M = 4, W = 3, N = M * W, V = 11 };

static void test_window_schedule(void **state)
{
    (void)state;
    char buf[256];
    PipeSchedule s = pipe_schedule_new(PIPE_PIPEDREAM, 4, 6);
    assert_string_equal(pipe_stage_string(&s, 0, buf, sizeof buf),
                        "F0 B-3 F1 B-2 F2 B-1 F3 B0 F4 B1 F5 B2");
    assert_string_equal(pipe_stage_string(&s, 3, buf, sizeof buf),
                        "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
    for (int st = 0; st < 4; st++)
        assert_int_equal(pipe_max_in_flight(&s, st), 4 - st);     /* as 1F1B, p - s */
    /* One window between two synchronisations (f = 1, b = 2): only the fill of the forwards
     * is idle, 3 of 3 m + 3 units on the last stage; in steady state nothing. */
    double busy[4];
    double span = pipe_simulate(&s, NULL, NULL, busy);
    assert_true(fabs(span - (3.0 * 6 + 3.0)) < 1e-12);
    assert_true(fabs(pipe_simulate_steady(4, 6, NULL, NULL, NULL)) < 1e-12);
    assert_true(pipe_bubble_formula(PIPE_PIPEDREAM, 4, 6) == 0.0);
    /* An imbalance is all that steady state leaves: stage 1 twice as slow sets the pace. */
    double f[4] = { 1, 2, 1, 1 }, b[4] = { 2, 4, 2, 2 };
    assert_true(fabs(pipe_simulate_steady(4, 6, f, b, NULL) - 3.0 * 0.5 / 4) < 1e-12);
    pipe_schedule_free(&s);
    PipeSchedKind k;
    assert_true(pipe_sched_parse("pipedream", &k) && k == PIPE_PIPEDREAM);
}

static TrainerConfig tiny(const char *policy)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = V, .max_seq = T, .n_layer = 4, .n_head = 2,
                           .n_embd = 8, .tied = false, .fused_qkv = true };
    c.clip = 0.0;
    c.seed = 5;
    policy_preset(policy, &c.policy);
    return c;
}

static void rows(int *tokens, int *targets, int n, uint64_t seed)
{
    Rng r = rng_new(seed, RNG_STREAM_DATA);
    dist_test_rows(&r, n * B, T, V, tokens, targets);
}

/* The stage of a parameter under the split first[p + 1]: its block's, or the ends'. */
static int stage_of(const Tensor *p, const int *first, int stages)
{
    int layer;
    if (sscanf(p->name, "blocks.%d.", &layer) == 1) {
        for (int s = 0; s < stages; s++)
            if (layer < first[s + 1])
                return s;
    }
    return strncmp(p->name, "wte.", 4) == 0 || strncmp(p->name, "wpe.", 4) == 0 ? 0
                                                                                 : stages - 1;
}

static unsigned char *stored(Tensor *p)
{
    if (p->dtype == DTYPE_F32)
        return (unsigned char *)p->data;
    tensor_release(p);
    return p->packed;
}

/* Every parameter's stored bytes, one version of the model. */
typedef struct {
    unsigned char *bytes;
    float         *scales;
} Version;

static Version take(Tensor *const *params, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += tensor_bytes(params[i]);
    Version v = { malloc(total), malloc((size_t)n * sizeof(float)) };
    for (size_t i = 0, at = 0; i < (size_t)n; at += tensor_bytes(params[i]), i++) {
        memcpy(v.bytes + at, stored(params[i]), tensor_bytes(params[i]));
        v.scales[i] = params[i]->scale;
    }
    return v;
}

/* Parameter i set to its version in vs[pick[i]]. */
static void put(Tensor *const *params, int n, const Version *vs, const long *pick)
{
    for (size_t i = 0, at = 0; i < (size_t)n; at += tensor_bytes(params[i]), i++) {
        memcpy(stored(params[i]), vs[pick[i]].bytes + at, tensor_bytes(params[i]));
        params[i]->scale = vs[pick[i]].scales[i];
    }
}

/* The reference: N micro-batches, each on the stale weights its stages used, one update each.
 * versions[v] after v updates (v = 0 .. N); losses[n]. */
static void reference(const TrainerConfig *cfg, const int *first, int stages, const int *tokens,
                      const int *targets, double lr, Version *versions, float *losses)
{
    Trainer *t = trainer_new(cfg);
    int n;
    Tensor *const *params = gpt_params(t->model, &n);
    long *pick = malloc((size_t)n * sizeof *pick);
    float S = loss_scale_value(&t->scaler);
    versions[0] = take(params, n);
    for (long mb = 0; mb < N; mb++) {
        for (int i = 0; i < n; i++) {
            long v = mb - (stages - 1 - stage_of(params[i], first, stages));
            pick[i] = v > 0 ? v : 0;
        }
        put(params, n, versions, pick);
        size_t at = (size_t)mb * B * T;
        losses[mb] = (float)step_micro_batch(t, NULL, tokens + at, targets + at, B, T, S);
        for (int i = 0; i < n; i++)
            pick[i] = mb;
        put(params, n, versions, pick);        /* the live weights take the update */
        TrainStepResult r = { 0 };
        step_finish(t, NULL, lr, &r);
        versions[mb + 1] = take(params, n);
    }
    free(pick);
    trainer_free(t);
}

/* This stage's parameters equal to version v of the reference, byte for byte. */
static bool stage_is(Pipeline *pp, const Version *v)
{
    int n;
    Tensor *const *params = gpt_params(pipe_trainer(pp)->model, &n);
    bool ok = true;
    for (size_t i = 0, at = 0; i < (size_t)n; at += tensor_bytes(params[i]), i++) {
        if (!pipe_owns(pp, params[i]->name))
            continue;
        ok = ok && memcmp(stored(params[i]), v->bytes + at, tensor_bytes(params[i])) == 0;
        ok = ok && params[i]->scale == v->scales[i];
    }
    return ok;
}

static void check_pipedream(const char *policy)
{
    int stages = dist_world()->size < 4 ? dist_world()->size : 4;
    DistComm *c = dist_test_comm(stages);
    bool ok = true;
    if (c) {
        int first[5];
        char err[200];
        if (!pipe_split_parse(stages == 3 ? "2,1,1" : NULL, 4, stages, first, err, sizeof err))
            fail_msg("%s", err);
        TrainerConfig cfg = tiny(policy);
        int *tokens = malloc((size_t)N * B * T * sizeof *tokens);
        int *targets = malloc((size_t)N * B * T * sizeof *targets);
        rows(tokens, targets, N, 9);
        const double lr = 3e-2;
        Version versions[N + 1];
        float losses[N];
        reference(&cfg, first, stages, tokens, targets, lr, versions, losses);

        size_t param0 = mem_current(MEM_PARAM);
        Pipeline *pp = pipe_new(&cfg, c, PIPE_PIPEDREAM, M, first);
        int s = pipe_stage(pp), w = stages - 1 - s;
        size_t held = mem_current(MEM_PARAM) - param0;      /* the whole model, no stash */
        double step_loss[W];
        for (int k = 0; k < W; k++) {
            size_t at = (size_t)k * M * B * T;
            step_loss[k] = pipe_step(pp, tokens + at, targets + at, B, T, lr).loss;
        }
        /* Stage s has updated after every backward but its w in flight. */
        ok = ok && pipe_updates(pp) == N - w && stage_is(pp, &versions[N - w]);
        /* The w in flight hold w copies of the stage's weights; none beyond at the peak. */
        size_t weights = 0;
        int n;
        Tensor *const *params = gpt_params(pipe_trainer(pp)->model, &n);
        for (int i = 0; i < n; i++)
            if (pipe_owns(pp, params[i]->name))
                weights += tensor_bytes(params[i]);
        ok = ok && pipe_stage_weight_bytes(pp) == weights;
        ok = ok && pipe_stash_peak(pp) == (size_t)w * weights;
        ok = ok && mem_current(MEM_PARAM) - param0 - held == (size_t)w * weights;
        int most;
        double mean = pipe_staleness(pp, &most);
        ok = ok && most == w && mean <= w && mean > (w > 0 ? 0.5 * w : -1.0);
        /* The losses this stage saw: the micro-batches it backpropagated in each step. */
        for (int k = 0; k < W; k++) {
            long lo = (long)k * M - w, hi = (long)k * M + M - 1 - w;
            lo = lo > 0 ? lo : 0;
            double sum = 0.0;
            for (long mb = lo; mb <= hi; mb++)
                sum += losses[mb];
            ok = ok && step_loss[k] == sum / (double)(hi - lo + 1);
        }
        /* The drain: every micro-batch's update applied, the reference's last weights. */
        pipe_drain(pp);
        ok = ok && pipe_updates(pp) == N && stage_is(pp, &versions[N]);
        ok = ok && mem_current(MEM_PARAM) - param0 == held;         /* the stash is gone */
        if (getenv("PIPE_DEBUG"))
            fprintf(stderr, "stage %d: stash peak %zu = %d x %zu, staleness %.3f max %d\n", s,
                    pipe_stash_peak(pp), w, weights, mean, most);
        pipe_free(pp);
        for (int v = 0; v <= N; v++) {
            free(versions[v].bytes);
            free(versions[v].scales);
        }
        free(tokens);
        free(targets);
        dist_comm_free(c);
    }
    assert_true(dist_test_all(ok));
}

static void test_fp32_equals_stale_reference(void **state)
{
    (void)state;
    check_pipedream("fp32");
}

static void test_bf16_equals_stale_reference(void **state)
{
    (void)state;
    check_pipedream("bf16");
}

int main(int argc, char **argv)
{
    dist_test_init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_schedule),
        cmocka_unit_test(test_fp32_equals_stale_reference),
        cmocka_unit_test(test_bf16_equals_stale_reference),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dist_finalize();
    return failed;
}

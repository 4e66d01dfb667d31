/* Every strategy of the one step driver (optim/step.h) against the single-process step of the
 * same global batch, bit for bit: DDP and ZeRO levels 1-3 on 4 ranks against the one process
 * that computes each rank's micro-batch gradient from zero and adds them in rank order
 * (ddp_reference_step: the additions an all-reduce in rank order makes), the pipeline on 4
 * stages against one process accumulating the same micro-batches (trainer_step_accum); vanilla
 * and sqrt checkpointing, three steps each, every weight compared after each step. With the
 * gradients on a bf16 wire (dist/wire.h), DDP and ZeRO against the same reference rounding each
 * rank's gradient to bf16 (and DDP's sum again), and the gradient bytes exactly half fp32's. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dist/ddp.h"
#include "dist/pipeline.h"
#include "dist/zero.h"
#include "optim/step.h"
#include "tests/dist_test.h"

enum { V = 13, T = 8, B = 2, N = 4, STEPS = 3 };

static TrainerConfig tiny_config(const char *checkpoint, bool tied)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = V, .max_seq = T, .n_layer = 4, .n_head = 2,
                           .n_embd = 16, .tied = tied, .fused_qkv = true };
    c.seed = 11;
    c.clip = 1e6;               /* the norm measured, every rank's the same, nothing clipped */
    char err[128];
    assert_true(ckpt_parse(checkpoint, &c.local.checkpoint, err, sizeof err));
    return c;
}

/* The bytes of a's and b's parameters of the same names (b's that a holds): equal or not. */
static bool same_weights(const Trainer *a, const Trainer *b, bool (*owned)(const char *, void *),
                         void *ctx)
{
    int na, nb;
    Tensor *const *pa = gpt_params(a->model, &na);
    Tensor *const *pb = gpt_params(b->model, &nb);
    if (na != nb)
        return false;
    for (int i = 0; i < na; i++) {
        if (owned && !owned(pa[i]->name, ctx))
            continue;
        if (memcmp(pa[i]->data, pb[i]->data, pa[i]->size * sizeof(float)) != 0) {
            print_message("%s differs\n", pa[i]->name);
            return false;
        }
    }
    return true;
}

/* ---- data parallel: DDP, ZeRO 1-3 ----------------------------------------------------------- */

/* level 0: DDP. Every rank runs the reference too, on the whole global batch; *grad_bytes
 * (if not NULL) gets this rank's gradient bytes sent over the steps. */
static bool data_parallel_on_wire(const char *checkpoint, int level, DistWire wire,
                                  uint64_t *grad_bytes)
{
    DistComm *c = dist_test_comm(N);
    if (!c)
        return true;
    TrainerConfig cfg = tiny_config(checkpoint, true);
    Trainer *one = trainer_new(&cfg), *mine = trainer_new(&cfg);
    Ddp *ddp = NULL;
    Zero *zero = NULL;
    if (level == 0)
        ddp = ddp_new(c, mine, &(DdpConfig){ .bucket_bytes = 4096, .overlap = true,
                                             .wire = wire });
    else
        zero = zero_new(c, mine, level);
    if (zero)
        zero_set_wire(zero, wire);
    uint64_t sent = 0;
    int tokens[N * B * T], targets[N * B * T];
    Rng rng = rng_new(5, RNG_STREAM_DATA);
    bool ok = true;
    size_t at = (size_t)c->rank * B * T;
    for (int s = 0; s < STEPS; s++) {
        dist_test_rows(&rng, N * B, T, V, tokens, targets);
        TrainStepResult want = ddp_reference_step_wire(one, tokens, targets, B, T, N, 1, wire,
                                                       ddp != NULL, 1e-2);
        TrainStepResult got;
        if (ddp) {
            DdpStepResult r = ddp_step(ddp, tokens + at, targets + at, B, T, 1e-2);
            got = r.r;
            sent += r.grad_bytes_sent;
        } else {
            ZeroStepResult r = zero_step(zero, tokens + at, targets + at, B, T, 1e-2);
            got = r.r;
            sent += r.grad_bytes_sent;
        }
        ok = ok && got.loss == want.loss && got.updated == want.updated;
        if (zero)
            zero_gather_weights(zero);
        ok = ok && same_weights(mine, one, NULL, NULL);
        if (zero)
            zero_shard_weights(zero);
    }
    ddp_free(ddp);
    zero_free(zero);
    trainer_free(one);
    trainer_free(mine);
    dist_comm_free(c);
    if (grad_bytes)
        *grad_bytes = sent;
    return ok;
}

static bool data_parallel_matches(const char *checkpoint, int level)
{
    return data_parallel_on_wire(checkpoint, level, DIST_WIRE_FP32, NULL);
}

static void test_ddp(void **s)
{
    (void)s;
    if (dist_world()->size < N)
        skip();
    assert_true(dist_test_all(data_parallel_matches("vanilla", 0)));
    assert_true(dist_test_all(data_parallel_matches("sqrt", 0)));
}

static void test_zero_levels(void **s)
{
    (void)s;
    if (dist_world()->size < N)
        skip();
    for (int level = 1; level <= 3; level++) {
        assert_true(dist_test_all(data_parallel_matches("vanilla", level)));
        assert_true(dist_test_all(data_parallel_matches("sqrt", level)));
    }
}

/* fp32 weights and activations, bf16 gradients on the wire only: every term really rounded. */
static void test_bf16_wire(void **s)
{
    (void)s;
    if (dist_world()->size < N)
        skip();
    for (int level = 0; level <= 3; level++) {
        uint64_t fp32_bytes = 0, bf16_bytes = 0;
        bool fp32 = data_parallel_on_wire("vanilla", level, DIST_WIRE_FP32, &fp32_bytes);
        bool bf16 = data_parallel_on_wire("vanilla", level, DIST_WIRE_BF16, &bf16_bytes);
        print_message("level %d: gradient bytes sent by this rank over %d steps: fp32 %llu, "
                      "bf16 %llu\n", level, STEPS, (unsigned long long)fp32_bytes,
                      (unsigned long long)bf16_bytes);
        assert_true(dist_test_all(fp32 && bf16));
        assert_true(dist_test_all(fp32_bytes > 0 && bf16_bytes * 2 == fp32_bytes));
    }
}

/* e5m2 on the wire, at the collective: rank r's vector is x_r[i] = (i - 300) (r + 1) / 7;
 * the reduce-scatter's shard equals the per-piece rounding (each piece with its own scale) added
 * in rank order; the all-reduce leaves the same bits on every rank; a piece costs 4 + n bytes. */
static void test_e5m2_wire(void **s)
{
    (void)s;
    if (dist_world()->size < N)
        skip();
    DistComm *c = dist_test_comm(N);
    if (!c)
        return;
    enum { n = 1001 };
    float x[n], want[n], piece[n], shard[n], all[n];
    for (int i = 0; i < n; i++)
        x[i] = (float)(i - 300) * (float)(c->rank + 1) / 7.0f;
    size_t counts[N], begin = 0;
    for (int k = 0; k < N; k++)
        counts[k] = dist_shard_count(n, N, k);
    for (int k = 0; k < c->rank; k++)
        begin += counts[k];
    size_t mine = counts[c->rank];
    for (int r = 0; r < N; r++) {           /* what rank r sends me, as the wire rounds it */
        for (size_t i = 0; i < mine; i++)
            piece[i] = (float)((int)(begin + i) - 300) * (float)(r + 1) / 7.0f;
        dist_wire_round(DIST_WIRE_E5M2, piece, piece, mine);
        for (size_t i = 0; i < mine; i++)
            want[i] = r == 0 ? piece[i] : want[i] + piece[i];
    }
    uint64_t sent0 = c->bytes_sent;
    dist_reduce_scatter_sum_wire(c, x, shard, counts, DIST_WIRE_E5M2);
    uint64_t sent = c->bytes_sent - sent0;
    bool same = memcmp(shard, want, mine * sizeof *shard) == 0;
    uint64_t expect = 0;
    for (int k = 0; k < N; k++)
        if (k != c->rank)
            expect += sizeof(float) + counts[k];
    memcpy(all, x, sizeof all);
    DistAllreduce h;
    dist_iallreduce_start_wire(c, &h, all, n, 0, DIST_WIRE_E5M2);
    dist_iallreduce_wait(&h);
    /* Every rank's result, compared on rank 0 through a max of the sum of bits. */
    double sig = 0.0, err = 0.0;
    for (int i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &all[i], sizeof b);
        sig += (double)b * (i + 1);
        double exact = (i - 300) * 10.0 / 7.0;      /* sum over r of (r + 1) = 10 */
        err = fmax(err, fabs(all[i] - exact) / fmax(1.0, fabs(exact)));
    }
    bool agree = dist_max_double(c, sig) == sig && -dist_max_double(c, -sig) == sig;
    dist_comm_free(c);
    print_message("e5m2 all-reduce: worst relative error %.3g (e5m2 keeps 2 mantissa bits)\n",
                  err);
    assert_true(dist_test_all(same && sent == expect && agree && err < 0.3));
}

/* ---- the pipeline --------------------------------------------------------------------------- */

static bool stage_owns(const char *name, void *ctx) { return pipe_owns(ctx, name); }

static bool pipeline_matches(const char *checkpoint, PipeSchedKind kind)
{
    DistComm *c = dist_test_comm(N);
    if (!c)
        return true;
    enum { M = 4 };
    TrainerConfig cfg = tiny_config(checkpoint, false);
    int first[N + 1] = { 0, 1, 2, 3, 4 };
    Pipeline *pp = pipe_new(&cfg, c, kind, M, first);
    Trainer *one = trainer_new(&cfg);
    int tokens[M * B * T], targets[M * B * T];
    Rng rng = rng_new(6, RNG_STREAM_DATA);
    bool ok = true;
    for (int s = 0; s < STEPS; s++) {
        dist_test_rows(&rng, M * B, T, V, tokens, targets);
        TrainStepResult want = trainer_step_accum(one, tokens, targets, B, T, M, 1e-2);
        TrainStepResult got = pipe_step(pp, tokens, targets, B, T, 1e-2);
        ok = ok && got.loss == want.loss;
        ok = ok && same_weights(pipe_trainer(pp), one, stage_owns, pp);
    }
    pipe_free(pp);
    trainer_free(one);
    dist_comm_free(c);
    return ok;
}

static void test_pipeline(void **s)
{
    (void)s;
    if (dist_world()->size < N)
        skip();
    assert_true(dist_test_all(pipeline_matches("vanilla", PIPE_1F1B)));
    assert_true(dist_test_all(pipeline_matches("sqrt", PIPE_GPIPE)));
}

int main(int argc, char **argv)
{
    dist_test_init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ddp),
        cmocka_unit_test(test_zero_levels),
        cmocka_unit_test(test_bf16_wire),
        cmocka_unit_test(test_e5m2_wire),
        cmocka_unit_test(test_pipeline),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dist_finalize();
    return failed;
}

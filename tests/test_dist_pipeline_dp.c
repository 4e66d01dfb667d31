/* Pipeline x data parallel (dist/pipeline.h, pipe_set_replicas) on 4 ranks: 2 replicas of a
 * 2-stage pipeline, the world split by replica (the pipelines) and by stage (the data-parallel
 * groups). Each replica runs m = 2 micro-batches of the global batch's 4; each stage's gradients
 * are summed over the replicas; after every step each rank's parameters equal, bit for bit, the
 * single-process step of the same global batch (ddp_reference_step_accum with N = 2 replicas,
 * K = 2), in fp32, for 1F1B and GPipe, vanilla and with checkpointing inside the stages; the
 * loss is equal too. With ZeRO-1 inside the data groups (pipe_set_zero) the same bits again,
 * and each rank's optimizer holds its shard of its stage's state: the values of
 * dist_shard_count over the group, per slot. Needs 4 ranks (skipped with fewer). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dist/ddp.h"
#include "dist/pipeline.h"
#include "dist/zero.h"
#include "tests/dist_test.h"

enum { B = 2, T = 8, M = 2, D = 2, P = 2, V = 11, STEPS = 3 };

static TrainerConfig tiny(const char *ckpt)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = V, .max_seq = T, .n_layer = 4, .n_head = 2,
                           .n_embd = 8, .tied = false, .fused_qkv = true };
    c.clip = 0.0;
    c.seed = 11;
    char err[200];
    if (ckpt && !ckpt_parse(ckpt, &c.local.checkpoint, err, sizeof err))
        fail_msg("%s", err);
    return c;
}

static bool owned_equal(Pipeline *pp, Trainer *ref)
{
    int n;
    Tensor *const *mine = gpt_params(pipe_trainer(pp)->model, &n);
    Tensor *const *want = gpt_params(ref->model, &n);
    bool ok = true;
    for (int i = 0; i < n; i++)
        if (pipe_owns(pp, mine[i]->name))
            ok = ok && memcmp(mine[i]->data, want[i]->data, mine[i]->size * sizeof(float)) == 0;
    return ok;
}

/* The optimizer's state values on this rank: under ZeRO-1, the shard of each owned parameter. */
static bool state_sharded(Pipeline *pp, int replica)
{
    const Optim *o = pipe_trainer(pp)->optim;
    Tensor *const *params;
    int n;
    params = gpt_params(pipe_trainer(pp)->model, &n);
    size_t want = 0, have = 0;
    for (int i = 0; i < n; i++)
        if (pipe_owns(pp, params[i]->name))
            want += dist_shard_count(params[i]->size, D, replica) * (size_t)o->n_slots;
    for (int i = 0; i < o->n * o->n_slots; i++)
        have += o->state[i]->size;
    return o->n_slots > 0 && have == want;
}

static void check(PipeSchedKind kind, const char *ckpt, int zero_level)
{
    DistComm *w = dist_world();
    if (w->size < D * P)
        skip();
    DistComm *four = dist_test_comm(D * P);
    bool ok = true;
    if (four) {
        int replica = four->rank / P, stage = four->rank % P;
        DistComm *pipe = dist_split(four, replica, stage);
        DistComm *dp = dist_split(four, stage, replica);
        int first[P + 1];
        char err[200];
        if (!pipe_split_parse(NULL, 4, P, first, err, sizeof err))
            fail_msg("%s", err);
        TrainerConfig cfg = tiny(ckpt), rcfg = tiny(NULL);
        Pipeline *pp = pipe_new(&cfg, pipe, kind, M, first);
        pipe_set_replicas(pp, dp);
        if (zero_level) {
            pipe_set_zero(pp, zero_level);
            ok = ok && state_sharded(pp, replica);
        }
        Trainer *ref = trainer_new(&rcfg);
        int tokens[D * M * B * T], targets[D * M * B * T];
        Rng rng = rng_new(4, RNG_STREAM_DATA);
        size_t mine = (size_t)replica * M * B * T;
        for (int step = 0; step < STEPS; step++) {
            dist_test_rows(&rng, D * M * B, T, V, tokens, targets);
            TrainStepResult a = pipe_step(pp, tokens + mine, targets + mine, B, T, 1e-2);
            TrainStepResult b = ddp_reference_step_accum(ref, tokens, targets, B, T, D, M, 1e-2);
            ok = ok && a.loss == b.loss && a.updated == b.updated;
            ok = ok && fabs(a.grad_norm - b.grad_norm) <= 1e-9 * b.grad_norm;
            ok = ok && owned_equal(pp, ref);
        }
        pipe_free(pp);
        trainer_free(ref);
        dist_comm_free(pipe);
        dist_comm_free(dp);
        dist_comm_free(four);
    }
    assert_true(dist_test_all(ok));
}

static void test_1f1b_two_replicas_bit_for_bit(void **state)
{
    (void)state;
    check(PIPE_1F1B, NULL, 0);
}

static void test_gpipe_two_replicas_checkpointed_bit_for_bit(void **state)
{
    (void)state;
    check(PIPE_GPIPE, "sqrt", 0);
}

static void test_1f1b_zero1_in_the_data_groups_bit_for_bit(void **state)
{
    (void)state;
    check(PIPE_1F1B, NULL, 1);
}

static void test_gpipe_zero1_checkpointed_bit_for_bit(void **state)
{
    (void)state;
    check(PIPE_GPIPE, "sqrt", 1);
}

int main(int argc, char **argv)
{
    dist_test_init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_1f1b_two_replicas_bit_for_bit),
        cmocka_unit_test(test_gpipe_two_replicas_checkpointed_bit_for_bit),
        cmocka_unit_test(test_1f1b_zero1_in_the_data_groups_bit_for_bit),
        cmocka_unit_test(test_gpipe_zero1_checkpointed_bit_for_bit),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dist_finalize();
    return failed;
}

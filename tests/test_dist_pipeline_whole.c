/* The pipeline's trainer whole (dist/pipeline.h: pipe_new_on, pipe_share_weights,
 * pipe_give_back), on up to 4 ranks against one process training on the same micro-batches:
 * after a pipeline's steps, every rank's trainer holds the weights, the fp32 masters, every
 * optimizer state tensor and buffer and the step count one process holds, bit for bit (untied
 * head, no clipping); a trainer that has trained in one process goes on in a pipeline from its
 * state (what --load does) and comes back equal again. What train_gpt's --save and --load under
 * --parallel pipeline rest on. */
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
#include "tests/dist_test.h"

enum { B = 2, T = 8, M = 3, V = 11 };

static TrainerConfig tiny(const char *policy, TrainOptimizer opt)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = V, .max_seq = T, .n_layer = 4, .n_head = 2,
                           .n_embd = 8, .tied = false, .fused_qkv = true };
    c.clip = 0.0;
    c.seed = 5;
    c.optimizer = opt;
    policy_preset(policy, &c.policy);
    return c;
}

static void batch(int *tokens, int *targets, uint64_t seed)
{
    Rng r = rng_new(seed, RNG_STREAM_DATA);
    dist_test_rows(&r, M * B, T, V, tokens, targets);
}

/* Every parameter's storage and scale, every state tensor and buffer, the step count. */
static bool same_trainers(Trainer *a, Trainer *b)
{
    int n;
    Tensor *const *pa = gpt_params(a->model, &n);
    Tensor *const *pb = gpt_params(b->model, &n);
    bool ok = a->optim->step == b->optim->step && a->optim->n == b->optim->n &&
              a->step == b->step && a->optim->n_slots == b->optim->n_slots &&
              optim_buffer_count(a->optim) == optim_buffer_count(b->optim);
    for (int i = 0; ok && i < n; i++) {
        ok = pa[i]->dtype == pb[i]->dtype && pa[i]->scale == pb[i]->scale &&
             memcmp(pa[i]->packed ? pa[i]->packed : (void *)pa[i]->data,
                    pb[i]->packed ? pb[i]->packed : (void *)pb[i]->data,
                    tensor_bytes(pa[i])) == 0;
        if (!ok)
            print_message("weights of %s differ\n", pa[i]->name);
        ok = ok && a->optim->decay[i] == b->optim->decay[i];
    }
    for (int i = 0; ok && i < a->optim->n * a->optim->n_slots; i++) {
        ok = memcmp(a->optim->state[i]->data, b->optim->state[i]->data,
                    a->optim->state[i]->size * sizeof(float)) == 0;
        if (!ok)
            print_message("optimizer state %d differs\n", i);
    }
    for (int i = 0; ok && i < optim_buffer_count(a->optim); i++) {
        OptimBuffer *x = optim_buffer(a->optim, i), *y = optim_buffer(b->optim, i);
        ok = strcmp(x->name, y->name) == 0 && optim_buffer_bytes(x) == optim_buffer_bytes(y) &&
             memcmp(x->data, y->data, optim_buffer_bytes(x)) == 0;
        if (!ok)
            print_message("optimizer buffer %s differs\n", x->name);
    }
    return ok;
}

/* One process trains `before` steps; the same trainer then trains 2 more in a pipeline of each
 * schedule (pipe_new_on), comes back whole on every rank, and equals a process that trained
 * all of them; then both take one more step alone and are still equal. */
static void check_round_trip(const char *policy, TrainOptimizer opt, int before)
{
    int first[5], tokens[M * B * T], targets[M * B * T];
    int p = dist_world()->size < 4 ? dist_world()->size : 4;
    DistComm *c = dist_test_comm(p);
    bool ok = true;
    if (c) {
        char err[200];
        if (!pipe_split_parse(p == 3 ? "2,1,1" : NULL, 4, p, first, err, sizeof err))
            fail_msg("%s", err);
        TrainerConfig cfg = tiny(policy, opt);
        for (int k = 0; k < PIPE_NSCHED; k++) {
            Trainer *ref = trainer_new(&cfg), *t = trainer_new(&cfg);
            int step = 0;
            for (; step < before; step++) {
                batch(tokens, targets, 10 + (uint64_t)step);
                trainer_step_accum(ref, tokens, targets, B, T, M, 1e-2);
                trainer_step_accum(t, tokens, targets, B, T, M, 1e-2);
            }
            Pipeline *pp = pipe_new_on(c, t, (PipeSchedKind)k, M, first);
            for (; step < before + 2; step++) {
                batch(tokens, targets, 10 + (uint64_t)step);
                TrainStepResult a = pipe_step(pp, tokens, targets, B, T, 1e-2);
                TrainStepResult b = trainer_step_accum(ref, tokens, targets, B, T, M, 1e-2);
                ok = ok && a.loss == b.loss;
            }
            pipe_give_back(pp);
            ok = ok && same_trainers(t, ref);
            batch(tokens, targets, 99);
            TrainStepResult a = trainer_step_accum(t, tokens, targets, B, T, M, 1e-2);
            TrainStepResult b = trainer_step_accum(ref, tokens, targets, B, T, M, 1e-2);
            ok = ok && a.loss == b.loss && a.grad_norm == b.grad_norm && same_trainers(t, ref);
            trainer_free(t);
            trainer_free(ref);
        }
        dist_comm_free(c);
    }
    assert_true(dist_test_all(ok));
}

static void test_fp32_adamw_given_back_whole(void **state)
{
    (void)state;
    check_round_trip("fp32", TRAIN_ADAMW, 0);
}

static void test_bf16_masters_given_back_whole(void **state)
{
    (void)state;
    check_round_trip("bf16", TRAIN_ADAMW, 0);
}

static void test_trained_trainer_continues_in_a_pipeline(void **state)
{
    (void)state;
    check_round_trip("fp32", TRAIN_ADAMW, 2);
    check_round_trip("bf16", TRAIN_SGD, 1);
}

/* pipe_share_weights: a stage's stale copies of the others' weights become theirs. */
static void test_shared_weights_are_the_owners(void **state)
{
    (void)state;
    int first[5], tokens[M * B * T], targets[M * B * T];
    int p = dist_world()->size < 4 ? dist_world()->size : 4;
    DistComm *c = dist_test_comm(p);
    bool ok = true;
    if (c) {
        char err[200];
        if (!pipe_split_parse(p == 3 ? "2,1,1" : NULL, 4, p, first, err, sizeof err))
            fail_msg("%s", err);
        TrainerConfig cfg = tiny("bf16", TRAIN_ADAMW);
        Pipeline *pp = pipe_new(&cfg, c, PIPE_1F1B, M, first);
        Trainer *ref = trainer_new(&cfg);
        batch(tokens, targets, 3);
        pipe_step(pp, tokens, targets, B, T, 1e-2);
        trainer_step_accum(ref, tokens, targets, B, T, M, 1e-2);
        pipe_share_weights(pp);
        int n;
        Tensor *const *a = gpt_params(pipe_trainer(pp)->model, &n);
        Tensor *const *b = gpt_params(ref->model, &n);
        for (int i = 0; i < n; i++)
            ok = ok && a[i]->scale == b[i]->scale &&
                 memcmp(a[i]->packed ? a[i]->packed : (void *)a[i]->data,
                        b[i]->packed ? b[i]->packed : (void *)b[i]->data,
                        tensor_bytes(a[i])) == 0;
        /* and the pipeline trains on as before */
        batch(tokens, targets, 4);
        TrainStepResult x = pipe_step(pp, tokens, targets, B, T, 1e-2);
        TrainStepResult y = trainer_step_accum(ref, tokens, targets, B, T, M, 1e-2);
        ok = ok && x.loss == y.loss;
        trainer_free(ref);
        pipe_free(pp);
        dist_comm_free(c);
    }
    assert_true(dist_test_all(ok));
}

int main(int argc, char **argv)
{
    dist_test_init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32_adamw_given_back_whole),
        cmocka_unit_test(test_bf16_masters_given_back_whole),
        cmocka_unit_test(test_trained_trainer_continues_in_a_pipeline),
        cmocka_unit_test(test_shared_weights_are_the_owners),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dist_finalize();
    return failed;
}

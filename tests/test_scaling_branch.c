/* Cooldown branches (analysis/scaling_branch.h) at a tiny size: a branch is the warmup-stable-
 * decay run of its length, bit for bit, though it was cooled down from a snapshot of a trunk
 * that went on past it; the trunk's own point is the constant-rate run of that length; each
 * point's `trained` adds up to the steps really trained (the trunk once, plus the cooldowns),
 * fewer than separate runs; and the points file read back exactly, a bad schedule name refused
 * by line and column. */
#include "tests/test_helpers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "analysis/scaling_branch.h"
#include "optim/schedule.h"

static char text_path[64], snap_path[64];

static int make_text(void **state)
{
    (void)state;
    snprintf(text_path, sizeof text_path, "/tmp/test_scaling_branch_%d.txt", (int)getpid());
    snprintf(snap_path, sizeof snap_path, "/tmp/test_scaling_branch_%d.st", (int)getpid());
    FILE *f = fopen(text_path, "w");
    if (!f)
        return -1;
    const char *words[] = { "the ", "cat ", "sat ", "on ", "a ", "mat.\n" };
    Rng rng = rng_new(5, 1);
    for (int i = 0; i < 4000; i++)
        fputs(words[rng_below(&rng, 6)], f);
    return fclose(f);
}

static int remove_text(void **state)
{
    (void)state;
    remove(snap_path);
    return remove(text_path);
}

static ScalingTrainConfig tiny_config(void)
{
    ScalingTrainConfig cfg = scaling_train_defaults();
    cfg.batch = 2;
    cfg.seq = 16;
    cfg.eval_windows = 16;
    cfg.lr = 0.03;
    cfg.seed = 7;
    return cfg;
}

/* A run from scratch of `steps` steps under sc's shape: its validation loss. */
static double run_from_scratch(const Dataset *ds, const ScalingTrainConfig *cfg,
                               const SchedConfig *sc, long steps)
{
    TrainerConfig tc = trainer_config_default();
    tc.model.vocab_size = dataset_vocab_size(ds);
    tc.model.max_seq = cfg->seq;
    tc.model.n_layer = 1;
    tc.model.n_embd = 8;
    tc.model.n_head = 1;
    tc.seed = cfg->seed;
    Trainer *tr = trainer_new(&tc);
    int tokens[32], targets[32];
    for (long s = 0; s < steps; s++) {
        dataset_train_batch(ds, &tr->data_rng, cfg->batch, tokens, targets);
        trainer_step(tr, tokens, targets, cfg->batch, cfg->seq, sched_lr(sc, s));
    }
    double loss = scaling_validation_loss(tr, ds, cfg->eval_windows);
    trainer_free(tr);
    return loss;
}

static void test_branch_is_the_wsd_run(void **state)
{
    (void)state;
    char err[256];
    ScalingTrainConfig cfg = tiny_config();
    Dataset *ds = dataset_open_text(text_path, cfg.seq, err, sizeof err);
    assert_non_null(ds);
    /* two lengths, 40 and 100 steps; the cooldowns are the last 20%: 8 and 20 steps */
    ScalingTarget t[2] = { { 1e6, SCALING_COUNT_ALL, 40, true },
                           { 2e6, SCALING_COUNT_ALL, 100, true } };
    ScalingPoint p[4];
    int n = scaling_train_branches(ds, &cfg, 1, 8, 1, t, 2, 0.2, snap_path, NULL, "t", p, err,
                                   sizeof err);
    assert_int_equal(n, 4);
    long warmup = scaling_branch_warmup(&cfg, 40);
    assert_int_equal(warmup, 2);                 /* 5% of 40 */
    double trained = 0;
    for (int i = 0; i < n; i++) {
        SchedConfig sc = sched_defaults();
        sc.base_lr = scaling_lr_for(&cfg, 8);
        sc.base_batch = sc.batch = cfg.batch;
        sc.warmup = SCHED_WARMUP_GRADUAL;
        sc.warmup_steps = warmup;
        sc.total_steps = p[i].steps;
        if (p[i].schedule == SCALING_SCHED_COOLDOWN) {
            sc.decay = SCHED_DECAY_WSD;
            sc.cooldown_steps = p[i].steps / 5;
            sc.cooldown = SCHED_COOLDOWN_1SQRT;
        }
        /* the same bits: the branch's batches are the trunk's, from the snapshot's data RNG */
        assert_true(p[i].val_loss == run_from_scratch(ds, &cfg, &sc, p[i].steps));
        assert_true(p[i].D == (double)p[i].steps * cfg.batch * cfg.seq);
        assert_true(p[i].N_all > p[i].N_nonemb);
        trained += p[i].trained;
    }
    /* the trunk's 100 steps once, and the cooldowns' 8 + 20, against 140 for separate runs */
    assert_true(trained == (100.0 + 8 + 20) * cfg.batch * cfg.seq);
    dataset_free(ds);
}

static void test_points_file(void **state)
{
    (void)state;
    char path[64], err[256];
    snprintf(path, sizeof path, "/tmp/test_scaling_points_%d.tsv", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; SCALING_POINT_COLUMNS[i]; i++)
        fprintf(f, "%s%s", i ? "\t" : "", SCALING_POINT_COLUMNS[i]);
    fprintf(f, "\n1\t8\t1\t2\t888\t1920\tall\tcooldown\t1e10\t100\t25600\t0.04\t2.3456\t"
               "5120\t1.5e9\t0.5\n");
    fprintf(f, "1\t8\t1\t2\t888\t1920\tnonemb\tconstant\t1e10\t200\t51200\t0.04\t2.5\t"
               "5120\t1.5e9\t0.5\n");
    fclose(f);
    ScalingPoint p[4];
    int n = 0;
    assert_true(scaling_points_read(path, p, 4, &n, err, sizeof err));
    assert_int_equal(n, 2);
    assert_int_equal(p[0].count, SCALING_COUNT_ALL);
    assert_int_equal(p[0].schedule, SCALING_SCHED_COOLDOWN);
    assert_int_equal(p[1].count, SCALING_COUNT_NONEMB);
    assert_int_equal(p[1].schedule, SCALING_SCHED_CONSTANT);
    assert_true(p[0].val_loss == 2.3456 && p[0].N_all == 1920 && p[0].seed == 2);
    assert_true(p[1].steps == 200 && p[1].budget == 1e10);

    f = fopen(path, "a");
    fprintf(f, "1\t8\t1\t2\t888\t1920\tall\twarm\t1e10\t100\t25600\t0.04\t2.3\t1\t1\t1\n");
    fclose(f);
    assert_false(scaling_points_read(path, p, 4, &n, err, sizeof err));
    assert_non_null(strstr(err, "line 4"));
    assert_non_null(strstr(err, "'schedule'"));
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_branch_is_the_wsd_run, make_text, remove_text),
        cmocka_unit_test(test_points_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

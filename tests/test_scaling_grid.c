/* The grid machinery of scaling_laws (analysis/scaling_grid.h) at a tiny size: the
 * non-embedding parameter count against 12 L C^2 + 13 L C + 2 C by hand, the steps a budget
 * buys, one run trained end to end on a small text (D and C as the budget says, a loss well
 * below uniform, the same bits twice), and the results file written and read back exactly,
 * with a malformed file refused by name. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/scaling_grid.h"
#include "examples/common/tsv.h"

static void test_non_embedding_count(void **state)
{
    (void)state;
    /* L = 2, C = 16: 12 * 2 * 256 + 13 * 2 * 16 + 2 * 16 = 6144 + 416 + 32 = 6592. */
    assert_true(scaling_non_embedding_count(2, 16) == 6592.0);
    int shapes[3][3] = { { 1, 8, 1 }, { 2, 16, 2 }, { 3, 24, 3 } };
    for (int i = 0; i < 3; i++) {
        GptConfig c = gpt_config_default();
        c.vocab_size = 30;
        c.max_seq = 16;
        c.n_layer = shapes[i][0];
        c.n_embd = shapes[i][1];
        c.n_head = shapes[i][2];
        Gpt *g = gpt_new(&c, 1);
        assert_true(scaling_non_embedding_params(g) ==
                    scaling_non_embedding_count(shapes[i][0], shapes[i][1]));
        gpt_free(g);
    }
}

static void test_steps_for_budget(void **state)
{
    (void)state;
    ScalingTrainConfig cfg = scaling_train_defaults();
    cfg.batch = 4;
    cfg.seq = 16;                          /* 64 tokens a step */
    /* C / (6 N 64) with N = 1000: 1.5e7 / 384000 = 39.06 -> 39 steps; tiny budgets give 1. */
    assert_int_equal(scaling_steps_for(1.5e7, 1000, &cfg), 39);
    assert_int_equal(scaling_steps_for(1.0, 1000, &cfg), 1);
    assert_true(scaling_lr_for(&cfg, 32) == cfg.lr / 2);
}

static char text_path[64];

static int make_text(void **state)
{
    (void)state;
    snprintf(text_path, sizeof text_path, "/tmp/test_scaling_grid_%d.txt", (int)getpid());
    FILE *f = fopen(text_path, "w");
    if (!f)
        return -1;
    /* A text a tiny model can learn: short words from a small set, pseudo-randomly chosen. */
    const char *words[] = { "the ", "cat ", "sat ", "on ", "a ", "mat.\n" };
    Rng rng = rng_new(3, 1);
    for (int i = 0; i < 6000; i++)
        fputs(words[rng_below(&rng, 6)], f);
    return fclose(f);
}

static int remove_text(void **state)
{
    (void)state;
    return remove(text_path);
}

static void test_train_one(void **state)
{
    (void)state;
    char err[256];
    ScalingTrainConfig cfg = scaling_train_defaults();
    cfg.batch = 4;
    cfg.seq = 16;
    cfg.eval_windows = 64;
    cfg.lr = 0.03;
    Dataset *ds = dataset_open_text(text_path, cfg.seq, err, sizeof err);
    assert_non_null(ds);
    double N = scaling_non_embedding_count(1, 16), budget = 6 * N * 64 * 150.3;
    ScalingRun a = scaling_train_one(ds, &cfg, 1, 16, 2, budget, NULL, "test");
    ScalingRun b = scaling_train_one(ds, &cfg, 1, 16, 2, budget, NULL, "test");
    assert_int_equal(a.steps, 150);
    assert_true(a.N == N);
    assert_true(a.D == 150.0 * 64);
    assert_true(a.C == 6 * a.N * a.D);
    assert_true(a.budget == budget);
    assert_true(a.lr == cfg.lr);                  /* width 16: the rate as given */
    /* Uniform over the vocabulary is log V (V = 15 here, about 2.7 nats); the words leave well
     * under 1.5 nats per character to learn in 150 steps. */
    int V = dataset_vocab_size(ds);
    assert_true(a.val_loss < 0.6 * log((double)V));
    assert_true(a.val_loss == b.val_loss);        /* seeded: the same bits */
    dataset_free(ds);
}

static void test_results_roundtrip(void **state)
{
    (void)state;
    char dir[64], path[96], err[256];
    snprintf(dir, sizeof dir, "/tmp/test_scaling_grid_dir_%d", (int)getpid());
    assert_int_equal(mkdir(dir, 0777), 0);
    ScalingRun runs[2] = {
        { 1, 16, 2, 3312, 1e10, 7.5e5, 6 * 3312 * 7.5e5, 1474, 0.02, 2.4844, 2.1, 2.5e10 },
        { 2, 24, 3, 14496, 1e10, 1.1e5, 6 * 14496 * 1.1e5, 337, 1.0 / 75, 2.6241123456789, 1.4,
          1.25e10 },
    };
    TsvWriter *w = tsv_open_in(dir, "runs.tsv", SCALING_COLUMNS);
    for (int i = 0; i < 2; i++)
        assert_true(scaling_write_row(w, &runs[i]));
    tsv_close_or_die(w);
    snprintf(path, sizeof path, "%s/runs.tsv", dir);
    ScalingRun back[4];
    int n = 0;
    assert_true(scaling_read_results(path, back, 4, &n, err, sizeof err));
    assert_int_equal(n, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(back[i].layers, runs[i].layers);
        assert_int_equal(back[i].width, runs[i].width);
        assert_int_equal(back[i].steps, runs[i].steps);
        assert_true(back[i].N == runs[i].N && back[i].D == runs[i].D && back[i].C == runs[i].C);
        assert_true(back[i].lr == runs[i].lr && back[i].val_loss == runs[i].val_loss);
        assert_true(back[i].flop == runs[i].flop);
    }
    /* A file from before the counted FLOP column: read, with the count unknown. */
    char old[128];
    snprintf(old, sizeof old, "%s/old.tsv", dir);
    FILE *o = fopen(old, "w");
    fputs("layers\twidth\theads\tN\tD\tC\tbudget\tsteps\tlr\tval_loss\tseconds\n"
          "1\t16\t2\t3312\t7.5e5\t1.49e10\t1e10\t1474\t0.02\t2.48\t2.1\n", o);
    fclose(o);
    assert_true(scaling_read_results(old, back, 4, &n, err, sizeof err));
    assert_int_equal(n, 1);
    assert_true(isnan(back[0].flop) && back[0].val_loss == 2.48);
    remove(old);
    /* A row with a word where a number goes: refused, naming the line and column. */
    FILE *f = fopen(path, "a");
    fputs("1\t8\t1\t888\t1e10\t1\t1\t1\t0.04\tlots\t1\n", f);
    fclose(f);
    assert_false(scaling_read_results(path, back, 4, &n, err, sizeof err));
    assert_non_null(strstr(err, "line 4"));
    assert_non_null(strstr(err, "'val_loss'"));
    /* A header without a column the fits need. */
    f = fopen(path, "w");
    fputs("layers\twidth\n1\t8\n", f);
    fclose(f);
    assert_false(scaling_read_results(path, back, 4, &n, err, sizeof err));
    assert_non_null(strstr(err, "no column 'heads'"));
    remove(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_non_embedding_count),
        cmocka_unit_test(test_steps_for_budget),
        cmocka_unit_test_setup_teardown(test_train_one, make_text, remove_text),
        cmocka_unit_test(test_results_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

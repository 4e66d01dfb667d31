/* analysis/finetune_base.h: the cached base's name (every setting that decides its weights, the
 * kernel mode, the thread count in the fast mode), the base's shape for two tasks, a base file
 * that covers the tasks or not (with the message), the runs' order and whether their adapters
 * fit, and the study's table rows and headline numbers from rows made up by hand. */
#include "tests/test_helpers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "analysis/finetune_base.h"
#include "autograd/kernels.h"
#include "autograd/parallel.h"
#include "nn/gpt_lora.h"
#include "nn/gpt_snapshot.h"

static const FinetuneBaseSpec SPEC = {
    .task = "add", .layers = 2, .heads = 8, .embd = 144,
    .pretrain = { .lr = 1e-3, .steps = 4000, .batch = 64, .decay = 1, .seed = 1 },
};

static void test_cache_path(void **state)
{
    (void)state;
    char path[512];
    KernelsMode mode = kernels_mode();
    kernels_set(KERNELS_PORTABLE);
    assert_string_equal(finetune_base_cache_path(&SPEC, "cache", path, sizeof path),
                        "cache/base-add-L2-H8-C144-steps4000-lr0.001-cosine-batch64-seed1-"
                        "portable.safetensors");
    kernels_set(KERNELS_FAST);
    par_set_threads(3);
    FinetuneBaseSpec s = SPEC;
    s.pretrain.decay = 0;
    s.pretrain.lr = 2.5e-4;
    assert_string_equal(finetune_base_cache_path(&s, "d", path, sizeof path),
                        "d/base-add-L2-H8-C144-steps4000-lr0.00025-constant-batch64-seed1-"
                        "threads3-fast.safetensors");
    kernels_set(mode);
}

static Task *task(const char *name)
{
    char err[256];
    Task *t = task_new(&(TaskSpec){ .name = name }, err, sizeof err);
    assert_non_null(t);
    return t;
}

/* The shape covers the longer task; a base one position short does not, and says why. */
static void test_config_and_cover(void **state)
{
    (void)state;
    Task *add = task("add"), *rev = task("reverse");
    GptConfig cfg = finetune_base_config(&SPEC, add, rev);
    int T = task_seq_len(add) > task_seq_len(rev) ? task_seq_len(add) : task_seq_len(rev);
    assert_int_equal(cfg.vocab_size, TASK_VOCAB);
    assert_int_equal(cfg.max_seq, T);
    assert_int_equal(cfg.n_layer, 2);
    assert_int_equal(cfg.n_embd, 144);
    assert_true(cfg.tied);
    assert_false(cfg.fused_qkv);
    char path[] = "/tmp/test_finetune_base.XXXXXX", err[1024];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    cfg.n_embd = 32, cfg.n_head = 2;
    for (int shorter = 0; shorter < 2; shorter++) {
        GptConfig c = cfg, got;
        c.max_seq = T - shorter;
        Gpt *m = gpt_new(&c, 1);
        SnapshotError serr;
        assert_true(gpt_snapshot_save(m, path, &serr));
        gpt_free(m);
        bool ok = finetune_base_covers(path, add, rev, &got, err, sizeof err);
        assert_int_equal(got.max_seq, T - shorter);
        assert_int_equal(ok, !shorter);
        if (shorter)
            assert_non_null(strstr(err, "does not fit tasks add and reverse"));
    }
    remove(path);
    assert_false(finetune_base_covers(path, add, rev, &(GptConfig){ 0 }, err, sizeof err));
    assert_true(strlen(err) > 0);
    task_free(add);
    task_free(rev);
}

static void test_summary(void **state)
{
    (void)state;
    FinetuneResult rows[4] = {
        { .method = FINETUNE_BASE },
        { .method = FINETUNE_FULL, .params = 1000, .trainable = 1000,
          .peak = { [MEM_GRAD] = 100, [MEM_OPTIM] = 200 }, .acc_new = 0.8 },
        { .method = FINETUNE_LORA, .rank = 8, .params = 1000, .trainable = 10,
          .peak = { [MEM_GRAD] = 5, [MEM_OPTIM] = 10 }, .acc_new = 0.6 },
        { .method = FINETUNE_QLORA, .rank = 8, .frozen_bytes = 300, .base_fp32_bytes = 1200 },
    };
    FinetuneSummary s = finetune_summary(rows, 4);
    assert_true(s.lora8 && s.qlora);
    assert_true(s.lora8_trainable == 1.0);
    assert_true(s.lora8_states == 15.0 / 300.0);
    assert_true(s.lora8_accuracy == 75.0);
    assert_int_equal(s.qlora_frozen, 300);
    assert_int_equal(s.qlora_fp32, 1200);
    rows[1].acc_new = 0;            /* nothing to compare against */
    rows[2].rank = 4;
    assert_false(finetune_summary(rows, 3).lora8);
    assert_false(finetune_summary(rows, 3).qlora);
}

/* The runs in the study's order, whatever the order of --methods; none of them for none. */
static void test_runs_order(void **state)
{
    (void)state;
    FinetuneRuns r = { .methods = 7, .ranks = { 16, 2 }, .n_ranks = 2, .qlora_rank = 4 };
    FinetuneMethod method[FINETUNE_MAX_RUNS];
    int rank[FINETUNE_MAX_RUNS];
    assert_int_equal(finetune_runs_order(&r, method, rank), 4);
    FinetuneMethod want[] = { FINETUNE_FULL, FINETUNE_LORA, FINETUNE_LORA, FINETUNE_QLORA };
    int want_rank[] = { 0, 16, 2, 4 };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(method[i], want[i]);
        assert_int_equal(rank[i], want_rank[i]);
    }
    r.methods = 1u << FINETUNE_QLORA;
    assert_int_equal(finetune_runs_order(&r, method, rank), 1);
    assert_int_equal(method[0], FINETUNE_QLORA);
    assert_int_equal(rank[0], 4);
    r.methods = 0;
    assert_int_equal(finetune_runs_order(&r, method, rank), 0);
}

/* The largest rank decides, QLoRA's too; full fine-tuning alone checks no adapter. */
static void test_runs_fit(void **state)
{
    (void)state;
    GptConfig m = { .vocab_size = TASK_VOCAB, .max_seq = 12, .n_layer = 1, .n_head = 2,
                    .n_embd = 32, .tied = true };
    FinetuneConfig c = { .alpha = 16, .targets = LORA_TARGET_Q | LORA_TARGET_V };
    FinetuneRuns r = { .methods = 1u << FINETUNE_LORA, .ranks = { 1, 32 }, .n_ranks = 2,
                       .qlora_rank = 8 };
    char err[160] = "";
    assert_true(finetune_runs_fit(&r, &c, &m, err, sizeof err));
    r.ranks[1] = 33;
    assert_false(finetune_runs_fit(&r, &c, &m, err, sizeof err));
    assert_non_null(strstr(err, "LoRA rank 33 is not in 1..32"));
    r.ranks[1] = 2, r.qlora_rank = 34;
    assert_false(finetune_runs_fit(&r, &c, &m, err, sizeof err));
    assert_non_null(strstr(err, "LoRA rank 34"));
    r.methods = 1u << FINETUNE_FULL;
    assert_true(finetune_runs_fit(&r, &c, &m, err, sizeof err));
}

static char *read_all(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The base's row leaves the bytes, the step time and the loss empty; a QLoRA row has every
 * cell, the shares computed. */
static void test_write_row(void **state)
{
    (void)state;
    char path[] = "/tmp/test_finetune_rows.XXXXXX", err[512];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    TsvWriter *w = tsv_open(path, FINETUNE_COLUMNS, err, sizeof err);
    assert_non_null(w);
    FinetuneResult base = { .method = FINETUNE_BASE, .params = 1000, .trainable = 0,
                            .ms_per_step = NAN, .final_loss = NAN, .acc_new = 0.25,
                            .acc_old = 1, .loss_old = 0.5, .acc_old_off = NAN };
    FinetuneResult q = { .method = FINETUNE_QLORA, .rank = 8, .params = 1000, .trainable = 40,
                         .peak = { 10, 20, 30, 40, 50 }, .frozen_bytes = 300,
                         .base_fp32_bytes = 1200, .ms_per_step = 1.5, .final_loss = 2,
                         .acc_new = 0.5, .acc_old = 0.75, .loss_old = 1.25, .acc_old_off = 1 };
    assert_true(finetune_write_row(w, &base));
    assert_true(finetune_write_row(w, &q));
    assert_true(tsv_close(w, err, sizeof err));
    const char *text = read_all(path);
    const char *rows = strchr(text, '\n') + 1;
    assert_true(strncmp(text, "run\tmethod\trank\tparams\t", 22) == 0);
    assert_string_equal(rows, "base\tbase\t0\t1000\t0\t0\t\t\t\t\t\t\t\t\t\t0.25\t1\t0.5\t\n"
                        "qlora r=8\tqlora\t8\t1000\t40\t4\t10\t20\t30\t40\t50\t300\t0.25\t1.5\t"
                        "2\t0.5\t0.75\t1.25\t1\n");
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_path),
        cmocka_unit_test(test_config_and_cover),
        cmocka_unit_test(test_summary),
        cmocka_unit_test(test_runs_order),
        cmocka_unit_test(test_runs_fit),
        cmocka_unit_test(test_write_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

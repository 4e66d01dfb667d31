/* analysis/eval.h: the teacher-forced loss is the mean over every counted target of the rows
 * asked for, whatever the batch size (each batch's mean weighted back by its own count), rows
 * past max_examples are left out, and exact match counts whole rows. Checked against the
 * trainer's own loss on each row, computed here one row at a time. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "analysis/eval.h"

static Dataset *add_task(void)
{
    TaskSpec spec = { .name = "add", .n_val = 40 };
    char err[256];
    Dataset *ds = dataset_open_task(&spec, err, sizeof err);
    if (!ds)
        fail_msg("%s", err);
    return ds;
}

static Trainer *tiny_trainer(const Dataset *ds)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = dataset_vocab_size(ds),
                           .max_seq = dataset_seq_len(ds), .n_layer = 1, .n_head = 2,
                           .n_embd = 8, .tied = true, .fused_qkv = true };
    return trainer_new(&c);
}

/* Row r's loss and its counted targets, alone through the trainer. */
static double row_loss(Trainer *tr, const Dataset *ds, int r, int *counted)
{
    int T = dataset_seq_len(ds);
    int *tokens = malloc((size_t)T * sizeof *tokens), *targets = malloc((size_t)T * sizeof *targets);
    assert_non_null(tokens);
    assert_non_null(targets);
    dataset_val_batch(ds, r, 1, tokens, targets);
    *counted = 0;
    for (int t = 0; t < T; t++)
        *counted += targets[t] >= 0;
    double loss = 0.0;
    tensor_release(trainer_eval(tr, tokens, targets, 1, T, &loss));
    trainer_eval_done(tr);
    free(tokens);
    free(targets);
    return loss;
}

static void test_loss_is_the_mean_over_counted_targets(void **state)
{
    (void)state;
    Dataset *ds = add_task();
    Trainer *tr = tiny_trainer(ds);
    enum { ROWS = 13 };
    double sum = 0.0;
    long counted = 0;
    for (int r = 0; r < ROWS; r++) {
        int k;
        sum += row_loss(tr, ds, r, &k) * k;
        counted += k;
    }
    double want = sum / (double)counted;
    /* 13 rows in batches of 1, 4 (the last one short) and 32 (one batch, 19 rows left out) */
    int batches[] = { 1, 4, 32 };
    for (int i = 0; i < 3; i++) {
        EvalResult e = eval_teacher_forced(tr, ds, batches[i], ROWS);
        assert_int_equal(e.examples, ROWS);
        assert_true(fabs(e.loss - want) <= 1e-6 * want);
        assert_true(e.accuracy >= 0.0 && e.accuracy <= 1.0);
    }
    /* More rows than the validation set has: all of them. */
    assert_int_equal(eval_teacher_forced(tr, ds, 8, 1 << 20).examples, dataset_val_count(ds));
    trainer_free(tr);
    dataset_free(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_is_the_mean_over_counted_targets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

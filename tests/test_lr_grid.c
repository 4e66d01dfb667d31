/* The large-batch grid of lr_scaling (analysis/lr_grid.h): which cells the table has and in
 * what order, the curves' cells, and each cell's batch, micro-batch, steps, warmup and peak
 * rate. Expected values are worked out by hand from the defaults lr_scaling passes (12 epochs
 * of 16384 examples, b = 16, micro-batches of at most 64, warmup 0.5 epochs). */
#include "tests/test_helpers.h"

#include <math.h>
#include <string.h>

#include "analysis/lr_grid.h"

static const LrGrid GRID = { .epochs = 12, .epoch_examples = 16384, .base_batch = 16,
                             .max_micro = 64, .lr_sgd = 0.1, .lr_adamw = 0.001,
                             .warmup_epochs = 0.5 };

static void test_cells(void **state)
{
    (void)state;
    LrCell c[LR_GRID_MAX_CELLS];
    /* short: gradual warmup only; per optimizer k = 1 (none) then k = 32 (none linear sqrt) */
    assert_int_equal(lr_grid_cells(false, c), 8);
    assert_string_equal(c[0].optimizer, "sgd");
    assert_int_equal(c[0].k, 1);
    assert_int_equal(c[0].rule, SCHED_RULE_NONE);
    assert_int_equal(c[0].warmup, SCHED_WARMUP_GRADUAL);
    assert_int_equal(c[3].k, 32);
    assert_int_equal(c[3].rule, SCHED_RULE_SQRT);
    assert_string_equal(c[4].optimizer, "adamw");
    /* full: 2 warmups x 2 optimizers x (1 + 3 x 3) = 40, the gradual half first */
    assert_int_equal(lr_grid_cells(true, c), LR_GRID_MAX_CELLS);
    assert_int_equal(c[19].warmup, SCHED_WARMUP_GRADUAL);
    assert_int_equal(c[20].warmup, SCHED_WARMUP_NONE);
    assert_int_equal(c[2].k, 4);
    assert_int_equal(c[2].rule, SCHED_RULE_LINEAR);
    assert_int_equal(c[39].k, 32);
    assert_string_equal(c[39].optimizer, "adamw");
}

static void test_curves(void **state)
{
    (void)state;
    LrCell c[LR_GRID_CURVES];
    lr_grid_curve_cells(false, "adamw", c);
    assert_int_equal(c[0].k, 1);
    assert_int_equal(c[0].warmup, SCHED_WARMUP_NONE);
    assert_int_equal(c[2].k, 32);
    assert_int_equal(c[2].rule, SCHED_RULE_SQRT);
    assert_int_equal(c[2].warmup, SCHED_WARMUP_CONSTANT);
    assert_string_equal(LR_GRID_CURVE_LABELS[2], "constant warmup");
    /* the short grid has only gradual warmup: the k = 32 gradual run is in it, the others not */
    assert_false(lr_grid_has(false, &c[0]));
    assert_false(lr_grid_has(false, &c[1]));
    assert_false(lr_grid_has(false, &c[2]));
    assert_true(lr_grid_has(false, &c[3]));
    /* the full grid has no warmup as well; constant warmup is never in it */
    lr_grid_curve_cells(true, "sgd", c);
    assert_int_equal(c[1].rule, SCHED_RULE_LINEAR);
    assert_true(lr_grid_has(true, &c[0]));
    assert_true(lr_grid_has(true, &c[1]));
    assert_false(lr_grid_has(true, &c[2]));
}

static void test_arithmetic(void **state)
{
    (void)state;
    LrCell base = { "sgd", 1, SCHED_RULE_NONE, SCHED_WARMUP_GRADUAL };
    LrCell big = { "adamw", 32, SCHED_RULE_SQRT, SCHED_WARMUP_GRADUAL };
    /* b = 16: micro-batch 16, 12 x 16384 / 16 = 12288 steps, warmup 16384 / 16 / 2 = 512 */
    assert_int_equal(lr_grid_batch(&GRID, &base), 16);
    assert_int_equal(lr_grid_micro(&GRID, &base), 16);
    assert_int_equal(lr_grid_steps(&GRID, &base), 12288);
    assert_int_equal(lr_grid_warmup_steps(&GRID, &base), 512);
    assert_true(lr_grid_peak_lr(&GRID, &base) == 0.1);
    /* 32 b = 512: 8 micro-batches of 64, 384 steps, warmup 16, peak 0.001 sqrt 32 */
    assert_int_equal(lr_grid_batch(&GRID, &big), 512);
    assert_int_equal(lr_grid_micro(&GRID, &big), 64);
    assert_int_equal(lr_grid_steps(&GRID, &big), 384);
    assert_int_equal(lr_grid_warmup_steps(&GRID, &big), 16);
    assert_true(fabs(lr_grid_peak_lr(&GRID, &big) - 0.001 * sqrt(32.0)) < 1e-15);
    big.rule = SCHED_RULE_LINEAR;
    assert_true(lr_grid_peak_lr(&GRID, &big) == 0.001 * 32);
    big.warmup = SCHED_WARMUP_NONE;
    assert_int_equal(lr_grid_warmup_steps(&GRID, &big), 0);
    /* an epoch of 256 examples at 32 b = 512: a single step, which can have no warmup */
    LrGrid tiny = GRID;
    tiny.epochs = 1;
    tiny.epoch_examples = 256;
    big.warmup = SCHED_WARMUP_CONSTANT;
    assert_int_equal(lr_grid_steps(&tiny, &big), 1);
    assert_int_equal(lr_grid_warmup_steps(&tiny, &big), 0);
    /* 2 steps: the warmup is at least 1 and short of the end, so 1 */
    tiny.epoch_examples = 1024;
    assert_int_equal(lr_grid_steps(&tiny, &big), 2);
    assert_int_equal(lr_grid_warmup_steps(&tiny, &big), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cells),
        cmocka_unit_test(test_curves),
        cmocka_unit_test(test_arithmetic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

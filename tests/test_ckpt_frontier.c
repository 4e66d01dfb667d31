/* analysis/ckpt_frontier.h: the frontier's strategies at a length (intervals and budgets that
 * change nothing left out), the Pareto marks and the drawing order on rows made up by hand,
 * and one strategy measured against vanilla on a real chain. */
#include "tests/test_helpers.h"

#include <string.h>

#include "analysis/ckpt_frontier.h"

static void test_frontier_strategies(void **state)
{
    (void)state;
    const int intervals[] = { 1, 2, 8, 16 }, budgets[] = { 1, 4, 8, 9 };
    CkptStrategy s[3 + 8];
    int n = ckpt_frontier_strategies(8, intervals, 4, budgets, 4, s);
    const char *want[] = { "vanilla", "memory-poor", "sqrt", "every:1", "every:2", "budget:1",
                           "budget:4", "budget:8" };
    assert_int_equal(n, 8);
    for (int i = 0; i < n; i++) {
        char name[32];
        assert_string_equal(ckpt_name(s[i], name, sizeof name), want[i]);
    }
}

static CkptRow row(const char *name, long forwards, size_t bytes)
{
    CkptRow r = { .run = { .stats = { .forwards = forwards }, .peak_act = bytes } };
    strcpy(r.name, name);
    return r;
}

/* C dominates D (same forwards, fewer bytes), B dominates E (same bytes, fewer forwards). */
static void test_frontier_sort(void **state)
{
    (void)state;
    CkptRow rows[] = { row("A", 8, 800), row("B", 16, 100), row("E", 20, 100),
                       row("D", 12, 500), row("C", 12, 400) };
    ckpt_frontier_sort(rows, 5);
    const char *order = "ACDBE";
    const bool pareto[] = { true, true, false, true, false };
    for (int i = 0; i < 5; i++) {
        assert_int_equal(rows[i].name[0], order[i]);
        assert_int_equal(rows[i].pareto, pareto[i]);
    }
}

/* sqrt over 9 layers: every:3, 9 + 6 forward evaluations, vanilla's gradients bit for bit. */
static void test_row_measure(void **state)
{
    (void)state;
    CkptRow r = ckpt_row_measure((CkptStrategy){ CKPT_SQRT, 0 }, 9, 8, 2, 5, 1);
    assert_string_equal(r.name, "sqrt");
    assert_string_equal(r.family, "sqrt");
    assert_int_equal(r.n, 9);
    assert_int_equal(r.formula, 15);
    assert_int_equal(r.run.stats.forwards, r.formula);
    assert_true(r.same_grads);
    CkptRow v = ckpt_row_measure((CkptStrategy){ CKPT_VANILLA, 0 }, 9, 8, 2, 5, 1);
    assert_int_equal(v.run.stats.forwards, 9);
    assert_true(r.run.peak_act < v.run.peak_act);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frontier_strategies),
        cmocka_unit_test(test_frontier_sort),
        cmocka_unit_test(test_row_measure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

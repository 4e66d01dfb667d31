/* --parallel's plan (dist/run.h, dist_plan_parse): every form it takes, what each sets, and the
 * refusals, each with its sentence; the global batch's groups for each kind. No collective: the
 * ranks parse alike, each asserts alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dist/run.h"
#include "tests/dist_test.h"

static DistPlan parsed(const char *text)
{
    DistPlan plan;
    char why[256];
    if (!dist_plan_parse(text, &plan, why, sizeof why))
        fail_msg("'%s' refused: %s", text, why);
    return plan;
}

static void test_data_parallel_forms(void **state)
{
    (void)state;
    assert_int_equal(parsed("none").kind, DIST_RUN_NONE);
    assert_int_equal(parsed("ddp").kind, DIST_RUN_DDP);
    for (int level = 1; level <= 3; level++) {
        char text[8];
        snprintf(text, sizeof text, "zero%d", level);
        DistPlan p = parsed(text);
        assert_int_equal(p.kind, DIST_RUN_ZERO);
        assert_int_equal(p.zero_level, level);
    }
}

static void test_pipeline_forms(void **state)
{
    (void)state;
    DistPlan p = parsed("pipeline:1f1b");
    assert_int_equal(p.kind, DIST_RUN_PIPELINE);
    assert_int_equal(p.sched, PIPE_1F1B);
    assert_int_equal(p.replicas, 1);
    assert_int_equal(p.zero_level, 0);
    p = parsed("pipeline:gpipe,dp3");
    assert_int_equal(p.sched, PIPE_GPIPE);
    assert_int_equal(p.replicas, 3);
    assert_int_equal(p.zero_level, 0);
    p = parsed("pipeline:naive,dp2,zero1");
    assert_int_equal(p.sched, PIPE_NAIVE);
    assert_int_equal(p.replicas, 2);
    assert_int_equal(p.zero_level, 1);
    assert_int_equal(parsed("pipeline:pipedream").sched, PIPE_PIPEDREAM);
}

/* Each refused text and a word its sentence must contain. */
static void test_refusals_say_why(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        { "", "expected none, ddp" },
        { "zero4", "expected none, ddp" },
        { "DDP", "expected none, ddp" },
        { "pipeline:", "schedule" },
        { "pipeline:2f2b", "schedule" },
        { "pipeline:1f1b,", "dpD" },
        { "pipeline:1f1b,dp0", "dpD" },
        { "pipeline:1f1b,dp4097", "dpD" },
        { "pipeline:1f1b,dp2x", "zero1" },
        { "pipeline:1f1b,dp2,zero2", "levels 2 and 3" },
        { "pipeline:1f1b,dp2,zero1,", "zero1" },
        { "pipeline:1f1b,zero1", "dpD" },
        { "pipeline:1f1b,dp1,zero1", "D >= 2" },
        { "pipeline:pipedream,dp2", "pipedream has no data-parallel replicas" },
        { "pipeline:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "schedule" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        DistPlan plan;
        char why[256] = "";
        bool ok = dist_plan_parse(cases[i][0], &plan, why, sizeof why);
        if (ok || !strstr(why, cases[i][1]))
            fail_msg("'%s': %s, '%s' (wanted a refusal naming '%s')", cases[i][0],
                     ok ? "accepted" : "refused", why, cases[i][1]);
    }
}

static void test_batch_groups(void **state)
{
    (void)state;
    DistPlan none = parsed("none"), ddp = parsed("ddp"), zero = parsed("zero2");
    DistPlan pipe = parsed("pipeline:1f1b"), pdp = parsed("pipeline:1f1b,dp2,zero1");
    assert_int_equal(dist_run_batch_groups(&none, 4), 1);
    assert_int_equal(dist_run_batch_groups(&ddp, 4), 4);
    assert_int_equal(dist_run_batch_groups(&zero, 3), 3);
    assert_int_equal(dist_run_batch_groups(&pipe, 4), 1);
    assert_int_equal(dist_run_batch_groups(&pdp, 4), 2);
}

int main(int argc, char **argv)
{
    dist_test_init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_parallel_forms),
        cmocka_unit_test(test_pipeline_forms),
        cmocka_unit_test(test_refusals_say_why),
        cmocka_unit_test(test_batch_groups),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dist_finalize();
    return failed;
}

/* run/: assembling a run from its settings without a program around it. The schedule the
 * settings describe (run_schedule: the effective batch over the ranks, wsd's default cooldown,
 * a constant schedule's length), the data opened with the rows' length it allows, failures
 * handed to the program's handler with their code (2 for a setting refused, 1 for the rest), --parallel's text
 * into the plan, and the line that names the first setting two ranks disagree on. No MPI is
 * started: without run_ranks_begin a run is one process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "run/ranks.h"
#include "run/run.h"

static jmp_buf failed_at;
static int failed_code;
static char failed_message[2048];

static void catch_failure(int code, const char *message)
{
    failed_code = code;
    snprintf(failed_message, sizeof failed_message, "%s", message);
    longjmp(failed_at, 1);
}

static void test_schedule_over_ranks(void **state)
{
    (void)state;
    SchedConfig given = sched_defaults();
    given.base_batch = 0;               /* the effective batch */
    given.decay = SCHED_DECAY_WSD;
    given.cooldown_steps = 0;           /* a fifth of the steps */
    given.warmup = SCHED_WARMUP_GRADUAL;
    given.warmup_steps = 100;
    RunKept kept = { .steps = 1000, .batch = 8, .accum = 2 };
    SchedConfig c = run_schedule(&given, &kept, 4);
    assert_int_equal(c.batch, 8);
    assert_int_equal(c.accum, 8);       /* 2 micro-batches on each of 4 ranks */
    assert_int_equal(c.base_batch, 64);
    assert_int_equal(sched_effective_batch(&c), 64);
    assert_int_equal(c.cooldown_steps, 200);
    assert_int_equal(c.total_steps, 1000);
    given.final_fraction = 0.1;         /* --final-fraction: the floor is the run's as given */
    c = run_schedule(&given, &kept, 4);
    assert_true(c.final_fraction == 0.1);
    assert_true(sched_lr(&c, 999) > 0.1 * sched_peak_lr(&c));
    given.final_fraction = 0.0;
    /* Only wsd cools down; a constant schedule only needs to cover its warmup, so a resumed
     * run may extend --steps without changing any step's rate. */
    given.decay = SCHED_DECAY_CONSTANT;
    given.cooldown_steps = 50;
    c = run_schedule(&given, &kept, 1);
    assert_int_equal(c.cooldown_steps, 0);
    assert_int_equal(c.total_steps, 100);
    assert_int_equal(c.accum, 2);
    given.warmup_steps = 0;
    c = run_schedule(&given, &kept, 1);
    assert_int_equal(c.warmup, SCHED_WARMUP_NONE);
    assert_int_equal(c.total_steps, 1);
}

static void test_open_task_sets_its_rows(void **state)
{
    (void)state;
    DataConfig data = { .task = "add" };
    int seq = 0;
    Dataset *ds = run_open_data(&data, &seq);
    assert_int_equal(data.task_size, 3);        /* add's default */
    assert_int_equal(seq, dataset_seq_len(ds));
    assert_int_equal(seq, 12);                  /* "123+456=975": 13 tokens, 12 predicted */
    dataset_free(ds);
}

static void test_failures_reach_the_handler(void **state)
{
    (void)state;
    run_on_failure(catch_failure);
    RunLocal local = { 0 };
    char why[256];
    assert_true(run_parallel_parse(&local.parallel, "ddp", why, sizeof why));
    TrainerConfig cfg = trainer_config_default();
    LoraConfig lora = { .rank = 4 };
    if (setjmp(failed_at) == 0) {
        run_ranks_check(&local, &cfg, &lora);
        fail_msg("--lora under ddp was taken");
    }
    assert_int_equal(failed_code, 2);       /* a setting refused: the program's usage error */
    assert_string_equal(failed_message, "--lora with --parallel ddp is not built yet");
    GptConfig small = { .vocab_size = 4, .max_seq = 12 };
    DataConfig data = { .task = "add" };
    int seq = 0;
    Dataset *ds = run_open_data(&data, &seq);
    if (setjmp(failed_at) == 0) {
        run_check_fit(seq, ds, &small);
        fail_msg("a vocabulary smaller than the data's was taken");
    }
    assert_int_equal(failed_code, 1);
    assert_non_null(strstr(failed_message, "the model's vocabulary (V = 4) is smaller"));
    dataset_free(ds);
    run_on_failure(NULL);
}

static void test_parallel_text(void **state)
{
    (void)state;
    RunParallel p = { 0 };
    char why[256];
    assert_true(run_parallel_parse(&p, "pipeline:1f1b,dp2", why, sizeof why));
    assert_string_equal(run_parallel_pipeline(&p), "pipeline:1f1b,dp2");
    assert_int_equal(p.dist.plan.replicas, 2);
    assert_true(run_parallel_parse(&p, "zero3", why, sizeof why));
    assert_null(run_parallel_pipeline(&p));
    assert_int_equal(run_parallel_zero(&p), 3);
    assert_false(run_parallel_ddp(&p));
    assert_false(run_parallel_parse(&p, "zero4", why, sizeof why));
    /* MPI was never started: one process, whatever the plan says */
    assert_int_equal(run_ranks_data_count(&p), 1);
    assert_true(run_ranks_is_root());
}

static void test_first_difference_names_both(void **state)
{
    (void)state;
    char out[256];
    run_ranks_first_difference("--lr\t0.1\n--steps\t4\n", "--lr\t0.1\n--steps\t8\n", 3, out,
                               sizeof out);
    assert_string_equal(out, "--steps is 8 on rank 0, 4 on rank 3");
    /* the first line that differs, not the last */
    run_ranks_first_difference("--a\t1\n--b\tx\n--c\t3\n", "--a\t1\n--b\ty\n--c\t4\n", 2, out,
                               sizeof out);
    assert_string_equal(out, "--b is y on rank 0, x on rank 2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedule_over_ranks),
        cmocka_unit_test(test_open_task_sets_its_rows),
        cmocka_unit_test(test_failures_reach_the_handler),
        cmocka_unit_test(test_parallel_text),
        cmocka_unit_test(test_first_difference_names_both),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

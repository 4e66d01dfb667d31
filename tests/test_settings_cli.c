/* The programs whose flags come from a settings table (cli/settings.h), run as a
 * user runs them: a bad value is refused before any work with one message naming the flag and
 * exit status 2, --help lists every flag with its default, and the command lines of the docs
 * still work. train_gpt has its own, test_train_gpt_cli.c. The programs are built beside this
 * test (the Makefile makes them prerequisites) and found through TAPEGRAD_BUILD_DIR. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TAPEGRAD_BUILD_DIR
#define TAPEGRAD_BUILD_DIR "build"
#endif

typedef struct {
    int  status;        /* the exit status, or -1 for a signal or a timeout */
    char out[32768];    /* stdout and stderr together */
} Run;

/* PROGRAM ARGS (a shell fragment) with input (lines, no quote) on stdin, stopped after a minute.
 * Under SANITIZE=1, LeakSanitizer's suppressions for what OpenMPI keeps (data_parallel links it)
 * match only through the slow unwinder, as for the dist tests (tests/run.sh). */
static void run_input(Run *r, const char *program, const char *args, const char *input)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd %s && printf '%s' | OMP_NUM_THREADS=1 "
             "ASAN_OPTIONS=${ASAN_OPTIONS:-fast_unwind_on_malloc=0} timeout -s KILL 60 "
             "bin/%s %s 2>&1", TAPEGRAD_BUILD_DIR, input, program, args);
    r->status = test_run_shell(cmd, r->out, sizeof r->out);
}

static void run(Run *r, const char *program, const char *args)
{
    run_input(r, program, args, "");
}

/* The run must end with status code and print needle. */
static void expect_input(int code, const char *program, const char *args, const char *input,
                         const char *needle)
{
    Run *r = malloc(sizeof *r);
    assert_non_null(r);
    run_input(r, program, args, input);
    if (r->status != code || !strstr(r->out, needle)) {
        print_error("%s %s\nexpected status %d and \"%s\", got status %d:\n%s\n", program, args,
                    code, needle, r->status, r->out);
        fail();
    }
    free(r);
}

static void expect(int code, const char *program, const char *args, const char *needle)
{
    expect_input(code, program, args, "", needle);
}

/* A usage error: status 2, the flag named with the reason. */
static void refused(const char *program, const char *args, const char *needle)
{
    expect(2, program, args, needle);
}

static void test_backprop_strategies(void **state)
{
    (void)state;
    refused("backprop_strategies", "--width 0", "--width: 0 is out of range [1, 16384]");
    refused("backprop_strategies", "--picture 65", "--picture: 65 is out of range [1, 64]");
    refused("backprop_strategies", "--seed x", "--seed: 'x' is not");
    refused("backprop_strategies", "--strategies foo",
            "--strategies: unknown checkpoint strategy 'foo'");
    refused("backprop_strategies", "--budgets 1,0", "--budgets: 0 is out of range");
    /* issue 30: empty lists and entries were skipped (a typo ran the default frontier) */
    refused("backprop_strategies", "--budgets ''", "--budgets '': an empty entry");
    refused("backprop_strategies", "--budgets ,", "--budgets ',': an empty entry");
    refused("backprop_strategies", "--intervals ''", "--intervals '': an empty entry");
    refused("backprop_strategies", "--intervals 1,,2", "--intervals '1,,2': an empty entry");
    refused("backprop_strategies", "--strategies sqrt,", "--strategies 'sqrt,': an empty entry");
    refused("backprop_strategies", "--n-from 9 --n-to 4", "--n-from 9 is larger than --n-to 4");
    refused("backprop_strategies", "--log", "'--log' needs a value");
    refused("backprop_strategies", "--no-such-flag", "unknown option '--no-such-flag'");
    refused("backprop_strategies", "--picture 3 extra", "unexpected argument 'extra'");
    expect(0, "backprop_strategies", "--help", "  --width W           layer width (default 256)");
    expect(0, "backprop_strategies", "--help", "(default 1,2,3,4,5,6,8,10,12,16,24,32,48,64)");
    /* docs/checkpointing.md's picture: sqrt over 9 layers keeps 3 checkpoints */
    expect(0, "backprop_strategies", "--picture 9 --strategies sqrt",
           "forward evaluations 15 (formula 15)");
}

/* The flags are read before MPI starts, so a bad one needs no mpirun to be refused. */
static void test_data_parallel(void **state)
{
    (void)state;
    refused("data_parallel", "--modes ddp,,zero1", "--modes 'ddp,,zero1': give 1 to 4 items");
    refused("data_parallel", "--modes zero1,ddp,zero1", "--modes 'zero1,ddp,zero1': zero1 twice");
    refused("data_parallel", "--modes zero4", "--modes: 'zero4' is not one of: ddp, zero1");
    refused("data_parallel", "--steps 1", "--steps: 1 is out of range [2, 100000]");
}

static void test_lora_finetune(void **state)
{
    (void)state;
    refused("lora_finetune", "--ranks 0", "--ranks: 0 is out of range [1, 4096]");
    refused("lora_finetune", "--ranks 1,,2", "--ranks '1,,2': give 1 to 8 items");
    refused("lora_finetune", "--methods full,foo", "--methods: 'foo' is not one of");
    refused("lora_finetune", "--task mul", "--task: 'mul' is not one of: add, sub");
    refused("lora_finetune", "--lora-alpha 0", "--lora-alpha: 0 is out of range");
    refused("lora_finetune", "--lora-targets zz", "--lora-targets:");
    refused("lora_finetune", "--cache-dir ''", "--cache-dir: the folder name is empty");
    refused("lora_finetune", "--task add", "--task and --pretrain-task are both 'add'");
    refused("lora_finetune", "--plot x.png", "--plot needs --log");
    refused("lora_finetune", "--methods full,none", "none (the base only) goes alone");
    refused("lora_finetune", "--pretrain-decay wsd", "--pretrain-decay: 'wsd' is not one of");
    refused("lora_finetune", "--pretrain-eval-every -1", "--pretrain-eval-every: -1 is out of");
    /* The base's recipe (docs/lora.md, "The base's recipe"): shorter, constant or with 4 heads,
     * it ended below 95% of add on some seeds and CPUs; bench/claims.sh checks it over seeds. */
    expect(0, "lora_finetune", "--help", "or cosine to 0 (default cosine)");
    expect(0, "lora_finetune", "--help", "--pretrain-steps N  steps of pretraining (default 4000)");
    expect(0, "lora_finetune", "--help", "--heads N           the base model's heads (default 8)");
    expect(0, "lora_finetune", "--help", "--ranks LIST        LoRA ranks (default 1,2,4,8,16)");
    expect(0, "lora_finetune", "--help", "--lr-full X         full fine-tuning's learning rate "
           "(default 5e-4)");
}

static void test_loss_scaling(void **state)
{
    (void)state;
    refused("loss_scaling", "--steps 5", "--steps: 5 is out of range [20, 1000000]");
    refused("loss_scaling", "--jobs 7", "--jobs: 7 is out of range [1, 6]");
    refused("loss_scaling", "--seeds x", "--seeds 'x': not a list of distinct seeds");
    refused("loss_scaling", "--out ''", "--out: the folder name is empty");
    refused("loss_scaling", "--probe-only --runs-only",
            "--probe-only and --runs-only exclude each other");
    refused("loss_scaling", "--compare-step 150", "--compare-step 150 must be an evaluation step");
    expect(0, "loss_scaling", "--help", "--probe-step N      fp32 steps before the gradients are "
           "measured (default 300)");
}

static void test_lr_scaling(void **state)
{
    (void)state;
    refused("lr_scaling", "--seeds 17", "--seeds: 17 is out of range [1, 16]");
    refused("lr_scaling", "--lr-sgd 0", "--lr-sgd: 0 is out of range");
    refused("lr_scaling", "--embd 3", "--embd: 3 is out of range [4, 4096]");
    refused("lr_scaling", "--warmup-epochs -1", "--warmup-epochs: -1 is out of range");
    refused("lr_scaling", "--out ''", "--out: the folder name is empty");
    expect(0, "lr_scaling", "--help", "--base-batch N      the base batch b (default 16)");
    /* the schedules' TSV: a gradual warmup reaches the peak at step 100 of 1000 */
    expect(0, "lr_scaling", "--schedules", "gradual warmup, constant\t100\t1\n");
    /* bench/claims.sh runs this line: k = 32 is batch 512, 8 micro-batches of 64, 12 epochs of
     * 16 384 examples in 384 steps, the linear rule from 0.1 at b = 16, warmup half an epoch */
    expect(0, "lr_scaling", "--full --out o --print-commands",
           "/train_gpt --optimizer=sgd --embd=64 --batch=64 --accum=8 --steps=384 --lr=0.1 "
           "--base-batch=16 --lr-rule=linear --warmup-type=gradual --warmup=16 --decay=cosine "
           "--clip=1 --weight-decay=0 --seed=3 --eval-every=24 --eval-examples=500 --threads=1 "
           "--log=o/runs/sgd_k32_linear_gradual_s3.tsv\n");
}

static void test_memory_calculator(void **state)
{
    (void)state;
    refused("memory_calculator", "--layers 0", "--layers: 0 is out of range [1, 256]");
    refused("memory_calculator", "--policy foo", "--policy: unknown policy 'foo'");
    refused("memory_calculator", "--optimizer lion", "--optimizer: 'lion' is not one of");
    refused("memory_calculator", "--strategy budget:2", "--strategy: budget:S has no formula");
    refused("memory_calculator", "--embd 130", "130");
    refused("memory_calculator", "--params 0", "--params: 0 is out of range");
    /* issue 30: two modes ran the first alone */
    refused("memory_calculator", "--lecture --sweep 3", "--lecture and --sweep are two modes");
    refused("memory_calculator", "--params 1e9 --sweep 3", "--params and --sweep are two modes");
    refused("memory_calculator", "--fragmentation --lecture",
            "--lecture and --fragmentation are two modes");
    expect(0, "memory_calculator", "--help", "--vocab N           vocabulary V (default 40)");
    expect(0, "memory_calculator", "--help", "Policies: fp32|");
    /* the switches still turn things off: no measured column without a step */
    Run *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    run(a, "memory_calculator", "--no-measure --untied --separate-qkv --layers 3");
    run(b, "memory_calculator", "--no-measure --layers 3");
    assert_int_equal(a->status, 0);
    assert_int_equal(b->status, 0);
    assert_string_not_equal(a->out, b->out);     /* untied, separate q/k/v: more parameters */
    free(a);
    free(b);
}

static void test_number_formats(void **state)
{
    (void)state;
    refused("number_formats", "--block 0 --quantize int8", "--block: 0 is out of range");
    refused("number_formats", "--round up --table", "--round: 'up' is not one of");
    refused("number_formats", "--seed -1 --table", "--seed: -1 is out of range");
    refused("number_formats", "--convert e9m9", "--convert: 'e9m9' is not one of");
    refused("number_formats", "--quantize int2", "--quantize: 'int2' is not one of");
    refused("number_formats", "--table --spacing", "give exactly one of --table, --layout");
    refused("number_formats", "--layout", "'--layout' needs a value");
    refused("number_formats", "", "give one of --table, --layout");
    refused("number_formats", "--quantize nf4 --asymmetric", "--asymmetric applies to int8");
    /* the command lines of docs/precision.md */
    expect(0, "number_formats", "--layout 300", "fp32\t0\t10000111\t00101100000000000000000\t"
           "0x43960000\t300\t0\n");
    expect(0, "number_formats", "--table", "e4m3\t");
    expect(0, "number_formats", "--spacing", "e5m2\t");
    expect_input(0, "number_formats", "--convert e4m3 --saturate", "500\\n",
                 "0x43fa0000\t0x7e\t0x43e00000");      /* 500 saturates to e4m3's max, 448 */
    expect_input(0, "number_formats", "--convert bf16 --round stochastic --seed 1", "0.3\\n",
                 "0x3e99");
    /* two blocks of two, the first with zero point 10: --block and --asymmetric were read */
    expect_input(0, "number_formats", "--quantize int4 --block 2 --asymmetric",
                 "1\\n-2\\n3\\n4\\n", "0\t0\t0.200000003\t10\n1\t2\t0.266666681\t0\n");
    /* the one short option there is; the others were never accepted (--help shows none) */
    expect(0, "number_formats", "-h", "  --table             sign/exponent/mantissa bits");
    refused("number_formats", "-t", "unknown option '-t'");
    /* a unique prefix of a long option, as getopt_long allows */
    expect(0, "number_formats", "--lay 300", "0x43960000");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backprop_strategies),
        cmocka_unit_test(test_data_parallel),
        cmocka_unit_test(test_lora_finetune),
        cmocka_unit_test(test_loss_scaling),
        cmocka_unit_test(test_lr_scaling),
        cmocka_unit_test(test_memory_calculator),
        cmocka_unit_test(test_number_formats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

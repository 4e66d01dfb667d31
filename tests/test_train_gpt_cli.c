/* train_gpt run as a user runs it, with bad input: each case must end with one clear message
 * naming the flag or the key, a non-zero exit status, and no crash (a signal), no hang (a time
 * limit) and no step run. The program is built beside this test (the Makefile makes it a
 * prerequisite) and found through TAPEGRAD_BUILD_DIR. */
#include "tests/snapshot_test_helpers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef TAPEGRAD_BUILD_DIR
#define TAPEGRAD_BUILD_DIR "build"
#endif

typedef struct {
    int  status;        /* the exit status, or -1 for a signal or a timeout */
    char out[16384];    /* stdout and stderr together */
} JobResult;

/* train_gpt ARGS (a shell fragment) on one thread, stopped after `seconds`. */
static void run(JobResult *r, int seconds, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 timeout -s KILL %d %s/bin/train_gpt --threads 1 "
             "%s 2>&1", seconds, TAPEGRAD_BUILD_DIR, args);
    r->status = test_run_shell(cmd, r->out, sizeof r->out);
}

/* The run must exit with status `code` (1 or 2, never a crash), print needle, and run no step. */
static void expect_refused(int code, const char *args, const char *needle)
{
    JobResult *r = malloc(sizeof *r);
    run(r, 120, args);
    if (r->status != code || !strstr(r->out, needle) || strstr(r->out, "step 1")) {
        print_error("train_gpt %s\nexpected status %d and \"%s\", got status %d:\n%s\n", args,
                    code, needle, r->status, r->out);
        fail();
    }
    free(r);
}

/* Issue 18: 65536 x 65536 overflowed an int (undefined behaviour, then a misleading message). */
static void test_products_of_flags(void **state)
{
    (void)state;
    expect_refused(2, "--batch 65536 --accum 65536",
                   "--batch 65536 x --accum 65536 = 4294967296 rows per step");
    expect_refused(2, "--batch 65536 --accum 32768", "= 2147483648 rows per step");
    expect_refused(2, "--data /dev/null --batch 65536 --accum 16384 --seq 4",
                   "--batch 65536 x --accum 16384 x --seq 4 = 4294967296 tokens per step");
}

/* What a flag needs to be given (its row's needs, run/options_table.c): without it,
 * one message naming the flag and exit 2; the needs that look at nothing a snapshot or a base
 * holds are checked before either file is opened. A --scale-* factor is checked with the
 * others as the dynamic mode will (the row's check). */
static void test_flag_needs(void **state)
{
    (void)state;
    static const struct {
        const char *args, *needle;
    } cases[] = {
        { "--momentum 0.5", "--momentum applies to --optimizer sgd, not adamw" },
        { "--optimizer sgd --beta2 0.9",
          "--beta2 applies to --optimizer adamw and adam8bit, not sgd" },
        { "--loss-scale static:8 --scale-growth-interval 5",
          "--scale-growth-interval applies to --loss-scale dynamic, not static:8" },
        { "--precision bf16 --fp8-scaling current",
          "--fp8-scaling applies to --precision fp8, not bf16" },
        { "--cooldown-shape 1-sqrt", "--cooldown and --cooldown-shape apply to --decay wsd" },
        { "--pipe-events e.tsv", "--pipe-events need --parallel pipeline:" },
        { "--qlora", "--qlora needs --lora R (R >= 1)" },
        { "--load /nonexistent.safetensors --lora-targets q",
          "--lora-targets: --load takes the LoRA settings and the base from the snapshot "
          "/nonexistent.safetensors" },
        { "--load-base /nonexistent.safetensors --untied",
          "--untied: the model comes from --load-base /nonexistent.safetensors" },
        { "--plot x.png", "--plot needs --log" },
        { "--data /dev/null --sample-seed 3", "--sample-seed applies to a text sample" },
        { "--loss-scale dynamic --scale-growth-factor 0.5",
          "--scale-growth-factor 0.5: the growth factor 0.5 is not above 1" },
        { "--scale-backoff-factor 1 --loss-scale dynamic",
          "--scale-backoff-factor 1: the backoff factor 1 is not in (0, 1)" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_refused(2, cases[i].args, cases[i].needle);
}

/* Issue 30: the library's out-of-memory message began "tapegrad:", not the program's name. */
static void test_out_of_memory_names_the_program(void **state)
{
    (void)state;
    expect_refused(1, "--steps 1 --mem-budget 1KiB", "train_gpt: memory budget exceeded");
}

/* Issue 18: --save's folder was found missing only after the last step. */
static void test_outputs_checked_before_training(void **state)
{
    (void)state;
    char args[1024], file[512];
    snprintf(file, sizeof file, "%s/a_file", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(args, sizeof args, "--steps 3 --save %s/no/such/folder/s.safetensors", dir);
    expect_refused(1, args, "No such file or directory");
    snprintf(args, sizeof args, "--steps 3 --save %s", dir);
    expect_refused(1, args, "--save");
    snprintf(args, sizeof args, "--steps 3 --save %s/a_file/s.safetensors", dir);
    expect_refused(1, args, "Not a directory");
    snprintf(args, sizeof args, "--steps 3 --eval-every 0 --log %s/log.tsv --plot %s/no/p.png",
             dir, dir);
    expect_refused(1, args, "--plot");
    snprintf(args, sizeof args, "--steps 3 --lora 2 --save-adapter %s/no/a.safetensors", dir);
    expect_refused(1, args, "--save-adapter");
    /* the checks leave no file behind */
    snprintf(args, sizeof args, "ls -A '%s'", dir);
    char listing[256];
    test_run_shell(args, listing, sizeof listing);
    assert_string_equal(listing, "a_file\n");
}

/* The file's bytes with the first float of its data (a weight: parameters come first) set to v. */
static void poison_first_value(const char *src, const char *dst, float v)
{
    FILE *f = fopen(src, "rb");
    assert_non_null(f);
    unsigned char buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf, f);
    assert_true(len < sizeof buf || !feof(f));
    unsigned char *all = NULL;
    size_t total = 0;
    while (len > 0) {
        all = realloc(all, total + len);
        memcpy(all + total, buf, len);
        total += len;
        len = fread(buf, 1, sizeof buf, f);
    }
    fclose(f);
    uint64_t header = 0;
    for (int i = 0; i < 8; i++)
        header |= (uint64_t)all[i] << (8 * i);
    assert_true(8 + header + sizeof v <= total);
    memcpy(all + 8 + header, &v, sizeof v);
    f = fopen(dst, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(all, 1, total, f), total);
    fclose(f);
    free(all);
}

/* train_gpt with args, which must succeed (its output shown otherwise). */
static void run_ok(const char *args)
{
    JobResult *r = malloc(sizeof *r);
    run(r, 300, args);
    if (r->status != 0) {
        print_error("train_gpt %s failed:\n%s\n", args, r->out);
        fail();
    }
    free(r);
}

/* Issue 30: a FIFO given as an output held the run forever at its first write (a snapshot,
 * a log row, the pipeline's events); a socket or a folder is no file either. Each is refused
 * before training, one message naming the flag. And a --log whose write fails halfway (here
 * the file size limit, as a full disk would) ends the run with the path named and no
 * ".log.tsv.XXXXXX" left in the folder. */
static void test_special_outputs_refused(void **state)
{
    (void)state;
    char sub[512], fifo[600], args[2048], listing[512];
    snprintf(sub, sizeof sub, "%s/special", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    snprintf(fifo, sizeof fifo, "%s/fifo", sub);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    static const char *const flags[] = { "--save", "--log", "--save-adapter" };
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "--steps 3 %s %s %s", i == 2 ? "--lora 2" : "", flags[i],
                 fifo);
        char needle[1400];
        snprintf(needle, sizeof needle, "%s %s is a FIFO", flags[i], fifo);
        expect_refused(1, args, needle);
        snprintf(args, sizeof args, "--steps 3 %s %s %s", i == 2 ? "--lora 2" : "", flags[i],
                 sub);
        snprintf(needle, sizeof needle, "%s %s is a folder", flags[i], sub);
        expect_refused(1, args, needle);
    }
    /* a link to the FIFO is the FIFO */
    char link[600];
    snprintf(link, sizeof link, "%s/link", sub);
    assert_int_equal(symlink(fifo, link), 0);
    snprintf(args, sizeof args, "--steps 3 --log %s", link);
    expect_refused(1, args, "is a FIFO");
    /* a character device is written through */
    run_ok("--steps 2 --eval-every 0 --eval-examples 8 --log /dev/null --save /dev/zero");
    unlink(link);
    unlink(fifo);
    /* a log that cannot be written to the end: 1 KiB at most (ulimit -f, with SIGXFSZ ignored
     * so that the write fails instead of killing the run) */
    JobResult *r = malloc(sizeof *r);
    snprintf(args, sizeof args, "trap '' XFSZ; ulimit -f 1; OMP_NUM_THREADS=1 timeout -s KILL "
             "120 %s/bin/train_gpt --threads 1 --steps 40 --eval-every 0 --eval-examples 8 "
             "--log %s/log.tsv 2>&1", TAPEGRAD_BUILD_DIR, sub);
    r->status = test_run_shell(args, r->out, sizeof r->out);
    if (r->status != 1 || !strstr(r->out, "log.tsv")) {
        print_error("expected status 1 naming log.tsv, got %d:\n%s\n", r->status, r->out);
        fail();
    }
    free(r);
    snprintf(args, sizeof args, "ls -A '%s'", sub);
    test_run_shell(args, listing, sizeof listing);
    assert_string_equal(listing, "");
    rmdir(sub);
}

/* A snapshot of train_gpt's at path: 2 steps of the default task. */
static void save_good(const char *path)
{
    char args[1024];
    snprintf(args, sizeof args, "--steps 2 --eval-every 0 --eval-examples 64 --save %s", path);
    run_ok(args);
}

/* Issue 18: a snapshot of NaN weights evaluated to "validation loss nan" and status 0. */
static void test_non_finite_model_refused(void **state)
{
    (void)state;
    char args[1024], good[512], bad[512];
    snprintf(good, sizeof good, "%s/good.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/nan.safetensors", dir);
    save_good(good);
    poison_first_value(good, bad, NAN);
    snprintf(args, sizeof args, "--load %s --eval-examples 64", bad);
    expect_refused(1, args, "holds nan at element 0");
    poison_first_value(good, bad, -INFINITY);
    expect_refused(1, args, "holds -inf at element 0");
    snprintf(args, sizeof args, "--load-base %s --lora 2 --steps 2", bad);
    expect_refused(1, args, "holds -inf at element 0");
}

/* Issue 18: the data and schedule metadata train_gpt adds skipped the flags' range checks (a
 * schedule batch of 1e8 allocated at 250 MB/s, 64-bit counts were cut to 32 bits); the
 * trainer's own metadata reaches the library's checks through the program as well. Each must
 * stop the run with status 1, the key and the range named, before any step. */
static void test_wrong_program_metadata(void **state)
{
    (void)state;
    char good[512], bad[512], args[1024];
    in_dir(good, sizeof good, "program.safetensors");
    in_dir(bad, sizeof bad, "program_bad.safetensors");
    save_good(good);
    static const struct { const char *key, *value, *needle; } cases[] = {
        { "schedule.batch", "\"100000000\"",
          "'schedule.batch' = 100000000 is out of range [1, 65536], the range of --batch" },
        { "schedule.accum", "\"4294967297\"", "'schedule.accum' = 4294967297 is out of range" },
        { "schedule.base_batch", "\"1e9\"", "'schedule.base_batch' is '1e9', not an integer" },
        { "schedule.lr", "\"nan\"", "'schedule.lr' = nan is out of range" },
        { "schedule.lr", "\"100\"", "'schedule.lr' = 100 is out of range [1e-12, 10]" },
        { "schedule.warmup", "\"-5\"", "'schedule.warmup' = -5 is out of range" },
        { "schedule.warmup_fraction", "\"inf\"", "'schedule.warmup_fraction' = inf" },
        { "schedule.cooldown", "\"-1\"", "'schedule.cooldown' = -1 is out of range" },
        { "data.task_size", "\"4294967299\"", "'data.task_size' = 4294967299 is out of range" },
        { "data.msd_first", "\"2\"", "'data.msd_first' is '2', not 0 or 1" },
        { "data.task", "\"add\\u0000x\"", "escapes a NUL character" },
        { "train.step", "\"4294967296000\"", "'train.step' = 4294967296000 is out of range" },
        { "train.seed", "\"4611686018427387905\"", "'train.seed' = 4611686018427387905" },
        { "train.clip", "\"nan\"", "'train.clip' = nan is out of range [0, 1e+06]" },
        { "optim.beta1", "\"1.5\"", "'optim.beta1' = 1.5 is out of range [0, 0.9999]" },
        { "optim.eps", "\"-1\"", "'optim.eps' = -1 is out of range" },
        { "model.n_layer", "\"2147483647\"", "'model.n_layer' is 2147483647, not in 1..64" },
        { "model.n_layer", "\"100000\"", "'model.n_layer' is 100000, not in 1..64" },
        /* issue 30: any data.kind but text ran as a task; keys contradicting each other */
        { "data.kind", "\"bogus\"", "'data.kind' is 'bogus', not task or text" },
        { "data.kind", "\"\"", "'data.kind' is '', not task or text" },
        { "data.kind", "\"t\u00e9xt\"", "not task or text" },
        { "schedule.lr", "\"0x10\"", "'schedule.lr' is '0x10', not a decimal number" },
        { "train.clip", "\"0x1p0\"", "'train.clip' is '0x1p0', not a decimal number" },
        { "precision.param", "\"e4m3\"",
          "'precision.param' = e4m3 contradicts 'precision.policy' = fp32" },
        { "precision.policy", "\"fp8\"",
          "'precision.param' = fp32 contradicts 'precision.policy' = fp8" },
        { "loss_scale.scale", "\"2147483648\"",
          "'loss_scale.scale' = 2147483648 contradicts 'loss_scale.mode' = none" },
        /* the saving run's record (RUN_RECORD_SCHEMA) */
        { "run.ranks", "\"0\"", "'run.ranks' is 0, not in 1..1048576" },
        { "run.ranks", "\"two\"", "'run.ranks' is 'two', not an unsigned 64-bit integer" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        edit_meta(good, bad, cases[i].key, cases[i].value);
        snprintf(args, sizeof args, "--load %s --steps 3", bad);
        expect_refused(1, args, cases[i].needle);
    }
    /* Each count within its range, the model 2e11 parameters: refused before it is built (the
     * allocator aborted, or the kernel's OOM killer ended the run), as the same flags are. */
    edit_meta(good, bad, "model.n_layer", "\"64\"");
    edit_meta(bad, bad, "model.n_embd", "\"16384\"");
    snprintf(args, sizeof args, "--load %s --steps 3", bad);
    expect_refused(1, args, "of memory this machine has");
    expect_refused(1, "--layers 64 --embd 16384", "has 2.062e+11 parameters");
}

/* The loss and grad_norm cells of a log's rows from step `from` on, one row a line. */
static void log_rows(const char *path, long from, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    size_t used = 0;
    out[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        char *cells[4] = { line }, *p = line;
        for (int c = 1; c < 4 && (p = strchr(p, '\t')); c++) {
            *p++ = '\0';
            cells[c] = p;
        }
        if (!p || atol(cells[0]) < from)
            continue;       /* the header, or an earlier step */
        char *end = strchr(cells[3], '\t');
        if (end)
            *end = '\0';
        used += (size_t)snprintf(out + used, len - used, "%s %s %s\n", cells[0], cells[1],
                                 cells[3]);
        assert_true(used < len);
    }
    fclose(f);
}

/* A LoRA run resumed from --save and --load: 6 steps straight and 3 + save + load + 3 log the
 * same loss and gradient norm, to the last digit, on a base file and on the seed's random
 * base, in fp32 and under bf16 with QLoRA. A base replaced between the runs is refused. */
static void check_lora_resume(const char *base, const char *extra)
{
    char args[2048], straight[512], second[512], half[512], a[8192], b[8192];
    const char *common = "--eval-every 0 --eval-examples 64 --decay constant --warmup 0 --lora 2";
    char base_flag[600] = "";
    if (base)
        snprintf(base_flag, sizeof base_flag, "--load-base %s", base);
    in_dir(straight, sizeof straight, "straight.tsv");
    in_dir(second, sizeof second, "second.tsv");
    in_dir(half, sizeof half, "half.safetensors");
    snprintf(args, sizeof args, "%s %s %s --steps 6 --log %s", common, extra, base_flag,
             straight);
    run_ok(args);
    snprintf(args, sizeof args, "%s %s %s --steps 3 --save %s", common, extra, base_flag, half);
    run_ok(args);
    snprintf(args, sizeof args, "--eval-every 0 --eval-examples 64 --load %s --steps 6 --log %s",
             half, second);
    run_ok(args);
    log_rows(straight, 4, a, sizeof a);
    log_rows(second, 4, b, sizeof b);
    print_message("%s %s, steps 4-6 straight and resumed:\n%s", base ? "base file" : "seed's base",
                  extra, b);
    assert_int_equal(strlen(a) > 20, true);
    assert_string_equal(a, b);
}

static void test_lora_resume(void **state)
{
    (void)state;
    char base[512], args[1024], half[512];
    in_dir(base, sizeof base, "lora_base.safetensors");
    snprintf(args, sizeof args, "--steps 4 --separate-qkv --eval-every 0 --eval-examples 64 "
             "--save %s", base);
    run_ok(args);
    check_lora_resume(base, "");
    check_lora_resume(base, "--precision bf16 --qlora --lora-targets all");
    check_lora_resume(NULL, "--optimizer adam8bit --adam8bit-rounding stochastic");
    /* a base of add (rows of 12 tokens, T = 12) fine-tuned on sub (rows of 11): the resumed
     * run's rows are sub's, not the base's T (it was refused: "--seq 12 does not fit") */
    check_lora_resume(base, "--task sub");
    /* a base of text rows of 64 tokens (T = 64) fine-tuned on rows of 32: the resumed run's
     * rows are the run's (run.seq), not the base's T (it went on with rows of 64, silently) */
    char text_base[512];
    in_dir(text_base, sizeof text_base, "text_base.safetensors");
    snprintf(args, sizeof args, "--data %s/data/tinyshakespeare.txt --layers 1 --heads 2 "
             "--embd 32 --seq 64 --steps 2 --separate-qkv --eval-every 0 --eval-examples 64 "
             "--save %s", TAPEGRAD_SOURCE_DIR, text_base);
    run_ok(args);
    char text_run[600];
    snprintf(text_run, sizeof text_run, "--data %s/data/tinyshakespeare.txt --seq 32 --batch 4",
             TAPEGRAD_SOURCE_DIR);
    check_lora_resume(text_base, text_run);
    /* the base replaced since */
    check_lora_resume(base, "");
    snprintf(args, sizeof args, "--steps 4 --separate-qkv --seed 9 --eval-every 0 "
             "--eval-examples 64 --save %s", base);
    run_ok(args);
    in_dir(half, sizeof half, "half.safetensors");
    snprintf(args, sizeof args, "--load %s --steps 6", half);
    expect_refused(1, args, "is not the file the run began with");
    snprintf(args, sizeof args, "--load %s --steps 6 --lora 2", half);
    expect_refused(2, args, "--load takes the LoRA settings and the base from the snapshot");
    /* the record's hash is read through its schema row, with its check */
    char bad[512];
    in_dir(bad, sizeof bad, "bad_hash.safetensors");
    edit_meta(half, bad, "lora.base_fnv1a", "\"a4e89991\"");
    snprintf(args, sizeof args, "--load %s --steps 6", bad);
    expect_refused(1, args, "'lora.base_fnv1a' is 'a4e89991', not 16 hexadecimal digits");
}

/* Issue 18: --attention tiled was not in the snapshot, so a resume without the flag went on
 * with standard attention, whose fp32 sums differ in the last bits (grad_norm 2.0937124859
 * against 2.0937124824 at step 11). 6 steps straight and 3 + save + load (no flag) + 3 must log
 * the same numbers to the last digit; a flag against the snapshot's attention is refused. */
static void test_tiled_attention_resume(void **state)
{
    (void)state;
    char args[2048], straight[512], second[512], half[512], a[8192], b[8192];
    const char *common = "--eval-every 0 --eval-examples 64 --decay constant --warmup 0";
    in_dir(straight, sizeof straight, "tiled_straight.tsv");
    in_dir(second, sizeof second, "tiled_second.tsv");
    in_dir(half, sizeof half, "tiled_half.safetensors");
    snprintf(args, sizeof args, "%s --attention tiled --steps 6 --log %s", common, straight);
    run_ok(args);
    snprintf(args, sizeof args, "%s --attention tiled --steps 3 --save %s", common, half);
    run_ok(args);
    snprintf(args, sizeof args, "--eval-every 0 --eval-examples 64 --load %s --steps 6 --log %s",
             half, second);
    run_ok(args);
    log_rows(straight, 4, a, sizeof a);
    log_rows(second, 4, b, sizeof b);
    assert_int_equal(strlen(a) > 20, true);
    assert_string_equal(a, b);
    snprintf(args, sizeof args, "--load %s --steps 6 --attention standard", half);
    expect_refused(2, args, "--attention standard does not match the snapshot");
}

/* The snapshot in tests/fixtures was written by train_gpt before its flags and snapshot keys
 * came from one table (and before run.attention existed): it still loads, with its settings
 * (fp32, dynamic loss scaling, accumulation, the sqrt rule, wsd), and resumes to the numbers
 * that code logged. Without run.attention it is a standard-attention run. */
static const char *fixture_snapshot(char *buf, size_t len)
{
    const char *here = __FILE__, *slash = strrchr(here, '/');
    snprintf(buf, len, "%.*sfixtures/train_gpt_snapshot_v1.safetensors",
             slash ? (int)(slash - here + 1) : 0, here);
    return buf;
}

/* Issue 19: the precision flags and the switches over model.tied and model.fused_qkv are
 * merged by the settings table (custom rows compared as typed, negated switches read from the
 * library's true/false): a flag that agrees is taken, one that differs is refused by name. */
static void test_precision_and_switches_resume(void **state)
{
    (void)state;
    const char *small = "--layers 1 --embd 16 --heads 2 --eval-every 0 --eval-examples 64";
    char args[2048], p[512], q[512];
    snprintf(p, sizeof p, "%s/p.safetensors", dir);
    snprintf(q, sizeof q, "%s/q.safetensors", dir);
    snprintf(args, sizeof args, "%s --steps 2 --untied --precision bf16 --loss-scale dynamic "
             "--scale-growth-interval 5 --save %s", small, p);
    run_ok(args);
    snprintf(args, sizeof args, "%s --steps 2 --precision fp8 --fp8-scaling delayed:8 --save %s",
             small, q);
    run_ok(args);
    snprintf(args, sizeof args, "%s --load %s --steps 3 --untied --precision bf16 "
             "--loss-scale dynamic:65536 --scale-growth-interval 5", small, p);
    run_ok(args);
    snprintf(args, sizeof args, "%s --load %s --steps 3 --fp8-scaling delayed:8", small, q);
    run_ok(args);
    const struct {
        const char *file, *flags, *needle;
    } refused[] = {
        { p, "--separate-qkv", "--separate-qkv was given, but the snapshot" },
        { q, "--untied", "--untied was given, but the snapshot" },
        { p, "--precision fp16", "--precision fp16 does not match the snapshot" },
        { p, "--loss-scale static:8", "--loss-scale static:8 does not match the snapshot" },
        { p, "--scale-growth-interval 6", "--scale-growth-interval 6 does not match" },
        { p, "--scale-backoff-factor 0.25", "--scale-backoff-factor 0.25 does not match" },
        { q, "--fp8-scaling delayed", "--fp8-scaling delayed:16 does not match the snapshot" },
        { q, "--fp8-scaling current", "--fp8-scaling current does not match the snapshot" },
        { q, "--scale-growth-factor 3", "--scale-growth-factor applies to --loss-scale dynamic" },
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        snprintf(args, sizeof args, "%s --load %s --steps 3 %s", small, refused[i].file,
                 refused[i].flags);
        expect_refused(2, args, refused[i].needle);
    }
}

/* Issue 34: --final-fraction, a setting a snapshot keeps added as one row of SCHED_SCHEMA
 * (optim/schedule.c) and its flag. Cosine decays to that share of the peak: the last of 4 steps
 * (u = 3/4) runs at peak (f + (1 - f) (1 + cos(3 pi / 4)) / 2); a resumed run keeps the floor
 * from the snapshot, and a different one given with --load is refused by name. */
static void test_final_fraction_kept(void **state)
{
    (void)state;
    const char *small = "--layers 1 --embd 16 --heads 2 --eval-every 0 --eval-examples 16 "
                        "--warmup 0";
    char args[2048], snap[512], log[512];
    in_dir(snap, sizeof snap, "floor.safetensors");
    in_dir(log, sizeof log, "floor.tsv");
    snprintf(args, sizeof args, "%s --steps 4 --final-fraction 0.25 --save %s --log %s", small,
             snap, log);
    run_ok(args);
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char line[4096];
    double lr = NAN;
    while (fgets(line, sizeof line, f))
        if (atol(line) == 4)
            lr = atof(strchr(strchr(line, '\t') + 1, '\t') + 1);     /* step, loss, lr */
    fclose(f);
    const double pi = 3.14159265358979323846;
    double want = 0.25e-3 + (1e-3 - 0.25e-3) * (0.5 * (1.0 + cos(pi * 0.75)));
    assert_true(fabs(lr - want) <= 1e-15);
    assert_true(fabs(lr - 1e-3 * (0.25 + 0.75 * 0.14644660940672624)) <= 1e-15);
    JobResult *r = malloc(sizeof *r);
    snprintf(args, sizeof args, "--eval-every 0 --eval-examples 16 --load %s --steps 4", snap);
    run(r, 300, args);
    assert_int_equal(r->status, 0);
    assert_non_null(strstr(r->out, "warmup none over 0 steps; cosine to 0.25 of the peak"));
    free(r);
    snprintf(args, sizeof args, "--load %s --steps 4 --final-fraction 0.5", snap);
    expect_refused(2, args, "--final-fraction 0.5 does not match the snapshot");
    expect_refused(2, "--decay constant --final-fraction 0.1",
                   "--final-fraction applies to --decay cosine and wsd, not constant");
    expect_refused(2, "--final-fraction 1.5", "--final-fraction");
}

static void test_old_snapshot_loads(void **state)
{
    (void)state;
    char fixture[512], log[512], args[2048];
    fixture_snapshot(fixture, sizeof fixture);
    in_dir(log, sizeof log, "fixture.tsv");
    snprintf(args, sizeof args, "--load %s --steps 7 --eval-every 0 --eval-examples 16 --log %s",
             fixture, log);
    JobResult *r = malloc(sizeof *r);
    run(r, 300, args);
    print_message("%s", r->out);
    assert_int_equal(r->status, 0);
    static const char *const lines[] = {
        "model: V=40 T=12 L=1 H=2 C=16, tied head, fused q/k/v; 4144 parameters",
        "training: adamw, batch 8 x 2 accumulated = 16, clip 1, 1 threads; steps 4 to 7",
        "attention: standard",
        "loss scaling: dynamic:65536: scale 131072 now, x2 after 3 clean steps",
        "schedule: lr 0.001 at batch 8, rule sqrt: peak 0.00141421; warmup gradual over 1 "
        "steps; wsd, linear cooldown over the last 2 steps",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (!strstr(r->out, lines[i])) {
            print_error("missing \"%s\"\n", lines[i]);
            fail();
        }
    free(r);
    /* The rate and the loss scale follow from the settings alone: exact. The loss and the
     * gradient norm also depend on the BLAS kernels and the compiler (the sanitizer build's
     * differ in the 9th digit): within 1e-5 of what the code that wrote the fixture logged. */
    static const struct { double loss, lr, grad_norm, scale; } want[] = {
        { 3.5592394, 0.0014142135623730952, 1.4726649773586507, 131072 },
        { 3.5201907, 0.0014142135623730952, 1.3773858770836442, 131072 },
        { 3.4859366, 0.0007071067811865476, 1.2864059567451631, 262144 },
    };
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char line[4096];
    assert_non_null(fgets(line, sizeof line, f));     /* the header */
    for (int i = 0; i < 3; i++) {
        assert_non_null(fgets(line, sizeof line, f));
        double cell[9];     /* step, loss, lr, grad_norm, ..., loss_scale */
        char *p = line;
        for (int c = 0; c < 9; c++) {
            cell[c] = atof(p);
            p = strchr(p, '\t');
            assert_non_null(p);
            p++;
        }
        assert_int_equal((long)cell[0], 5 + i);
        assert_true(fabs(cell[1] - want[i].loss) <= 1e-5 * want[i].loss);
        assert_true(cell[2] == want[i].lr);
        assert_true(fabs(cell[3] - want[i].grad_norm) <= 1e-5 * want[i].grad_norm);
        assert_true(cell[8] == want[i].scale);
    }
    fclose(f);
    snprintf(args, sizeof args, "--load %s --steps 7 --attention tiled", fixture);
    expect_refused(2, args, "--attention tiled does not match the snapshot");
}

/* The number after `label` in out, or NAN. */
static double number_after(const char *out, const char *label)
{
    const char *at = strstr(out, label);
    return at ? atof(at + strlen(label)) : NAN;
}

/* Issue 28: under --parallel each rank's tape counts the products of its own rows of the global
 * batch only, and the report printed rank 0's count against the whole batch's estimate: 0.5 on
 * 2 ranks. The job's count is every rank's: the ratio to (6N + 12LTC) D is 1, and the compute
 * counted is what one process counts for the same global batch (--accum 2), exactly (FLOPs
 * depend on the shapes alone). */
static void test_parallel_counts_every_rank(void **state)
{
    (void)state;
    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        skip();
    const char *small = "--steps 3 --layers 1 --embd 16 --heads 2 --batch 2 --seq 12 "
                        "--eval-every 0 --eval-examples 8";
    const char *ratio = "products / estimate = ", *counted = "compute          ";
    JobResult *one = malloc(sizeof *one), *r = malloc(sizeof *r);
    char args[1024];
    snprintf(args, sizeof args, "%s --accum 2", small);
    run(one, 300, args);
    assert_int_equal(one->status, 0);
    double single = number_after(one->out, counted);
    assert_true(single > 0.0);
    assert_true(fabs(number_after(one->out, ratio) - 1.0) < 1e-6);
    static const char *const modes[] = { "ddp", "zero1", "zero2", "zero3" };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "ASAN_OPTIONS=detect_leaks=0 OMP_NUM_THREADS=1 timeout -s KILL "
                 "300 sh %s/scripts/mpirun -np 2 %s/bin/train_gpt --threads 1 --parallel %s %s "
                 "2>&1", TAPEGRAD_SOURCE_DIR, TAPEGRAD_BUILD_DIR, modes[i], small);
        r->status = test_run_shell(cmd, r->out, sizeof r->out);
        double x = number_after(r->out, ratio), job = number_after(r->out, counted);
        print_message("--parallel %s on 2 ranks: counted %g FLOP (one process, --accum 2: %g), "
                      "products / estimate %.6f\n", modes[i], job, single, x);
        if (r->status != 0 || !(fabs(x - 1.0) < 1e-6) || job != single) {
            print_error("%s\n", r->out);
            fail();
        }
    }
    free(one);
    free(r);
}

/* `scripts/mpirun -np N train_gpt --threads 1 ARGS` into r (status, output). */
static void run_ranks(JobResult *r, int n, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "ASAN_OPTIONS=detect_leaks=0 OMP_NUM_THREADS=1 timeout -s KILL 300 "
             "sh %s/scripts/mpirun -np %d %s/bin/train_gpt --threads 1 %s 2>&1",
             TAPEGRAD_SOURCE_DIR, n, TAPEGRAD_BUILD_DIR, args);
    r->status = test_run_shell(cmd, r->out, sizeof r->out);
}

static void run_ranks_ok(JobResult *r, int n, const char *args)
{
    run_ranks(r, n, args);
    if (r->status != 0) {
        print_error("mpirun -np %d train_gpt %s failed:\n%s\n", n, args, r->out);
        fail();
    }
}

/* Issue 30: a data-parallel run with --accum recorded ranks x accum as its accum, so resuming
 * with the same flags was refused ("--accum 2 does not match the snapshot, which has 4") and
 * resuming without --accum drew half the batch (the loss differed from the next step on). The
 * snapshot keeps --accum and the rank count apart: on 2 ranks with --accum 2, 6 steps straight
 * and 3 + save + load + 3 (with the flag or without) log the same loss and gradient norm to the
 * last digit under ddp and ZeRO 1-3; another rank count is refused with the reason unless it
 * draws the same global batch. (A pipeline's resume: test_pipeline_save_load_eval.) */
static void test_parallel_accum_resume(void **state)
{
    (void)state;
    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        skip();
    const char *common = "--layers 1 --embd 16 --heads 2 --batch 4 --eval-every 0 "
                         "--eval-examples 8 --decay constant --warmup 0";
    static const char *const modes[] = { "ddp", "zero1", "zero2", "zero3" };
    JobResult *r = malloc(sizeof *r);
    char args[2048], straight[512], second[512], half[512], a[8192], b[8192];
    in_dir(straight, sizeof straight, "par_straight.tsv");
    in_dir(second, sizeof second, "par_second.tsv");
    in_dir(half, sizeof half, "par_half.safetensors");
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        snprintf(args, sizeof args, "%s --parallel %s --accum 2 --steps 6 --log %s", common,
                 modes[i], straight);
        run_ranks_ok(r, 2, args);
        snprintf(args, sizeof args, "%s --parallel %s --accum 2 --steps 3 --save %s", common,
                 modes[i], half);
        run_ranks_ok(r, 2, args);
        for (int flag = 1; flag >= 0; flag--) {
            snprintf(args, sizeof args, "--parallel %s %s --eval-every 0 --eval-examples 8 "
                     "--load %s --steps 6 --log %s", modes[i], flag ? "--accum 2" : "", half,
                     second);
            run_ranks_ok(r, 2, args);
            log_rows(straight, 4, a, sizeof a);
            log_rows(second, 4, b, sizeof b);
            print_message("--parallel %s --accum 2 on 2 ranks, steps 4-6 resumed%s:\n%s",
                          modes[i], flag ? "" : " (no --accum)", b);
            assert_true(strlen(a) > 20);
            assert_string_equal(a, b);
        }
    }
    /* another rank count: the same global batch of 4 micro-batches or nothing; 3 ranks cannot
     * share it (refused by every rank alike, one message), one process with --accum 3 would
     * draw 3, one process without --accum is refused (not bit for bit: the reason and the two
     * ways on), one process given --accum 4 goes on and says that the sums are grouped anew */
    snprintf(args, sizeof args, "--parallel zero3 --eval-every 0 --load %s --steps 6", half);
    run_ranks(r, 3, args);
    assert_int_equal(r->status, 1);
    assert_non_null(strstr(r->out, "the snapshot's run drew 4 micro-batches a step (2 ranks x "
                                    "--accum 2), which 3 ranks cannot share evenly"));
    snprintf(args, sizeof args, "--load %s --steps 6 --accum 3", half);
    expect_refused(2, args, "1 rank x --accum 3 draws 3: give --accum 4");
    snprintf(args, sizeof args, "--eval-every 0 --eval-examples 8 --load %s --steps 4", half);
    expect_refused(2, args, "on 1 rank its gradients would be summed in another grouping and the "
                            "run would not continue bit for bit: resume on 2 ranks for that, or "
                            "give --accum 4 to continue it regrouped");
    snprintf(args, sizeof args, "--eval-every 0 --eval-examples 8 --load %s --steps 4 --accum 4",
             half);
    run(r, 300, args);
    assert_int_equal(r->status, 0);
    assert_non_null(strstr(r->out, "resuming 2 ranks x --accum 2 on 1 rank x --accum 4: the "
                                   "same 4 micro-batches a step"));
    free(r);
}

/* Issue 29: --parallel pipeline:* runs train_gpt's one loop, so it evaluates, saves and loads
 * like any run. On 2 ranks, 1F1B over 2 micro-batches (untied head, fp32): the evaluation
 * every 3 steps and at the end is printed and logged; 6 steps straight, 3 + --save + --load + 3
 * in the pipeline, the pipeline's snapshot continued in one process (--accum comes from the
 * snapshot), and one process's snapshot continued in a GPipe pipeline, all log the same loss
 * and gradient norm to the last digit as one process's 6 steps with --accum 2. */
static void test_pipeline_save_load_eval(void **state)
{
    (void)state;
    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        skip();
    const char *common = "--layers 2 --embd 16 --heads 2 --batch 4 --eval-examples 8 "
                         "--decay constant --warmup 0 --untied";
    JobResult *r = malloc(sizeof *r);
    char args[2048], one[512], straight[512], second[512], half[512], single[512];
    char a[8192], b[8192];
    in_dir(one, sizeof one, "pipe_one.tsv");
    in_dir(straight, sizeof straight, "pipe_straight.tsv");
    in_dir(second, sizeof second, "pipe_second.tsv");
    in_dir(half, sizeof half, "pipe_half.safetensors");
    in_dir(single, sizeof single, "pipe_single.safetensors");
    snprintf(args, sizeof args, "%s --accum 2 --eval-every 0 --steps 6 --log %s", common, one);
    run(r, 300, args);
    assert_int_equal(r->status, 0);
    log_rows(one, 4, a, sizeof a);
    assert_true(strlen(a) > 20);

    snprintf(args, sizeof args, "--parallel pipeline:1f1b --micro-batches 2 %s --eval-every 3 "
             "--steps 6 --log %s --sample 2", common, straight);
    run_ranks_ok(r, 2, args);
    assert_non_null(strstr(r->out, "step 3: validation loss "));
    assert_non_null(strstr(r->out, "step 6: validation loss "));
    assert_non_null(strstr(r->out, "exact match "));
    assert_non_null(strstr(r->out, "validation samples"));
    assert_non_null(strstr(r->out, "bubble over steps 2..6: measured "));
    double val = number_after(r->out, "step 6: validation loss ");
    assert_true(val > 0.0 && val < 10.0);
    assert_true(fabs(number_after(r->out, "validation loss  ") - val) < 1e-4);
    log_rows(straight, 4, b, sizeof b);
    print_message("one process, --accum 2, steps 4-6:\n%spipeline:1f1b on 2 ranks:\n%s", a, b);
    assert_string_equal(a, b);

    snprintf(args, sizeof args, "--parallel pipeline:1f1b --micro-batches 2 %s --eval-every 0 "
             "--steps 3 --save %s", common, half);
    run_ranks_ok(r, 2, args);
    assert_non_null(strstr(r->out, "snapshot: "));
    snprintf(args, sizeof args, "--parallel pipeline:1f1b --eval-every 0 --eval-examples 8 "
             "--load %s --steps 6 --log %s", half, second);
    run_ranks_ok(r, 2, args);
    log_rows(second, 4, b, sizeof b);
    assert_string_equal(a, b);
    /* the pipeline's snapshot in one process */
    snprintf(args, sizeof args, "--eval-every 0 --eval-examples 8 --load %s --steps 6 --log %s",
             half, second);
    run(r, 300, args);
    assert_int_equal(r->status, 0);
    log_rows(second, 4, b, sizeof b);
    assert_string_equal(a, b);
    /* one process's snapshot in a pipeline; a --micro-batches that is not its --accum refused */
    snprintf(args, sizeof args, "%s --accum 2 --eval-every 0 --steps 3 --save %s", common,
             single);
    run(r, 300, args);
    assert_int_equal(r->status, 0);
    snprintf(args, sizeof args, "--parallel pipeline:gpipe --micro-batches 2 --eval-every 0 "
             "--eval-examples 8 --load %s --steps 6 --log %s", single, second);
    run_ranks_ok(r, 2, args);
    log_rows(second, 4, b, sizeof b);
    assert_string_equal(a, b);
    snprintf(args, sizeof args, "--parallel pipeline:gpipe --micro-batches 3 --eval-every 0 "
             "--load %s --steps 6", single);
    run_ranks(r, 2, args);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->out, "--micro-batches 3 does not match the snapshot"));
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_products_of_flags),
        cmocka_unit_test(test_flag_needs),
        cmocka_unit_test(test_outputs_checked_before_training),
        cmocka_unit_test(test_special_outputs_refused),
        cmocka_unit_test(test_out_of_memory_names_the_program),
        cmocka_unit_test(test_non_finite_model_refused),
        cmocka_unit_test(test_wrong_program_metadata),
        cmocka_unit_test(test_lora_resume),
        cmocka_unit_test(test_tiled_attention_resume),
        cmocka_unit_test(test_precision_and_switches_resume),
        cmocka_unit_test(test_final_fraction_kept),
        cmocka_unit_test(test_old_snapshot_loads),
        cmocka_unit_test(test_parallel_counts_every_rank),
        cmocka_unit_test(test_parallel_accum_resume),
        cmocka_unit_test(test_pipeline_save_load_eval),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}

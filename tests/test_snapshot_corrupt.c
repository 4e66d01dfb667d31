/* Snapshots that are not valid: cut at every length, a corrupt header length, malformed JSON,
 * impossible offsets and shapes. Each is refused with a message that names the file and the
 * problem, and none crashes (run under SANITIZE=1 too). */
#include "tests/snapshot_test_helpers.h"

#include "optim/train_snapshot.h"

/* A file laid out by hand: the header text as given (padded with spaces to 8 bytes), then data.
 * For headers no JSON library would write. */
static void write_raw(const char *path, const char *header, size_t header_len, const void *data,
                      size_t data_len)
{
    size_t padded = (header_len + 7) & ~(size_t)7;
    unsigned char *buf = calloc(1, 8 + padded + data_len);
    set_header_length(buf, padded);
    memcpy(buf + 8, header, header_len);
    memset(buf + 8 + header_len, ' ', padded - header_len);
    if (data_len)
        memcpy(buf + 8 + padded, data, data_len);
    spit(path, buf, 8 + padded + data_len);
    free(buf);
}

static void test_truncated_at_every_length(void **state)
{
    (void)state;
    char path[512], cut[512];
    in_dir(path, sizeof path, "whole.safetensors");
    in_dir(cut, sizeof cut, "cut.safetensors");
    size_t len;
    unsigned char *whole = write_small(path, &len);
    for (size_t n = 0; n < len; n++) {
        spit(cut, whole, n);
        expect_open_fails(cut, "truncated");
    }
    spit(cut, whole, len);   /* the whole file is fine */
    SnapshotError err;
    SnapshotReader *r = snapshot_open(cut, &err);
    assert_non_null(r);
    snapshot_close(r);
    print_message("%zu truncated lengths of a %zu-byte file refused\n", len, len);
    free(whole);
}

static void test_corrupt_header_length(void **state)
{
    (void)state;
    char path[512], bad[512];
    in_dir(path, sizeof path, "good.safetensors");
    in_dir(bad, sizeof bad, "bad_length.safetensors");
    size_t len;
    unsigned char *file = write_small(path, &len);
    uint64_t n = header_length(file);
    const struct {
        uint64_t    length;
        const char *needle;
    } cases[] = {
        { (uint64_t)1 << 63, "is over the limit of 100000000 bytes" },
        { len, "truncated: the header length is" },
        { 0, "too short for a JSON object" },
        { n - 8, "not valid JSON" },
        { n + 4, "bytes other than padding" },   /* the JSON, then "ABCD" of the first tensor */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_header_length(file, cases[i].length);
        spit(bad, file, len);
        expect_open_fails(bad, cases[i].needle);
    }
    free(file);
}

static void test_malformed_headers(void **state)
{
    (void)state;
    static const struct {
        const char *header;
        size_t      data;     /* bytes of data after the header */
        const char *needle;
    } cases[] = {
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}", 4,
          "not valid JSON" },
        { "[1, 2]", 0, "does not start with '{'" },
        { "{} x", 0, "bytes other than padding" },
        { "{\"\xff\": 1}", 0, "not valid UTF-8" },
        { "{\"\xed\xa0\x80\": 1}", 0, "not valid UTF-8" },   /* a surrogate */
        { "{\"a\": 1}", 0, "tensor 'a' is not a JSON object" },
        { "{\"a\": {\"dtype\": \"F99\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
          "tensor 'a' has unknown dtype F99" },
        { "{\"a\": {\"dtype\": 5, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
          "unknown dtype (not a string)" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4, -1], \"data_offsets\": [0, 4]}}", 4,
          "shape holds something other than a size" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4,
          "shape holds something other than a size" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": \"4\", \"data_offsets\": [0, 4]}}", 4,
          "shape is not a list" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,4], \"data_offsets\": [0, 4]}}",
          4, "at most 8 sizes" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0]}}", 4,
          "data_offsets is not a pair" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [4, 0]}}", 4,
          "data_offsets is not a pair" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 1e300]}}", 4,
          "data_offsets is not a pair" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 18014398509481984]}}",
          4, "data_offsets is not a pair" },   /* 2^54: past what a double holds exactly */
        { "{\"a\": {\"dtype\": \"U8\", \"data_offsets\": [0, 4]}}", 4, "tensor 'a' has no 'shape'" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4], \"foo\": 1}}", 4,
          "tensor 'a' has an unexpected field 'foo'" },
        { "{\"a\": {\"dtype\": \"U8\", \"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}}",
          4, "tensor 'a' has field 'dtype' twice" },
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 4,
          "tensor 'a' is F32 [2], 8 bytes, but its data_offsets [0, 4] span 4" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [0, 8]}}", 4,
          "tensor 'a' has data_offsets [0, 8] but the data buffer holds 4 bytes" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [0, 8]},"
          " \"b\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [4, 12]}}", 12,
          "tensors 'a' and 'b' overlap: data_offsets [0, 8] and [4, 12]" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]},"
          " \"b\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [8, 12]}}", 12,
          "gap in the data buffer: bytes [4, 8) before tensor 'b'" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}}", 8,
          "the data buffer holds 8 bytes but the tensors cover only 4" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]},"
          " \"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [4, 8]}}", 8,
          "tensor 'a' appears twice" },
        { "{\"__metadata__\": {\"step\": 5}}", 0, "metadata 'step' is not a string" },
        { "{\"__metadata__\": [\"step\"]}", 0, "__metadata__ is not a JSON object" },
        { "{\"__metadata__\": {\"k\": \"1\", \"k\": \"2\"}}", 0, "metadata 'k' appears twice" },
        { "{\"__metadata__\": {}, \"__metadata__\": {}}", 0, "__metadata__ appears twice" },
    };
    static const char data[16] = "AAAAAAAAAAAAAAAA";
    char path[512];
    in_dir(path, sizeof path, "malformed.safetensors");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_raw(path, cases[i].header, strlen(cases[i].header), data, cases[i].data);
        expect_open_fails(path, cases[i].needle);
    }
    static const char with_nul[] = "{\"a\0\": 1}";
    write_raw(path, with_nul, sizeof with_nul - 1, NULL, 0);
    expect_open_fails(path, "NUL byte");

    /* Controls: the same hand-made layout is accepted when it is right. */
    const char *good = "{\"a\": {\"dtype\": \"U8\", \"shape\": [2, 2], \"data_offsets\": [0, 4]},"
                       " \"z\": {\"dtype\": \"I64\", \"shape\": [0], \"data_offsets\": [4, 4]}}";
    write_raw(path, good, strlen(good), data, 4);
    SnapshotError err;
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    char back[4];
    assert_true(snapshot_read(r, "a", SNAPSHOT_U8, 2, (int64_t[]){ 2, 2 }, back, &err));
    assert_memory_equal(back, "AAAA", 4);
    assert_int_equal(snapshot_count(r), 2);
    snapshot_close(r);
    write_raw(path, "{}", 2, NULL, 0);
    r = snapshot_open(path, &err);
    assert_non_null(r);
    assert_int_equal(snapshot_count(r), 0);
    assert_int_equal(snapshot_meta_count(r), 0);
    snapshot_close(r);
}

static void test_open_errors(void **state)
{
    (void)state;
    char path[512];
    expect_open_fails(in_dir(path, sizeof path, "does_not_exist.safetensors"),
                      "cannot open: No such file or directory");
    expect_open_fails(dir, "not a regular file");
}

/* ---- well-formed files with wrong metadata ------------------------------------------------
 * Issue 18: header-only files reached the library's own checks from metadata (SIGABRT: an Adam
 * beta1 of 1.5, Adafactor's decay exponent 0, Nesterov without momentum, 2^31-1 layers), ran for
 * minutes (100 000 layers) or were accepted silently (NaN clip, eps or decay; momentum 5; a name
 * cut at an escaped NUL). Each case below edits one key of a valid training snapshot (two for
 * Nesterov) and must be refused with a message naming the key: the load runs in a child, so an
 * abort counts as a crash and a minute without an answer as a hang, not as the end of the test. */
typedef enum { LOAD_CLEAR, LOAD_UNCLEAR, LOAD_ACCEPTED, LOAD_CRASH, LOAD_HANG } LoadOutcome;
static const char *const OUTCOME_NAMES[] = { "clear error", "unclear error", "silently accepted",
                                             "crash", "hang" };

static LoadOutcome load_outcome(const char *path, const char *needle)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        par_set_threads(1);
        alarm(60);
        SnapshotError err = { { 0 } };
        SnapshotReader *r = snapshot_open(path, &err);
        Trainer *t = r ? train_snapshot_load(r, path, &err) : NULL;
        if (t)
            _exit(LOAD_ACCEPTED);
        size_t n = strlen(path);
        bool clear = strncmp(err.message, path, n) == 0 && strstr(err.message, needle);
        fprintf(stderr, "    %s\n", err.message);
        _exit(clear ? LOAD_CLEAR : LOAD_UNCLEAR);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status))
        return WTERMSIG(status) == SIGALRM ? LOAD_HANG : LOAD_CRASH;
    return (LoadOutcome)WEXITSTATUS(status);
}

static void save_trainer(const char *path, TrainOptimizer kind)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = 11, .max_seq = 8, .n_layer = 2, .n_head = 2,
                           .n_embd = 16, .tied = true, .fused_qkv = true };
    c.optimizer = kind;
    c.sgd.momentum = 0.9;
    Trainer *t = trainer_new(&c);
    SnapshotError err;
    assert_true(train_snapshot_save(t, path, NULL, NULL, 0, &err));
    trainer_free(t);
}

typedef struct {
    TrainOptimizer kind;
    const char    *key, *value;     /* value: raw JSON text */
    const char    *needle;          /* in the message */
} MetaCase;

static const MetaCase META_CASES[] = {
    /* what made the library abort */
    { TRAIN_ADAMW, "optim.beta1", "\"1.5\"", "'optim.beta1' = 1.5 is out of range [0, 0.9999]" },
    { TRAIN_ADAMW, "optim.beta2", "\"1\"", "'optim.beta2' = 1 is out of range" },
    { TRAIN_ADAM8BIT, "optim.beta1", "\"1.5\"", "'optim.beta1' = 1.5" },
    { TRAIN_ADAM8BIT, "optim.beta2", "\"-0.5\"", "'optim.beta2' = -0.5" },
    { TRAIN_ADAFACTOR, "optim.decay_exponent", "\"0\"", "'optim.decay_exponent' = 0" },
    { TRAIN_ADAFACTOR, "optim.decay_exponent", "\"2\"", "'optim.decay_exponent' = 2" },
    { TRAIN_ADAFACTOR, "optim.beta1", "\"1\"", "'optim.beta1' = 1 is out of range" },
    { TRAIN_SGD, "optim.nesterov", "\"true\"", NULL },    /* with momentum 0: below */
    { TRAIN_ADAMW, "model.n_layer", "\"2147483647\"",
      "'model.n_layer' is 2147483647, not in 1..64" },
    { TRAIN_ADAMW, "model.n_layer", "\"100000\"", "'model.n_layer' is 100000, not in 1..64" },
    { TRAIN_ADAMW, "model.n_embd", "\"1048576\"", "'model.n_embd' is 1048576, not in 1..16384" },
    { TRAIN_ADAMW, "model.max_seq", "\"65537\"", "'model.max_seq' is 65537" },
    { TRAIN_ADAMW, "model.vocab_size", "\"4294967307\"", "'model.vocab_size' is 4294967307" },
    /* what was accepted silently */
    { TRAIN_ADAMW, "train.clip", "\"nan\"", "'train.clip' = nan is out of range" },
    { TRAIN_ADAMW, "train.clip", "\"-1\"", "'train.clip' = -1" },
    { TRAIN_ADAMW, "train.clip", "\"inf\"", "'train.clip' = inf" },
    { TRAIN_ADAMW, "optim.eps", "\"nan\"", "'optim.eps' = nan" },
    { TRAIN_ADAMW, "optim.eps", "\"-1\"", "'optim.eps' = -1" },
    { TRAIN_ADAMW, "optim.eps", "\"0\"", "'optim.eps' = 0" },
    { TRAIN_ADAMW, "optim.eps", "\"inf\"", "'optim.eps' = inf" },
    { TRAIN_ADAMW, "optim.weight_decay", "\"nan\"", "'optim.weight_decay' = nan" },
    { TRAIN_ADAMW, "optim.weight_decay", "\"-1\"", "'optim.weight_decay' = -1" },
    { TRAIN_ADAMW, "optim.weight_decay", "\"inf\"", "'optim.weight_decay' = inf" },
    { TRAIN_ADAMW, "optim.beta1", "\"nan\"", "'optim.beta1' = nan" },
    { TRAIN_SGD, "optim.momentum", "\"5\"", "'optim.momentum' = 5 is out of range [0, 0.999]" },
    { TRAIN_SGD, "optim.momentum", "\"nan\"", "'optim.momentum' = nan" },
    { TRAIN_SGD, "optim.weight_decay", "\"-1\"", "'optim.weight_decay' = -1" },
    { TRAIN_ADAFACTOR, "optim.eps1", "\"0\"", "'optim.eps1' = 0" },
    { TRAIN_ADAFACTOR, "optim.eps2", "\"nan\"", "'optim.eps2' = nan" },
    { TRAIN_ADAFACTOR, "optim.clip_threshold", "\"-1\"", "'optim.clip_threshold' = -1" },
    { TRAIN_ADAFACTOR, "optim.weight_decay", "\"inf\"", "'optim.weight_decay' = inf" },
    { TRAIN_ADAMW, "train.seed", "\"18446744073709551615\"",
      "'train.seed' = 18446744073709551615 is out of range" },
    { TRAIN_ADAMW, "loss_scale.init_scale", "\"nan\"", "'loss_scale.init_scale' = nan" },
    { TRAIN_ADAMW, "loss_scale.growth_factor", "\"0.5\"", "'loss_scale.growth_factor' = 0.5" },
    { TRAIN_ADAMW, "loss_scale.backoff_factor", "\"inf\"", "'loss_scale.backoff_factor' = inf" },
    { TRAIN_ADAMW, "loss_scale.growth_interval", "\"18446744073709551615\"",
      "'loss_scale.growth_interval' = 18446744073709551615 is out of range [1, 1000000000]" },
    { TRAIN_ADAMW, "loss_scale.growth_interval", "\"4294967296\"",
      "'loss_scale.growth_interval' = 4294967296" },
    { TRAIN_ADAMW, "precision.fp8_window", "\"4294967297\"", "'precision.fp8_window'" },
    { TRAIN_ADAMW, "train.step", "\"18446744073709551615\"", "'train.step'" },
    { TRAIN_ADAMW, "optim.step", "\"4294967296\"", "'optim.step' = 4294967296" },
    /* names cut at an escaped NUL */
    { TRAIN_ADAMW, "optim.kind", "\"adamw\\u0000x\"", "escapes a NUL character" },
    { TRAIN_ADAM8BIT, "optim.rounding", "\"nearest\\u0000x\"", "escapes a NUL character" },
    { TRAIN_ADAMW, "format", "\"tapegrad-train-1\\u0000\"", "escapes a NUL character" },
};

static void test_wrong_metadata(void **state)
{
    (void)state;
    char good[4][512], bad[512];
    for (int k = 0; k < 4; k++) {
        char name[64];
        snprintf(name, sizeof name, "good_%s.safetensors", trainer_optimizer_name(k));
        save_trainer(in_dir(good[k], sizeof good[k], name), (TrainOptimizer)k);
        assert_int_equal(load_outcome(good[k], ""), LOAD_ACCEPTED);
    }
    in_dir(bad, sizeof bad, "bad_meta.safetensors");
    int counts[5] = { 0 };
    size_t n = sizeof META_CASES / sizeof META_CASES[0];
    for (size_t i = 0; i < n; i++) {
        const MetaCase *c = &META_CASES[i];
        const char *needle = c->needle;
        edit_meta(good[c->kind], bad, c->key, c->value);
        if (!needle) {          /* Nesterov needs momentum > 0 */
            edit_meta(bad, bad, "optim.momentum", "\"0\"");
            needle = "'optim.nesterov' is true with 'optim.momentum' = 0";
        }
        LoadOutcome got = load_outcome(bad, needle);
        counts[got]++;
        if (got != LOAD_CLEAR)
            print_error("%s %s = %s: %s (expected a message with \"%s\")\n",
                        trainer_optimizer_name(c->kind), c->key, c->value, OUTCOME_NAMES[got],
                        needle);
    }
    /* A tensor name with an escaped NUL: "wte.weight\u0000x" would read as "wte.weight". */
    edit_header(good[TRAIN_ADAMW], bad, "\"wte.weight\"", "\"wte.weight\\u0000x\"");
    counts[load_outcome(bad, "escapes a NUL character")]++;
    print_message("%zu well-formed snapshots with wrong metadata or names: %d clear errors, %d "
                  "unclear, %d accepted, %d crashes, %d hangs\n", n + 1, counts[LOAD_CLEAR],
                  counts[LOAD_UNCLEAR], counts[LOAD_ACCEPTED], counts[LOAD_CRASH],
                  counts[LOAD_HANG]);
    assert_int_equal(counts[LOAD_CLEAR], (int)n + 1);
}

/* ---- keys that contradict each other ---------------------------------------------------------
 * Issue 30: each key in range, but two of them saying different things, was loaded silently
 * (precision.param = e4m3 under an fp32 policy changed the validation loss). Each must be
 * refused with one message naming both keys; a float key takes decimal text only. */

/* A snapshot of a tiny trainer under preset, after one step (so fp8 delayed scaling has an
 * amax history); with poison, the history's first value is amax when it is saved. */
static void save_policy(const char *path, const char *preset, bool delayed, bool poison,
                        float amax)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = 11, .max_seq = 8, .n_layer = 1, .n_head = 2,
                           .n_embd = 16, .tied = true, .fused_qkv = true };
    assert_true(policy_preset(preset, &c.policy));
    if (delayed)
        c.policy.fp8_scaling = POLICY_FP8_DELAYED;
    Trainer *t = trainer_new(&c);
    int tokens[16], targets[16];
    for (int i = 0; i < 16; i++)
        tokens[i] = targets[i] = i % 11;
    trainer_step(t, tokens, targets, 2, 8, 1e-3);
    if (poison) {
        assert_non_null(t->tape->amax_history);
        t->tape->amax_history[0] = amax;
    }
    SnapshotError err;
    assert_true(train_snapshot_save(t, path, NULL, NULL, 0, &err));
    trainer_free(t);
}

static void test_contradicting_metadata(void **state)
{
    (void)state;
    char fp32[512], fp8[512], bad[512];
    in_dir(fp32, sizeof fp32, "fp32.safetensors");
    in_dir(fp8, sizeof fp8, "fp8_delayed.safetensors");
    in_dir(bad, sizeof bad, "contradiction.safetensors");
    save_policy(fp32, "fp32", false, false, 0);
    save_policy(fp8, "fp8", true, false, 0);
    assert_int_equal(load_outcome(fp32, ""), LOAD_ACCEPTED);
    assert_int_equal(load_outcome(fp8, ""), LOAD_ACCEPTED);
    static const struct {
        bool        fp8;
        const char *key, *value, *key2, *value2, *needle;
    } cases[] = {
        { false, "precision.param", "\"e4m3\"", NULL, NULL,
          "'precision.param' = e4m3 contradicts 'precision.policy' = fp32, whose param is fp32" },
        { false, "precision.policy", "\"fp8\"", NULL, NULL,
          "'precision.param' = fp32 contradicts 'precision.policy' = fp8, whose param is bf16" },
        { false, "precision.compute", "\"bf16\"", NULL, NULL,
          "'precision.compute' = bf16 contradicts 'precision.policy' = fp32" },
        { false, "precision.accumulate_low", "\"true\"", NULL, NULL,
          "'precision.accumulate_low' = true contradicts 'precision.policy' = fp32" },
        { false, "precision.fp8_scaling", "\"delayed\"", NULL, NULL,
          "'precision.fp8_scaling' = delayed contradicts 'precision.policy' = fp32" },
        { false, "loss_scale.scale", "\"2147483648\"", NULL, NULL,
          "'loss_scale.scale' = 2147483648 contradicts 'loss_scale.mode' = none" },
        { false, "loss_scale.mode", "\"static\"", "loss_scale.scale", "\"3\"",
          "'loss_scale.scale' = 3 contradicts 'loss_scale.mode' = static, whose scale is "
          "always 65536" },
        { false, "train.clip", "\"0x1\"", NULL, NULL, "'train.clip' is '0x1', not a decimal" },
        { false, "optim.beta1", "\"0x0.8p0\"", NULL, NULL, "'optim.beta1' is '0x0.8p0'" },
        { false, "loss_scale.scale", "\"0x10\"", NULL, NULL, "'loss_scale.scale' is '0x10'" },
        { true, "precision.amax_history_steps", "\"0\"", NULL, NULL,
          "'precision.amax_history_steps' = 0 contradicts 'precision.amax_history_slots'" },
        { true, "precision.amax_history_steps", "\"2147483648\"", NULL, NULL,
          "'precision.amax_history_steps' = 2147483648 contradicts 'train.step' = 1" },
        { true, "precision.amax_history_steps", "\"2\"", NULL, NULL,
          "'precision.amax_history_steps' = 2 contradicts 'train.step' = 1" },
        { true, "precision.act", "\"fp32\"", NULL, NULL,
          "'precision.act' = fp32 contradicts 'precision.policy' = fp8, whose act is e4m3" },
    };
    size_t n = sizeof cases / sizeof cases[0];
    int clear = 0;
    for (size_t i = 0; i < n; i++) {
        edit_meta(cases[i].fp8 ? fp8 : fp32, bad, cases[i].key, cases[i].value);
        if (cases[i].key2)
            edit_meta(bad, bad, cases[i].key2, cases[i].value2);
        LoadOutcome got = load_outcome(bad, cases[i].needle);
        clear += got == LOAD_CLEAR;
        if (got != LOAD_CLEAR)
            print_error("%s = %s: %s (expected a message with \"%s\")\n", cases[i].key,
                        cases[i].value, OUTCOME_NAMES[got], cases[i].needle);
    }
    /* An amax history holding what no amax is. */
    const float poisons[] = { NAN, -1.0f, INFINITY };
    for (int i = 0; i < 3; i++) {
        save_policy(bad, "fp8", true, true, poisons[i]);
        LoadOutcome got = load_outcome(bad, "an amax is a finite magnitude >= 0");
        clear += got == LOAD_CLEAR;
        if (got != LOAD_CLEAR)
            print_error("amax history %g: %s\n", (double)poisons[i], OUTCOME_NAMES[got]);
    }
    print_message("%zu snapshots with contradicting keys: %d clear errors\n", n + 3, clear);
    assert_int_equal(clear, (int)n + 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncated_at_every_length),
        cmocka_unit_test(test_corrupt_header_length),
        cmocka_unit_test(test_malformed_headers),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_wrong_metadata),
        cmocka_unit_test(test_contradicting_metadata),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}

/* The config schemas (autograd/schema.h): GPT_SCHEMA (nn/gpt.h), LORA_SCHEMA (nn/gpt_lora.h),
 * TRAINER_SCHEMA with TRAINER_LOCAL_SCHEMA (optim/train.h), the trainer's counters
 * (optim/snapshot_keys.h),
 * SCHED_SCHEMA (optim/schedule.h), DATA_SCHEMA (data/dataset.h) and the run's own (run/run.h:
 * RUN_KEPT_SCHEMA, and RUN_LOCAL_SCHEMA with RUN_PARALLEL_SCHEMA, all run-only). Each row's
 * default is its struct's default; a struct written and read back is the same struct; a bad
 * value is refused naming the key and the range; every key of a saved training snapshot is a
 * row of a schema and every kept row is in the file; the run-only rows are in no snapshot and
 * live in structs of their own (TrainerLocal, RunLocal), which a resumed run keeps by assigning
 * them back. Every program's flags against these schemas:
 * tests/test_schema_cli.c. */
#include "tests/snapshot_test_helpers.h"

#include <string.h>

#include "autograd/schema.h"
#include "data/dataset.h"
#include "nn/gpt.h"
#include "nn/gpt_lora.h"
#include "nn/gpt_snapshot.h"
#include "nn/lora_snapshot.h"
#include "autograd/policy.h"
#include "optim/adafactor.h"
#include "optim/adamw.h"
#include "optim/loss_scale.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "optim/snapshot_keys.h"
#include "optim/train.h"
#include "optim/train_snapshot.h"
#include "run/run.h"

/* Every row's default, parsed into a copy of the default struct whose field was scribbled on,
 * formats as the default struct's field (a SUB row's rows, each in its inner struct). */
typedef struct {
    const Schema  *sc;
    const char    *defaults;
    unsigned char *scratch;
} DefaultsCtx;

static size_t field_size(const SchemaRow *r)
{
    static const size_t size[] = {
        [SCHEMA_DOUBLE] = sizeof(double), [SCHEMA_FLOAT] = sizeof(float),
        [SCHEMA_U64] = sizeof(uint64_t), [SCHEMA_LONG] = sizeof(long),
        [SCHEMA_INT] = sizeof(int), [SCHEMA_BOOL] = sizeof(bool), [SCHEMA_CHOICE] = sizeof(int),
        [SCHEMA_STRING] = sizeof(const char *), [SCHEMA_BYTES] = sizeof(size_t),
    };
    return r->type == SCHEMA_CUSTOM ? r->size : size[r->type];
}

static bool default_leaf(const SchemaRow *r, const char *key, const void *s, void *ctx)
{
    DefaultsCtx *c = ctx;
    char want[256], got[256], why[256];
    void *mine = c->scratch + ((const char *)s - c->defaults);
    if ((const char *)s != c->defaults)
        return true;    /* an inner struct's: checked against its own defaults */
    if ((!r->def && r->type != SCHEMA_STRING) || !r->help) {
        print_error("%s: row '%s' has no default or no help\n", c->sc->name, key);
        fail();
    }
    if (!r->def) {      /* a string without a default: not given, NULL */
        assert_null(*(const char *const *)((const char *)s + r->offset));
        return true;
    }
    memset((char *)mine + r->offset, 0x5a, r->type == SCHEMA_BOOL ? 0 : field_size(r));
    if (!schema_parse(r, r->def, mine, why, sizeof why)) {
        print_error("%s: default of '%s': %s\n", c->sc->name, key, why);
        fail();
    }
    schema_format(r, s, want, sizeof want);
    schema_format(r, mine, got, sizeof got);
    if (strcmp(want, got) != 0) {
        print_error("%s: '%s' defaults to %s, its row says %s (%s)\n", c->sc->name, key, want,
                    r->def, got);
        fail();
    }
    return true;
}

static void check_defaults(const Schema *sc, const void *defaults, size_t size)
{
    DefaultsCtx c = { sc, defaults, malloc(size) };
    assert_non_null(c.scratch);
    memcpy(c.scratch, defaults, size);      /* the other fields, which a check may read */
    schema_each(sc, NULL, defaults, default_leaf, &c);
    free(c.scratch);
}

static void test_defaults_are_the_structs(void **state)
{
    (void)state;
    GptConfig g = gpt_config_default();
    check_defaults(&GPT_SCHEMA, &g, sizeof g);
    LoraConfig l = lora_config_default();
    check_defaults(&LORA_SCHEMA, &l, sizeof l);
    TrainerConfig t = trainer_config_default();
    check_defaults(&TRAINER_SCHEMA, &t, sizeof t);
    SchedConfig c = sched_defaults();
    check_defaults(&SCHED_SCHEMA, &c, sizeof c);
    AdamWConfig a = adamw_defaults();
    check_defaults(&ADAMW_SCHEMA, &a, sizeof a);
    SgdConfig sg = sgd_defaults();
    check_defaults(&SGD_SCHEMA, &sg, sizeof sg);
    AdafactorConfig af = adafactor_defaults();
    check_defaults(&ADAFACTOR_SCHEMA, &af, sizeof af);
    PrecisionPolicy p;
    assert_true(policy_preset("fp32", &p));
    check_defaults(&POLICY_SCHEMA, &p, sizeof p);
    LossScaleConfig ls = loss_scale_defaults();
    check_defaults(&LOSS_SCALE_SCHEMA, &ls, sizeof ls);
    DataConfig d = data_config_default();
    check_defaults(&DATA_SCHEMA, &d, sizeof d);
    RunKept k = run_kept_default();
    check_defaults(&RUN_KEPT_SCHEMA, &k, sizeof k);
    RunLocal rl = run_local_default();
    check_defaults(&RUN_LOCAL_SCHEMA, &rl, sizeof rl);
    check_defaults(&RUN_PARALLEL_SCHEMA, &rl.parallel, sizeof rl.parallel);
    RunRecord rr = { .ranks = 1 };      /* one process, no LoRA base */
    check_defaults(&RUN_RECORD_SCHEMA, &rr, sizeof rr);
}

/* s written under prefix and read back into a struct that starts as blank: the same kept rows. */
static void round_trip(const Schema *sc, const char *prefix, const void *s, void *blank)
{
    char path[512];
    in_dir(path, sizeof path, "round_trip.safetensors");
    SnapshotError err = { { 0 } };
    SnapshotWriter *w = snapshot_writer_new();
    assert_true(schema_write(sc, prefix, s, w, &err));
    assert_true(snapshot_write(w, path, &err));
    snapshot_writer_free(w);
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    if (!schema_read(sc, prefix, schema_reader_value, r, path, blank, &err)) {
        print_error("%s\n", err.message);
        fail();
    }
    /* before the reader closes: a string read points into its metadata */
    const SchemaRow *d = schema_differs(sc, s, blank);
    if (d) {
        print_error("%s: '%s' differs after a round trip\n", sc->name, d->key);
        fail();
    }
    snapshot_close(r);
}

static void test_round_trip(void **state)
{
    (void)state;
    GptConfig g = { .vocab_size = 11, .max_seq = 9, .n_layer = 3, .n_head = 2, .n_embd = 6,
                    .tied = false, .fused_qkv = false }, g2 = { 0 };
    round_trip(&GPT_SCHEMA, "base", &g, &g2);
    /* field by field: the struct's padding bytes are nobody's (a sanitizer build leaves stack
     * garbage in them) */
    assert_int_equal(g2.vocab_size, 11);
    assert_int_equal(g2.max_seq, 9);
    assert_int_equal(g2.n_layer, 3);
    assert_int_equal(g2.n_head, 2);
    assert_int_equal(g2.n_embd, 6);
    assert_false(g2.tied);
    assert_false(g2.fused_qkv);
    LoraConfig l = { .rank = 3, .alpha = 0.375f, .targets = LORA_TARGET_K | LORA_TARGET_MLP,
                     .qlora = true }, l2 = lora_config_default();
    round_trip(&LORA_SCHEMA, "lora", &l, &l2);
    TrainerConfig t = trainer_config_default(), t2 = trainer_config_default();
    t.optimizer = TRAIN_SGD;
    t.sgd.momentum = 0.5;
    t.sgd.nesterov = true;
    t.sgd.weight_decay = 0.25;
    t.clip = 0.1;
    t.seed = 123456789012345ULL;
    policy_preset("bf16", &t.policy);
    t.loss_scale.mode = LOSS_SCALE_DYNAMIC;
    t.loss_scale.growth_interval = 7;
    round_trip(&TRAINER_SCHEMA, NULL, &t, &t2);
    assert_int_equal(t2.optimizer, TRAIN_SGD);
    assert_true(t2.sgd.nesterov);
    assert_string_equal(t2.policy.name, "bf16");
    /* a task, and a text: data.kind says which rows apply (a task's read into a struct that
     * held a text, and the other way) */
    DataConfig task = { .task = "sub", .task_size = 4, .msd_first = true };
    DataConfig text = { .path = "data/tinyshakespeare.txt" }, d2 = text;
    round_trip(&DATA_SCHEMA, "data", &task, &d2);
    assert_null(d2.path);
    assert_int_equal(d2.task_size, 4);
    assert_true(d2.msd_first);
    assert_ptr_equal(d2.task, task_names[1]);      /* the name's own text, not the file's */
    round_trip(&DATA_SCHEMA, "data", &text, &d2);
    assert_null(d2.task);
    /* RunKept: its data under data. (a SUB row), its own keys as a training snapshot has them */
    RunKept k = { .data = text, .steps = 77, .batch = 5, .accum = 3, .seq = 48,
                  .attention = RUN_ATTENTION_TILED }, k2 = run_kept_default();
    round_trip(&RUN_KEPT_SCHEMA, NULL, &k, &k2);
    assert_int_equal(k2.seq, 48);
    assert_int_equal(k2.steps, 77);
    assert_int_equal(k2.batch, 5);
    assert_int_equal(k2.accum, 3);
    assert_int_equal(k2.attention, RUN_ATTENTION_TILED);
    assert_null(k2.data.task);
    /* RunRecord: the lora.* rows only for a LoRA run; the hash all 64 bits */
    RunRecord r = { .ranks = 3, .lora = true, .lora_base = "base.st",
                    .lora_base_fnv1a = 0xfedcba9876543210u }, r2 = { .lora = true };
    round_trip(&RUN_RECORD_SCHEMA, NULL, &r, &r2);
    assert_int_equal(r2.ranks, 3);     /* the base's text: compared before the reader closed */
    assert_true(r2.lora_base_fnv1a == 0xfedcba9876543210u);
}

/* One kept row given text in a file: refused with "PATH: metadata ...needle...". */
typedef struct {
    SnapshotWriter *w;
    const char     *key, *text;
} RefuseCtx;

static bool refuse_leaf(const SchemaRow *r, const char *key, const void *s, void *ctx)
{
    RefuseCtx *c = ctx;
    char value[256];
    SnapshotError err;
    if (r->kept && (!r->applies || r->applies(s))) {
        schema_format(r, s, value, sizeof value);
        snapshot_add_meta(c->w, key, strcmp(key, c->key) == 0 ? c->text : value, &err);
    }
    return true;
}

static void refused(const Schema *sc, const char *prefix, const void *s, size_t size,
                    const char *key, const char *text, const char *needle)
{
    char path[512];
    in_dir(path, sizeof path, "refused.safetensors");
    SnapshotError err = { { 0 } };
    RefuseCtx c = { snapshot_writer_new(), key, text };
    schema_each(sc, prefix, s, refuse_leaf, &c);
    assert_true(snapshot_write(c.w, path, &err));
    snapshot_writer_free(c.w);
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    void *blank = malloc(size);
    memcpy(blank, s, size);
    assert_false(schema_read(sc, prefix, schema_reader_value, r, path, blank, &err));
    expect_message(err.message, path, needle);
    free(blank);
    snapshot_close(r);
}

static void test_refusals_name_key_and_range(void **state)
{
    (void)state;
    GptConfig g = gpt_config_default();
    refused(&GPT_SCHEMA, "model", &g, sizeof g, "model.n_layer", "65",
            "metadata 'model.n_layer' is 65, not in 1..64");
    refused(&GPT_SCHEMA, "base", &g, sizeof g, "base.tied", "1",
            "metadata 'base.tied' is '1', not true or false");
    LoraConfig l = lora_config_default();
    refused(&LORA_SCHEMA, "lora", &l, sizeof l, "lora.alpha", "2e6",
            "metadata 'lora.alpha' = 2000000 is out of range [1e-06, 1e+06]");
    refused(&LORA_SCHEMA, "lora", &l, sizeof l, "lora.alpha", "0.1",
            "metadata 'lora.alpha' = 0.1 is not a positive float");
    refused(&LORA_SCHEMA, "lora", &l, sizeof l, "lora.rank", "0",
            "metadata 'lora.rank' = 0 is out of range [1, 2147483647]");
    refused(&LORA_SCHEMA, "lora", &l, sizeof l, "lora.targets", "q,z", "'lora.targets' is 'q,z'");
    TrainerConfig t = trainer_config_default();
    refused(&TRAINER_SCHEMA, NULL, &t, sizeof t, "optim.eps", "0x1p-3",
            "metadata 'optim.eps' is '0x1p-3', not a decimal number");
    refused(&TRAINER_SCHEMA, NULL, &t, sizeof t, "precision.policy", "fp7",
            "metadata 'precision.policy' is 'fp7', not ");
    refused(&TRAINER_SCHEMA, NULL, &t, sizeof t, "train.seed", "4611686018427387905",
            "'train.seed' = 4611686018427387905 is out of range [0, 4611686018427387904]");
    SchedConfig c = sched_defaults();
    refused(&SCHED_SCHEMA, NULL, &c, sizeof c, "schedule.cooldown", "1000000001",
            "metadata 'schedule.cooldown' = 1000000001 is out of range [1, 1000000000]");
    refused(&SCHED_SCHEMA, NULL, &c, sizeof c, "schedule.warmup_fraction", "1.5",
            "metadata 'schedule.warmup_fraction' = 1.5 is out of range [0, 1]");
    t.optimizer = TRAIN_SGD;
    t.sgd.momentum = 0.0;
    refused(&TRAINER_SCHEMA, NULL, &t, sizeof t, "optim.nesterov", "true",
            "'optim.nesterov' is true with 'optim.momentum' = 0");
    DataConfig d = data_config_default();
    refused(&DATA_SCHEMA, "data", &d, sizeof d, "data.kind", "image",
            "metadata 'data.kind' is 'image', not task or text");
    refused(&DATA_SCHEMA, "data", &d, sizeof d, "data.task", "mul",
            "metadata 'data.task' is 'mul', which this version does not know (add, sub, "
            "reverse, sort)");
    refused(&DATA_SCHEMA, "data", &d, sizeof d, "data.task_size", "33",
            "metadata 'data.task_size' = 33 is out of range [1, 32]");
    refused(&DATA_SCHEMA, "data", &d, sizeof d, "data.msd_first", "true",
            "metadata 'data.msd_first' is 'true', not 0 or 1");
    d.task = "reverse";
    refused(&DATA_SCHEMA, "data", &d, sizeof d, "data.msd_first", "1",
            "'data.msd_first' is 1 with 'data.task' = reverse: only add and sub have it");
    /* a text's path is any text; a text without one is refused as missing */
    d = (DataConfig){ .path = "corpus.txt" };
    refused(&DATA_SCHEMA, "data", &d, sizeof d, "data.kind", "task",
            "missing metadata 'data.task'");
    RunKept k = run_kept_default();
    refused(&RUN_KEPT_SCHEMA, NULL, &k, sizeof k, "schedule.batch", "0",
            "metadata 'schedule.batch' = 0 is out of range [1, 65536]");
    refused(&RUN_KEPT_SCHEMA, NULL, &k, sizeof k, "run.attention", "flash",
            "metadata 'run.attention' is 'flash', which this version does not know (standard, "
            "tiled)");
    refused(&RUN_KEPT_SCHEMA, NULL, &k, sizeof k, "data.task_size", "40",
            "metadata 'data.task_size' = 40 is out of range [1, 32]");
    refused(&RUN_KEPT_SCHEMA, NULL, &k, sizeof k, "train.step", "1000000001",
            "metadata 'train.step' = 1000000001 is out of range [0, 1000000000]");
    /* the record's hash: 16 lowercase hexadecimal digits, neither fewer nor more */
    RunRecord rec = { .ranks = 1, .lora = true, .lora_base = "" };
    refused(&RUN_RECORD_SCHEMA, NULL, &rec, sizeof rec, "lora.base_fnv1a", "a4e89991",
            "metadata 'lora.base_fnv1a' is 'a4e89991', not 16 hexadecimal digits");
    refused(&RUN_RECORD_SCHEMA, NULL, &rec, sizeof rec, "lora.base_fnv1a", "A4E8999190DCF722",
            "not 16 hexadecimal digits");
    refused(&RUN_RECORD_SCHEMA, NULL, &rec, sizeof rec, "lora.base_fnv1a", "a4e8999190dcf7220",
            "not 16 hexadecimal digits");
    refused(&RUN_RECORD_SCHEMA, NULL, &rec, sizeof rec, "run.ranks", "0",
            "metadata 'run.ranks' is 0, not in 1..1048576");
}

/* A run-only row's value as a flag would give it, refused with needle in the sentence. */
static void refused_value(const Schema *sc, const char *key, void *s, const char *text,
                          const char *needle)
{
    char why[256];
    const SchemaRow *r = schema_find(sc, key);
    assert_non_null(r);
    assert_false(r->kept);
    if (schema_parse(r, text, s, why, sizeof why) || !strstr(why, needle)) {
        print_error("'%s' = '%s': \"%s\", not \"%s\"\n", key, text, why, needle);
        fail();
    }
}

static bool count_kept(const SchemaRow *r, const char *key, const void *s, void *ctx)
{
    (void)key, (void)s;
    *(int *)ctx += r->kept;
    return true;
}

static bool count_leaves(const SchemaRow *r, const char *key, const void *s, void *ctx)
{
    (void)r, (void)key, (void)s;
    *(int *)ctx += 1;
    return true;
}

/* RunLocal's rows (its RunParallel's too) are in no snapshot and RunKept's all are: they
 * give a flag its range, and a resumed run keeps its own RunLocal whole. */
static void test_run_local_is_run_only(void **state)
{
    (void)state;
    int kept = 0, leaves = 0;
    RunLocal src = run_local_default();
    schema_each(&RUN_LOCAL_SCHEMA, NULL, &src, count_kept, &kept);
    assert_int_equal(kept, 0);
    RunKept k = run_kept_default();
    schema_each(&RUN_KEPT_SCHEMA, NULL, &k, count_kept, &kept);
    schema_each(&RUN_KEPT_SCHEMA, NULL, &k, count_leaves, &leaves);
    assert_int_equal(kept, leaves);
    assert_true(leaves >= 8);       /* kind, task, task_size, msd_first, path, step, batch, ... */
    RunLocal l = run_local_default();
    refused_value(&RUN_LOCAL_SCHEMA, "threads", &l, "1025", "'threads' = 1025 is out of range "
                  "[0, 1024]");
    refused_value(&RUN_LOCAL_SCHEMA, "mem_budget", &l, "1125899906842625",
                  "'mem_budget' = 1125899906842625 is out of range [1, 1125899906842624]");
    refused_value(&RUN_LOCAL_SCHEMA, "mem_budget", &l, "64MiB",
                  "'mem_budget' is '64MiB', not an unsigned 64-bit integer");
    refused_value(&RUN_LOCAL_SCHEMA, "eval_examples", &l, "0",
                  "'eval_examples' = 0 is out of range [1, 16777216]");
    refused_value(&RUN_LOCAL_SCHEMA, "temperature", &l, "101",
                  "'temperature' = 101 is out of range [0, 100]");
    refused_value(&RUN_LOCAL_SCHEMA, "parallel.grad_wire", &l.parallel, "fp16",
                  "'grad_wire' is 'fp16', which this version does not know (auto, fp32, bf16, "
                  "e5m2)");
    refused_value(&RUN_LOCAL_SCHEMA, "parallel.micro_batches", &l.parallel, "4097",
                  "'micro_batches' = 4097 is out of range [1, 4096]");
    refused_value(&RUN_LOCAL_SCHEMA, "parallel.text", &l.parallel, "ring", "'parallel.text' is "
                  "'ring': ");
    /* a budget of 0 is no limit; a plan as --parallel takes it */
    char why[256];
    assert_true(schema_parse(schema_find(&RUN_LOCAL_SCHEMA, "mem_budget"), "0", &l, why,
                             sizeof why));
    assert_true(schema_parse(schema_find(&RUN_LOCAL_SCHEMA, "parallel.text"), "pipeline:1f1b,dp2",
                             &l.parallel, why, sizeof why));
    assert_string_equal(l.parallel.text, "pipeline:1f1b,dp2");
}

/* The key of a file's metadata is a kept row of one of the schemas (under its prefix), or the
 * format tag and the data RNG's words (snapshot_add_rng). */
static bool is_schema_key(const char *key, bool lora)
{
    const struct { const Schema *sc; const char *prefix; } all[] = {
        { &GPT_SCHEMA, "model." }, { &TRAINER_SCHEMA, "" }, { &TRAINER_COUNTER_SCHEMA, "" },
        { lora ? &LORA_SCHEMA : NULL, "lora." },
    };
    if (strcmp(key, "format") == 0 || strcmp(key, "train.data_rng.state") == 0 ||
        strcmp(key, "train.data_rng.inc") == 0)
        return true;
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        size_t n = strlen(all[k].prefix);
        const SchemaRow *r = all[k].sc && strncmp(key, all[k].prefix, n) == 0
                                 ? schema_find(all[k].sc, key + n) : NULL;
        if (r && r->kept)
            return true;
    }
    return false;
}

/* (a key of rows that apply to other optimizers, optim.beta1, may be another's) */
static bool in_file_leaf(const SchemaRow *row, const char *key, const void *s, void *ctx)
{
    bool has = snapshot_meta(ctx, key) != NULL;
    if ((row->kept && (!row->applies || row->applies(s)) && !has) || (!row->kept && has)) {
        print_error("'%s' %s the file\n", key, has ? "in" : "missing from");
        fail();
    }
    return true;
}

static void expect_rows_in(const SnapshotReader *r, const Schema *sc, const char *prefix,
                           const void *s)
{
    schema_each(sc, prefix, s, in_file_leaf, (void *)r);
}

static void check_saved_keys(TrainerConfig c, const LoraConfig *lc)
{
    char path[512];
    in_dir(path, sizeof path, "trainer.safetensors");
    Trainer *t = trainer_new(&c);
    if (lc)
        trainer_use_lora(t, lc, 7);
    SnapshotError err = { { 0 } };
    assert_true(train_snapshot_save(t, path, NULL, NULL, 0, &err));
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    for (int i = 0; i < snapshot_meta_count(r); i++)
        if (!is_schema_key(snapshot_meta_key(r, i), lc != NULL)) {
            print_error("the snapshot's key '%s' is in no schema\n", snapshot_meta_key(r, i));
            fail();
        }
    expect_rows_in(r, &GPT_SCHEMA, "model", &c.model);
    expect_rows_in(r, &TRAINER_SCHEMA, NULL, &c);
    if (lc)
        expect_rows_in(r, &LORA_SCHEMA, "lora", lc);
    assert_null(snapshot_meta(r, "run.checkpoint"));
    snapshot_close(r);
    trainer_free(t);
}

static void test_every_snapshot_key_is_a_schema_row(void **state)
{
    (void)state;
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = 11, .max_seq = 8, .n_layer = 2, .n_head = 2,
                           .n_embd = 16, .tied = true, .fused_qkv = false };
    char why[160];
    assert_true(ckpt_parse("sqrt", &c.local.checkpoint, why, sizeof why));
    for (int k = TRAIN_ADAMW; k <= TRAIN_ADAFACTOR; k++) {
        c.optimizer = (TrainOptimizer)k;
        check_saved_keys(c, NULL);
    }
    c.optimizer = TRAIN_ADAMW;
    LoraConfig lc = lora_config_default();
    check_saved_keys(c, &lc);
}

/* The run-only rows are checkpoint and offload (TrainerLocal's, TRAINER_SCHEMA's run.*), and
 * they are exactly the rows whose field lies inside TrainerConfig.local: a run-only setting
 * added outside it, or a kept one inside it, fails here. A resumed run takes the snapshot's
 * config and assigns its own local back, so the split is what keeps them apart. */
typedef struct {
    const char *base;
    int         run_only, misplaced;
} SplitCtx;

static bool check_split(const SchemaRow *r, const char *key, const void *s, void *ctx)
{
    SplitCtx *c = ctx;
    size_t at = (size_t)((const char *)s + r->offset - c->base);
    bool in_local = at >= offsetof(TrainerConfig, local) &&
                    at < offsetof(TrainerConfig, local) + sizeof(TrainerLocal);
    c->run_only += !r->kept;
    if (in_local == r->kept) {
        print_error("'%s' is %s but its field is %s TrainerConfig.local\n", key,
                    r->kept ? "kept" : "run-only", in_local ? "inside" : "outside");
        c->misplaced++;
    }
    return true;
}

static void test_run_only_rows_stay_the_runs(void **state)
{
    (void)state;
    TrainerConfig d = trainer_config_default();
    for (int k = TRAIN_ADAMW; k <= TRAIN_ADAFACTOR; k++) {  /* every optimizer's rows */
        d.optimizer = (TrainOptimizer)k;
        SplitCtx c = { .base = (const char *)&d };
        schema_each(&TRAINER_SCHEMA, NULL, &d, check_split, &c);
        assert_int_equal(c.run_only, 2);
        assert_int_equal(c.misplaced, 0);
    }
    /* Two configs that differ only in their run-only settings agree on every kept row. */
    TrainerConfig mine = trainer_config_default(), saved = trainer_config_default();
    char why[160];
    assert_true(ckpt_parse("every:2", &mine.local.checkpoint, why, sizeof why));
    mine.local.offload = TRAIN_OFFLOAD_OPTIMIZER;
    assert_null(schema_differs(&TRAINER_SCHEMA, &mine, &saved));
    saved.clip = 0.5;
    const SchemaRow *r = schema_differs(&TRAINER_SCHEMA, &mine, &saved);
    assert_non_null(r);
    assert_string_equal(r->key, "train.clip");
}

/* The settings tables of docs/settings.md ----------------------------------------------------- */

static const struct {
    const Schema *sc;
    const char   *where, *keys;
} DOCUMENTED[] = {
    { &GPT_SCHEMA, "`GPT_SCHEMA`, nn/gpt.h (rows in nn/gpt_snapshot.c)",
      "`model.` in a training snapshot or a base, `base.` in a LoRA adapter" },
    { &LORA_SCHEMA, "`LORA_SCHEMA`, nn/gpt_lora.h (rows in nn/lora_snapshot.c)", "`lora.`" },
    { &TRAINER_SCHEMA, "`TRAINER_SCHEMA`, optim/train.h (rows in optim/snapshot_keys.c)",
      "as listed; a row of type schema stands for the inner struct's rows, below" },
    { &ADAMW_SCHEMA, "`ADAMW_SCHEMA`, optim/adamw.h (rows in optim/adamw.c)",
      "`optim.` (TrainerConfig's adamw, for adamw and adam8bit)" },
    { &ADAFACTOR_SCHEMA, "`ADAFACTOR_SCHEMA`, optim/adafactor.h (rows in optim/adafactor.c; "
      "train_gpt's defaults are the absolute-lr mode: relative_step and scale_parameter false)",
      "`optim.` (TrainerConfig's adafactor)" },
    { &SGD_SCHEMA, "`SGD_SCHEMA`, optim/sgd.h (rows in optim/sgd.c)",
      "`optim.` (TrainerConfig's sgd)" },
    { &POLICY_SCHEMA, "`POLICY_SCHEMA`, autograd/policy.h (rows in autograd/policy.c)",
      "`precision.` (TrainerConfig's policy)" },
    { &LOSS_SCALE_SCHEMA, "`LOSS_SCALE_SCHEMA`, optim/loss_scale.h (rows in "
      "optim/loss_scale.c)", "`loss_scale.` (TrainerConfig's loss_scale)" },
    { &TRAINER_LOCAL_SCHEMA, "`TRAINER_LOCAL_SCHEMA`, optim/train.h (rows in "
      "optim/snapshot_keys.c): the trainer's run-only settings, memory, time and traffic only, "
      "never the numbers, in no snapshot", "none (run-only); `run.` in TrainerConfig's table" },
    { &TRAINER_COUNTER_SCHEMA, "`TRAINER_COUNTER_SCHEMA`, optim/snapshot_keys.h: the "
      "trainer's counters, state rather than settings", "as listed" },
    { &SCHED_SCHEMA, "`SCHED_SCHEMA`, optim/schedule.h (rows in optim/schedule.c), written by "
      "the program (train_gpt)", "as listed" },
    { &DATA_SCHEMA, "`DATA_SCHEMA`, data/dataset.h (rows in data/dataset.c), written by the "
      "program (train_gpt)", "`data.`" },
    { &RUN_KEPT_SCHEMA, "`RUN_KEPT_SCHEMA`, run/run.h (rows in run/settings.c): what a snapshot "
      "keeps of a run beside the library's configs, written by the program (train_gpt; "
      "train.step is the trainer's counter, which the library writes)",
      "as listed; `data.*` is DataConfig's rows, above" },
    { &RUN_LOCAL_SCHEMA, "`RUN_LOCAL_SCHEMA`, run/run.h (rows in run/settings.c): a run's own "
      "settings, in no snapshot; they give train_gpt's flags their range",
      "none (run-only); `parallel.*` is RunParallel's rows, below" },
    { &RUN_PARALLEL_SCHEMA, "`RUN_PARALLEL_SCHEMA`, run/run.h (rows in run/settings.c): "
      "--parallel and its companions, in no snapshot", "none (run-only)" },
    { &RUN_RECORD_SCHEMA, "`RUN_RECORD_SCHEMA`, run/run.h (rows in run/settings.c): what a "
      "snapshot records of the run that saved it, written by the program (train_gpt); a "
      "resumed run compares it with its own and does not take it", "as listed" },
};

static void print_range(FILE *f, const SchemaRow *r)
{
    bool integer = r->type == SCHEMA_U64 || r->type == SCHEMA_LONG || r->type == SCHEMA_INT ||
                   r->type == SCHEMA_BYTES;
    if (r->type == SCHEMA_CHOICE || (r->type == SCHEMA_STRING && r->name)) {
        for (int i = 0; r->name(i); i++)
            fprintf(f, "%s%s", i ? ", " : "", r->name(i));
    } else if (r->type == SCHEMA_BOOL) {
        fprintf(f, "true, false");
    } else if (r->type == SCHEMA_CUSTOM) {
        fprintf(f, "(its help)");
    } else if (r->type == SCHEMA_STRING) {
        fprintf(f, "any");
    } else if (r->type == SCHEMA_SUB) {
        fprintf(f, "%s's rows", r->sub->name);
        if (r->first || r->count)
            fprintf(f, " from %s", r->first ? r->first : r->sub->rows[0].key);
        if (r->count)
            fprintf(f, ", %d", r->count);
        else if (r->first)
            fprintf(f, " on");
    } else if (r->lo == 0.0 && r->hi == 0.0) {
        fprintf(f, r->type == SCHEMA_FLOAT ? "a float > 0" : integer ? ">= 0" : "any");
    } else {
        fprintf(f, "%s[", r->zero_unset ? "0 or " : "");
        if (integer)
            fprintf(f, "%.0f, %.0f]", r->lo, r->hi);
        else
            fprintf(f, "%g, %g]", r->lo, r->hi);
    }
}

static void print_settings_tables(FILE *f)
{
    static const char *const TYPES[] = {
        [SCHEMA_DOUBLE] = "double", [SCHEMA_FLOAT] = "float", [SCHEMA_U64] = "u64",
        [SCHEMA_LONG] = "long", [SCHEMA_INT] = "int", [SCHEMA_BOOL] = "bool",
        [SCHEMA_CHOICE] = "choice", [SCHEMA_CUSTOM] = "text", [SCHEMA_SUB] = "schema",
        [SCHEMA_STRING] = "string", [SCHEMA_BYTES] = "bytes",
    };
    for (size_t k = 0; k < sizeof DOCUMENTED / sizeof DOCUMENTED[0]; k++) {
        const Schema *sc = DOCUMENTED[k].sc;
        fprintf(f, "\n### %s\n\n%s; keys: %s.\n\n", sc->name, DOCUMENTED[k].where,
                DOCUMENTED[k].keys);
        fprintf(f, "| key | type | values | default | kept | agrees with | what |\n");
        fprintf(f, "|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < sc->n; i++) {
            const SchemaRow *r = &sc->rows[i];
            fprintf(f, "| `%s%s` | %s | ", r->key, r->type == SCHEMA_SUB ? ".*" : "",
                    TYPES[r->type]);
            print_range(f, r);
            fprintf(f, " | %s | %s", r->def ? r->def : "", r->kept ? "yes" : "run-only");
            if (r->before)
                fprintf(f, " (older files: %s)", r->before);
            fprintf(f, " | %s | %s |\n", r->agrees ? r->agrees : "", r->help ? r->help : "");
        }
    }
}

/* A key the file lacks reads as its row's before (a setting added later), or is refused. */
static void test_missing_key_reads_as_before(void **state)
{
    (void)state;
    char path[512], why[256];
    in_dir(path, sizeof path, "before.safetensors");
    SnapshotError err = { { 0 } };
    SnapshotWriter *w = snapshot_writer_new();
    snapshot_add_meta(w, "schedule.lr", "0.25", &err);
    snapshot_add_meta(w, "schedule.warmup", "7", &err);
    assert_true(snapshot_write(w, path, &err));
    snapshot_writer_free(w);
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    SchedConfig c = { 0 };
    assert_true(schema_read(&SCHED_SCHEMA, NULL, schema_reader_value, r, path, &c, &err));
    assert_true(c.base_lr == 0.25);
    assert_int_equal(c.warmup_steps, 7);
    assert_int_equal(c.warmup, SCHED_WARMUP_GRADUAL);     /* before "gradual" */
    assert_int_equal(c.decay, SCHED_DECAY_CONSTANT);      /* before "constant" */
    assert_int_equal(c.base_batch, 0);                    /* before "0": not set */
    assert_true(c.warmup_fraction == 0.1);
    assert_true(schema_check(&SCHED_SCHEMA, NULL, &c, why, sizeof why));
    GptConfig g;
    assert_false(schema_read(&GPT_SCHEMA, "model", schema_reader_value, r, path, &g, &err));
    expect_message(err.message, path, "missing metadata 'model.vocab_size'");
    snapshot_close(r);
}

/* docs/settings.md holds, between its markers, exactly what --settings-table prints. */
static const char BEGIN[] = "<!-- settings tables: build/tests/test_schema --settings-table -->";
static const char END[] = "<!-- end of the settings tables -->";

static void test_docs_table_is_the_schemas(void **state)
{
    (void)state;
    size_t len;
    char *doc = (char *)slurp(TAPEGRAD_SOURCE_DIR "/docs/settings.md", &len);
    doc[len] = '\0';
    char *begin = strstr(doc, BEGIN), *end = strstr(doc, END);
    assert_non_null(begin);
    assert_non_null(end);
    begin += strlen(BEGIN);
    *end = '\0';
    char *want;
    size_t want_len;
    FILE *f = open_memstream(&want, &want_len);
    fprintf(f, "\n");      /* the marker's line ends */
    print_settings_tables(f);
    fprintf(f, "\n");
    fclose(f);
    if (strcmp(begin, want) != 0) {
        print_error("docs/settings.md's tables are not the schemas': regenerate them with "
                    "build/tests/test_schema --settings-table\n");
        fail();
    }
    free(want);
    free(doc);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--settings-table") == 0) {
        print_settings_tables(stdout);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_the_structs),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refusals_name_key_and_range),
        cmocka_unit_test(test_every_snapshot_key_is_a_schema_row),
        cmocka_unit_test(test_run_only_rows_stay_the_runs),
        cmocka_unit_test(test_run_local_is_run_only),
        cmocka_unit_test(test_missing_key_reads_as_before),
        cmocka_unit_test(test_docs_table_is_the_schemas),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}

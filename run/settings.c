/* The run's own settings as schemas (autograd/schema.h), beside their structs (run/run.h):
 * what a snapshot keeps (RunKept: the data, the steps, the batch, the accumulation, the
 * attention) and what is this run's alone (RunLocal, with --parallel's RunParallel: every row
 * run-only, in no snapshot). A program's flags reference these rows for their keys and ranges
 * (train_gpt's settings table); the defaults here are train_gpt's demo, the one run they
 * describe. */
#include <stddef.h>
#include <stdio.h>

#include "run/run.h"

RunKept run_kept_default(void)
{
    return (RunKept){ .data = data_config_default(), .steps = 2000, .batch = 64, .accum = 1,
                      .attention = RUN_ATTENTION_STANDARD };
}

RunLocal run_local_default(void)
{
    return (RunLocal){
        .eval_every = 250, .eval_examples = 1000, .temperature = 1.0,
        .parallel = { .dist = { .plan = { .kind = DIST_RUN_NONE, .sched = PIPE_GPIPE,
                                          .replicas = 1 },
                                .bucket_kb = 256 },
                      .grad_wire = "auto" },
    };
}

/* Kept ---------------------------------------------------------------------------------------- */

static const char *attention_name(int i)
{
    static const char *const names[] = { "standard", "tiled" };
    return i >= 0 && i < 2 ? names[i] : NULL;
}

static bool is_text(const void *s) { return ((const RunKept *)s)->data.path != NULL; }

#define KEPT(f) offsetof(RunKept, f)
/* The keys are a training snapshot's (no prefix): the data's under "data.", the batch beside the
 * schedule's keys. train.step is the trainer's counter of that name (TRAINER_COUNTER_SCHEMA),
 * which the library writes: a run saves at its last step, so the file's step is the run's. */
static const SchemaRow RUN_KEPT_ROWS[] = {
    { .key = "data", .type = SCHEMA_SUB, .offset = KEPT(data), .sub = &DATA_SCHEMA,
      .kept = true, .help = "the data: a task or a text" },
    { .key = "train.step", .type = SCHEMA_LONG, .offset = KEPT(steps), .lo = 0,
      .hi = 1000000000, .def = "2000", .kept = true,
      .help = "train until this step (a total, counting a resumed run's)" },
    { .key = "schedule.batch", .type = SCHEMA_INT, .offset = KEPT(batch), .lo = 1, .hi = 1 << 16,
      .def = "64", .kept = true, .help = "rows per micro-batch" },
    { .key = "schedule.accum", .type = SCHEMA_INT, .offset = KEPT(accum), .lo = 1, .hi = 1 << 16,
      .def = "1", .before = "1", .kept = true, .agrees = "run.ranks",
      .help = "micro-batches per update (per rank under ddp and ZeRO)" },
    /* A text's rows: the model's T, but a LoRA run on a base of a longer T trains on rows of
     * its own --seq, which the model's keys cannot say (files before it: model.max_seq,
     * optim/snapshot_keys.c). A task's rows are the task's own length (data.task). */
    { .key = "run.seq", .type = SCHEMA_INT, .offset = KEPT(seq), .lo = 1, .hi = GPT_MAX_SEQ,
      .zero_unset = true, .message = SCHEMA_MSG_COUNT, .def = "0", .kept = true,
      .applies = is_text,
      .help = "tokens per row of a text: the model's T, or fewer under a LoRA base (older "
              "files: model.max_seq)" },
    /* Tiled attention sums a row's exponentials in another order than standard attention
     * does, so in fp32 the two differ in the last bits: the snapshot keeps it. */
    { .key = "run.attention", .type = SCHEMA_CHOICE, .offset = KEPT(attention),
      .name = attention_name, .def = "standard", .before = "standard", .kept = true,
      .help = "standard (keeps the [T, T] probabilities) or tiled (a statistic per row)" },
};
#undef KEPT
const Schema RUN_KEPT_SCHEMA = { .name = "RunKept", .rows = RUN_KEPT_ROWS,
                                 .n = sizeof RUN_KEPT_ROWS / sizeof RUN_KEPT_ROWS[0],
                                 .by_program = true };

/* The saving run's record ---------------------------------------------------------------------- */

static bool is_lora(const void *s) { return ((const RunRecord *)s)->lora; }

static void format_hash(const void *field, char *buf, size_t len)
{
    snprintf(buf, len, "%016llx", (unsigned long long)*(const uint64_t *)field);
}

static bool parse_hash(const char *text, void *field, char *why, size_t len)
{
    uint64_t h = 0;
    size_t n = 0;
    for (; text[n]; n++) {
        char c = text[n];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0 || n == 16)
            break;
        h = h << 4 | (uint64_t)d;
    }
    if (n != 16 || text[n]) {
        snprintf(why, len, "not 16 hexadecimal digits (0-9, a-f)");
        return false;
    }
    *(uint64_t *)field = h;
    return true;
}

#define REC(f) offsetof(RunRecord, f)
/* Written by the program (train_gpt's options_snapshot_meta), read where each is compared:
 * run.ranks by the merge of --accum (run_ranks_regroup), the base by run_lora_merge_snapshot. */
static const SchemaRow RUN_RECORD_ROWS[] = {
    { .key = "run.ranks", .type = SCHEMA_INT, .offset = REC(ranks), .lo = 1, .hi = 1 << 20,
      .message = SCHEMA_MSG_COUNT, .def = "1", .before = "1", .kept = true,
      .agrees = "schedule.accum",
      .help = "the data-parallel ranks of the run that saved it (a record: compared, not taken)" },
    { .key = "lora.base", .type = SCHEMA_STRING, .offset = REC(lora_base), .kept = true,
      .applies = is_lora,
      .help = "a LoRA run's base file, \"\": the seed's random base (a record)" },
    { .key = "lora.base_fnv1a", .type = SCHEMA_CUSTOM, .offset = REC(lora_base_fnv1a),
      .size = sizeof(uint64_t), .format = format_hash, .parse = parse_hash,
      .def = "0000000000000000", .kept = true, .applies = is_lora, .agrees = "lora.base",
      .help = "that file's FNV-1a hash: a base replaced since is refused (a record)" },
};
#undef REC
const Schema RUN_RECORD_SCHEMA = { .name = "RunRecord", .rows = RUN_RECORD_ROWS,
                                   .n = sizeof RUN_RECORD_ROWS / sizeof RUN_RECORD_ROWS[0],
                                   .by_program = true };

/* This run's alone ---------------------------------------------------------------------------- */

static const char *wire_name(int i)
{
    static const char *const names[] = { "auto", "fp32", "bf16", "e5m2" };
    return i >= 0 && i < 4 ? names[i] : NULL;
}

/* The text of --parallel is a plan dist_plan_parse reads (NULL: not given). */
static bool plan_parses(const SchemaRow *r, const void *s, char *why, size_t len)
{
    (void)r;
    const char *text = ((const RunParallel *)s)->text;
    DistPlan plan;
    char because[200];
    if (!text || dist_plan_parse(text, &plan, because, sizeof because))
        return true;
    snprintf(why, len, "'parallel.text' is '%s': %s", text, because);
    return false;
}

#define PAR(f) offsetof(RunParallel, f)
static const SchemaRow RUN_PARALLEL_ROWS[] = {
    { .key = "text", .type = SCHEMA_STRING, .offset = PAR(text), .check = plan_parses,
      .help = "the plan as given: none, ddp, zero1-3 or pipeline:S[,dpD[,zero1]]" },
    { .key = "bucket_kb", .type = SCHEMA_INT, .offset = PAR(dist.bucket_kb), .lo = 0,
      .hi = 1 << 20, .def = "256", .agrees = "parallel.text",
      .help = "ddp: gradients sent in buckets of that many KiB, 0 = one after backward" },
    { .key = "grad_wire", .type = SCHEMA_STRING, .offset = PAR(grad_wire), .name = wire_name,
      .def = "auto", .agrees = "parallel.text",
      .help = "ddp, zero: what the gradients travel as (auto: from the precision)" },
    { .key = "micro_batches", .type = SCHEMA_INT, .offset = PAR(dist.micro_batches), .lo = 1,
      .hi = 1 << 12, .zero_unset = true, .def = "0", .agrees = "parallel.text",
      .help = "pipeline: micro-batches per step, 0 = not given (1)" },
    { .key = "stages", .type = SCHEMA_STRING, .offset = PAR(dist.stages),
      .agrees = "parallel.text", .help = "pipeline: blocks per stage, one count per rank" },
    { .key = "pipe_events", .type = SCHEMA_STRING, .offset = PAR(pipe_events),
      .agrees = "parallel.text", .help = "pipeline: the TSV of every forward and backward" },
};
#undef PAR
const Schema RUN_PARALLEL_SCHEMA = { .name = "RunParallel", .rows = RUN_PARALLEL_ROWS,
                                     .n = sizeof RUN_PARALLEL_ROWS / sizeof RUN_PARALLEL_ROWS[0] };

#define LOCAL(f) offsetof(RunLocal, f)
static const SchemaRow RUN_LOCAL_ROWS[] = {
    { .key = "threads", .type = SCHEMA_INT, .offset = LOCAL(threads), .lo = 0, .hi = 1024,
      .def = "0", .help = "OpenMP threads, 0 = one per core" },
    { .key = "mem_budget", .type = SCHEMA_BYTES, .offset = LOCAL(mem_budget), .lo = 1,
      .hi = (double)((size_t)1 << 50), .zero_unset = true, .def = "0",
      .help = "the most tracked memory the run may hold, 0 = no limit" },
    { .key = "eval_every", .type = SCHEMA_LONG, .offset = LOCAL(eval_every), .lo = 0,
      .hi = 1000000000, .def = "250", .help = "validation every that many steps, 0 = at the end" },
    { .key = "eval_examples", .type = SCHEMA_INT, .offset = LOCAL(eval_examples), .lo = 1,
      .hi = 1 << 24, .def = "1000", .help = "validation rows used (or all there are)" },
    { .key = "sample", .type = SCHEMA_INT, .offset = LOCAL(sample), .lo = 0, .hi = 1 << 20,
      .def = "0", .help = "after training: greedy answers (task) or characters (text)" },
    { .key = "temperature", .type = SCHEMA_DOUBLE, .offset = LOCAL(temperature), .lo = 0.0,
      .hi = 100.0, .def = "1", .agrees = "sample",
      .help = "a text sample's softmax temperature, 0 = greedy" },
    { .key = "sample_seed", .type = SCHEMA_LONG, .offset = LOCAL(sample_seed), .lo = 0,
      .hi = (double)(1L << 62), .def = "0", .agrees = "sample",
      .help = "a text sample's generator seed (train_gpt: the trainer's unless given)" },
    { .key = "log", .type = SCHEMA_STRING, .offset = LOCAL(log_path),
      .help = "the TSV of every step" },
    { .key = "plot", .type = SCHEMA_STRING, .offset = LOCAL(plot_path), .agrees = "log",
      .help = "the loss figure drawn from the log" },
    { .key = "save", .type = SCHEMA_STRING, .offset = LOCAL(save_path),
      .help = "the snapshot written at the end" },
    { .key = "load", .type = SCHEMA_STRING, .offset = LOCAL(load_path),
      .help = "the snapshot resumed from" },
    { .key = "load_base", .type = SCHEMA_STRING, .offset = LOCAL(load_base_path),
      .help = "the model fine-tuned (a snapshot or a base file)" },
    { .key = "save_adapter", .type = SCHEMA_STRING, .offset = LOCAL(save_adapter_path),
      .help = "the LoRA adapters alone, at the end" },
    { .key = "parallel", .type = SCHEMA_SUB, .offset = LOCAL(parallel),
      .sub = &RUN_PARALLEL_SCHEMA, .help = "--parallel and its companions" },
};
#undef LOCAL
const Schema RUN_LOCAL_SCHEMA = { .name = "RunLocal", .rows = RUN_LOCAL_ROWS,
                                  .n = sizeof RUN_LOCAL_ROWS / sizeof RUN_LOCAL_ROWS[0] };

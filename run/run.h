#ifndef TAPEGRAD_RUN_RUN_H
#define TAPEGRAD_RUN_RUN_H
/* A GPT training run, assembled from its settings: the data, the model and its trainer (with
 * LoRA or QLoRA adapters on a base), the --parallel strategy on MPI ranks (dist/run.h), resuming
 * from a snapshot, the steps with each one's record, the evaluations, the report's numbers and
 * the snapshot at the end. train_gpt is its command line around it.
 *
 * The settings come in the library's configs (TrainerConfig, SchedConfig, LoraConfig) and in
 * two structs of the run's own, apart because a snapshot treats them apart: RunKept, what a
 * snapshot keeps beside the library's configs (a resumed run takes them from it), and RunLocal,
 * what is this run's alone (threads, outputs, the ranks' layout; never in a snapshot). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "autograd/snapshot.h"
#include "data/dataset.h"
#include "dist/run.h"
#include "nn/gpt_lora.h"
#include "optim/schedule.h"
#include "optim/train.h"

enum { RUN_TEXT_DEFAULT_SEQ = 64 };   /* the rows' length for text data when not given */
typedef enum { RUN_ATTENTION_STANDARD, RUN_ATTENTION_TILED } RunAttention;

typedef struct {
    DataConfig data;
    long       steps;            /* train until this step (a total, counting a loaded run's) */
    int        batch;            /* rows per micro-batch */
    int        accum;            /* micro-batches per update (per rank under ddp and ZeRO) */
    /* Tokens per row: the model's T, or fewer under a LoRA base of a longer T; 0: the task's
     * row length, or RUN_TEXT_DEFAULT_SEQ for text (run_open_data sets it). */
    int        seq;
    int        attention;        /* RunAttention: the two differ in the last bits in fp32 */
} RunKept;

/* --parallel and its companions. dist's config holds the plan, --bucket-kb, --stages and
 * --micro-batches as given; its micro_batches and wire become the run's when it starts. */
typedef struct {
    DistRunConfig dist;
    const char   *text;          /* --parallel as given; NULL: not given */
    const char   *grad_wire;     /* "auto", "fp32", "bf16", "e5m2" */
    const char   *pipe_events;   /* TSV of every F and B of every step */
} RunParallel;

typedef struct {
    int         threads;
    size_t      mem_budget;      /* bytes of tracked memory the run may hold; 0: no limit */
    long        eval_every;
    int         eval_examples;
    int         sample;
    double      temperature;     /* of the text sample; 0: greedy */
    long        sample_seed;     /* its generator's seed (the trainer's unless given) */
    const char *log_path, *plot_path, *save_path, *load_path;
    const char *load_base_path, *save_adapter_path;    /* LoRA and QLoRA */
    RunParallel parallel;
} RunLocal;

/* What a snapshot records of the run that saved it, beside its settings: a resumed run compares
 * these with its own and never takes them as settings (RUN_RECORD_SCHEMA: the keys run.ranks,
 * lora.base, lora.base_fnv1a). */
typedef struct {
    int         ranks;           /* data-parallel ranks (RunSettings.ranks; one before the key):
                                  * another count resumes regrouped (run_ranks_regroup) */
    bool        lora;            /* not a key: a LoRA run, which has the two below */
    const char *lora_base;       /* the base file it began with; "": the seed's random base */
    uint64_t    lora_base_fnv1a; /* that file's hash (run_lora_base_hash), 16 hex digits: a
                                  * resumed run refuses a base replaced since */
} RunRecord;

/* Their schemas (autograd/schema.h; rows in run/settings.c). RUN_KEPT_SCHEMA's rows are the
 * keys a training snapshot keeps for RunKept: DATA_SCHEMA's under data., train.step (the
 * trainer's counter, which the library writes), schedule.batch, schedule.accum, run.seq (text
 * only), run.attention;
 * a program writes the others (by_program: train_gpt's settings table). RUN_LOCAL_SCHEMA's and
 * RUN_PARALLEL_SCHEMA's (parallel.) are all run-only: no snapshot holds them, they give the
 * flags that set them their range. The defaults are train_gpt's demo. */
extern const Schema RUN_KEPT_SCHEMA, RUN_LOCAL_SCHEMA, RUN_PARALLEL_SCHEMA, RUN_RECORD_SCHEMA;
RunKept  run_kept_default(void);
RunLocal run_local_default(void);

/* Everything a run is assembled from: its own settings and the library's configs. */
typedef struct {
    RunKept       kept;
    RunLocal      local;
    int           ranks;     /* data-parallel ranks: 1, or mpirun's N under ddp and ZeRO (known
                              * once the run starts); a step draws batch x accum x ranks rows */
    /* The trainer's config (optim/train.h): the model's V and T come from the data, and with a
     * snapshot the snapshot's config is the run's but for its run-only rows. */
    TrainerConfig cfg;
    /* The schedule as given (optim/schedule.h): base_batch 0 is the effective batch (the rule
     * then changes nothing), cooldown_steps 0 with wsd a fifth of the steps; run_schedule
     * completes it. */
    SchedConfig   sched;
    LoraConfig    lora;      /* nn/gpt_lora.h; rank 0: no adapters */
} RunSettings;

/* How the run reports a failure: code 2 for settings it refuses (a usage error), 1 for anything
 * else (a missing file, a diverged loss), message without the program's name. The program says
 * how to print it (its handler must not return); the default prints "PROGRAM: message" and
 * exits with code. */
typedef void (*RunFailHandler)(int code, const char *message);
void run_on_failure(RunFailHandler handler);
_Noreturn void run_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What the parallel settings say: ddp, the ZeRO level (0: none), the pipeline's text
 * ("pipeline:1f1b,dp2"; NULL: none). */
static inline bool run_parallel_ddp(const RunParallel *p)
{
    return p->dist.plan.kind == DIST_RUN_DDP;
}
static inline int  run_parallel_zero(const RunParallel *p)
{
    return p->dist.plan.kind == DIST_RUN_ZERO ? p->dist.plan.zero_level : 0;
}
static inline const char *run_parallel_pipeline(const RunParallel *p)
{
    return p->dist.plan.kind == DIST_RUN_PIPELINE ? p->text : NULL;
}

/* setup.c: assembling a run. The data the settings name (a task's size into data, the rows'
 * length into *seq; a length a task does not allow is refused); the model checked against the
 * data (every token id below V, every row within T) and against the machine's memory; a
 * snapshot's trainer config, its reader in *reader (kept open to the end: settings point into
 * its metadata); the trainer it holds, with this run's checkpointing, offload and attention; a
 * fresh trainer for the data (on a base, with adapters); the outputs written at the end
 * checked now (writable, not a FIFO or a folder: nothing left behind); the schedule the
 * settings describe over ranks data-parallel ranks; the snapshot at the end, with the
 * program's metadata keys[i] = values[i]. */
Dataset      *run_open_data(DataConfig *data, int *seq);
void          run_check_fit(int seq, const Dataset *ds, const GptConfig *m);
void          run_check_model_size(const GptConfig *m);
TrainerConfig run_snapshot_settings(const char *path, SnapshotReader **reader);
Trainer      *run_trainer_resume(SnapshotReader *r, const TrainerConfig *saved,
                                 const RunSettings *s);
Trainer      *run_trainer_fresh(const RunSettings *s, const Dataset *ds);
void          run_check_outputs(const RunLocal *local);
SchedConfig   run_schedule(const SchedConfig *given, const RunKept *kept, int ranks);
void          run_save(const Trainer *tr, const char *path, const char *const *keys,
                       const char *const *values, int n);

/* lora.c: LoRA and QLoRA (base: the --load-base file, or NULL; seed: the trainer's, the
 * adapters draw from seed + 1). The base's model config; the trainer of a fresh run (with a base
 * and adapters, trainer_new_lora, whose setting up holds no more than the run will), or the
 * base's weights and the adapters put on a trainer (run_lora_setup); the header's lines and the
 * report's; the adapters alone into path; the FNV-1a hash of the base's bytes (0 without one).
 * A snapshot's LoRA settings and base become the run's (*lora, local->load_base_path; the base
 * must hash as recorded), and a LoRA run resumed from it. */
void     run_lora_base_config(const char *base, GptConfig *model);
Trainer *run_lora_trainer_new(const TrainerConfig *cfg, const LoraConfig *lora, uint64_t seed,
                              const char *base);
void     run_lora_setup(Trainer *tr, const LoraConfig *lora, uint64_t seed, const char *base);
void     run_lora_describe(const Trainer *tr, const char *base);
void     run_lora_report(const Trainer *tr);
void     run_lora_save_adapter(const Trainer *tr, const char *path);
uint64_t run_lora_base_hash(const char *base);
void     run_lora_merge_snapshot(LoraConfig *lora, RunLocal *local, const SnapshotReader *r,
                                 const char *path, const GptConfig *model);
Trainer *run_lora_resume(const TrainerConfig *saved, const LoraConfig *lora, uint64_t seed,
                         const char *base, SnapshotReader *r, const char *path);

/* precision.c: the policy and the loss scaling in the run's header (the scale a resumed run
 * starts from), the skipped steps and the final scale in its report. */
void run_precision_describe(const Trainer *tr);
void run_precision_report(const Trainer *tr);
/* offload.c: the host pool's bytes and the bytes each update moved, beside the formula (nothing
 * without offload). */
void run_offload_report(const Trainer *tr);
/* samples.c: after training, n validation prompts with the model's greedy answers (a task), or
 * n characters generated from the start of the validation text (text data), drawn at the
 * temperature (0: greedy) from a generator seeded with seed. */
void run_print_samples(Trainer *tr, const Dataset *ds, int n, double temperature, uint64_t seed);

#endif

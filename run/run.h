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

#include "data/dataset.h"
#include "dist/run.h"

enum { RUN_TEXT_DEFAULT_SEQ = 64 };   /* the rows' length for text data when not given */
typedef enum { RUN_ATTENTION_STANDARD, RUN_ATTENTION_TILED } RunAttention;

typedef struct {
    DataConfig data;
    long       steps;            /* train until this step (a total, counting a loaded run's) */
    int        batch;            /* rows per micro-batch */
    int        accum;            /* micro-batches per update (per rank under ddp and ZeRO) */
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

/* How the run reports a failure: code 2 for settings it refuses (a usage error), 1 for anything
 * else (a missing file, a diverged loss), message without the program's name. The program says
 * how to print it (its handler must not return); the default prints "PROGRAM: message" and
 * exits with code. */
typedef void (*RunFailHandler)(int code, const char *message);
void run_on_failure(RunFailHandler handler);
_Noreturn void run_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What the parallel settings say: ddp, the ZeRO level (0: none), the pipeline's text
 * ("pipeline:1f1b,dp2"; NULL: none). */
static inline bool run_parallel_ddp(const RunParallel *p) { return p->dist.plan.kind == DIST_RUN_DDP; }
static inline int  run_parallel_zero(const RunParallel *p)
{
    return p->dist.plan.kind == DIST_RUN_ZERO ? p->dist.plan.zero_level : 0;
}
static inline const char *run_parallel_pipeline(const RunParallel *p)
{
    return p->dist.plan.kind == DIST_RUN_PIPELINE ? p->text : NULL;
}

#endif

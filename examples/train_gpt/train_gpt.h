#ifndef TAPEGRAD_TRAIN_GPT_H
#define TAPEGRAD_TRAIN_GPT_H
/* What the files of train_gpt share: the options (flags.c), the run (train_gpt.c) and the
 * evaluation (evaluate.c). */
#include <stdbool.h>

#include "analysis/eval.h"
#include "autograd/snapshot.h"
#include "data/dataset.h"
#include "examples/common/settings.h"
#include "optim/schedule.h"
#include "optim/train.h"
#include "run/run.h"


/* One per flag; also the option parser's value for it (offset past the characters). */
typedef enum {
    FLAG_TASK = 256, FLAG_TASK_SIZE, FLAG_MSD_FIRST, FLAG_DATA,
    FLAG_STEPS, FLAG_BATCH, FLAG_SEQ, FLAG_LAYERS, FLAG_HEADS, FLAG_EMBD, FLAG_UNTIED,
    FLAG_SEPARATE_QKV, FLAG_LR, FLAG_WARMUP, FLAG_OPTIMIZER, FLAG_MOMENTUM, FLAG_WEIGHT_DECAY,
    FLAG_BETA1, FLAG_BETA2, FLAG_CLIP, FLAG_SEED, FLAG_THREADS, FLAG_KERNELS, FLAG_EVAL_EVERY,
    FLAG_EVAL_EXAMPLES, FLAG_LOG, FLAG_PLOT, FLAG_SAVE, FLAG_LOAD, FLAG_SAMPLE,
    FLAG_ACCUM, FLAG_LR_RULE, FLAG_BASE_BATCH, FLAG_WARMUP_TYPE, FLAG_WARMUP_FRACTION,
    FLAG_DECAY, FLAG_COOLDOWN, FLAG_COOLDOWN_SHAPE, FLAG_CHECKPOINT,
    FLAG_ATTENTION,
    FLAG_LORA, FLAG_LORA_ALPHA, FLAG_LORA_TARGETS, FLAG_QLORA, FLAG_LOAD_BASE, FLAG_SAVE_ADAPTER,
    FLAG_PRECISION, FLAG_LOSS_SCALE, FLAG_SCALE_GROWTH_INTERVAL, FLAG_SCALE_GROWTH_FACTOR,
    FLAG_SCALE_BACKOFF_FACTOR, FLAG_FP8_SCALING,
    FLAG_ADAM8BIT_ROUNDING, FLAG_TEMPERATURE, FLAG_SAMPLE_SEED, FLAG_MEM_BUDGET,
    FLAG_OFFLOAD,                                                       /* offload.c */
    FLAG_PARALLEL,                                                      /* ranks.c, pipeline.c */
    FLAG_BUCKET_KB, FLAG_GRAD_WIRE,                                     /* ranks.c */
    FLAG_MICRO_BATCHES, FLAG_STAGES, FLAG_PIPE_EVENTS,                  /* pipeline.c */
    FLAG_END,
} Flag;

/* The settings: the run's own (run/run.h: kept by a snapshot, or this run's alone) and the
 * library's configs, which the rows of the table set (settings.c). */
typedef struct {
    RunKept     kept;
    RunLocal    local;
    int         seq;             /* 0: the task's row length, or 64 for text */
    int         ranks;           /* data-parallel ranks: 1, or mpirun's N under ddp and ZeRO (set
                                  * once the run starts); a step draws batch x accum x ranks rows */
    /* The trainer's config (optim/train.h), which the model, optimizer, checkpointing and
     * precision rows of the table set: the model's V and T once the data is open, and with
     * --load the snapshot's. --weight-decay sets adamw's, which options_parse copies to the
     * other optimizers'; --precision sets the preset, with --fp8-scaling's settings there. */
    TrainerConfig cfg;
    PolicyFp8Scaling fp8_scaling;   /* --fp8-scaling: current, or delayed over fp8_window */
    int         fp8_window;
    /* The schedule's fields the flags set (optim/schedule.h): base_batch 0 is the effective
     * batch (the rule then changes nothing), cooldown_steps 0 with wsd a fifth of --steps;
     * options_schedule completes it. */
    SchedConfig sched;
    LoraConfig  lora;            /* nn/gpt_lora.h; rank 0: no adapters (lora.c) */
    bool        given[FLAG_END - FLAG_TASK];   /* which flags were on the command line */
} Options;

/* flags.c: the command line, checked completely before anything is done (from the settings
 * table there). Bad input exits with a message (cli_usage_error). */
Options options_parse(int argc, char **argv);
/* settings.c: the table of every flag (examples/common/settings.h), and --help from it. */
extern const Setting TRAIN_GPT_SETTINGS[];
extern const int     TRAIN_GPT_N_SETTINGS;
void    options_usage(void);
bool    options_given(const Options *o, Flag f);
/* --batch x --accum (and x --seq once known) within an int, or a usage error naming them. */
void    options_check_products(const Options *o);
/* Settings a snapshot holds become the run's (o->cfg the snapshot's config); a flag given
 * explicitly must agree with the snapshot (one message naming the flag, both values and the
 * file otherwise). Every kept key is read through the settings table, with its flag's checks
 * (train.step with --steps'). */
void    options_merge_snapshot(Options *o, const TrainerConfig *saved_cfg,
                               const SnapshotReader *r, const char *path);
/* The metadata train_gpt adds to a snapshot: the data, the schedule, the run's keys (the
 * settings table's; --accum as given, per rank), the data-parallel rank count (run.ranks) and a
 * LoRA run's base. */
void    options_snapshot_meta(const Options *o, SettingsMeta *m);
/* The schedule the options describe (checked when the options were parsed), and the learning
 * rate of step (1-based) under it. */
SchedConfig options_schedule(const Options *o);
double  options_lr(const Options *o, long step);

/* agree.c: the settings every rank of a --parallel run must share, as text: a "--name\tvalue"
 * line per flag (but the rank's own: threads, memory budget, outputs, samples), with the
 * kernel mode and then the step a snapshot resumes from; its length (at most len - 1). And the
 * first line where two such texts differ, "--steps is 4 on rank 0, 8 on rank R" into out. */
enum { OPTIONS_AGREED_MAX = 1 << 16 };
size_t options_agreed_text(const Options *o, long start_step, char *buf, size_t len);
void   options_first_difference(const char *mine, const char *theirs, int rank, char *out,
                                size_t len);

/* evaluate.c ---------------------------------------------------------------------------------- */
/* After training: n validation prompts with the model's greedy answers (a task), or n
 * characters generated from the start of the validation text (text data), drawn at the
 * temperature (0: greedy) from a generator seeded with seed. */
void       eval_print_samples(Trainer *tr, const Dataset *ds, int n, double temperature,
                              uint64_t seed);

/* pipeline.c (dist/pipeline.h) --------------------------------------------------------------- */
/* The checks of the pipeline flags (after every flag is read: they set accum to the
 * micro-batch count), and again once a
 * snapshot's settings are in (its accumulation is the micro-batch count). */
void pipeline_check_options(Options *o);
void pipeline_check_loaded(Options *o, const char *path);
bool pipeline_requested(const Options *o);
/* The pipeline's reporting beside ranks.c's calls (the strategy itself is run's, dist/run.h):
 * its reporting hook (the --log row with the bubble and each stage's peak act bytes, the
 * --pipe-events rows, the printed line), pipedream's stash and staleness before the trainer
 * goes back, the summary. */
typedef struct PipelineRun PipelineRun;
struct DistRun;
PipelineRun    *pipeline_start(const Options *o, Trainer *tr, struct DistRun *run);
void            pipeline_describe(const PipelineRun *pr);
void            pipeline_step_report(PipelineRun *pr, long step, double lr, TrainStepResult r,
                                     double seconds, size_t act_peak, const EvalResult *ev);
void            pipeline_training_done(PipelineRun *pr);
void            pipeline_report(PipelineRun *pr);
void            pipeline_end(PipelineRun *pr);

/* precision.c -------------------------------------------------------------------------------- */
/* The value of --precision, --loss-scale or --fp8-scaling (custom settings of the table), and
 * each as it would be typed, from o->cfg (how a snapshot's is compared). */
void precision_set_option(void *opts, int f, const char *flag, const char *arg);
void precision_format_option(const void *opts, int f, char *buf, size_t len);
/* Checkpointing with fp8 delayed scaling (the amax history belongs to one tape): refused. */
void precision_check_options(const Options *o);
/* The policy the options describe: the --precision preset with --fp8-scaling's settings. */
PrecisionPolicy precision_policy(const Options *o);
/* A line for the policy and one for the loss scaling in the run header; skipped steps and the
 * final scale in the report. */
void precision_describe(const Trainer *tr);
void precision_report(const Trainer *tr);

/* lora.c ------------------------------------------------------------------------------------- */
/* The LoRA flags together and against the others; switches on separate q/k/v for a fresh model
 * whose q, k or v get adapters. */
void lora_check_options(Options *o);
/* The model config of --load-base. */
void lora_base_config(const Options *o, GptConfig *model);
/* After trainer_new: the base's weights, then the adapters (trainer_use_lora). */
void lora_setup(Trainer *tr, const Options *o);
Trainer *lora_trainer_new(const TrainerConfig *cfg, const Options *o);
void lora_describe(const Trainer *tr, const Options *o);
void lora_report(const Trainer *tr);
void lora_save_adapter(const Trainer *tr, const Options *o);

/* offload.c: --offload optimizer. Whether the options allow it (--parallel zero1-3 and the
 * pipeline make optimizers of their own, which stay on the device: refused); the host pool's
 * bytes and the bytes each update moved, beside the formula, in the report. */
bool offload_allowed(const void *opts);
void offload_report(const Trainer *tr);
/* --load of a LoRA run's snapshot (optim/train_snapshot.h): its settings and its base become the
 * run's (the base must be the file the run began with, by its hash); the run rebuilt as it
 * began, then the snapshot's adapters, optimizer state and counters read into it. */
void     lora_merge_snapshot(Options *o, const SnapshotReader *r, const char *path,
                             const GptConfig *model);
Trainer *lora_resume(const Options *o, const TrainerConfig *saved, SnapshotReader *r);
uint64_t lora_base_hash(const Options *o);

/* ranks.c: --parallel under mpirun: ddp, zero1, zero2, zero3 (data parallel) or pipeline:S
 * (pipeline.c), each one more case of the calls the training loop makes. ranks_begin (first
 * thing in main) starts MPI only when --parallel is on the command line; ranks_start returns
 * NULL without it. Under zero3 the weights are sharded between steps, under a pipeline each
 * rank's copies of the other stages' weights go stale: ranks_whole_weights(p, true) makes them
 * whole (for an evaluation), false shards them again; after the last step ranks_training_done
 * makes the trainer whole (the optimizer state too: ZeRO gathers its shards, the pipeline its
 * stages), so that the report, the samples and --save see an ordinary trainer. */
typedef struct RanksRun RanksRun;
/* The value of --parallel, every form (dist_plan_parse): the custom setting of settings.c. */
void         ranks_set_option(void *opts, int f, const char *flag, const char *arg);
void         ranks_check_options(const Options *o);
void         ranks_begin(int *argc, char ***argv);
void         ranks_parsed(void);          /* after options_parse */
/* The end of the setup (the data, the model, a snapshot): the ranks vote on whether any of them
 * failed, and all exit if one did; then they compare the settings that must agree (every flag
 * but the rank's own threads, outputs, ...; and the step a snapshot resumes from, start_step),
 * and all exit 1 if any differs, the lowest differing rank naming the first setting and both
 * values. The first collectives of a run: ranks_start calls it first. */
void         ranks_setup_done(const Options *o, long start_step);
RanksRun    *ranks_start(const Options *o, Trainer *tr);
bool         ranks_is_root(void);
/* The ranks a data-parallel run (--parallel ddp, zero1-3) of these options trains on: mpirun's
 * N, or 1 (no --parallel, or a pipeline). Known from MPI_Init on (ranks_begin). */
int          ranks_data_count(const Options *o);
int          ranks_count(const RanksRun *p);        /* every process: 1 without --parallel */
void         ranks_describe(const RanksRun *p, int B);
/* One step on the global batch (tokens [K B T], every rank the same): each data-parallel rank
 * trains on its own K micro-batches, a pipeline's stages on all of them. */
TrainStepResult ranks_step(RanksRun *p, const int *tokens, const int *targets, int B, int T,
                           double lr);
/* The reporting hook after a step (and its evaluation, ev, or NULL): the pipeline's own log row,
 * events and printed line (pipeline_step_report); true when it wrote the log row, which the
 * loop then leaves out. Collective. */
bool         ranks_step_report(RanksRun *p, long step, double lr, TrainStepResult r,
                               double seconds, const size_t *peaks, const EvalResult *ev);
void         ranks_whole_weights(RanksRun *p, bool whole);
void         ranks_training_done(RanksRun *p);
void         ranks_report(RanksRun *p, const size_t *step_peak);
/* Collective: each rank's tape counts the FLOPs of its own rows of the global batch (its own
 * blocks, in a pipeline) only, so the job's compute is the sum over the ranks. *f becomes that
 * sum (exact: integers); x's sum is returned (the peak FLOP/s). With p NULL (one process) both
 * are left as they are. */
void         ranks_sum_flops(const RanksRun *p, TapeFlops *f);
double       ranks_sum(const RanksRun *p, double x);
void         ranks_end(RanksRun *p);

#endif

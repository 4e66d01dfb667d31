#ifndef TAPEGRAD_RUN_OPTIONS_H
#define TAPEGRAD_RUN_OPTIONS_H
/* A run's settings as flags (train_gpt's command line): one table (cli/settings.h) whose rows
 * say, for every setting of RunSettings (run/run.h) and of the library's configs in it, its
 * flag, its field, its range (a schema's row), its default, its help lines, the snapshot key
 * that keeps it and what it needs to be given (run/options_table.c). From it come the parsing
 * with every check of the flags alone and together (run/options.c), the merge with a snapshot
 * given by --load and the keys a snapshot gets, the settings every rank of a --parallel run
 * must share (run/options_agree.c) and the precision flags' values (run/options_precision.c).
 * Bad input is one message naming the flag and exit 2 (cli_usage_error); run/'s own failures
 * print the same way once run_options_parse has run.
 *
 *     RunOptions o = run_options_parse(argc, argv, usage);   // usage: the program's --help
 *     ... run_options_merge_snapshot(&o, &saved, reader, path);   // with --load
 */
#include <stdbool.h>

#include "autograd/snapshot.h"
#include "cli/settings.h"
#include "run/ranks.h"
#include "run/run.h"

/* One per flag (the table's rows in run/options_table.c); also the option parser's value for it
 * (offset past the characters). */
typedef enum {
    RUN_FLAG_TASK = 256, RUN_FLAG_TASK_SIZE, RUN_FLAG_MSD_FIRST, RUN_FLAG_DATA, RUN_FLAG_STEPS,
    RUN_FLAG_BATCH, RUN_FLAG_SEQ, RUN_FLAG_LAYERS, RUN_FLAG_HEADS, RUN_FLAG_EMBD, RUN_FLAG_UNTIED,
    RUN_FLAG_SEPARATE_QKV, RUN_FLAG_LR, RUN_FLAG_WARMUP, RUN_FLAG_OPTIMIZER, RUN_FLAG_MOMENTUM,
    RUN_FLAG_WEIGHT_DECAY, RUN_FLAG_BETA1, RUN_FLAG_BETA2, RUN_FLAG_CLIP, RUN_FLAG_SEED,
    RUN_FLAG_THREADS, RUN_FLAG_KERNELS, RUN_FLAG_EVAL_EVERY, RUN_FLAG_EVAL_EXAMPLES, RUN_FLAG_LOG,
    RUN_FLAG_PLOT, RUN_FLAG_SAVE, RUN_FLAG_LOAD, RUN_FLAG_SAMPLE, RUN_FLAG_ACCUM, RUN_FLAG_LR_RULE,
    RUN_FLAG_BASE_BATCH, RUN_FLAG_WARMUP_TYPE, RUN_FLAG_WARMUP_FRACTION, RUN_FLAG_DECAY,
    RUN_FLAG_COOLDOWN, RUN_FLAG_COOLDOWN_SHAPE, RUN_FLAG_FINAL_FRACTION, RUN_FLAG_CHECKPOINT,
    RUN_FLAG_ATTENTION, RUN_FLAG_LORA, RUN_FLAG_LORA_ALPHA, RUN_FLAG_LORA_TARGETS, RUN_FLAG_QLORA,
    RUN_FLAG_LOAD_BASE, RUN_FLAG_SAVE_ADAPTER, RUN_FLAG_PRECISION, RUN_FLAG_LOSS_SCALE,
    RUN_FLAG_SCALE_GROWTH_INTERVAL, RUN_FLAG_SCALE_GROWTH_FACTOR, RUN_FLAG_SCALE_BACKOFF_FACTOR,
    RUN_FLAG_FP8_SCALING, RUN_FLAG_ADAM8BIT_ROUNDING, RUN_FLAG_TEMPERATURE, RUN_FLAG_SAMPLE_SEED,
    RUN_FLAG_MEM_BUDGET, RUN_FLAG_OFFLOAD, RUN_FLAG_PARALLEL, RUN_FLAG_BUCKET_KB,
    RUN_FLAG_GRAD_WIRE, RUN_FLAG_MICRO_BATCHES, RUN_FLAG_STAGES, RUN_FLAG_PIPE_EVENTS,
    RUN_FLAG_END,
} RunFlag;

/* The settings: the run's (run/run.h: its own, kept by a snapshot or this run's alone, and the
 * library's configs, which the rows of the table set), and what only the flags need.
 * --weight-decay sets adamw's, which run_options_parse copies to the other optimizers';
 * --precision sets the preset, with --fp8-scaling's settings there. */
typedef struct {
    RunSettings      run;
    PolicyFp8Scaling fp8_scaling;   /* --fp8-scaling: current, or delayed over fp8_window */
    int              fp8_window;
    bool             given[RUN_FLAG_END - RUN_FLAG_TASK];   /* the flags on the command line */
} RunOptions;

/* The table of every flag (run/options_table.c); settings_usage(RUN_OPTIONS_TABLE,
 * RUN_OPTIONS_N) prints its --help lines. */
extern const Setting RUN_OPTIONS_TABLE[];
extern const int     RUN_OPTIONS_N;

/* The command line, checked completely before anything is done; usage prints --help (the
 * program's lines, then the table's) for -h and --help. */
RunOptions run_options_parse(int argc, char **argv, void (*usage)(void));
bool       run_options_given(const RunOptions *o, RunFlag f);
/* --batch x --accum (and x --seq once known) within an int, or a usage error naming them. */
void       run_options_check_products(const RunOptions *o);
/* Settings a snapshot holds become the run's (o->run.cfg the snapshot's config); a flag given
 * explicitly must agree with the snapshot (one message naming the flag, both values and the
 * file otherwise). Every kept key is read through the settings table, with its flag's checks
 * (train.step with --steps'). */
void       run_options_merge_snapshot(RunOptions *o, const TrainerConfig *saved_cfg,
                                      const SnapshotReader *r, const char *path);
/* The metadata a run adds to a snapshot: the data, the schedule, the run's keys (the settings
 * table's; --accum as given, per rank) and its record (RUN_RECORD_SCHEMA: the data-parallel
 * rank count, a LoRA run's base). */
void       run_options_snapshot_meta(const RunOptions *o, SettingsMeta *m);

/* run/options_agree.c: the settings every rank of a --parallel run must share, as text: a
 * "--name\tvalue" line per flag (but the rank's own: threads, memory budget, outputs, samples),
 * with the kernel mode and then the step a snapshot resumes from; its length (at most
 * len - 1), which run_ranks_start compares between the ranks (run_ranks_first_difference names
 * the first line that differs). */
enum { RUN_OPTIONS_AGREED_MAX = 1 << 16 };
size_t run_options_agreed_text(const RunOptions *o, long start_step, char *buf, size_t len);

/* run/options_precision.c: the value of --precision, --loss-scale or --fp8-scaling (custom rows
 * of the table), and each as it would be typed, from o->run.cfg (how a snapshot's is
 * compared); checkpointing with fp8 delayed scaling refused (the amax history belongs to one
 * tape); the policy the options describe (the --precision preset with --fp8-scaling's). */
void            run_options_set_precision(void *opts, int f, const char *flag, const char *arg);
void            run_options_format_precision(const void *opts, int f, char *buf, size_t len);
void            run_options_check_precision(const RunOptions *o);
PrecisionPolicy run_options_policy(const RunOptions *o);

#endif

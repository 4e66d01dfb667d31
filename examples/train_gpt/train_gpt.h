#ifndef TAPEGRAD_TRAIN_GPT_H
#define TAPEGRAD_TRAIN_GPT_H
/* What the files of train_gpt share: the options (settings.c, flags.c, precision.c), the
 * settings the ranks compare (agree.c), the pipeline's flags (pipeline.c); the run itself is
 * run/'s (run/run.h, run/ranks.h, run/train.h), called from main (train_gpt.c). */
#include <stdbool.h>

#include "autograd/snapshot.h"
#include "cli/settings.h"
#include "run/ranks.h"
#include "run/run.h"

/* One per flag; also the option parser's value for it (offset past the characters). */
typedef enum {
    FLAG_TASK = 256, FLAG_TASK_SIZE, FLAG_MSD_FIRST, FLAG_DATA,
    FLAG_STEPS, FLAG_BATCH, FLAG_SEQ, FLAG_LAYERS, FLAG_HEADS, FLAG_EMBD, FLAG_UNTIED,
    FLAG_SEPARATE_QKV, FLAG_LR, FLAG_WARMUP, FLAG_OPTIMIZER, FLAG_MOMENTUM, FLAG_WEIGHT_DECAY,
    FLAG_BETA1, FLAG_BETA2, FLAG_CLIP, FLAG_SEED, FLAG_THREADS, FLAG_KERNELS, FLAG_EVAL_EVERY,
    FLAG_EVAL_EXAMPLES, FLAG_LOG, FLAG_PLOT, FLAG_SAVE, FLAG_LOAD, FLAG_SAMPLE,
    FLAG_ACCUM, FLAG_LR_RULE, FLAG_BASE_BATCH, FLAG_WARMUP_TYPE, FLAG_WARMUP_FRACTION,
    FLAG_DECAY, FLAG_COOLDOWN, FLAG_COOLDOWN_SHAPE, FLAG_FINAL_FRACTION, FLAG_CHECKPOINT,
    FLAG_ATTENTION,
    FLAG_LORA, FLAG_LORA_ALPHA, FLAG_LORA_TARGETS, FLAG_QLORA, FLAG_LOAD_BASE, FLAG_SAVE_ADAPTER,
    FLAG_PRECISION, FLAG_LOSS_SCALE, FLAG_SCALE_GROWTH_INTERVAL, FLAG_SCALE_GROWTH_FACTOR,
    FLAG_SCALE_BACKOFF_FACTOR, FLAG_FP8_SCALING,
    FLAG_ADAM8BIT_ROUNDING, FLAG_TEMPERATURE, FLAG_SAMPLE_SEED, FLAG_MEM_BUDGET,
    FLAG_OFFLOAD,                                                       /* run/offload.c */
    FLAG_PARALLEL,                                                      /* run/ranks.h */
    FLAG_BUCKET_KB, FLAG_GRAD_WIRE,                                     /* run/ranks.h */
    FLAG_MICRO_BATCHES, FLAG_STAGES, FLAG_PIPE_EVENTS,                  /* run/ranks.h */
    FLAG_END,
} Flag;

/* The settings: the run's (run/run.h: its own, kept by a snapshot or this run's alone, and the
 * library's configs, which the rows of the table set: settings.c), and what only the flags
 * need. --weight-decay sets adamw's, which options_parse copies to the other optimizers';
 * --precision sets the preset, with --fp8-scaling's settings there. */
typedef struct {
    RunSettings run;
    PolicyFp8Scaling fp8_scaling;   /* --fp8-scaling: current, or delayed over fp8_window */
    int         fp8_window;
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
/* Settings a snapshot holds become the run's (o->run.cfg the snapshot's config); a flag given
 * explicitly must agree with the snapshot (one message naming the flag, both values and the
 * file otherwise). Every kept key is read through the settings table, with its flag's checks
 * (train.step with --steps'). */
void    options_merge_snapshot(Options *o, const TrainerConfig *saved_cfg,
                               const SnapshotReader *r, const char *path);
/* The metadata train_gpt adds to a snapshot: the data, the schedule, the run's keys (the
 * settings table's; --accum as given, per rank), the data-parallel rank count (run.ranks) and a
 * LoRA run's base. */
void    options_snapshot_meta(const Options *o, SettingsMeta *m);

/* agree.c: the settings every rank of a --parallel run must share, as text: a "--name\tvalue"
 * line per flag (but the rank's own: threads, memory budget, outputs, samples), with the
 * kernel mode and then the step a snapshot resumes from; its length (at most len - 1), which
 * run_ranks_start compares between the ranks. And the first line where two such texts differ,
 * "--steps is 4 on rank 0, 8 on rank R" into out (run_ranks_first_difference). */
enum { OPTIONS_AGREED_MAX = 1 << 16 };
size_t options_agreed_text(const Options *o, long start_step, char *buf, size_t len);
void   options_first_difference(const char *mine, const char *theirs, int rank, char *out,
                                size_t len);

/* pipeline.c: the checks of the pipeline flags (after every flag is read: they set accum to the
 * micro-batch count), and again once a snapshot's settings are in (its accumulation is the
 * micro-batch count). */
void pipeline_check_options(Options *o);
void pipeline_check_loaded(Options *o, const char *path);

/* precision.c: the value of --precision, --loss-scale or --fp8-scaling (custom settings of the
 * table), and each as it would be typed, from o->run.cfg (how a snapshot's is compared). */
void precision_set_option(void *opts, int f, const char *flag, const char *arg);
void precision_format_option(const void *opts, int f, char *buf, size_t len);
/* Checkpointing with fp8 delayed scaling (the amax history belongs to one tape): refused. */
void precision_check_options(const Options *o);
/* The policy the options describe: the --precision preset with --fp8-scaling's settings. */
PrecisionPolicy precision_policy(const Options *o);

/* flags.c, LoRA: the flags together and against the others; switches on separate q/k/v for a
 * fresh model whose q, k or v get adapters. */
void lora_check_options(Options *o);

/* How run/ reports a failure: as cli_die and cli_usage_error do (options_parse installs it). */
void options_on_failure(int code, const char *message);

#endif

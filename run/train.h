#ifndef TAPEGRAD_RUN_TRAIN_H
#define TAPEGRAD_RUN_TRAIN_H
/* A run's training, once it is assembled (run/run.h: the data and the trainer; run/ranks.h: the
 * strategy on the ranks): the steps, each one's record handed to the program's hooks (its log
 * row, its progress display), the evaluations, and the header's and the report's numbers.
 *
 *     RunTrain *t = run_train_new(&settings, tr, ds, ranks);   // measures the FMA peak
 *     run_describe(t); ...; run_describe_training(t);
 *     run_train_begin(t);
 *     run_train_steps(t, &hooks);
 *     run_train_done(t);                                       // the trainer whole again
 *     run_report_eval(t); ...; run_report(t);
 *     run_train_free(t);
 *
 * Failures (a diverged loss, a validation loss that is not a number) end the run through
 * run_fail. */
#include <stdbool.h>

#include "run/ranks.h"
#include "run/run.h"

typedef struct RunTrain RunTrain;

/* One step as the log shows it. */
typedef struct {
    long               step;
    double             lr;
    TrainStepResult    result;
    double             seconds;
    long long          tokens;      /* K B T: the step's */
    double             flop;        /* the job's training compute so far, recompute included */
    double             mfu;         /* the step's model FLOPs over its time at the peak */
    const size_t      *peaks;       /* [MEM_NCAT + 1]: the step's peak bytes per category */
    const EvalResult  *ev;          /* the evaluation after it, or NULL */
    bool               pipelined;   /* a pipeline reported the step (its own log: pipe) */
    const RunPipeStep *pipe;        /* its record on rank 0, else NULL */
} RunStepRecord;

/* What the program does with each step's record and each evaluation's line. */
typedef struct {
    void *ctx;
    void (*step)(void *ctx, const RunStepRecord *rec);
    void (*note)(void *ctx, const char *line);
} RunHooks;

/* The training steps' totals, for a tokens/s line. */
typedef struct {
    double    seconds;
    long long tokens;
    long      steps;
    int       K, B, T;
} RunTotals;

/* s must outlive the RunTrain; its ranks set (run_ranks_data_count). Collective. */
RunTrain *run_train_new(const RunSettings *s, Trainer *tr, const Dataset *ds, RunRanks *ranks);
/* The header: the data, the model, the batch, the optimizer, checkpointing, attention, the
 * measured peak; then the precision, LoRA, the ranks and the schedule. */
void      run_describe(const RunTrain *t);
void      run_describe_training(const RunTrain *t);
/* The batch buffers; the memory peaks count from here. */
void      run_train_begin(RunTrain *t);
void      run_train_steps(RunTrain *t, const RunHooks *h);
void      run_train_done(RunTrain *t);
/* The final train loss, validation loss and exact match; then the parameters, the compute, the
 * precision, LoRA, memory, offload and ranks' lines. */
void      run_report_eval(RunTrain *t);
RunTotals run_train_totals(const RunTrain *t);
void      run_report(RunTrain *t);
void      run_train_free(RunTrain *t);

/* run/logs.c: the run's result files from each step's record, on the rank that writes them:
 * --log, one row per step (columns in docs/gpt.md), or under a pipeline (stages > 0) its own
 * --log and --pipe-events (docs/pipeline.md). run_logs_close prints the events' path. A file
 * that cannot be opened or written ends the run (run_fail). */
typedef struct RunLogs RunLogs;
RunLogs *run_logs_open(const RunLocal *l, int stages);
void     run_logs_write(RunLogs *g, const RunStepRecord *rec);
void     run_logs_close(RunLogs *g);

#endif

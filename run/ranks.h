#ifndef TAPEGRAD_RUN_RANKS_H
#define TAPEGRAD_RUN_RANKS_H
/* A run's --parallel on the ranks mpirun starts: ddp, zero1-3 (data parallel) or pipeline:S,
 * each one more case of the calls the training loop makes; dist/run.h is the strategy, what is
 * here is the run's around it: MPI started only when asked for, the setup vote, the settings
 * the ranks must agree on, what each rank prints, and the report.
 *
 *     scripts/mpirun -np 2 build/bin/train_gpt --parallel ddp [--bucket-kb N] ...
 *     scripts/mpirun -np 4 build/bin/train_gpt --parallel zero3 ...
 *     scripts/mpirun -np 4 build/bin/train_gpt --parallel pipeline:1f1b --micro-batches 8 ...
 *
 * Every rank parses the same command line, builds (or loads) the same model and draws the same
 * global batch from the same data RNG: under ddp and ZeRO N x --batch rows (the batch
 * `--accum N` would draw), rank r training on rows r B .. (r + 1) B - 1; under a pipeline m x
 * --batch rows, every stage on all of them. Rank 0 alone prints and writes the files (the
 * trainer is whole again by then). Without --parallel, MPI is never initialised.
 *
 * run_ranks_begin (first thing in main) starts MPI only when --parallel is on the command line;
 * run_ranks_start returns NULL without it. Under zero3 the weights are sharded between steps,
 * under a pipeline each rank's copies of the other stages' weights go stale:
 * run_ranks_whole_weights(p, true) makes them whole (for an evaluation), false shards them
 * again; after the last step run_ranks_training_done makes the trainer whole (the optimizer
 * state too: ZeRO gathers its shards, the pipeline its stages), so that the report, the samples
 * and a snapshot see an ordinary trainer.
 *
 * Failures: the settings are usually the same on every rank, so a bad flag fails on all of them
 * at once; only rank 0's message is shown and every rank leaves MPI cleanly with the usage
 * error's code (a bad flag on one rank alone votes like a setup failure). Ranks given different
 * settings are stopped before their first collective with one message naming the first
 * differing setting. A failure while the run is set up (a data file missing on one host or on
 * all, a snapshot that does not load) can happen on any set of ranks: they vote
 * (run_ranks_setup_done, the first collective), the lowest failing rank's message alone is
 * shown, and every rank leaves MPI cleanly, whatever order the ranks got there in. A failure
 * while training (a diverged loss) ends every rank through MPI_Abort: one message, exit code 1,
 * no rank left waiting. */
#include <stdbool.h>
#include <stddef.h>

#include "analysis/eval.h"
#include "nn/gpt_lora.h"
#include "optim/train.h"
#include "run/run.h"

typedef struct RunRanks RunRanks;

/* --parallel's text into p's plan (dist_plan_parse: every form); false with why otherwise. */
bool run_parallel_parse(RunParallel *p, const char *text, char *why, size_t len);
/* What --parallel cannot run with (LoRA, 8-bit Adam's snapshots under ZeRO, a config ZeRO
 * refuses): a usage error (run_fail, code 2) naming the flags. */
void run_ranks_check(const RunLocal *local, const TrainerConfig *cfg, const LoraConfig *lora);

void run_ranks_begin(int *argc, char ***argv);
void run_ranks_parsed(void);            /* after the settings are read */
/* The end of the setup (the data, the model, a snapshot): the ranks vote on whether any of them
 * failed, and all exit if one did; then they compare agreed (n bytes: the settings that must
 * agree as "--name\tvalue" lines, then the step a snapshot resumes from) and all exit 1 if any
 * differs, the lowest differing rank naming the first differing line and both values. The
 * first collectives of a run: run_ranks_start calls it first. */
void run_ranks_setup_done(const char *agreed, size_t n);
/* The first line where two such texts differ, "--steps is 4 on rank 0, 8 on rank R". */
void run_ranks_first_difference(const char *mine, const char *theirs, int rank, char *out,
                                size_t len);
/* The strategy of the settings around the trainer (fresh or loaded), after the setup vote;
 * NULL without --parallel (or with none). */
RunRanks *run_ranks_start(const RunKept *kept, const RunLocal *local, Trainer *tr,
                          const char *agreed, size_t n);
bool      run_ranks_is_root(void);
/* The ranks a data-parallel run (ddp, zero1-3) of these settings trains on: mpirun's N, or 1
 * (no --parallel, or a pipeline). Known from MPI_Init on (run_ranks_begin). */
int       run_ranks_data_count(const RunParallel *p);
/* Resuming a data-parallel run on another rank count. A step draws --accum K micro-batches on
 * each of N ranks: N K micro-batches from the one data generator, in rank order; a snapshot
 * keeps K (schedule.accum) and N (run.ranks) apart. On the same N the run resumes exactly (K
 * is a kept setting: a flag must agree). On another N (mine) it resumes only with the same
 * global batch, N K micro-batches (K derived when not given): the same rows, the same
 * schedule, the gradients summed in another grouping (the last bits may differ from an
 * unbroken run, which a line says); any other N K would draw other batches, and is refused
 * with the K that fits (run_fail). given: the K the command line gave (0: none) through flag
 * ("--accum", or a pipeline's "--micro-batches"). Returns the K to run with; n != mine. */
int       run_ranks_regroup(const char *path, long n, long k, int mine, int given,
                            const char *flag);
int       run_ranks_count(const RunRanks *p);       /* every process: 1 without --parallel */
/* The pipeline's stages, 0 without a pipeline (or p NULL). */
int       run_ranks_stages(const RunRanks *p);
void      run_ranks_describe(const RunRanks *p, int B);
/* One step on the global batch (tokens [K B T], every rank the same): each data-parallel rank
 * trains on its own K micro-batches, a pipeline's stages on all of them. */
TrainStepResult run_ranks_step(RunRanks *p, const int *tokens, const int *targets, int B, int T,
                               double lr);

/* A pipeline's record of a step, on rank 0: what its log row holds. */
typedef struct {
    long             step;
    double           loss, lr, grad_norm, ms;
    double           bytes_sent;               /* by every rank */
    double           bubble, bubble_replayed, bubble_schedule, bubble_formula;
    double           val_loss, val_acc;        /* NAN when not evaluated */
    int              stages;
    const size_t    *act_peaks;                /* [stages]: each stage's peak act bytes */
    int              n_events;
    const PipeEvent *events;                   /* every F and B of every stage */
} RunPipeStep;

/* The reporting after a step (and its evaluation, ev, or NULL): under a pipeline, its
 * bookkeeping and printed line, and true (the loop leaves out its own log row); *rec is then the
 * step's record on rank 0 (valid until the next call), NULL on the others. False otherwise.
 * Collective. */
bool      run_ranks_step_report(RunRanks *p, long step, double lr, TrainStepResult r,
                                double seconds, const size_t *peaks, const EvalResult *ev,
                                const RunPipeStep **rec);
void      run_ranks_whole_weights(RunRanks *p, bool whole);
void      run_ranks_training_done(RunRanks *p);
/* Traffic and memory per rank beside the formulas, or the pipeline's bubbles. Collective. */
void      run_ranks_report(RunRanks *p, const size_t *step_peak);
/* Collective: each rank's tape counts the FLOPs of its own rows of the global batch (its own
 * blocks, in a pipeline) only, so the job's compute is the sum over the ranks. *f becomes that
 * sum (exact: integers); x's sum is returned (the peak FLOP/s). With p NULL (one process) both
 * are left as they are. */
void      run_ranks_sum_flops(const RunRanks *p, TapeFlops *f);
double    run_ranks_sum(const RunRanks *p, double x);
void      run_ranks_end(RunRanks *p);

#endif

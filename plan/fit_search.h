#ifndef TAPEGRAD_FIT_SEARCH_H
#define TAPEGRAD_FIT_SEARCH_H
/* The course's homework, "fit the largest model you can", as a search (examples/fit_largest):
 *
 *   1. list the candidates: every model shape (layers, width) with every way of training it
 *      (micro-batch, checkpointing strategy, precision policy, optimizer);
 *   2. predict each one's peak bytes with the memory calculator (memcalc_predict) and drop the
 *      ones over the budget;
 *   3. keep, per shape, the first survivor in the order of preference below (the cheapest way
 *      to train that shape), and sort the shapes by parameter count, largest first;
 *   4. measure the first few: real training updates under the budget (fit_measure).
 *
 * Preference within a shape: no recomputation before some (vanilla, then sqrt, then
 * memory-poor); then the larger micro-batch (fewer accumulation steps); then fp32 before bf16;
 * then AdamW, 8-bit Adam, Adafactor. Accumulation makes up the rest of the target batch:
 * accum = target / B, so every candidate updates on the same number of rows; its memory is one
 * micro-batch's (optim/train.c frees each micro-batch's tape before the next).
 *
 * The memory calculator's total is the sum of the categories' peaks, an upper bound (they do
 * not all peak at once), so a candidate it admits fits; the measurement says by how much.
 *
 * Fine-tuning (FitSpace.base, fit_largest --base FILE): the shape is the base's, and the ways
 * are full fine-tuning (every parameter trained, the base's weights as the start) and LoRA
 * (FIT_LORA_RANKS below C / 2, on the Linears the base allows: every one with separate q/k/v, o and mlp on
 * a fused qkv), plain and QLoRA, each with the same micro-batch, strategy, precision and
 * optimizer dimensions. Preference: full fine-tuning when it fits (it trains every weight:
 * the most the task can get from the base); else LoRA with the largest rank that fits (the
 * most trainable numbers); at one rank plain before QLoRA (QLoRA trains the same adapters on
 * an NF4-rounded base, through bf16 products: it costs accuracy, docs/lora.md measures it, and
 * pays only when memory forces it); then the order above. Without a base there is no LoRA:
 * adapters on a frozen random model would train a few numbers beside weights that mean
 * nothing. */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/tsv.h"
#include "plan/memcalc.h"

/* The precision policies searched: policy_preset names. */
typedef enum { FIT_FP32, FIT_BF16, FIT_NPRECISIONS } FitPrecision;
extern const char *const FIT_PRECISION_NAMES[];     /* "fp32", "bf16", NULL */
/* The strategies and optimizers searched, in the order of preference: vanilla, sqrt,
 * memory-poor; AdamW, 8-bit Adam, Adafactor (by memcalc's names, which train_gpt's are). */
enum { FIT_NSTRATEGIES = 3, FIT_NOPTIMIZERS = 3 };
extern const CkptKind    FIT_STRATEGIES[FIT_NSTRATEGIES];
extern const McOptimizer FIT_OPTIMIZERS[FIT_NOPTIMIZERS];
extern const char *const FIT_OPTIMIZER_NAMES[];     /* "adamw", "adam8bit", "adafactor", NULL */

typedef struct {
    GptConfig    model;
    int          B, accum, T;
    CkptStrategy strategy;
    FitPrecision precision;
    McOptimizer  optimizer;     /* MC_ADAMW, MC_ADAM8BIT or MC_ADAFACTOR */
    size_t       params;
    double       predicted;     /* memcalc_predict's total, bytes; for LoRA the larger of
                                 * memcalc_predict_lora's and the set-up's bound */
    int          threads;       /* the attention scratch is per thread */
    /* Fine-tuning: the base file (NULL: training from scratch), and LoRA (rank 0: every
     * parameter trained). */
    const char  *base;
    McLora       lora;
    size_t       trainable;     /* parameters the optimizer updates */
    bool         offload;       /* train_gpt --offload optimizer: masters and state on the
                                 * host, outside the budget (optim/offload.h) */
} FitCandidate;

/* The ranks tried on a base, largest first. */
enum { FIT_N_LORA_RANKS = 5 };
extern const int FIT_LORA_RANKS[FIT_N_LORA_RANKS];  /* 64, 32, 16, 8, 4 */

/* What the search ranges over. fit_space_default fills the lists used by fit_largest. */
enum { FIT_MAX_LIST = 16 };
typedef struct {
    int V, T;                   /* vocabulary and sequence length of the data */
    int target_batch;           /* rows per update; batches that do not divide it are left
                                 * out */
    int threads;
    int layers[FIT_MAX_LIST], n_layers;
    int widths[FIT_MAX_LIST], n_widths;     /* heads = width / 32 */
    int batches[FIT_MAX_LIST], n_batches;   /* largest first */
    /* Fine-tuning: the base file and its shape (layers and widths are then ignored). */
    const char *base;
    GptConfig   base_model;
    /* Also the ways with the optimizer offloaded (fit_largest --offload): each way of training
     * is tried as it is, then offloaded. Offload changes no number of the run (the same bits,
     * optim/offload.h), only its traffic, so it comes before another optimizer or precision
     * would, and after the same way on the device. */
    bool        offload;
} FitSpace;

FitSpace fit_space_default(int V, int T, int threads);

/* A shape from scratch (V, T; L blocks of width C, heads of 32 dimensions, tied, fused qkv),
 * B 1 and accum 1, its way of training (strategy, precision, optimizer) the zero one. */
FitCandidate fit_shape(int V, int T, int L, int C, int threads);

/* One candidate's prediction filled in (params, predicted). */
void   fit_predict(FitCandidate *c);
/* Every candidate of the space, predicted, in the order of preference within each shape.
 * Returns the count; *out is malloc'd (free it). */
int    fit_candidates(const FitSpace *s, FitCandidate **out);
/* Steps 2 and 3 in place: the survivors, one per shape, largest first; returns their count. */
int    fit_filter_sort(FitCandidate *c, int n, size_t budget);

/* "L4 C256 H8, B 16 x 2, sqrt, bf16, adam8bit", with ", offload" when offloaded and ", LoRA r 16"
 * (or QLoRA, or "full fine-tuning") on a base. */
const char *fit_describe(const FitCandidate *c, char *buf, size_t len);
/* "from scratch", "full fine-tuning", "LoRA r 16", "QLoRA r 8". */
const char *fit_method(const FitCandidate *c, char *buf, size_t len);
/* The LoRA targets the search gives a base: every Linear (q,k,v,o,mlp) with separate q/k/v,
 * o and mlp on a fused qkv (nn/gpt_lora.h refuses q, k, v there). */
unsigned    fit_lora_targets(const GptConfig *base);
/* A rank is searched when 2 r < C: from r = C / 2 on, an adapter on a [C, C] weight holds as
 * many numbers as the weight (r (C + C) >= C^2), and full fine-tuning trains no more. */
bool        fit_lora_rank_useful(int rank, const GptConfig *base);
/* The train_gpt arguments that run it, one call of fn each, in order: "--seq", "64",
 * "--layers", "4", "--heads", "8", ... "--optimizer", "adam8bit" (then "--offload",
 * "optimizer"); on a base "--load-base", FILE [, "--lora", R, "--lora-targets", T
 * [, "--qlora"]] instead of the shape. fit_flags joins them with spaces. */
typedef void (*FitArgFn)(void *ctx, const char *arg);
void        fit_each_arg(const FitCandidate *c, FitArgFn fn, void *ctx);
const char *fit_flags(const FitCandidate *c, char *buf, size_t len);
/* Forward-equivalents of one micro-batch under its strategy over one without recomputation:
 * (2 + forwards / L) / 3, a backward costing two forwards. */
double fit_recompute_factor(const FitCandidate *c);

/* Real training updates of c (optim/train.h's trainer, as train_gpt builds it, accum
 * micro-batches each) with the allocator's budget set before the model exists, in a child
 * process: one for the memory, and a second, timed, with FIT_TIMED; then, with FIT_EVAL, an
 * evaluation of B rows (train_gpt evaluates at its batch size, and the memory calculator does
 * not predict it: without recording, it still holds every block's output until done, which
 * under checkpointing can exceed what the training step holds).
 *
 * Why a child: the library allocates through mem_alloc, which ends the program when the budget
 * refuses an allocation (every op and module would otherwise have to handle NULL and unwind a
 * half-built tape). A forked child may die that way; the parent reads the outcome from a pipe
 * and the child's message from another, and stays clean for the next trial. The parent must not
 * have started OpenMP threads before (libgomp's pool does not survive fork): the search only
 * predicts in the parent, and trains by starting train_gpt. */
typedef struct {
    bool   fits;
    double peak[MEM_NCAT + 1];  /* peaks from building the trainer to the end of the
                                 * evaluation (fits only) */
    double seconds;             /* wall time of the second update (timed only) */
    char   error[700];          /* why not (the allocator's message), or "" */
} FitMeasure;

enum { FIT_TIMED = 1, FIT_EVAL = 2 };
FitMeasure fit_measure(const FitCandidate *c, size_t budget, unsigned what);

/* The largest micro-batch in [1, max_batch] whose predicted total fits budget (0 if none):
 * a bisection, the prediction growing with B. */
int fit_max_batch_predicted(const FitCandidate *c, size_t budget, int max_batch);
/* The same measured (fit_measure with what: 0 for the update alone, FIT_EVAL to include an
 * evaluation): B doubled from 1 while a step fits, then a bisection between the last
 * that fit and the first that did not. *trials counts the steps run; *peak gets the measured
 * total of the largest that fit. 0 if B = 1 does not fit. */
int fit_max_batch_measured(const FitCandidate *c, size_t budget, unsigned what, int max_batch,
                           int *trials, double *peak);

/* Both for one candidate (the exercise's row; plan/fit_max_batch.c): the predicted batch and
 * its predicted total (0 when none fits), the measured batch without and with an evaluation
 * and their measured totals, the trials of both and their wall time. */
typedef struct {
    int    predicted, measured, measured_eval;
    double predicted_bytes, measured_bytes, measured_eval_bytes;
    int    trials;
    double seconds;
} FitMaxBatch;
FitMaxBatch fit_max_batch(const FitCandidate *c, size_t budget, int max_batch);

/* The exercise's table (plan/fit_max_batch.c): fit_max_batch for each of FIT_STRATEGIES in
 * turn, each row given to fn as it is done (it may print it) and, with t, written there as a
 * row of FIT_MAX_BATCH_COLUMNS (fit_largest --exercise max-batch --out). False when a row
 * could not be written; the rows after it are not measured. */
extern const char *const FIT_MAX_BATCH_COLUMNS[];
typedef void (*FitMaxBatchFn)(void *ctx, const char *strategy, const FitMaxBatch *m);
bool fit_max_batch_rows(const FitCandidate *c, size_t budget, int max_batch, TsvWriter *t,
                        FitMaxBatchFn fn, void *ctx);

/* The whole search for one goal ------------------------------------------------------------ */

/* What must fit: the memory budget, and min_steps updates in train_seconds. */
typedef struct {
    size_t budget;
    double train_seconds;
    long   min_steps;
    int    verify;              /* measure at least this many candidates */
} FitGoal;

/* One surviving candidate (one per shape) and what became of it. */
typedef struct {
    FitCandidate c;
    bool         measured;
    FitMeasure   m;
    double       update_seconds;  /* measured, or predicted from the FLOP rate */
    long         steps;           /* updates in the goal's time at that rate */
    const char  *verdict;         /* "winner", "fits", "over budget", "too slow", ... */
} FitRow;

typedef struct {
    int     n_candidates;       /* listed */
    int     n;                  /* predicted to fit, one per shape: rows[0 .. n) */
    FitRow *rows;
    int     winner;             /* index into rows, or -1 */
    int     measured;           /* trials run */
    double  smallest_predicted; /* the least any candidate needs, bytes */
} FitSearch;

/* Steps 1 to 4 (above) with the time rule: a candidate is measured (fit_measure) in order; its
 * measured update time says how many updates fit the time; fewer than min_steps is "too
 * slow". Model FLOPs (6 x parameters per token x the recompute factor) over the fastest
 * measured update time give a rate that predicts the others' update times, so candidates too
 * slow even at that rate are skipped unmeasured (and looked at again when a faster rate is
 * measured). The winner is the first (largest) that fits both; the search stops once it has
 * one and has measured goal->verify candidates. Progress lines go to log (may be NULL). Free
 * with fit_search_free. */
FitSearch fit_search(const FitSpace *space, const FitGoal *goal, FILE *log);
void      fit_search_free(FitSearch *s);
/* The search's table as fit_largest prints it: how many were listed, kept and measured, then
 * every row up to the last one measured and three more (rank, setup, parameters, predicted and
 * measured MiB, their difference in bytes, update seconds, updates, verdict; a measured row
 * that did not fit followed by its error), then what the columns mean. */
void      fit_search_print(const FitSearch *s, const FitGoal *goal, FILE *out);

/* The winner trained (plan/fit_winner.c) ---------------------------------------------------- */

/* The validation rows train_gpt evaluates the winner on, once, at the end. */
enum { FIT_EVAL_EXAMPLES = 256 };

/* The winner's train_gpt arguments after the program's name: "--data", the text, c's own
 * (fit_each_arg), then "--steps", "--eval-every" 0, "--eval-examples" FIT_EVAL_EXAMPLES,
 * "--sample", "--mem-budget" (the budget enforced on the whole run) and "--threads". */
typedef struct {
    const char *data;
    long        steps;
    int         sample, threads;
    size_t      budget;
} FitRunArgs;
void fit_each_run_arg(const FitCandidate *c, const FitRunArgs *a, FitArgFn fn, void *ctx);

/* What the winner's run reported. */
typedef struct {
    long   steps;
    double val_loss;            /* at the end, on FIT_EVAL_EXAMPLES validation rows */
    double seconds;             /* wall time of the run */
    size_t peak_step, peak_run; /* train_gpt's memory report: the total's peak over the training
                                 * steps and over the whole run */
    char   sample[4096];        /* the prompt and the generated text */
} FitTrained;

/* The homework's table as a TSV file of one row (fit_largest --out), FIT_TABLE_COLUMNS: the
 * budget, the winner's setup and its parts, its parameters, the run's peaks, the search's
 * measured step and the prediction, the eval loss, the updates, the seconds, the sample on one
 * line (a newline shown as " / "), the method, the LoRA rank and the trained parameters. False
 * with the message in err. */
extern const char *const FIT_TABLE_COLUMNS[];
bool fit_write_table(const char *path, size_t budget, const FitRow *w, const FitTrained *r,
                     char *err, size_t errlen);
/* The same table as fit_largest prints it, a line a field (the setup, the base and method when
 * fine-tuned, the parameters, the peaks beside the search's step and the prediction, the eval
 * loss, the batch, the run's seconds, the sample between two rules), under the budget and the
 * --time (seconds) it was trained for. */
void fit_trained_print(const FitTrained *r, const FitRow *w, size_t budget, double seconds,
                       FILE *out);

#endif

/* A run's training (run/run.h): the steps with each one's record, the evaluations, the memory
 * peaks per phase, the FLOPs counted beside the estimate, and the header's and the report's
 * numbers. The program draws the progress display and writes the log from the hooks.
 *
 * Each step draws a batch, runs the trainer's step (forward on the tape, cross-entropy on the
 * answer tokens, backward, clipping, the update) on one process or through the --parallel
 * strategy (run/ranks.h), and hands its record to the program. Every eval_every steps, and
 * after the last, it measures the validation loss and exact-match accuracy.
 *
 * The tape counts the FLOPs of every step (docs/autograd.md, "Counting FLOPs"): the record's
 * flop is the training compute so far, its mfu a step's model FLOPs (forward and backward, not
 * recompute) over its time at the FMA peak measured when the run starts, and the report sets
 * the total beside the 6ND + 12LTCD estimate. Under --parallel every rank counts only its own
 * rows of the global batch (ddp, zero1-3) or its own blocks (a pipeline): the numbers are the
 * job's, every rank's counts summed after each step, over the ranks' peaks summed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/peak_fma.h"
#include "autograd/parallel.h"
#include "optim/adam8bit.h"
#include "run/train.h"

enum { LOSS_WINDOW = 50 };     /* steps averaged into the final training loss */

struct RunTrain {
    const RunSettings *s;
    Trainer   *tr;
    const Dataset *ds;
    RunRanks  *ranks;
    int        B, T, K;              /* micro-batch rows, tokens per row, micro-batches per step */
    int       *tokens, *targets;
    size_t     peak[MEM_NCAT + 1];   /* the run's peak per category, over every phase */
    size_t     step_peak[MEM_NCAT + 1];   /* the same over the training steps alone */
    double     train_seconds;
    double     peak_flops;           /* FLOP/s, measured at the start on the run's threads
                                      * (on every rank's, summed) */
    TapeFlops  flops;                /* the training compute of the job: every rank's tape */
    long long  train_tokens;
    double     recent_loss[LOSS_WINDOW];
    long       steps_run;
    EvalResult last_eval;            /* the latest evaluation, at step last_eval_step */
    long       last_eval_step;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* What the mfu divides by: the fp32 FMA peak of the widest vectors this CPU has, on the run's
 * threads, best of a few runs of ~12 ms (analysis/peak_fma.h). */
static double measure_peak(void)
{
    return 1e9 * peak_gflops(peak_best_isa(), par_threads(), 5);
}

RunTrain *run_train_new(const RunSettings *s, Trainer *tr, const Dataset *ds, RunRanks *ranks)
{
    RunTrain *t = calloc(1, sizeof *t);
    if (!t)
        run_fail(1, "out of memory");
    t->s = s;
    t->tr = tr;
    t->ds = ds;
    t->ranks = ranks;
    t->B = s->kept.batch;
    t->T = s->kept.seq;
    /* Under ddp and ZeRO the batch drawn is the global one, K micro-batches on each of N
     * ranks: the batch --accum N K draws in one process, which the schedule sees as the
     * effective batch. */
    t->K = s->kept.accum * s->ranks;
    t->peak_flops = run_ranks_sum(ranks, measure_peak());
    return t;
}

/* Memory ------------------------------------------------------------------------------------ */

/* Peaks restart at every phase (each step, each evaluation) so the log shows a step's own; the
 * run's peak is the largest of them. The phase's peaks go to phase[] when it is not NULL. */
static void end_phase(RunTrain *t, size_t *phase)
{
    for (int c = 0; c <= MEM_NCAT; c++) {
        size_t p = mem_peak((MemCategory)c);
        if (phase)
            phase[c] = p;
        if (p > t->peak[c])
            t->peak[c] = p;
    }
    mem_reset_peaks();
}

void run_train_begin(RunTrain *t)
{
    size_t batch_tokens = (size_t)t->K * t->B * t->T;
    t->tokens = malloc(batch_tokens * sizeof *t->tokens);
    t->targets = malloc(batch_tokens * sizeof *t->targets);
    if (!t->tokens || !t->targets)
        run_fail(1, "out of memory for %d batches of %d x %d tokens", t->K, t->B, t->T);
    end_phase(t, NULL);    /* the model and the optimizer state count from here */
}

/* Both columns, because evaluation does not record: under a precision policy its activations
 * are rounded but not packed, so the run's act peak can be an evaluation's fp32 one while the
 * training steps' shows what the policy saves. */
static void print_memory(const RunTrain *t)
{
    printf("memory, peak bytes per category:   training steps      whole run (evaluation "
           "included)\n");
    for (int c = 0; c <= MEM_NCAT; c++) {
        char a[32], b[32];
        printf("  %-6s %12zu %10s  %12zu %10s\n", mem_category_name((MemCategory)c),
               t->step_peak[c], mem_format_bytes(t->step_peak[c], a, sizeof a),
               t->peak[c], mem_format_bytes(t->peak[c], b, sizeof b));
    }
}

/* The loop ---------------------------------------------------------------------------------- */

/* A validation loss that is not a number is a model that computes nothing: a failure, not a
 * result to print (a loaded model with finite but enormous weights can overflow). */
static EvalResult eval_checked(RunTrain *t, long step)
{
    EvalResult ev = eval_teacher_forced(t->tr, t->ds, t->B, t->s->local.eval_examples);
    if (!isfinite(ev.loss))
        run_fail(1, "the validation loss is %g at step %ld: the model's outputs are not finite "
                 "numbers%s", ev.loss, step,
                 t->s->local.load_path ? " (check the --load file)" : "");
    return ev;
}

static EvalResult evaluate(RunTrain *t, long step, const RunHooks *h)
{
    EvalResult ev = eval_checked(t, step);
    end_phase(t, NULL);
    t->last_eval = ev;
    t->last_eval_step = step;
    char acc[64] = "", line[256];
    if (!isnan(ev.accuracy))
        snprintf(acc, sizeof acc, ", exact match %.1f%% (teacher-forced)", 100.0 * ev.accuracy);
    snprintf(line, sizeof line, "step %ld: validation loss %.4f%s over %d examples", step,
             ev.loss, acc, ev.examples);
    if (h->note)
        h->note(h->ctx, line);
    return ev;
}

/* Model FLOPs: what the step needs, forward and backward, without what it recomputes. */
static double model_flops(const TapeFlops *f)
{
    return (double)(flop_total(f->forward) + flop_total(f->backward));
}

static double all_flops(const TapeFlops *f)
{
    return model_flops(f) + (double)flop_total(f->recompute);
}

/* A skipped step is the loss scaler's business (a scale too high for fp16 or fp8 gradients).
 * With no scaling and gradients in a format with fp32's range (its 8 exponent bits: fp32,
 * bf16) nothing but the numbers themselves overflows: the run has diverged, even while its
 * loss is still finite (an SGD run at --lr 10 can skip 20 of 30 steps at a loss of 1e17 and
 * exit 0 otherwise). */
static bool overflow_can_skip(const Trainer *tr)
{
    const FormatInfo *grad = fmt_info(tensor_dtype_format(tr->cfg.policy.grad));
    return tr->cfg.loss_scale.mode != LOSS_SCALE_NONE || grad->exponent_bits < 8;
}

void run_train_steps(RunTrain *t, const RunHooks *h)
{
    const RunSettings *s = t->s;
    SchedConfig sched = run_schedule(&s->sched, &s->kept, s->ranks);
    for (long step = t->tr->step + 1; step <= s->kept.steps; step++) {
        double lr = sched_lr(&sched, step - 1);
        double t0 = now();
        TapeFlops before = t->tr->flops;
        dataset_train_batch(t->ds, &t->tr->data_rng, t->K * t->B, t->tokens, t->targets);
        TrainStepResult r = t->ranks
            ? run_ranks_step(t->ranks, t->tokens, t->targets, t->B, t->T, lr)
            : trainer_step_accum(t->tr, t->tokens, t->targets, t->B, t->T, t->K, lr);
        double seconds = now() - t0;
        TapeFlops step_flops = t->tr->flops;     /* this rank's count of this step */
        tape_flops_sub(&step_flops, &before);
        run_ranks_sum_flops(t->ranks, &step_flops);     /* every rank's rows: the job's */
        tape_flops_add(&t->flops, &step_flops);
        size_t peaks[MEM_NCAT + 1];
        end_phase(t, peaks);
        for (int c = 0; c <= MEM_NCAT; c++)
            if (peaks[c] > t->step_peak[c])
                t->step_peak[c] = peaks[c];
        t->train_seconds += seconds;
        t->train_tokens += (long long)t->K * t->B * t->T;
        t->recent_loss[t->steps_run++ % LOSS_WINDOW] = r.loss;
        if (!isfinite(r.loss))
            run_fail(1, "the loss is %g at step %ld: training diverged (try a smaller --lr)",
                     r.loss, step);
        if (r.skipped && !overflow_can_skip(t->tr))
            run_fail(1, "the gradient is not finite at step %ld (loss %g) with no loss scaling, "
                     "in a format with fp32's range: training diverged (try a smaller --lr)",
                     step, r.loss);

        long every = s->local.eval_every;
        bool eval_now = step == s->kept.steps || (every > 0 && step % every == 0);
        EvalResult ev;
        if (eval_now) {
            run_ranks_whole_weights(t->ranks, true);
            ev = evaluate(t, step, h);
            run_ranks_whole_weights(t->ranks, step == s->kept.steps);
            end_phase(t, NULL);       /* the gathered weights belong to the evaluation */
        }
        RunStepRecord rec = {
            .step = step, .lr = lr, .result = r, .seconds = seconds,
            .tokens = (long long)t->K * t->B * t->T, .flop = all_flops(&t->flops),
            .mfu = model_flops(&step_flops) / (seconds * t->peak_flops), .peaks = peaks,
            .ev = eval_now ? &ev : NULL,
        };
        rec.pipelined = run_ranks_step_report(t->ranks, step, lr, r, seconds, peaks, rec.ev,
                                              &rec.pipe);
        if (h->step)
            h->step(h->ctx, &rec);
    }
}

void run_train_done(RunTrain *t)
{
    run_ranks_training_done(t->ranks);       /* for the report, the samples, the snapshot */
}

/* The end ----------------------------------------------------------------------------------- */

static double mean_recent_loss(const RunTrain *t)
{
    int n = t->steps_run < LOSS_WINDOW ? (int)t->steps_run : LOSS_WINDOW;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += t->recent_loss[i];
    return n ? sum / n : NAN;
}

void run_report_eval(RunTrain *t)
{
    if (t->steps_run > 0) {
        int n = t->steps_run < LOSS_WINDOW ? (int)t->steps_run : LOSS_WINDOW;
        printf("train loss       %.4f (mean over the last %d step%s)\n", mean_recent_loss(t),
               n, n == 1 ? "" : "s");
    }
    EvalResult ev = t->last_eval;
    if (t->last_eval_step != t->tr->step || t->steps_run == 0)
        ev = eval_checked(t, t->tr->step);
    printf("validation loss  %.4f over %d examples\n", ev.loss, ev.examples);
    if (dataset_task(t->ds)) {
        double acc = eval_greedy_accuracy(t->tr, t->ds, t->B, t->s->local.eval_examples);
        printf("exact match      %.1f%% of %d validation examples (greedy decoding)\n",
               100.0 * acc, ev.examples);
    }
    end_phase(t, NULL);
}

RunTotals run_train_totals(const RunTrain *t)
{
    return (RunTotals){ .seconds = t->train_seconds, .tokens = t->train_tokens,
                        .steps = t->steps_run, .K = t->K, .B = t->B, .T = t->T };
}

/* The training compute counted, beside the estimate and as a share of the peak. */
static void report_compute(const RunTrain *t)
{
    const TapeFlops *f = &t->flops;
    if (t->steps_run == 0)
        return;
    char ranks[48] = "";
    if (t->ranks)
        snprintf(ranks, sizeof ranks, " (%d ranks' tapes, summed)", run_ranks_count(t->ranks));
    printf("compute          %.4g FLOP counted%s: forward %.4g, backward %.4g, recompute %.4g; "
           "products %.4g, the rest %.4g\n", all_flops(f), ranks, (double)flop_total(f->forward),
           (double)flop_total(f->backward), (double)flop_total(f->recompute),
           (double)(f->forward.matmul + f->backward.matmul + f->recompute.matmul),
           (double)(f->forward.other + f->backward.other + f->recompute.other));
    const GptConfig *m = &t->tr->model->cfg;
    double tokens = (double)t->train_tokens, per_token = gpt_flops_per_token(m, t->T);
    double products = (double)(f->forward.matmul + f->backward.matmul);
    double N = gpt_product_weights(m);
    printf("estimate         (6N + 12LTC) D = %.4g FLOP (6ND alone %.4g): N = 12LC^2 + VC = %.0f, "
           "T = %d, D = %.0f tokens; counted forward + backward products / estimate = %.6f\n",
           per_token * tokens, 6.0 * N * tokens, N, t->T, tokens,
           products / (per_token * tokens));
    printf("MFU              %.2f%%: model FLOPs (forward + backward) %.4g over %.1f s of "
           "steps at the measured peak %.1f GFLOP/s\n",
           100.0 * model_flops(f) / (t->train_seconds * t->peak_flops), model_flops(f),
           t->train_seconds, 1e-9 * t->peak_flops);
}

void run_report(RunTrain *t)
{
    printf("parameters       %zu\n", gpt_n_params(t->tr->model));
    report_compute(t);
    run_precision_report(t->tr);
    run_lora_report(t->tr);
    print_memory(t);
    run_offload_report(t->tr);
    run_ranks_report(t->ranks, t->step_peak);
}

/* The header -------------------------------------------------------------------------------- */

void run_describe(const RunTrain *t)
{
    const RunSettings *s = t->s;
    const GptConfig *m = &t->tr->model->cfg;
    char buf[512];
    printf("%s\n", dataset_describe(t->ds, buf, sizeof buf));
    printf("model: V=%d T=%d L=%d H=%d C=%d, %s head, %s q/k/v; %zu parameters\n",
           m->vocab_size, m->max_seq, m->n_layer, m->n_head, m->n_embd,
           m->tied ? "tied" : "untied", m->fused_qkv ? "fused" : "separate",
           gpt_n_params(t->tr->model));
    SchedConfig sc = run_schedule(&s->sched, &s->kept, s->ranks);
    printf("training: %s, batch %d x %d %s = %ld, clip %g, %d threads; steps %ld to "
           "%ld\n", trainer_optimizer_name(s->cfg.optimizer), s->kept.batch, t->K,
           run_parallel_pipeline(&s->local.parallel) ? "micro-batches, pipelined"
           : t->ranks ? "(ranks x micro-batches)" : "accumulated",
           sched_effective_batch(&sc), s->cfg.clip, par_threads(), t->tr->step, s->kept.steps);
    if (s->cfg.optimizer == TRAIN_ADAM8BIT)
        printf("adam8bit: moments in 8 bits, re-encoded by %s rounding\n",
               adam8bit_rounding_name(s->cfg.adam8bit_rounding));
    char ckpt[32];
    printf("checkpointing over the blocks: %s (the log's peak_act and ms columns show the "
           "effect)\n", ckpt_name(s->cfg.local.checkpoint, ckpt, sizeof ckpt));
    printf("attention: %s\n", s->kept.attention == RUN_ATTENTION_TILED ? "tiled" : "standard");
    char ranks[48] = "";
    if (t->ranks)
        snprintf(ranks, sizeof ranks, " on each of %d ranks, summed", run_ranks_count(t->ranks));
    printf("peak: %.1f GFLOP/s fp32 FMA (%s, %d threads%s), measured now: the mfu column's "
           "denominator\n", 1e-9 * t->peak_flops, peak_isa_name[peak_best_isa()],
           par_threads(), ranks);
}

void run_describe_training(const RunTrain *t)
{
    const RunSettings *s = t->s;
    run_precision_describe(t->tr);
    run_lora_describe(t->tr, s->local.load_base_path);
    run_ranks_describe(t->ranks, t->B);
    SchedConfig sc = run_schedule(&s->sched, &s->kept, s->ranks);
    char decay[96];
    snprintf(decay, sizeof decay, "%s", SCHED_DECAY_NAMES[sc.decay]);
    if (sc.decay == SCHED_DECAY_WSD)
        snprintf(decay, sizeof decay, "wsd, %s cooldown over the last %ld steps",
                 SCHED_COOLDOWN_NAMES[sc.cooldown], sc.cooldown_steps);
    if (sc.decay != SCHED_DECAY_CONSTANT && sc.final_fraction > 0.0) {
        size_t n = strlen(decay);
        snprintf(decay + n, sizeof decay - n, " to %g of the peak", sc.final_fraction);
    }
    printf("schedule: lr %g at batch %d, rule %s: peak %g; warmup %s over %ld steps; %s\n",
           sc.base_lr, sc.base_batch, SCHED_RULE_NAMES[sc.rule], sched_peak_lr(&sc),
           SCHED_WARMUP_NAMES[sc.warmup], sc.warmup == SCHED_WARMUP_NONE ? 0 : sc.warmup_steps,
           decay);
}

void run_train_free(RunTrain *t)
{
    if (!t)
        return;
    free(t->tokens);
    free(t->targets);
    free(t);
}

/* train_gpt: a small GPT learns a built-in task (3-digit addition by default) or a text file.
 *
 * The main program of the project. Each step draws a batch, runs optim/train.h's trainer_step
 * (forward on the tape, cross-entropy on the answer tokens, backward, clipping, AdamW or SGD)
 * and logs the loss, the speed and the peak bytes of each memory category. Every --eval-every
 * steps it measures the validation loss and exact-match accuracy; at the end it decodes the
 * validation set greedily for the final accuracy, prints a report, and can save a snapshot that
 * --load resumes exactly.
 *
 * --precision runs the step under a mixed-precision policy (packed bf16/fp16/fp8 tensors, fp32
 * master weights in the optimizer) and --loss-scale seeds backward with a scale, unscaled once
 * per update before clipping; the log's loss_scale column is the scale a step used and
 * skipped is 1 when an inf or NaN gradient skipped its update (docs/mixed_precision.md).
 *
 * The tape counts the FLOPs of every step (docs/autograd.md, "Counting FLOPs"): the log's flop
 * column is the training compute so far, its mfu column a step's model FLOPs (forward and
 * backward, not recompute) over its time at the FMA peak measured when the run starts, and the
 * report sets the total beside the 6ND + 12LTCD estimate. Under --parallel every rank counts
 * only its own rows of the global batch (ddp, zero1-3) or its own blocks (a pipeline): the
 * numbers printed are the job's, every rank's counts summed after each step
 * (run_ranks_sum_flops),
 * over the ranks' peaks summed.
 *
 * One training loop (train) for every --parallel value: run/ranks.h's calls are where one
 * process, ddp, ZeRO and the pipeline part.
 *
 * Files: settings.c (every flag: one table), flags.c (the command line and a snapshot's
 * settings, from that table), evaluate.c (validation and samples), lora.c (LoRA and QLoRA),
 * precision.c (--precision and --loss-scale: their values and checks), pipeline.c (the
 * pipeline's flags and logs), agree.c (the settings the ranks compare), loss.gp (the figure);
 * --parallel on MPI ranks is run/ranks.h's.
 * docs/gpt.md explains the model, its backward pass and every column of the log. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/peak_fma.h"
#include "autograd/outfile.h"
#include "autograd/parallel.h"
#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "examples/common/tsv.h"
#include "examples/common/blas_kernels.h"
#include "examples/common/wait_policy.h"
#include "examples/train_gpt/train_gpt.h"
#include "optim/train_snapshot.h"
#include "run/ranks.h"

enum { LOSS_WINDOW = 50 };     /* steps averaged into the final training loss */

/* Readers find columns by name (loss.gp, examples/common's train_run), so new ones go before
 * the peak_* group that closes a row. */
static const char *const LOG_COLUMNS[] = {
    "step", "loss", "lr", "grad_norm", "tokens_per_s", "ms", "val_loss", "val_acc",
    "loss_scale", "skipped", "flop", "mfu",
    "peak_param", "peak_grad", "peak_optim", "peak_act", "peak_temp", NULL,
};

typedef struct {
    Options    o;
    Dataset   *ds;
    Trainer   *tr;
    TsvWriter *log;
    Progress   progress;
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
    RunRanks  *ranks;                /* --parallel ddp, zero1-3, pipeline:S (run/ranks.h),
                                      * else NULL */
    PipeLogs  *pipe_logs;            /* a pipeline's --log and --pipe-events, rank 0's */
    SnapshotReader *loaded;          /* --load's file: open to the end, since the options
                                      * point into its metadata (the task, the data path) */
} Run;

/* Setup: data, model, optimizer -------------------------------------------------------------- */

static Dataset *open_data(Options *o)
{
    char err[512];
    Dataset *ds;
    if (o->kept.data.path) {
        if (o->seq == 0)
            o->seq = RUN_TEXT_DEFAULT_SEQ;
        ds = dataset_open_text(o->kept.data.path, o->seq, err, sizeof err);
    } else {
        TaskSpec spec = { .name = o->kept.data.task, .size = o->kept.data.task_size, .n_val = 0,
                          .answer_msd_first = o->kept.data.msd_first };
        ds = dataset_open_task(&spec, err, sizeof err);
    }
    if (!ds)
        cli_die(1, "%s", err);
    if (dataset_task(ds)) {
        int rows = dataset_seq_len(ds);
        o->kept.data.task_size = task_size(dataset_task(ds));
        if (o->seq == 0)
            o->seq = rows;
        if (o->seq != rows)
            cli_usage_error("--seq %d does not fit task %s (size %d): its examples are %d "
                            "tokens, so every row is %d (leave --seq out)", o->seq,
                            o->kept.data.task,
                            o->kept.data.task_size, rows + 1, rows);
    }
    return ds;
}

/* The model must cover the data: every token id below V, every row within T. */
static void check_fit(const Options *o, const Dataset *ds, const GptConfig *m)
{
    if (m->vocab_size < dataset_vocab_size(ds))
        cli_die(1, "the model's vocabulary (V = %d) is smaller than the data's (%d tokens)",
                m->vocab_size, dataset_vocab_size(ds));
    if (o->seq > m->max_seq)
        cli_die(1, "rows of %d tokens are longer than the model's T = %d", o->seq, m->max_seq);
}

/* A model whose fp32 weights alone exceed the machine's memory is refused before it is built
 * (building it would end in an allocator's abort or the kernel's OOM killer): from flags or
 * from a snapshot's model.* keys alike. */
static void check_model_size(const GptConfig *m)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double params = (double)gpt_config_n_params(m), memory = (double)pages * (double)page;
    if (pages > 0 && page > 0 && 4.0 * params > memory)
        cli_die(1, "the model (V=%d T=%d L=%d C=%d) has %.4g parameters: its fp32 weights alone "
                "need %.3g GB, more than the %.3g GB of memory this machine has", m->vocab_size,
                m->max_seq, m->n_layer, m->n_embd, params, 4e-9 * params, 1e-9 * memory);
}

/* --load, first half: the snapshot's settings merged into the options (a flag that disagrees
 * ends the run with a message), the data opened and the model checked against both. The
 * reader is kept in run->loaded. Returns the snapshot's trainer config. */
static TrainerConfig load_settings(Run *run)
{
    Options *o = &run->o;
    SnapshotError err;
    TrainerConfig saved;
    run->loaded = snapshot_open(o->local.load_path, &err);
    if (!run->loaded || !train_snapshot_config(run->loaded, o->local.load_path, &saved, &err))
        cli_die(1, "%s", err.message);
    options_merge_snapshot(o, &saved, run->loaded, o->local.load_path);
    run->ds = open_data(o);
    check_fit(o, run->ds, &saved.model);
    check_model_size(&saved.model);
    return saved;
}

/* --load, second half: the trainer built from the settings and the snapshot's tensors. */
static Trainer *load_trainer(Run *run, TrainerConfig *saved)
{
    Options *o = &run->o;
    SnapshotError err;
    Trainer *tr = o->lora.rank > 0
        ? run_lora_resume(saved, &o->lora, o->cfg.seed, o->local.load_base_path, run->loaded,
                          o->local.load_path)
        : train_snapshot_load(run->loaded, o->local.load_path, &err);
    if (!tr)
        cli_die(1, "%s", err.message);
    tr->cfg.checkpoint = o->cfg.checkpoint;     /* not in the snapshot: it changes no number */
    if (o->cfg.offload != TRAIN_OFFLOAD_NONE)   /* nor is offload */
        trainer_offload(tr);
    /* the snapshot's (run.attention) */
    gpt_set_tiled_attention(tr->model, o->kept.attention == RUN_ATTENTION_TILED);
    /* As lora_setup does for a fresh run: the parameters were made fp32 and then packed (under
     * a policy); that transient copy is not the run's. */
    mem_reset_peaks();
    return tr;
}

/* A fresh trainer, or the one a snapshot holds (its settings merged into the options). */
static Trainer *make_trainer(Run *run)
{
    Options *o = &run->o;
    if (o->local.load_path) {
        TrainerConfig saved = load_settings(run);
        return load_trainer(run, &saved);
    }
    run->ds = open_data(o);
    TrainerConfig cfg = o->cfg;
    cfg.model.vocab_size = dataset_vocab_size(run->ds);
    cfg.model.max_seq = o->seq;
    if (o->local.load_base_path)
        run_lora_base_config(o->local.load_base_path, &cfg.model);
    check_fit(o, run->ds, &cfg.model);
    check_model_size(&cfg.model);
    Trainer *tr = run_lora_trainer_new(&cfg, &o->lora, o->cfg.seed, o->local.load_base_path);
    gpt_set_tiled_attention(tr->model, o->kept.attention == RUN_ATTENTION_TILED);
    return tr;
}

static void save_snapshot(const Run *run)
{
    static SettingsMeta meta;
    options_snapshot_meta(&run->o, &meta);
    SnapshotError err;
    if (!train_snapshot_save(run->tr, run->o.local.save_path, meta.keys, meta.values, meta.n, &err))
        cli_die(1, "%s", err.message);
    printf("snapshot: %s (step %ld)\n", run->o.local.save_path, run->tr->step);
}

/* Memory ------------------------------------------------------------------------------------ */

/* Peaks restart at every phase (each step, each evaluation) so the log shows a step's own; the
 * run's peak is the largest of them. The phase's peaks go to phase[] when it is not NULL. */
static void end_phase(Run *run, size_t *phase)
{
    for (int c = 0; c <= MEM_NCAT; c++) {
        size_t p = mem_peak((MemCategory)c);
        if (phase)
            phase[c] = p;
        if (p > run->peak[c])
            run->peak[c] = p;
    }
    mem_reset_peaks();
}

/* Both columns, because evaluation does not record: under a precision policy its activations
 * are rounded but not packed, so the run's act peak can be an evaluation's fp32 one while the
 * training steps' shows what the policy saves. */
static void print_memory(const Run *run)
{
    printf("memory, peak bytes per category:   training steps      whole run (evaluation "
           "included)\n");
    for (int c = 0; c <= MEM_NCAT; c++) {
        char a[32], b[32];
        printf("  %-6s %12zu %10s  %12zu %10s\n", mem_category_name((MemCategory)c),
               run->step_peak[c], mem_format_bytes(run->step_peak[c], a, sizeof a),
               run->peak[c], mem_format_bytes(run->peak[c], b, sizeof b));
    }
}

/* The loop ---------------------------------------------------------------------------------- */

/* A validation loss that is not a number is a model that computes nothing: a failure, not a
 * result to print (a loaded model with finite but enormous weights can overflow). */
static EvalResult eval_checked(Run *run, long step)
{
    EvalResult ev = eval_teacher_forced(run->tr, run->ds, run->B, run->o.local.eval_examples);
    if (!isfinite(ev.loss))
        cli_die(1, "the validation loss is %g at step %ld: the model's outputs are not finite "
                "numbers%s", ev.loss, step,
                run->o.local.load_path ? " (check the --load file)" : "");
    return ev;
}

static EvalResult evaluate(Run *run, long step)
{
    EvalResult ev = eval_checked(run, step);
    end_phase(run, NULL);
    run->last_eval = ev;
    run->last_eval_step = step;
    char acc[64] = "";
    if (!isnan(ev.accuracy))
        snprintf(acc, sizeof acc, ", exact match %.1f%% (teacher-forced)", 100.0 * ev.accuracy);
    progress_note(&run->progress, "step %ld: validation loss %.4f%s over %d examples", step,
                  ev.loss, acc, ev.examples);
    return ev;
}

/* Validation cells stay empty between evaluations (and val_acc for text): gnuplot and
 * spreadsheets read an empty cell as missing, and the curves are drawn across the gaps. */
static void log_cell(TsvWriter *log, double v)
{
    if (isnan(v))
        tsv_str(log, "");
    else
        tsv_num(log, v);
}

/* FLOPs ------------------------------------------------------------------------------------ */

/* What the MFU column divides by: the fp32 FMA peak of the widest vectors this CPU has, on the
 * run's threads, best of a few runs of ~12 ms (examples/common/peak_fma.h). */
static double measure_peak(void)
{
    return 1e9 * peak_gflops(peak_best_isa(), par_threads(), 5);
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

static void log_row(Run *run, long step, double lr, TrainStepResult r, double seconds,
                    double step_model_flops, const size_t *peaks, const EvalResult *ev)
{
    if (!run->log)
        return;
    tsv_int(run->log, step);
    tsv_float(run->log, (float)r.loss);     /* the loss is a float; no false digits */
    tsv_num(run->log, lr);
    tsv_num(run->log, r.grad_norm);
    tsv_num(run->log, (double)run->K * run->B * run->T / seconds);
    tsv_num(run->log, 1000.0 * seconds);
    log_cell(run->log, ev ? ev->loss : NAN);
    log_cell(run->log, ev ? ev->accuracy : NAN);
    tsv_num(run->log, r.loss_scale);
    tsv_int(run->log, r.skipped);
    tsv_num(run->log, all_flops(&run->flops));
    tsv_num(run->log, step_model_flops / (seconds * run->peak_flops));
    for (int c = 0; c < MEM_NCAT; c++)
        tsv_int(run->log, (long long)peaks[c]);
    if (!tsv_end_row(run->log))
        cli_die(1, "%s: write failed (disk full?)", run->o.local.log_path);
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

static void train(Run *run)
{
    const Options *o = &run->o;
    long first = run->tr->step;
    progress_start(&run->progress, first, o->kept.steps, (o->kept.steps - first) / 20);
    for (long step = first + 1; step <= o->kept.steps; step++) {
        double lr = options_lr(o, step);
        double t0 = progress_now();
        TapeFlops before = run->tr->flops;
        dataset_train_batch(run->ds, &run->tr->data_rng, run->K * run->B, run->tokens,
                            run->targets);
        TrainStepResult r = run->ranks
            ? run_ranks_step(run->ranks, run->tokens, run->targets, run->B, run->T, lr)
            : trainer_step_accum(run->tr, run->tokens, run->targets, run->B, run->T, run->K, lr);
        double seconds = progress_now() - t0;
        TapeFlops step_flops = run->tr->flops;     /* this rank's count of this step */
        tape_flops_sub(&step_flops, &before);
        run_ranks_sum_flops(run->ranks, &step_flops);      /* every rank's rows: the job's */
        tape_flops_add(&run->flops, &step_flops);
        size_t peaks[MEM_NCAT + 1];
        end_phase(run, peaks);
        for (int c = 0; c <= MEM_NCAT; c++)
            if (peaks[c] > run->step_peak[c])
                run->step_peak[c] = peaks[c];
        run->train_seconds += seconds;
        run->train_tokens += (long long)run->K * run->B * run->T;
        run->recent_loss[run->steps_run++ % LOSS_WINDOW] = r.loss;
        if (!isfinite(r.loss))
            cli_die(1, "the loss is %g at step %ld: training diverged (try a smaller --lr)",
                    r.loss, step);
        if (r.skipped && !overflow_can_skip(run->tr))
            cli_die(1, "the gradient is not finite at step %ld (loss %g) with no loss scaling, "
                    "in a format with fp32's range: training diverged (try a smaller --lr)",
                    step, r.loss);

        long every = o->local.eval_every;
        bool eval_now = step == o->kept.steps || (every > 0 && step % every == 0);
        EvalResult ev;
        if (eval_now) {
            run_ranks_whole_weights(run->ranks, true);
            ev = evaluate(run, step);
            run_ranks_whole_weights(run->ranks, step == o->kept.steps);
            end_phase(run, NULL);       /* the gathered weights belong to the evaluation */
        }
        const RunPipeStep *rec;
        if (run_ranks_step_report(run->ranks, step, lr, r, seconds, peaks, eval_now ? &ev : NULL,
                                  &rec)) {
            if (rec && run->pipe_logs)
                pipe_logs_write(run->pipe_logs, rec);
        } else {
            log_row(run, step, lr, r, seconds, model_flops(&step_flops), peaks,
                    eval_now ? &ev : NULL);
        }
        char extra[48];
        if (o->cfg.loss_scale.mode == LOSS_SCALE_NONE)
            snprintf(extra, sizeof extra, "lr %.1e", lr);
        else
            snprintf(extra, sizeof extra, "lr %.1e, scale %g", lr, r.loss_scale);
        progress_update(&run->progress, step, r.loss, (long long)run->K * run->B * run->T,
                        extra);
    }
    progress_finish(&run->progress);
    run_ranks_training_done(run->ranks);       /* for the report, the samples, the snapshot */
}

/* The end ----------------------------------------------------------------------------------- */

static double mean_recent_loss(const Run *run)
{
    int n = run->steps_run < LOSS_WINDOW ? (int)run->steps_run : LOSS_WINDOW;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += run->recent_loss[i];
    return n ? sum / n : NAN;
}

/* The training compute counted, beside the estimate and as a share of the peak. */
static void report_compute(const Run *run)
{
    const TapeFlops *f = &run->flops;
    if (run->steps_run == 0)
        return;
    char ranks[48] = "";
    if (run->ranks)
        snprintf(ranks, sizeof ranks, " (%d ranks' tapes, summed)", run_ranks_count(run->ranks));
    printf("compute          %.4g FLOP counted%s: forward %.4g, backward %.4g, recompute %.4g; "
           "products %.4g, the rest %.4g\n", all_flops(f), ranks, (double)flop_total(f->forward),
           (double)flop_total(f->backward), (double)flop_total(f->recompute),
           (double)(f->forward.matmul + f->backward.matmul + f->recompute.matmul),
           (double)(f->forward.other + f->backward.other + f->recompute.other));
    const GptConfig *m = &run->tr->model->cfg;
    double tokens = (double)run->train_tokens, per_token = gpt_flops_per_token(m, run->T);
    double products = (double)(f->forward.matmul + f->backward.matmul);
    double N = gpt_product_weights(m);
    printf("estimate         (6N + 12LTC) D = %.4g FLOP (6ND alone %.4g): N = 12LC^2 + VC = %.0f, "
           "T = %d, D = %.0f tokens; counted forward + backward products / estimate = %.6f\n",
           per_token * tokens, 6.0 * N * tokens, N, run->T, tokens,
           products / (per_token * tokens));
    printf("MFU              %.2f%%: model FLOPs (forward + backward) %.4g over %.1f s of "
           "steps at the measured peak %.1f GFLOP/s\n",
           100.0 * model_flops(f) / (run->train_seconds * run->peak_flops), model_flops(f),
           run->train_seconds, 1e-9 * run->peak_flops);
}

/* The final numbers. The wall time runs from the start of the program to the end of the final
 * evaluation (the greedy decoding included); tokens/s counts the training steps only. */
static void report(Run *run, double start)
{
    const Options *o = &run->o;
    if (run->steps_run > 0) {
        int n = run->steps_run < LOSS_WINDOW ? (int)run->steps_run : LOSS_WINDOW;
        printf("train loss       %.4f (mean over the last %d step%s)\n", mean_recent_loss(run),
               n, n == 1 ? "" : "s");
    }
    EvalResult ev = run->last_eval;
    if (run->last_eval_step != run->tr->step || run->steps_run == 0)
        ev = eval_checked(run, run->tr->step);
    printf("validation loss  %.4f over %d examples\n", ev.loss, ev.examples);
    if (dataset_task(run->ds)) {
        double acc = eval_greedy_accuracy(run->tr, run->ds, run->B, o->local.eval_examples);
        printf("exact match      %.1f%% of %d validation examples (greedy decoding)\n",
               100.0 * acc, ev.examples);
    }
    end_phase(run, NULL);
    double wall_seconds = progress_now() - start;
    char wall[32], rate[32];
    printf("wall time        %s (%.1f s)\n",
           progress_format_duration(wall_seconds, wall, sizeof wall), wall_seconds);
    if (run->train_seconds > 0.0)
        printf("tokens/s         %s (training steps only, %ld steps of %d x %d x %d tokens)\n",
               progress_format_rate((double)run->train_tokens / run->train_seconds, rate,
                                    sizeof rate), run->steps_run, run->K, run->B, run->T);
    printf("parameters       %zu\n", gpt_n_params(run->tr->model));
    report_compute(run);
    run_precision_report(run->tr);
    run_lora_report(run->tr);
    print_memory(run);
    run_offload_report(run->tr);
    run_ranks_report(run->ranks, run->step_peak);
    pipe_logs_close(run->pipe_logs);
    run->pipe_logs = NULL;
}

static void describe(const Run *run)
{
    const Options *o = &run->o;
    const GptConfig *m = &run->tr->model->cfg;
    char buf[512];
    printf("%s\n", dataset_describe(run->ds, buf, sizeof buf));
    printf("model: V=%d T=%d L=%d H=%d C=%d, %s head, %s q/k/v; %zu parameters\n",
           m->vocab_size, m->max_seq, m->n_layer, m->n_head, m->n_embd,
           m->tied ? "tied" : "untied", m->fused_qkv ? "fused" : "separate",
           gpt_n_params(run->tr->model));
    SchedConfig s = options_schedule(o);
    printf("training: %s, batch %d x %d %s = %ld, clip %g, %d threads; steps %ld to "
           "%ld\n", trainer_optimizer_name(o->cfg.optimizer), o->kept.batch, run->K,
           run_parallel_pipeline(&o->local.parallel) ? "micro-batches, pipelined"
           : run->ranks ? "(ranks x micro-batches)"
                                                                : "accumulated",
           sched_effective_batch(&s), o->cfg.clip, par_threads(), run->tr->step, o->kept.steps);
    if (o->cfg.optimizer == TRAIN_ADAM8BIT)
        printf("adam8bit: moments in 8 bits, re-encoded by %s rounding\n",
               adam8bit_rounding_name(o->cfg.adam8bit_rounding));
    char ckpt[32];
    printf("checkpointing over the blocks: %s (the log's peak_act and ms columns show the "
           "effect)\n", ckpt_name(o->cfg.checkpoint, ckpt, sizeof ckpt));
    printf("attention: %s\n", o->kept.attention == RUN_ATTENTION_TILED ? "tiled" : "standard");
    char ranks[48] = "";
    if (run->ranks)
        snprintf(ranks, sizeof ranks, " on each of %d ranks, summed", run_ranks_count(run->ranks));
    printf("peak: %.1f GFLOP/s fp32 FMA (%s, %d threads%s), measured now: the mfu column's "
           "denominator\n", 1e-9 * run->peak_flops, peak_isa_name[peak_best_isa()],
           par_threads(), ranks);
    char blas[160];
    printf("gemm: %s\n", blas_kernels_note(blas, sizeof blas));
    printf("openmp wait policy: %s\n", wait_policy_note(blas, sizeof blas));
    run_precision_describe(run->tr);
    run_lora_describe(run->tr, o->local.load_base_path);
    run_ranks_describe(run->ranks, run->B);
    char decay[96];
    snprintf(decay, sizeof decay, "%s", SCHED_DECAY_NAMES[s.decay]);
    if (s.decay == SCHED_DECAY_WSD)
        snprintf(decay, sizeof decay, "wsd, %s cooldown over the last %ld steps",
                 SCHED_COOLDOWN_NAMES[s.cooldown], s.cooldown_steps);
    printf("schedule: lr %g at batch %d, rule %s: peak %g; warmup %s over %ld steps; %s\n",
           s.base_lr, s.base_batch, SCHED_RULE_NAMES[s.rule], sched_peak_lr(&s),
           SCHED_WARMUP_NAMES[s.warmup], s.warmup == SCHED_WARMUP_NONE ? 0 : s.warmup_steps,
           decay);
}

static void finish_outputs(Run *run)
{
    const Options *o = &run->o;
    char err[512];
    if (run->log && !tsv_close(run->log, err, sizeof err))
        cli_die(1, "%s", err);
    if (o->local.log_path)
        printf("log: %s\n", o->local.log_path);
    if (o->local.plot_path) {
        const char *names[] = { "input", "output", "accuracy" };
        const char *values[] = { o->local.log_path, o->local.plot_path,
                                 dataset_task(run->ds) ? "1" : "0" };
        if (plot_run_vars(TAPEGRAD_SOURCE_DIR "/examples/train_gpt/loss.gp", names, values, 3,
                          "output") == PLOT_OK)
            printf("figure: %s\n", o->local.plot_path);
    }
    if (o->local.save_path)
        save_snapshot(run);
    if (o->local.save_adapter_path)
        run_lora_save_adapter(run->tr, o->local.save_adapter_path);
}

/* Outputs written only at the end are checked now: a run must not train for an hour and then
 * find that it cannot save (a missing folder, a folder given as the file), or block at its first
 * log row on a FIFO nobody reads. The check leaves nothing behind. */
static void check_outputs(const Options *o)
{
    const struct { const char *flag, *path; } outputs[] = {
        { "--save", o->local.save_path }, { "--save-adapter", o->local.save_adapter_path },
        { "--plot", o->local.plot_path }, { "--log", o->local.log_path },
        { "--pipe-events", o->local.parallel.pipe_events },
    };
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) {
        char err[512];
        if (outputs[i].path && (!outfile_check_kind(outputs[i].path, err, sizeof err) ||
                                !outfile_check_writable(outputs[i].path, err, sizeof err)))
            cli_die(1, "%s %s", outputs[i].flag, err);
    }
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    run_ranks_begin(&argc, &argv);
    double start = progress_now();
    Run run = { .o = options_parse(argc, argv) };
    run_ranks_parsed();
    par_set_threads(run.o.local.threads);
    check_outputs(&run.o);      /* every rank: each stops alike, none is left waiting */
    /* Before the model exists, so everything the run allocates counts against it. */
    if (run.o.local.mem_budget)
        mem_set_budget(MEM_ALL, run.o.local.mem_budget);
    run.tr = make_trainer(&run);
    static char agreed[OPTIONS_AGREED_MAX];
    size_t agreed_len = options_agreed_text(&run.o, run.tr->step, agreed, sizeof agreed);
    run.ranks = run_ranks_start(&run.o.kept, &run.o.local, run.o.seq, run.tr, agreed,
                                agreed_len);
    if (run_ranks_stages(run.ranks) > 0 && run_ranks_is_root())
        run.pipe_logs = pipe_logs_open(&run.o, run_ranks_stages(run.ranks));
    run.B = run.o.kept.batch;
    run.T = run.o.seq;
    /* Under ddp and ZeRO the batch drawn is the global one, --accum K micro-batches on each of
     * N ranks: the batch --accum N K draws in one process, which the schedule (--lr-rule) sees
     * as the effective batch. The snapshot keeps K and N apart (options_snapshot_meta). */
    run.o.ranks = run_ranks_data_count(&run.o.local.parallel);
    run.K = run.o.kept.accum * run.o.ranks;
    options_check_products(&run.o);     /* --seq is known now, and accum under ddp */
    run.peak_flops = run_ranks_sum(run.ranks, measure_peak());
    describe(&run);

    size_t batch_tokens = (size_t)run.K * run.B * run.T;
    run.tokens = malloc(batch_tokens * sizeof *run.tokens);
    run.targets = malloc(batch_tokens * sizeof *run.targets);
    if (!run.tokens || !run.targets)
        cli_die(1, "out of memory for %d batches of %d x %d tokens", run.K, run.B, run.T);
    /* a pipeline writes its own (pipe_logs) */
    if (run.o.local.log_path && run_ranks_is_root() &&
        !run_parallel_pipeline(&run.o.local.parallel)) {
        char err[512];
        run.log = tsv_open(run.o.local.log_path, LOG_COLUMNS, err, sizeof err);
        if (!run.log)
            cli_die(1, "%s", err);
    }
    end_phase(&run, NULL);    /* the model and the optimizer state count from here */

    train(&run);
    report(&run, start);
    if (run_ranks_is_root())
        finish_outputs(&run);
    const RunLocal *local = &run.o.local;
    long sample_seed = options_given(&run.o, FLAG_SAMPLE_SEED) ? local->sample_seed
                                                              : (long)run.o.cfg.seed;
    run_print_samples(run.tr, run.ds, local->sample, local->temperature, (uint64_t)sample_seed);

    free(run.tokens);
    free(run.targets);
    run_ranks_end(run.ranks);
    trainer_free(run.tr);
    dataset_free(run.ds);
    snapshot_close(run.loaded);
    return 0;
}

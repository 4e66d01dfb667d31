/* train_gpt: a small GPT learns a built-in task (3-digit addition by default) or a text file.
 *
 * The main program of the project: its flags, the run/ library's calls, its output. The run
 * (run/train.h) draws a batch each step, runs optim/train.h's trainer step (forward on the tape,
 * cross-entropy on the answer tokens, backward, clipping, the update) on one process or through
 * --parallel (run/ranks.h), evaluates every --eval-every steps, and reports; this program logs
 * each step's loss, speed, FLOPs and peak bytes per memory category (columns in docs/gpt.md),
 * draws the progress display and the figure, and saves a snapshot that --load resumes exactly.
 *
 * --precision runs the step under a mixed-precision policy (packed bf16/fp16/fp8 tensors, fp32
 * master weights in the optimizer) and --loss-scale seeds backward with a scale, unscaled once
 * per update before clipping; the log's loss_scale column is the scale a step used and
 * skipped is 1 when an inf or NaN gradient skipped its update (docs/mixed_precision.md).
 *
 * Its flags are the run's (run/options.h: one table, run/options_table.c, with every check of
 * the flags alone and together, the merge with --load's snapshot and what the ranks agree on);
 * loss.gp draws the figure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>        /* and for tests/fuzz/fuzz_train_load.c, which includes this file */

#include "autograd/parallel.h"
#include "examples/common/blas_kernels.h"
#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "examples/common/wait_policy.h"
#include "run/options.h"
#include "run/ranks.h"
#include "run/train.h"

typedef struct {
    RunOptions      o;
    Dataset        *ds;
    Trainer        *tr;
    RunRanks       *ranks;          /* --parallel ddp, zero1-3, pipeline:S, else NULL */
    RunTrain       *train;
    RunLogs        *logs;           /* --log (a pipeline's, and --pipe-events), rank 0's */
    Progress        progress;
    SnapshotReader *loaded;         /* --load's file: open to the end, since the options
                                     * point into its metadata (the task, the data path) */
} Run;

static void usage(void)
{
    printf("Usage: train_gpt [OPTION]...\n"
           "Train a small GPT on a built-in task or a text file; print the loss, the validation\n"
           "loss and exact-match accuracy, the speed and the memory used per category.\n\n");
    settings_usage(RUN_OPTIONS_TABLE, RUN_OPTIONS_N);
}

/* The command line (the fuzz harnesses parse theirs the same way). */
static RunOptions parse(int argc, char **argv)
{
    return run_options_parse(argc, argv, usage);
}

/* --load, first half: the snapshot's settings merged into the options (a flag that disagrees
 * ends the run with a message), the data opened and the model checked against both. The
 * reader is kept in run->loaded. Returns the snapshot's trainer config. */
static TrainerConfig load_settings(Run *run)
{
    RunSettings *s = &run->o.run;
    TrainerConfig saved = run_snapshot_settings(s->local.load_path, &run->loaded);
    run_options_merge_snapshot(&run->o, &saved, run->loaded, s->local.load_path);
    run->ds = run_open_data(&s->kept.data, &s->kept.seq);
    run_check_fit(s->kept.seq, run->ds, &saved.model);
    run_check_model_size(&saved.model);
    return saved;
}

/* --load, second half: the trainer built from the settings and the snapshot's tensors. */
static Trainer *load_trainer(Run *run, TrainerConfig *saved)
{
    return run_trainer_resume(run->loaded, saved, &run->o.run);
}

/* A fresh trainer, or the one a snapshot holds (its settings merged into the options). */
static Trainer *make_trainer(Run *run)
{
    RunSettings *s = &run->o.run;
    if (s->local.load_path) {
        TrainerConfig saved = load_settings(run);
        return load_trainer(run, &saved);
    }
    run->ds = run_open_data(&s->kept.data, &s->kept.seq);
    return run_trainer_fresh(s, run->ds);
}

/* Each step: its log row (or the pipeline's), then the progress display. */
static void on_step(void *ctx, const RunStepRecord *rec)
{
    Run *run = ctx;
    if (run->logs)
        run_logs_write(run->logs, rec);
    char extra[48];
    if (run->o.run.cfg.loss_scale.mode == LOSS_SCALE_NONE)
        snprintf(extra, sizeof extra, "lr %.1e", rec->lr);
    else
        snprintf(extra, sizeof extra, "lr %.1e, scale %g", rec->lr, rec->result.loss_scale);
    progress_update(&run->progress, rec->step, rec->result.loss, rec->tokens, extra);
}

static void on_note(void *ctx, const char *line)
{
    progress_note(&((Run *)ctx)->progress, "%s", line);
}

/* The final numbers. The wall time runs from the start of the program to the end of the final
 * evaluation (the greedy decoding included); tokens/s counts the training steps only. */
static void report(Run *run, double start)
{
    run_report_eval(run->train);
    RunTotals t = run_train_totals(run->train);
    double wall_seconds = progress_now() - start;
    char wall[32], rate[32];
    printf("wall time        %s (%.1f s)\n",
           progress_format_duration(wall_seconds, wall, sizeof wall), wall_seconds);
    if (t.seconds > 0.0)
        printf("tokens/s         %s (training steps only, %ld steps of %d x %d x %d tokens)\n",
               progress_format_rate((double)t.tokens / t.seconds, rate, sizeof rate), t.steps,
               t.K, t.B, t.T);
    run_report(run->train);
    run_logs_close(run->logs);
    run->logs = NULL;
}

static void describe(const Run *run)
{
    run_describe(run->train);
    char buf[160];
    printf("gemm: %s\n", blas_kernels_note(buf, sizeof buf));
    printf("openmp wait policy: %s\n", wait_policy_note(buf, sizeof buf));
    run_describe_training(run->train);
}

static void finish_outputs(Run *run)
{
    const RunLocal *l = &run->o.run.local;
    if (l->log_path)
        printf("log: %s\n", l->log_path);
    if (l->plot_path) {
        const char *names[] = { "input", "output", "accuracy" };
        const char *values[] = { l->log_path, l->plot_path, dataset_task(run->ds) ? "1" : "0" };
        if (plot_run_vars(TAPEGRAD_SOURCE_DIR "/examples/train_gpt/loss.gp", names, values, 3,
                          "output") == PLOT_OK)
            printf("figure: %s\n", l->plot_path);
    }
    if (l->save_path) {
        static SettingsMeta meta;
        run_options_snapshot_meta(&run->o, &meta);
        run_save(run->tr, l->save_path, meta.keys, meta.values, meta.n);
    }
    if (l->save_adapter_path)
        run_lora_save_adapter(run->tr, l->save_adapter_path);
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    run_ranks_begin(&argc, &argv);
    double start = progress_now();
    Run run = { .o = parse(argc, argv) };
    RunSettings *s = &run.o.run;
    run_ranks_parsed();
    par_set_threads(s->local.threads);
    run_check_outputs(&s->local);   /* every rank: each stops alike, none is left waiting */
    /* Before the model exists, so everything the run allocates counts against it. */
    if (s->local.mem_budget)
        mem_set_budget(MEM_ALL, s->local.mem_budget);
    run.tr = make_trainer(&run);
    static char agreed[RUN_OPTIONS_AGREED_MAX];
    size_t agreed_len = run_options_agreed_text(&run.o, run.tr->step, agreed, sizeof agreed);
    run.ranks = run_ranks_start(&s->kept, &s->local, run.tr, agreed, agreed_len);
    /* The snapshot keeps --accum K and the ranks N apart (run_options_snapshot_meta). */
    s->ranks = run_ranks_data_count(&s->local.parallel);
    run_options_check_products(&run.o);     /* --seq is known now, and accum under ddp */
    run.train = run_train_new(s, run.tr, run.ds, run.ranks);
    describe(&run);

    if (run_ranks_is_root())
        run.logs = run_logs_open(&s->local, run_ranks_stages(run.ranks));
    run_train_begin(run.train);

    long first = run.tr->step;
    progress_start(&run.progress, first, s->kept.steps, (s->kept.steps - first) / 20);
    run_train_steps(run.train, &(RunHooks){ .ctx = &run, .step = on_step, .note = on_note });
    progress_finish(&run.progress);
    run_train_done(run.train);
    report(&run, start);
    if (run_ranks_is_root())
        finish_outputs(&run);
    long sample_seed = run_options_given(&run.o, RUN_FLAG_SAMPLE_SEED) ? s->local.sample_seed
                                                              : (long)s->cfg.seed;
    run_print_samples(run.tr, run.ds, s->local.sample, s->local.temperature,
                      (uint64_t)sample_seed);

    run_train_free(run.train);
    run_ranks_end(run.ranks);
    trainer_free(run.tr);
    dataset_free(run.ds);
    snapshot_close(run.loaded);
    return 0;
}

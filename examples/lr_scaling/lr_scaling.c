/* lr_scaling: the large-batch table in miniature (Goyal et al. 2017, "Accurate, Large Minibatch
 * SGD"). A base batch b and multiples k of it, the learning rate scaled by a rule (none, linear,
 * sqrt), with or without a gradual warmup, SGD and AdamW, the same number of epochs of the
 * default task (3-digit addition) for every run, several seeds: a table of the final validation
 * loss and exact-match accuracy as mean and standard deviation, and the curves of no warmup,
 * constant warmup and gradual warmup at the largest batch (SGD with the linear rule, AdamW with
 * the sqrt rule) against the base batch.
 *
 * Every run is train_gpt, started as a subprocess with the flags printed beside the table, so a
 * row can be rerun by hand. Batches larger than --max-micro rows are made by accumulation
 * (--accum), as a real large-batch run on a small machine would be.
 *
 * Output, in --out DIR: runs/NAME.tsv (each run's log), lr_scaling_table.tsv, lr_scaling_curves.tsv
 * (validation loss and learning rate against examples seen, for the figure); the table on stdout.
 * figure.sh draws docs/figures/lr_scaling_curves.png and lr_schedules.png. The grid's cells and
 * their steps, warmups and rates are analysis/lr_grid.h's. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "analysis/lr_grid.h"
#include "analysis/seed_stats.h"
#include "analysis/train_log.h"
#include "cli/settings.h"
#include "examples/common/cli.h"
#include "examples/common/jobs.h"
#include "examples/common/tsv.h"

enum { MAX_SEEDS = 16, MAX_POINTS = 4096 };

typedef struct {
    bool        full, schedules, print_commands;
    const char *out, *train_gpt;
    int         threads, jobs, seeds, embd, eval_examples;
    LrGrid      grid;
    double      clip;
} Options;

enum { FLAG_SCHEDULES = 256, FLAG_FULL, FLAG_OUT, FLAG_TRAIN_GPT, FLAG_SEEDS, FLAG_EPOCHS,
       FLAG_EPOCH_EXAMPLES, FLAG_BASE_BATCH, FLAG_MAX_MICRO, FLAG_EMBD, FLAG_LR_SGD,
       FLAG_LR_ADAMW, FLAG_WARMUP_EPOCHS, FLAG_CLIP, FLAG_EVAL_EXAMPLES, FLAG_THREADS, FLAG_KERNELS,
       FLAG_JOBS, FLAG_PRINT_COMMANDS };

#define FIELD(f) offsetof(Options, f)
static const Setting SETTINGS[] = {
    { .name = "schedules", .id = FLAG_SCHEDULES, .type = SETTING_SWITCH,
      .offset = FIELD(schedules),
      .help = "print the schedule shapes as TSV (no training) and stop" },
    { .name = "print-commands", .id = FLAG_PRINT_COMMANDS, .type = SETTING_SWITCH,
      .offset = FIELD(print_commands),
      .help = "print the table's train_gpt commands, one a line, and\n"
              "stop: no training, no files (their logs go to DIR/runs)" },
    { .name = "full", .id = FLAG_FULL, .type = SETTING_SWITCH, .offset = FIELD(full),
      .help = "the whole table: k in 1 4 16 32, rules none linear sqrt,\n"
              "warmup none and gradual, sgd and adamw, 3 seeds (long: see\n"
              "docs/batch_and_lr.md); the default is k in 1 32, gradual\n"
              "warmup, 1 seed (a few minutes)" },
    { .name = "out", .id = FLAG_OUT, .type = SETTING_FOLDER, .offset = FIELD(out),
      .def = "lr_scaling_out", .arg = "DIR", .help = "where the logs and TSV files go" },
    { .name = "train-gpt", .id = FLAG_TRAIN_GPT, .type = SETTING_STRING,
      .offset = FIELD(train_gpt), .arg = "PATH",
      .help = "the train_gpt program (default: next to this one)" },
    { .name = "seeds", .id = FLAG_SEEDS, .type = SETTING_INT, .offset = FIELD(seeds),
      .lo = 1, .hi = MAX_SEEDS, .arg = "N", .help = "seeds per cell (default 1; --full 3)" },
    { .name = "epochs", .id = FLAG_EPOCHS, .type = SETTING_INT, .offset = FIELD(grid.epochs),
      .lo = 1, .hi = 1000, .def = "12", .arg = "N",
      .help = "epochs per run (12: with 8, AdamW at k = 4 ended some seeds on\n"
              "the carries' plateau, docs/batch_and_lr.md)" },
    { .name = "epoch-examples", .id = FLAG_EPOCH_EXAMPLES, .type = SETTING_INT,
      .offset = FIELD(grid.epoch_examples), .lo = 1, .hi = 1 << 24, .def = "16384", .arg = "N",
      .help = "examples in an epoch" },
    { .name = "base-batch", .id = FLAG_BASE_BATCH, .type = SETTING_INT,
      .offset = FIELD(grid.base_batch), .lo = 1, .hi = 1 << 12, .def = "16", .arg = "N",
      .help = "the base batch b" },
    { .name = "max-micro", .id = FLAG_MAX_MICRO, .type = SETTING_INT,
      .offset = FIELD(grid.max_micro),
      .lo = 1, .hi = 1 << 16, .def = "64", .arg = "N",
      .help = "larger batches accumulate micro-batches of N" },
    { .name = "embd", .id = FLAG_EMBD, .type = SETTING_INT, .offset = FIELD(embd),
      .lo = 4, .hi = 1 << 12, .def = "64", .arg = "N", .help = "model width" },
    { .name = "lr-sgd", .id = FLAG_LR_SGD, .type = SETTING_DOUBLE, .offset = FIELD(grid.lr_sgd),
      .lo = 1e-9, .hi = 100.0, .def = "0.1", .arg = "X", .help = "SGD's base rate at b" },
    { .name = "lr-adamw", .id = FLAG_LR_ADAMW, .type = SETTING_DOUBLE,
      .offset = FIELD(grid.lr_adamw),
      .lo = 1e-9, .hi = 100.0, .def = "0.001", .arg = "X", .help = "AdamW's base rate at b" },
    { .name = "warmup-epochs", .id = FLAG_WARMUP_EPOCHS, .type = SETTING_DOUBLE,
      .offset = FIELD(grid.warmup_epochs), .lo = 0.0, .hi = 1000.0, .def = "0.5", .arg = "X",
      .help = "warmup length in epochs" },
    { .name = "clip", .id = FLAG_CLIP, .type = SETTING_DOUBLE, .offset = FIELD(clip),
      .lo = 0.0, .hi = 1e6, .def = "1", .arg = "X",
      .help = "gradient-norm clipping, 0 = off; train_gpt's default" },
    { .name = "eval-examples", .id = FLAG_EVAL_EXAMPLES, .type = SETTING_INT,
      .offset = FIELD(eval_examples), .lo = 1, .hi = 1 << 20, .def = "500", .arg = "N",
      .help = "validation rows per evaluation" },
    { .name = "threads", .id = FLAG_THREADS, .type = SETTING_INT, .offset = FIELD(threads),
      .lo = 0, .hi = 1024, .def = "1", .arg = "N",
      .help = "threads per run (runs are small, and one thread is\n"
              "reproducible and immune to a busy machine)" },
    { .name = "kernels", .id = FLAG_KERNELS, .type = SETTING_CUSTOM,
      .set = settings_set_kernels, .arg = "K", .help = SETTINGS_KERNELS_HELP },
    { .name = "jobs", .id = FLAG_JOBS, .type = SETTING_INT, .offset = FIELD(jobs),
      .lo = 1, .hi = MAX_SEEDS, .def = "1", .arg = "N",
      .help = "runs at once; results do not depend on it" },
    { .heading = "  -h, --help          this text" },
};
#undef FIELD
enum { N_SETTINGS = sizeof SETTINGS / sizeof SETTINGS[0] };

static void usage(void)
{
    printf("Usage: lr_scaling [OPTION]...\n"
           "Final validation loss and accuracy of train_gpt on the add task for batch sizes\n"
           "b x k, learning-rate scaling rules and warmups, SGD and AdamW; and the curves of\n"
           "no / constant / gradual warmup at the largest batch against the base batch.\n\n");
    settings_usage(SETTINGS, N_SETTINGS);
}

static Options parse(int argc, char **argv)
{
    Options o = { 0 };
    settings_defaults(SETTINGS, N_SETTINGS, &o);
    settings_parse(SETTINGS, N_SETTINGS, &o, NULL, FLAG_SCHEDULES, usage, argc, argv);
    if (o.seeds == 0)
        o.seeds = o.full ? 3 : 1;
    return o;
}

/* ---- one run ---------------------------------------------------------------------------------- */

static void run_name(const LrCell *c, int seed, char *buf, size_t len)
{
    snprintf(buf, len, "%s_k%d_%s_%s_s%d", c->optimizer, c->k, SCHED_RULE_NAMES[c->rule],
             SCHED_WARMUP_NAMES[c->warmup], seed);
}

/* The train_gpt command of one run: the default task, cosine decay to 0 at the end, clipping as
 * train_gpt does (without it SGD at the larger rates blows up, warmup or not), no weight decay
 * (so the rule and the warmup alone decide). */
static void build_run(const Options *o, const LrCell *c, int seed, JobSpec *r)
{
    char name[128];
    run_name(c, seed, name, sizeof name);
    memset(r, 0, sizeof *r);
    snprintf(r->log_path, sizeof r->log_path, "%s/runs/%s.tsv", o->out, name);
    snprintf(r->out_path, sizeof r->out_path, "%s/runs/%s.out", o->out, name);
    const LrGrid *g = &o->grid;
    int micro = lr_grid_micro(g, c);
    long steps = lr_grid_steps(g, c);
    job_arg(r, "%s", o->train_gpt);
    job_arg(r, "--optimizer=%s", c->optimizer);
    job_arg(r, "--embd=%d", o->embd);
    job_arg(r, "--batch=%d", micro);
    job_arg(r, "--accum=%d", lr_grid_batch(g, c) / micro);
    job_arg(r, "--steps=%ld", steps);
    job_arg(r, "--lr=%g", lr_grid_base_lr(g, c));
    job_arg(r, "--base-batch=%d", g->base_batch);
    job_arg(r, "--lr-rule=%s", SCHED_RULE_NAMES[c->rule]);
    job_arg(r, "--warmup-type=%s", SCHED_WARMUP_NAMES[c->warmup]);
    job_arg(r, "--warmup=%ld", lr_grid_warmup_steps(g, c));
    job_arg(r, "--decay=cosine");
    job_arg(r, "--clip=%g", o->clip);
    job_arg(r, "--weight-decay=0");
    job_arg(r, "--seed=%d", seed);
    job_arg(r, "--eval-every=%ld", steps / 16 > 0 ? steps / 16 : 1);
    job_arg(r, "--eval-examples=%d", o->eval_examples);
    job_arg(r, "--threads=%d", o->threads);
    job_arg(r, "--log=%s", r->log_path);
}

/* ---- the table -------------------------------------------------------------------------------- */

static const char *const TABLE_COLUMNS[] = {
    "optimizer", "k", "batch", "accum", "rule", "warmup", "peak_lr", "steps", "seeds",
    "diverged", "val_loss_mean", "val_loss_std", "val_acc_mean", "val_acc_std", NULL,
};

/* Runs every seed of a cell (--jobs at a time), adds its row to the table and prints it. */
static void run_cell(const Options *o, const LrCell *c, TsvWriter *table, FILE *commands)
{
    double loss[MAX_SEEDS], acc[MAX_SEEDS];
    int diverged = 0;
    static JobSpec r[MAX_SEEDS];
    JobResult res[MAX_SEEDS];
    for (int s = 0; s < o->seeds; s++) {
        build_run(o, c, s + 1, &r[s]);
        job_print_command(commands, &r[s]);
    }
    jobs_run(r, res, o->seeds, o->jobs, NULL);
    for (int s = 0; s < o->seeds; s++) {
        loss[s] = res[s].ok ? res[s].val_loss : NAN;
        acc[s] = res[s].ok ? res[s].val_acc : NAN;
        diverged += res[s].diverged || !isfinite(loss[s]);
    }
    const LrGrid *g = &o->grid;
    SeedMeanSd l = seed_mean_sd(loss, o->seeds), a = seed_mean_sd(acc, o->seeds);
    int batch = lr_grid_batch(g, c);
    const char *rule = SCHED_RULE_NAMES[c->rule], *warmup = SCHED_WARMUP_NAMES[c->warmup];
    tsv_str(table, c->optimizer);
    tsv_int(table, c->k);
    tsv_int(table, batch);
    tsv_int(table, batch / lr_grid_micro(g, c));
    tsv_str(table, rule);
    tsv_str(table, warmup);
    tsv_num(table, lr_grid_peak_lr(g, c));
    tsv_int(table, lr_grid_steps(g, c));
    tsv_int(table, o->seeds);
    tsv_int(table, diverged);
    tsv_num(table, l.mean);
    tsv_num(table, l.sd);
    tsv_num(table, a.mean);
    tsv_num(table, a.sd);
    tsv_end_row(table);
    printf("| %-5s | %2d | %4d | %-6s | %-8s | %8.4g | %5ld | %7.4g ± %-7.2g | %5.1f%% ± %4.1f%% |",
           c->optimizer, c->k, batch, rule, warmup, lr_grid_peak_lr(g, c), lr_grid_steps(g, c),
           l.mean, l.sd, 100.0 * a.mean, 100.0 * a.sd);
    if (diverged)
        printf(" %d of %d diverged", diverged, o->seeds);
    printf(" |\n");
    fflush(stdout);
}

static void print_table_header(const Options *o)
{
    const LrGrid *g = &o->grid;
    printf("\nadd task, %d epoch(s) of %d examples per run, base batch %d, %d seed%s; final "
           "validation loss and exact match (teacher-forced), mean ± std over seeds\n\n",
           g->epochs, g->epoch_examples, g->base_batch, o->seeds, o->seeds > 1 ? "s" : "");
    printf("| opt   |  k | batch | rule   | warmup   |  peak lr | steps | val loss          | "
           "accuracy          | note |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
}

/* ---- the curves ------------------------------------------------------------------------------- */

static const char *const CURVE_COLUMNS[] = { "optimizer", "curve", "examples", "lr", "val_loss",
                                             NULL };

/* One run's learning rate at every step and validation loss at every evaluation, against the
 * examples seen (step x batch), as rows of the curves TSV. */
static void add_curve(TsvWriter *w, const JobSpec *r, const LrCell *c, double batch,
                      const char *label)
{
    static double steps[MAX_POINTS * 4], values[MAX_POINTS * 4];
    const char *columns[2] = { "lr", "val_loss" };
    for (int which = 0; which < 2; which++) {
        int n = train_log_columns(r->log_path, "step", columns[which], steps, values,
                                 MAX_POINTS * 4);
        for (int i = 0; i < n; i++) {
            tsv_str(w, c->optimizer);
            tsv_str(w, label);
            tsv_num(w, steps[i] * batch);
            tsv_num(w, which == 0 ? values[i] : NAN);
            tsv_num(w, which == 1 ? values[i] : NAN);
            tsv_end_row(w);
        }
    }
}

/* An optimizer's curves (lr_grid_curve_cells), seed 1: the runs the grid did not make are made
 * here. */
static void make_curves(const Options *o, const char *optimizer, TsvWriter *w, FILE *commands)
{
    LrCell cells[LR_GRID_CURVES];
    lr_grid_curve_cells(o->full, optimizer, cells);
    for (int i = 0; i < LR_GRID_CURVES; i++) {
        static JobSpec r;
        build_run(o, &cells[i], 1, &r);
        if (!lr_grid_has(o->full, &cells[i])) {
            job_print_command(commands, &r);
            job_run(&r);
        }
        add_curve(w, &r, &cells[i], lr_grid_batch(&o->grid, &cells[i]), LR_GRID_CURVE_LABELS[i]);
    }
}

/* ---- the schedule shapes ---------------------------------------------------------------------- */

/* optim/schedule.h's shapes over S = 1000 steps, W = 100, D = 200: TSV on stdout. */
static void print_schedules(void)
{
    typedef struct {
        const char   *name;
        SchedWarmup   warmup;
        SchedDecay    decay;
        SchedCooldown cooldown;
    } Shape;
    const Shape shapes[] = {
        { "gradual warmup, constant", SCHED_WARMUP_GRADUAL, SCHED_DECAY_CONSTANT, 0 },
        { "constant warmup, constant", SCHED_WARMUP_CONSTANT, SCHED_DECAY_CONSTANT, 0 },
        { "gradual warmup, cosine", SCHED_WARMUP_GRADUAL, SCHED_DECAY_COSINE, 0 },
        { "no warmup, cosine", SCHED_WARMUP_NONE, SCHED_DECAY_COSINE, 0 },
        { "gradual warmup, wsd linear", SCHED_WARMUP_GRADUAL, SCHED_DECAY_WSD,
          SCHED_COOLDOWN_LINEAR },
        { "gradual warmup, wsd 1-sqrt", SCHED_WARMUP_GRADUAL, SCHED_DECAY_WSD,
          SCHED_COOLDOWN_1SQRT },
    };
    printf("schedule\tstep\tlr\n");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        SchedConfig c = sched_defaults();
        c.base_lr = 1.0;
        c.warmup = shapes[i].warmup;
        c.warmup_steps = 100;
        c.decay = shapes[i].decay;
        c.cooldown = shapes[i].cooldown;
        c.cooldown_steps = 200;
        c.total_steps = 1000;
        for (long s = 0; s < c.total_steps; s++)
            printf("%s\t%ld\t%.6g\n", shapes[i].name, s + 1, sched_lr(&c, s));
    }
}

/* The table's runs as commands, without running them: a script that checks one cell
 * (bench/claims.sh) takes its line from here rather than copying the grid's arithmetic. */
static void print_commands(const Options *o)
{
    LrCell cells[LR_GRID_MAX_CELLS];
    int n = lr_grid_cells(o->full, cells);
    static JobSpec r;
    for (int i = 0; i < n; i++)
        for (int s = 1; s <= o->seeds; s++) {
            build_run(o, &cells[i], s, &r);
            job_print_command(stdout, &r);
        }
}

/* ---- main ------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    Options o = parse(argc, argv);
    if (o.schedules) {
        print_schedules();
        return 0;
    }
    if (!o.train_gpt)
        o.train_gpt = job_find_train_gpt(argv[0]);
    if (o.print_commands) {
        print_commands(&o);
        return 0;
    }
    char runs[600];
    snprintf(runs, sizeof runs, "%s/runs", o.out);
    job_make_dir(o.out);
    job_make_dir(runs);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "%s/commands.txt", o.out);
    FILE *commands = fopen(cmd, "w");
    if (!commands)
        cli_die(1, "cannot write %s", cmd);
    setvbuf(commands, NULL, _IOLBF, 0);   /* a line per run as it starts: a killed sweep keeps them */

    LrCell cells[LR_GRID_MAX_CELLS];
    int n_cells = lr_grid_cells(o.full, cells);
    TsvWriter *table = tsv_open_in(o.out, "lr_scaling_table.tsv", TABLE_COLUMNS);
    print_table_header(&o);
    for (int i = 0; i < n_cells; i++)
        run_cell(&o, &cells[i], table, commands);
    tsv_close_or_die(table);

    TsvWriter *curves = tsv_open_in(o.out, "lr_scaling_curves.tsv", CURVE_COLUMNS);
    make_curves(&o, "sgd", curves, commands);
    make_curves(&o, "adamw", curves, commands);
    tsv_close_or_die(curves);
    fclose(commands);
    printf("\nlogs in %s/runs, tables in %s, commands in %s\n", o.out, o.out, cmd);
    return 0;
}


/* memory_savers: what each memory-saving technique costs in quality, on text.
 *
 * train_gpt on data/tinyshakespeare.txt with the tiny config of docs/performance.md (V=65 T=64
 * L=4 H=4 C=128 B=16), 2000 steps, seeds 1-3, one thread per run, in nine configurations: fp32
 * AdamW (the reference), bf16, fp16 with dynamic loss scaling, fp8 with current and with
 * delayed scaling, 8-bit Adam, Adafactor, sqrt checkpointing, and 4 accumulated micro-batches
 * of B/4. The final validation loss of each, over the seeds, against fp32's mean, with the
 * targets of issue 15: bf16, fp16, 8-bit Adam and checkpointing within 1%, fp8 within 3%,
 * accumulation within the seeds' noise, Adafactor reported without one
 * (analysis/quality.h defines the statistics).
 *
 * Every run is a train_gpt subprocess (examples/common/jobs.h) whose log is
 * DIR/NAME.sSEED.tsv and console output DIR/NAME.sSEED.out; a run whose log is already
 * finished in DIR is kept, not redone, so an interrupted sweep resumes. --from-logs DIR starts
 * no run and reads whatever a folder of such logs holds (runs made by hand or by a script with
 * the same names count the same; the table lists the ones missing).
 *
 * Output in --out: memory_savers_table.tsv (a row per configuration), memory_savers_curves.tsv
 * (the validation loss by step, mean and range over the seeds, and its ratio to fp32's),
 * memory_savers_curves.png drawn from it by curves.gp, commands.txt (the train_gpt command of
 * every run); the table in markdown on stdout. docs/mixed_precision.md and docs/memory.md
 * discuss the numbers. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "analysis/quality.h"
#include "analysis/quality_logs.h"
#include "cli/settings.h"
#include "examples/common/cli.h"
#include "examples/common/jobs.h"
#include "examples/common/plot.h"

/* The configurations, fp32 first: the file stem, the flags beyond the shared ones, the target.
 * The batch is the shared --batch 16 except for accumulation, 4 micro-batches of 4. */
static const QualityConfig CONFIGS[] = {
    { "fp32", "", QUALITY_TARGET_NONE, 0.0 },
    { "bf16", "--precision bf16", QUALITY_TARGET_WITHIN, 0.01 },
    { "fp16dyn", "--precision fp16 --loss-scale dynamic", QUALITY_TARGET_WITHIN, 0.01 },
    { "fp8cur", "--precision fp8 --fp8-scaling current", QUALITY_TARGET_WITHIN, 0.03 },
    { "fp8del", "--precision fp8 --fp8-scaling delayed", QUALITY_TARGET_WITHIN, 0.03 },
    { "adam8bit", "--optimizer adam8bit", QUALITY_TARGET_WITHIN, 0.01 },
    { "adafactor", "--optimizer adafactor", QUALITY_TARGET_NONE, 0.0 },
    { "sqrt", "--checkpoint sqrt", QUALITY_TARGET_WITHIN, 0.01 },
    { "accum4", "--accum 4 --batch 4", QUALITY_TARGET_NOISE, 0.0 },
};
enum { N_CONFIGS = sizeof CONFIGS / sizeof CONFIGS[0], MAX_JOBS = 16 };

typedef struct {
    const char *out, *from_logs, *train_gpt, *data;
    long        steps, eval_every;
    int         eval_examples, threads, jobs;
    long        seeds[SEED_MAX];
    int         n_seeds;
    bool        quick;
} Options;

static void set_seeds(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    Options *o = opts;
    o->n_seeds = cli_seed_list(flag, arg, o->seeds, SEED_MAX);
}

enum { FLAG_OUT = 256, FLAG_FROM_LOGS, FLAG_QUICK, FLAG_SEEDS, FLAG_STEPS, FLAG_EVAL_EVERY,
       FLAG_EVAL_EXAMPLES, FLAG_DATA, FLAG_THREADS, FLAG_KERNELS, FLAG_JOBS, FLAG_TRAIN_GPT,
       FLAG_END };

#define FIELD(f) offsetof(Options, f)
static const Setting SETTINGS[] = {
    { .name = "out", .id = FLAG_OUT, .type = SETTING_STRING, .offset = FIELD(out),
      .def = "out/memory_savers", .arg = "DIR",
      .help = "where the runs' logs (NAME.sSEED.tsv, .out), the tables and\nthe figure go" },
    { .name = "from-logs", .id = FLAG_FROM_LOGS, .type = SETTING_STRING,
      .offset = FIELD(from_logs), .arg = "DIR",
      .help = "start no run: read the logs in DIR (NAME.sSEED.tsv, as\n"
              "this program names them); runs not finished there are\n"
              "listed as missing. Tables and figure still go to --out" },
    { .name = "quick", .id = FLAG_QUICK, .type = SETTING_SWITCH, .offset = FIELD(quick),
      .help = "a trial: seed 1, 200 steps, evaluation every 50 steps on\n"
              "200 rows (a few minutes; its ratios say nothing)" },
    { .name = "seeds", .id = FLAG_SEEDS, .type = SETTING_CUSTOM, .set = set_seeds, .def = "1-3",
      .arg = "LIST", .help = "seeds (1-3, 1,2,5; at most 31, SEED_MAX)" },
    { .name = "steps", .id = FLAG_STEPS, .type = SETTING_LONG, .offset = FIELD(steps),
      .lo = 1, .hi = 1000000, .def = "2000", .arg = "N", .help = "steps of every run" },
    { .name = "eval-every", .id = FLAG_EVAL_EVERY, .type = SETTING_LONG,
      .offset = FIELD(eval_every), .lo = 1, .hi = 1000000, .def = "250", .arg = "N",
      .help = "validation every N steps" },
    { .name = "eval-examples", .id = FLAG_EVAL_EXAMPLES, .type = SETTING_INT,
      .offset = FIELD(eval_examples), .lo = 1, .hi = 1 << 24, .def = "1000", .arg = "N",
      .help = "validation rows per evaluation (train_gpt's)" },
    { .name = "data", .id = FLAG_DATA, .type = SETTING_STRING, .offset = FIELD(data),
      .def = TAPEGRAD_SOURCE_DIR "/data/tinyshakespeare.txt", .arg = "PATH",
      .help = "the text" },
    { .name = "threads", .id = FLAG_THREADS, .type = SETTING_INT, .offset = FIELD(threads),
      .lo = 0, .hi = 1024, .def = "1", .arg = "N", .help = "threads per run" },
    { .name = "kernels", .id = FLAG_KERNELS, .type = SETTING_CUSTOM,
      .set = settings_set_kernels, .arg = "K", .help = SETTINGS_KERNELS_HELP },
    { .name = "jobs", .id = FLAG_JOBS, .type = SETTING_INT, .offset = FIELD(jobs),
      .lo = 1, .hi = MAX_JOBS, .def = "2", .arg = "N",
      .help = "runs at once; results do not depend on it" },
    { .name = "train-gpt", .id = FLAG_TRAIN_GPT, .type = SETTING_STRING,
      .offset = FIELD(train_gpt), .arg = "PATH",
      .help = "the train_gpt program (default: next to this one)" },
    { .heading = "  -h, --help          this text" },
};
#undef FIELD
enum { N_SETTINGS = sizeof SETTINGS / sizeof SETTINGS[0] };

static void usage(void)
{
    printf("Usage: memory_savers [OPTION]...\n"
           "train_gpt on a text at the tiny config (T=64 L=4 H=4 C=128, batch 16) in nine\n"
           "configurations (fp32 AdamW, bf16, fp16 with dynamic loss scaling, fp8 with current\n"
           "and delayed scaling, 8-bit Adam, Adafactor, sqrt checkpointing, 4 accumulated\n"
           "micro-batches of 4) over several seeds; a table of the final validation loss\n"
           "against fp32's mean and a figure of the validation curves.\n\n");
    settings_usage(SETTINGS, N_SETTINGS);
}

static Options parse(int argc, char **argv)
{
    Options o = { 0 };
    bool given[FLAG_END - FLAG_OUT] = { false };
    settings_defaults(SETTINGS, N_SETTINGS, &o);
    settings_parse(SETTINGS, N_SETTINGS, &o, given, FLAG_OUT, usage, argc, argv);
    if (o.quick) {      /* --quick's own defaults, for the flags not given */
        if (!given[FLAG_SEEDS - FLAG_OUT])
            o.n_seeds = seed_list_parse("1", o.seeds, SEED_MAX);
        o.steps = given[FLAG_STEPS - FLAG_OUT] ? o.steps : 200;
        o.eval_every = given[FLAG_EVAL_EVERY - FLAG_OUT] ? o.eval_every : 50;
        o.eval_examples = given[FLAG_EVAL_EXAMPLES - FLAG_OUT] ? o.eval_examples : 200;
    }
    if (!o.train_gpt)
        o.train_gpt = job_find_train_gpt(argv[0]);
    return o;
}

/* ---- the runs ----------------------------------------------------------------------------- */

static void make_dir(const char *dir)
{
    /* every component, as mkdir -p: --out defaults to out/memory_savers */
    char path[700];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char keep = *p;
            *p = '\0';
            struct stat st;
            if (mkdir(path, 0755) != 0 && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)))
                cli_die(1, "cannot create %s", path);
            *p = keep;
            if (keep == '\0')
                break;
        }
    }
}

/* The train_gpt command of one run: the shared flags (run.sh of docs/memory.md's sweep in the
 * same order), then the configuration's own. */
static void build_run(const Options *o, const QualityConfig *c, long seed, JobSpec *r)
{
    memset(r, 0, sizeof *r);
    quality_path(r->log_path, sizeof r->log_path, o->out, c->name, seed, ".tsv");
    quality_path(r->out_path, sizeof r->out_path, o->out, c->name, seed, ".out");
    job_arg(r, "%s", o->train_gpt);
    job_arg(r, "--data");
    job_arg(r, "%s", o->data);
    job_arg(r, "--steps=%ld", o->steps);
    job_arg(r, "--layers=4");
    job_arg(r, "--heads=4");
    job_arg(r, "--embd=128");
    job_arg(r, "--seq=64");
    job_arg(r, "--threads=%d", o->threads);
    job_arg(r, "--eval-every=%ld", o->eval_every);
    job_arg(r, "--eval-examples=%d", o->eval_examples);
    job_arg(r, "--batch=16");
    job_arg(r, "--seed=%ld", seed);
    job_arg(r, "--log=%s", r->log_path);
    char flags[JOB_ARG_LEN];
    snprintf(flags, sizeof flags, "%s", c->flags);
    for (char *save = NULL, *w = strtok_r(flags, " ", &save); w; w = strtok_r(NULL, " ", &save))
        job_arg(r, "%s", w);
}

/* Every run not already finished in --out, --jobs at a time (each waited for in the order
 * started: the runs are of about one length). */
static void run_all(const Options *o)
{
    int total = o->n_seeds * N_CONFIGS;
    JobSpec *spec = malloc((size_t)total * sizeof *spec);
    if (!spec)
        cli_die(1, "out of memory");
    char path[700];
    snprintf(path, sizeof path, "%s/commands.txt", o->out);
    FILE *commands = fopen(path, "w");
    if (!commands)
        cli_die(1, "cannot write %s", path);
    int todo[SEED_MAX * N_CONFIGS], n_todo = 0;
    for (int k = 0; k < o->n_seeds; k++)
        for (int i = 0; i < N_CONFIGS; i++) {
            int j = k * N_CONFIGS + i;
            double loss;
            build_run(o, &CONFIGS[i], o->seeds[k], &spec[j]);
            job_print_command(commands, &spec[j]);
            if (quality_read_final(o->out, CONFIGS[i].name, o->seeds[k], o->steps, &loss) ==
                QUALITY_RUN_OK)
                fprintf(stderr, "kept: %s (finished, val loss %.4f)\n", spec[j].log_path, loss);
            else
                todo[n_todo++] = j;
        }
    fclose(commands);
    pid_t pid[SEED_MAX * N_CONFIGS];
    int started = 0, done = 0;
    while (done < n_todo) {
        while (started < n_todo && started - done < o->jobs) {
            const JobSpec *r = &spec[todo[started]];
            fprintf(stderr, "run %d of %d: %s\n", started + 1, n_todo, r->log_path);
            pid[started] = job_start(r);
            started++;
        }
        JobResult res = job_wait(&spec[todo[done]], pid[done]);
        if (res.diverged)
            fprintf(stderr, "diverged: %s\n", spec[todo[done]].out_path);
        done++;
    }
    free(spec);
}

/* A folder of logs made elsewhere: each finished run's console output must name this model
 * and batch, or the table would compare other runs than it says. */
static void check_runs(const Options *o, const QualityTable *t, const char *dir)
{
    for (int i = 0; i < N_CONFIGS; i++)
        for (int k = 0; k < o->n_seeds; k++) {
            if (t->row[i].status[k] != QUALITY_RUN_OK)
                continue;
            bool accum = strstr(CONFIGS[i].flags, "--accum 4") != NULL;
            char path[1024], model[64], batch[64], line[1024];
            quality_path(path, sizeof path, dir, CONFIGS[i].name, o->seeds[k], ".out");
            snprintf(model, sizeof model, "T=64 L=4 H=4 C=128,");
            snprintf(batch, sizeof batch, "batch %d x %d accumulated", accum ? 4 : 16,
                     accum ? 4 : 1);
            FILE *f = fopen(path, "r");
            bool has_model = false, has_batch = false;
            while (f && fgets(line, sizeof line, f)) {
                has_model = has_model || strstr(line, model);
                has_batch = has_batch || strstr(line, batch);
            }
            if (f)
                fclose(f);
            if (!has_model || !has_batch)
                cli_die(1, "--from-logs: %s does not say '%s' and '%s': not a run of this "
                        "table", path, model, batch);
        }
}

/* ---- the outputs -------------------------------------------------------------------------- */

static void draw(const Options *o, const char *curves, const char *png)
{
    char script[700], title[300];
    snprintf(script, sizeof script, "%s/examples/memory_savers/curves.gp", TAPEGRAD_SOURCE_DIR);
    snprintf(title, sizeof title, "train\\_gpt on Tiny Shakespeare, T=64 L=4 H=4 C=128 B=16, "
             "%ld steps, %d seed%s", o->steps, o->n_seeds, o->n_seeds == 1 ? "" : "s");
    const char *names[] = { "input", "output", "heading" };
    const char *values[] = { curves, png, title };
    if (plot_run_vars(script, names, values, 3, "output") == PLOT_OK)
        fprintf(stderr, "figure: %s\n", png);
}

/* The table: mean +- sd, the ratio, the target and the verdict, the seeds' losses, and the
 * missing runs. */
static void print_table(const QualityTable *t)
{
    printf("| config | final val loss, mean ± sd (n) | ratio to %s | paired ratio [95%%] | "
           "target | met |", t->cfg[0].name);
    for (int k = 0; k < t->n_seeds; k++)
        printf(" seed %ld |", t->seeds[k]);
    printf("\n|---|---|---|---|---|---|");
    for (int k = 0; k < t->n_seeds; k++)
        printf("---|");
    printf("\n");
    for (int i = 0; i < t->n_configs; i++) {
        const QualityRow *r = &t->row[i];
        char target[64];
        printf("| %s | %.4f ± %.4f (%d) | %.4f | ", t->cfg[i].name, r->mean, r->sd, r->n,
               r->ratio);
        if (i == 0)
            printf("|");
        else
            printf("%.4f [%.4f, %.4f] |", r->paired.geomean, r->paired.ci_lo, r->paired.ci_hi);
        printf(" %s | %s |", quality_target_text(t, i, target, sizeof target),
               quality_met_text(r->met));
        for (int k = 0; k < t->n_seeds; k++) {
            if (r->status[k] == QUALITY_RUN_OK)
                printf(" %.4f |", r->final[k]);
            else
                printf(" %s |", quality_status_word(r->status[k]));
        }
        printf("\n");
    }
    const QualityRow *ref = &t->row[0];
    printf("\n%s over %d seeds: mean %.4f, sd %.4f (%.2f%% of the mean), range %.4f..%.4f; "
           "\"noise\" = 2 sqrt(2/n) sd / mean = %.2f%%\n", t->cfg[0].name, ref->n, ref->mean,
           ref->sd, 100.0 * ref->sd / ref->mean, ref->min, ref->max, 100.0 * t->noise);
    int missing = 0;
    for (int i = 0; i < t->n_configs; i++)
        for (int k = 0; k < t->n_seeds; k++)
            if (t->row[i].status[k] != QUALITY_RUN_OK) {
                printf("%s %s.s%ld", missing++ ? "," : "not in the table:", t->cfg[i].name,
                       t->seeds[k]);
                if (t->row[i].status[k] == QUALITY_RUN_DIVERGED)
                    printf(" (diverged)");
            }
    if (missing)
        printf("\n");
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    Options o = parse(argc, argv);
    make_dir(o.out);
    const char *logs = o.from_logs ? o.from_logs : o.out;
    if (!o.from_logs)
        run_all(&o);
    QualityTable t = quality_table(CONFIGS, N_CONFIGS, o.seeds, o.n_seeds, o.steps);
    quality_collect(&t, logs);
    check_runs(&o, &t, logs);
    if (t.row[0].n == 0)
        cli_die(1, "no finished fp32 run in %s (fp32.sSEED.tsv at step %ld): nothing to "
                "compare with", logs, o.steps);
    char table[700], curves[700], png[700], err[1024];
    snprintf(table, sizeof table, "%s/memory_savers_table.tsv", o.out);
    snprintf(curves, sizeof curves, "%s/memory_savers_curves.tsv", o.out);
    snprintf(png, sizeof png, "%s/memory_savers_curves.png", o.out);
    cli_check(quality_write_table(&t, table, err, sizeof err), err);
    cli_check(quality_write_curves(&t, logs, curves, err, sizeof err), err);
    draw(&o, curves, png);
    printf("final validation loss at step %ld, from the logs in %s (mean ± sample sd over the "
           "finished seeds; ratio: mean / fp32's mean; paired: each seed / fp32's same seed)"
           "\n\n", o.steps, logs);
    print_table(&t);
    fprintf(stderr, "wrote %s and %s\n", table, curves);
    return 0;
}

/* memory_savers: what each memory-saving technique costs in quality, on text.
 *
 * train_gpt on data/tinyshakespeare.txt with the tiny config of docs/performance.md (V=65 T=64
 * L=4 H=4 C=128 B=16), 2000 steps, seeds 1-3, one thread per run, in nine configurations: fp32
 * AdamW (the reference), bf16, fp16 with dynamic loss scaling, fp8 with current and with
 * delayed scaling, 8-bit Adam, Adafactor, sqrt checkpointing, and 4 accumulated micro-batches
 * of B/4. The final validation loss of each, over the seeds, against fp32's mean, with the
 * targets of issue 15: bf16, fp16, 8-bit Adam and checkpointing within 1%, fp8 within 3%,
 * accumulation within the seeds' noise, Adafactor reported without one
 * (examples/common/quality.h defines the statistics).
 *
 * Every run is a train_gpt subprocess (examples/common/train_run.h) whose log is
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
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/quality.h"
#include "examples/common/train_run.h"

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

static void usage(void)
{
    printf("Usage: memory_savers [OPTION]...\n"
           "train_gpt on a text at the tiny config (T=64 L=4 H=4 C=128, batch 16) in nine\n"
           "configurations (fp32 AdamW, bf16, fp16 with dynamic loss scaling, fp8 with current\n"
           "and delayed scaling, 8-bit Adam, Adafactor, sqrt checkpointing, 4 accumulated\n"
           "micro-batches of 4) over several seeds; a table of the final validation loss\n"
           "against fp32's mean and a figure of the validation curves.\n\n"
           "  --out DIR            where the runs' logs (NAME.sSEED.tsv, .out), the tables and\n"
           "                       the figure go (default out/memory_savers)\n"
           "  --from-logs DIR      start no run: read the logs in DIR (NAME.sSEED.tsv, as\n"
           "                       this program names them); runs not finished there are\n"
           "                       listed as missing. Tables and figure still go to --out\n"
           "  --quick              a trial: seed 1, 200 steps, evaluation every 50 steps on\n"
           "                       200 rows (a few minutes; its ratios say nothing)\n"
           "  --seeds LIST         seeds (1-3, 1,2,5; at most %d; default 1-3)\n"
           "  --steps N            steps of every run (default 2000)\n"
           "  --eval-every N       validation every N steps (default 250)\n"
           "  --eval-examples N    validation rows per evaluation (default 1000,\n"
           "                       train_gpt's)\n"
           "  --data PATH          the text (default data/tinyshakespeare.txt of the source\n"
           "                       tree)\n"
           "  --threads N          threads per run (default 1)\n"
           "  --jobs N             runs at once (default 2); results do not depend on it\n"
           "  --train-gpt PATH     the train_gpt program (default: next to this one)\n"
           "  -h, --help           this text\n", SEED_MAX);
}

static Options parse(int argc, char **argv)
{
    Options o = { .out = "out/memory_savers", .steps = 2000, .eval_every = 250,
                  .eval_examples = 1000, .threads = 1, .jobs = 2,
                  .data = TAPEGRAD_SOURCE_DIR "/data/tinyshakespeare.txt" };
    const struct option options[] = {
        { "out", required_argument, NULL, 'o' },
        { "from-logs", required_argument, NULL, 'F' },
        { "quick", no_argument, NULL, 'q' },
        { "seeds", required_argument, NULL, 'S' },
        { "steps", required_argument, NULL, 's' },
        { "eval-every", required_argument, NULL, 'e' },
        { "eval-examples", required_argument, NULL, 'v' },
        { "data", required_argument, NULL, 'd' },
        { "threads", required_argument, NULL, 't' },
        { "jobs", required_argument, NULL, 'j' },
        { "train-gpt", required_argument, NULL, 'g' },
        { "help", no_argument, NULL, 'h' },
        { 0, 0, 0, 0 },
    };
    bool given_seeds = false, given_steps = false, given_every = false, given_examples = false;
    int c;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (c) {
        case 'o': o.out = optarg; break;
        case 'F': o.from_logs = optarg; break;
        case 'q': o.quick = true; break;
        case 'S':
            o.n_seeds = seed_list_parse(optarg, o.seeds, SEED_MAX);
            if (o.n_seeds < 0)
                cli_usage_error("--seeds '%s': not a list of distinct seeds like 1-3 or 1,2,5 "
                                "(at most %d)", optarg, SEED_MAX);
            given_seeds = true;
            break;
        case 's': o.steps = cli_long("--steps", optarg, 1, 1000000); given_steps = true; break;
        case 'e':
            o.eval_every = cli_long("--eval-every", optarg, 1, 1000000);
            given_every = true;
            break;
        case 'v':
            o.eval_examples = (int)cli_long("--eval-examples", optarg, 1, 1 << 24);
            given_examples = true;
            break;
        case 'd': o.data = optarg; break;
        case 't': o.threads = (int)cli_long("--threads", optarg, 0, 1024); break;
        case 'j': o.jobs = (int)cli_long("--jobs", optarg, 1, MAX_JOBS); break;
        case 'g': o.train_gpt = optarg; break;
        case 'h': usage(); exit(0);
        case ':': cli_usage_error("%s needs a value", argv[optind - 1]);
        default: cli_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        cli_usage_error("unexpected argument '%s'", argv[optind]);
    if (o.quick) {
        if (!given_seeds)
            o.n_seeds = seed_list_parse("1", o.seeds, SEED_MAX);
        o.steps = given_steps ? o.steps : 200;
        o.eval_every = given_every ? o.eval_every : 50;
        o.eval_examples = given_examples ? o.eval_examples : 200;
    }
    if (o.n_seeds == 0)
        o.n_seeds = seed_list_parse("1-3", o.seeds, SEED_MAX);
    if (!o.train_gpt)
        o.train_gpt = run_find_train_gpt(argv[0]);
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
static void build_run(const Options *o, const QualityConfig *c, long seed, RunSpec *r)
{
    memset(r, 0, sizeof *r);
    quality_path(r->log_path, sizeof r->log_path, o->out, c->name, seed, ".tsv");
    quality_path(r->out_path, sizeof r->out_path, o->out, c->name, seed, ".out");
    run_arg(r, "%s", o->train_gpt);
    run_arg(r, "--data");
    run_arg(r, "%s", o->data);
    run_arg(r, "--steps=%ld", o->steps);
    run_arg(r, "--layers=4");
    run_arg(r, "--heads=4");
    run_arg(r, "--embd=128");
    run_arg(r, "--seq=64");
    run_arg(r, "--threads=%d", o->threads);
    run_arg(r, "--eval-every=%ld", o->eval_every);
    run_arg(r, "--eval-examples=%d", o->eval_examples);
    run_arg(r, "--batch=16");
    run_arg(r, "--seed=%ld", seed);
    run_arg(r, "--log=%s", r->log_path);
    char flags[RUN_ARG_LEN];
    snprintf(flags, sizeof flags, "%s", c->flags);
    for (char *save = NULL, *w = strtok_r(flags, " ", &save); w; w = strtok_r(NULL, " ", &save))
        run_arg(r, "%s", w);
}

static void print_command(FILE *f, const RunSpec *r)
{
    for (int i = 0; i < r->argc; i++)
        fprintf(f, "%s%s", i ? " " : "", r->argv[i]);
    fputc('\n', f);
}

/* Every run not already finished in --out, --jobs at a time (each waited for in the order
 * started: the runs are of about one length). */
static void run_all(const Options *o)
{
    int total = o->n_seeds * N_CONFIGS;
    RunSpec *spec = malloc((size_t)total * sizeof *spec);
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
            print_command(commands, &spec[j]);
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
            const RunSpec *r = &spec[todo[started]];
            fprintf(stderr, "run %d of %d: %s\n", started + 1, n_todo, r->log_path);
            pid[started] = run_start(r);
            started++;
        }
        RunResult res = run_wait(&spec[todo[done]], pid[done]);
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
    if (!quality_write_table(&t, table, err, sizeof err) ||
        !quality_write_curves(&t, logs, curves, err, sizeof err))
        cli_die(1, "%s", err);
    draw(&o, curves, png);
    printf("final validation loss at step %ld, from the logs in %s (mean ± sample sd over the "
           "finished seeds; ratio: mean / fp32's mean; paired: each seed / fp32's same seed)"
           "\n\n", o.steps, logs);
    quality_print(&t);
    fprintf(stderr, "wrote %s and %s\n", table, curves);
    return 0;
}

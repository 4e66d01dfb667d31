/* fit_largest: the course's homework on CPU. Given a memory budget and a time budget, find the
 * largest GPT that trains on a text within both, train it, and fill the homework's table: setup,
 * parameters, peak memory (measured, and predicted), eval loss, batch size, time, a sample.
 *
 * The search (plan/fit_search.h) lists candidates, keeps those the memory calculator
 * predicts to fit, sorts them by parameter count, and measures one real step of the first few
 * under the budget, each in a child process. The winner is trained by train_gpt with
 * --mem-budget, so the allocator enforces the budget on the whole run, not only on one step.
 *
 * --exercise max-batch: the checkpointing exercise, the largest micro-batch that fits the
 * budget for vanilla, sqrt and memory-poor, measured beside the calculator's prediction
 * (exercise.c).
 *
 *   fit_largest --budget 64MiB --time 120s
 *   fit_largest --exercise max-batch --budget 64MiB --layers 4 --embd 128 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/parallel.h"
#include "data/dataset.h"
#include "examples/common/cli.h"
#include "examples/common/settings.h"
#include "examples/common/train_run.h"
#include "examples/fit_largest/fit_largest.h"
#include "nn/gpt_snapshot.h"

enum {
    OPT_BUDGET = 256, OPT_TIME, OPT_DATA, OPT_SEQ, OPT_TARGET_BATCH, OPT_VERIFY, OPT_MIN_STEPS,
    OPT_NO_TRAIN, OPT_SAMPLE, OPT_OUT, OPT_WORK, OPT_OFFLOAD, OPT_TRAIN_GPT, OPT_THREADS,
    OPT_KERNELS,
    OPT_EXERCISE,
    OPT_LAYERS, OPT_EMBD, OPT_PRECISION, OPT_OPTIMIZER, OPT_MAX_BATCH, OPT_BASE, OPT_END
};

static const char *const EXERCISES[] = { "max-batch", NULL };
/* The optimizers searched, as memcalc names them (train_gpt uses the same names). */
static const char *const OPTIMIZER_CHOICES[] = { "adamw", "adam8bit", "adafactor", NULL };
static const McOptimizer OPTIMIZER_VALUES[] = { MC_ADAMW, MC_ADAM8BIT, MC_ADAFACTOR };

static void set_time(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    ((FitOptions *)opts)->seconds = cli_seconds(flag, arg, 1, 86400);
}

static void set_target_batch(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    FitOptions *o = opts;
    o->target_batch = (int)cli_long(flag, arg, 4, 1 << 16);
    if (o->target_batch % 4)
        cli_usage_error("%s %d is not a multiple of 4, the smallest micro-batch searched", flag,
                        o->target_batch);
}

static void set_work(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    ((FitOptions *)opts)->work = cli_folder(flag, arg);
}

static void set_exercise(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    ((FitOptions *)opts)->exercise = cli_choice(flag, arg, EXERCISES) + 1;
}

static void set_embd(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    FitOptions *o = opts;
    o->embd = (int)cli_long(flag, arg, 32, 1 << 14);
    if (o->embd % 32)
        cli_usage_error("%s %d is not a multiple of 32 (heads of 32 dimensions)", flag, o->embd);
}

static void set_optimizer(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    ((FitOptions *)opts)->optimizer = OPTIMIZER_VALUES[cli_choice(flag, arg, OPTIMIZER_CHOICES)];
}

#define FIELD(f) offsetof(FitOptions, f)
static const Setting SETTINGS[] = {
    { .name = "budget", .id = OPT_BUDGET, .type = SETTING_BYTES, .offset = FIELD(budget),
      .lo = 1024, .hi = (double)((size_t)1 << 40), .def = "64MiB", .arg = "SIZE",
      .help = "tracked memory allowed, e.g. 64MiB (B, KiB, MiB, GiB)" },
    { .name = "time", .id = OPT_TIME, .type = SETTING_CUSTOM, .set = set_time, .def = "120s",
      .arg = "T", .help = "training time, e.g. 120s or 2min" },
    { .name = "data", .id = OPT_DATA, .type = SETTING_STRING, .offset = FIELD(data),
      .def = "data/tinyshakespeare.txt", .arg = "PATH", .help = "the text" },
    { .name = "seq", .id = OPT_SEQ, .type = SETTING_INT, .offset = FIELD(seq),
      .lo = 2, .hi = 4096, .def = "64", .arg = "N", .help = "tokens per row" },
    { .name = "target-batch", .id = OPT_TARGET_BATCH, .type = SETTING_CUSTOM,
      .set = set_target_batch, .def = "32", .arg = "N",
      .help = "rows per update, a multiple of 4; accumulation makes up\n"
              "what a micro-batch (4, 8, 16 or 32 rows) lacks" },
    { .name = "verify", .id = OPT_VERIFY, .type = SETTING_INT, .offset = FIELD(verify),
      .lo = 1, .hi = 100, .def = "3", .arg = "N", .help = "measure at least N candidates" },
    { .name = "min-steps", .id = OPT_MIN_STEPS, .type = SETTING_LONG, .offset = FIELD(min_steps),
      .lo = 1, .hi = 1000000, .def = "50", .arg = "N",
      .help = "a candidate must fit N updates in the time" },
    { .name = "no-train", .id = OPT_NO_TRAIN, .type = SETTING_SWITCH, .offset = FIELD(no_train),
      .help = "search and verify only" },
    { .name = "sample", .id = OPT_SAMPLE, .type = SETTING_INT, .offset = FIELD(sample),
      .lo = 0, .hi = 100000, .def = "200", .arg = "N",
      .help = "characters generated by the winner" },
    { .name = "out", .id = OPT_OUT, .type = SETTING_STRING, .offset = FIELD(out),
      .arg = "FILE", .help = "the table as TSV (one row)" },
    { .name = "work", .id = OPT_WORK, .type = SETTING_CUSTOM, .set = set_work, .def = "/tmp",
      .arg = "DIR", .help = "train_gpt's log and output" },
    { .name = "offload", .id = OPT_OFFLOAD, .type = SETTING_SWITCH, .offset = FIELD(offload),
      .help = "also try each way with its optimizer offloaded (train_gpt\n"
              "--offload optimizer: masters and state on the host, outside\n"
              "--budget; the same numbers, more traffic)" },
    { .name = "train-gpt", .id = OPT_TRAIN_GPT, .type = SETTING_STRING,
      .offset = FIELD(train_gpt), .arg = "PATH",
      .help = "the trainer (default: next to this program)" },
    { .name = "base", .id = OPT_BASE, .type = SETTING_STRING, .offset = FIELD(base),
      .arg = "FILE",
      .help = "fine-tune this model (a train_gpt --save snapshot or an\n"
              "nn/gpt_snapshot.h file): the search is then over full\n"
              "fine-tuning and LoRA/QLoRA (ranks 64..4) of its shape" },
    { .name = "threads", .id = OPT_THREADS, .type = SETTING_INT, .offset = FIELD(threads),
      .lo = 0, .hi = 1024, .def = "0", .arg = "N", .help = "threads, 0 = one per core" },
    { .name = "kernels", .id = OPT_KERNELS, .type = SETTING_CUSTOM,
      .set = settings_set_kernels, .arg = "K", .help = SETTINGS_KERNELS_HELP },
    { .heading = "The checkpointing exercise:" },
    { .name = "exercise", .id = OPT_EXERCISE, .type = SETTING_CUSTOM, .set = set_exercise,
      .arg = "max-batch",
      .help = "for vanilla, sqrt and memory-poor, the largest micro-batch\n"
              "that fits --budget: predicted, and measured by real steps\n"
              "(doubling, then bisection); --out writes that table" },
    { .name = "layers", .id = OPT_LAYERS, .type = SETTING_INT, .offset = FIELD(layers),
      .lo = 1, .hi = 64, .def = "4", .arg = "N", .help = "its model's blocks" },
    { .name = "embd", .id = OPT_EMBD, .type = SETTING_CUSTOM, .set = set_embd, .def = "128",
      .arg = "N", .help = "its model's width; heads = embd / 32" },
    { .name = "precision", .id = OPT_PRECISION, .type = SETTING_CHOICE,
      .offset = FIELD(precision), .choices = FIT_PRECISION_NAMES, .def = "fp32", .arg = "P",
      .help = "its policy" },
    { .name = "optimizer", .id = OPT_OPTIMIZER, .type = SETTING_CUSTOM, .set = set_optimizer,
      .def = "adamw", .arg = "O", .help = "its optimizer: adamw, adam8bit or adafactor" },
    { .name = "max-batch", .id = OPT_MAX_BATCH, .type = SETTING_INT, .offset = FIELD(max_batch),
      .lo = 1, .hi = 1 << 20, .def = "4096", .arg = "N", .help = "the largest batch tried" },
    { .heading = "  -h, --help          this text" },
};
#undef FIELD
enum { N_SETTINGS = sizeof SETTINGS / sizeof SETTINGS[0] };

static void usage(void)
{
    printf("Usage: fit_largest [OPTION]...\n"
           "The homework \"fit the largest model you can\": search layers, width, batch size,\n"
           "accumulation, checkpointing (vanilla, sqrt, memory-poor), precision (fp32, bf16) and\n"
           "optimizer (adamw, adam8bit, adafactor) for the largest GPT whose training fits the\n"
           "memory budget (predicted by the memory calculator, then measured by a real step\n"
           "under the budget), train it for the time budget with train_gpt, and print the\n"
           "table: setup, parameters, peak memory, eval loss, batch, time, a sample.\n\n"
           "With --base FILE it fine-tunes that model instead: full fine-tuning when it fits,\n"
           "else LoRA with the largest rank (64, 32, 16, 8, 4) that fits, plain before QLoRA\n"
           "(an NF4 base), each with the same batch, checkpointing, precision and optimizer\n"
           "choices. Without --base LoRA is not searched: its base would be a frozen random\n"
           "model, and the adapters would learn a correction to weights that mean nothing.\n\n");
    settings_usage(SETTINGS, N_SETTINGS);
    printf("\nExamples:\n"
           "  fit_largest --budget 64MiB --time 120s --out fit64.tsv\n"
           "  fit_largest --base base.safetensors --budget 40MiB --time 120s\n"
           "  fit_largest --exercise max-batch --budget 64MiB\n");
}

/* --base: its shape, read and checked now (the file must be a model train_gpt --load-base
 * takes); its sequence length is the default --seq. */
static void read_base(FitOptions *o, bool seq_given)
{
    SnapshotError err;
    SnapshotReader *r = snapshot_open(o->base, &err);
    if (!r)
        cli_die(1, "--base: %s", err.message);
    bool ok = gpt_snapshot_read_config(r, o->base, "model", &o->base_model, &err);
    snapshot_close(r);
    if (!ok)
        cli_die(1, "--base: %s", err.message);
    if (!seq_given)
        o->seq = o->base_model.max_seq;
    else if (o->seq > o->base_model.max_seq)
        cli_usage_error("--seq %d is longer than --base %s's %d positions", o->seq, o->base,
                        o->base_model.max_seq);
}

static FitOptions parse(int argc, char **argv)
{
    FitOptions o = { 0 };
    bool given[OPT_END - OPT_BUDGET] = { false };
    settings_defaults(SETTINGS, N_SETTINGS, &o);
    settings_parse(SETTINGS, N_SETTINGS, &o, given, OPT_BUDGET, usage, argc, argv);
    /* The flags of one mode given in the other: the search's, and the exercise's. */
    const char *search_flag = NULL;
    for (int id = OPT_TIME; id <= OPT_TRAIN_GPT; id++)
        if (given[id - OPT_BUDGET] && id != OPT_DATA && id != OPT_SEQ && id != OPT_OUT)
            search_flag = settings_find(SETTINGS, N_SETTINGS, id)->name;
    for (int id = OPT_LAYERS; id <= OPT_MAX_BATCH; id++)
        o.exercise_flag_given |= given[id - OPT_BUDGET];
    if (given[OPT_BASE - OPT_BUDGET])
        search_flag = "base";
    if (o.exercise && search_flag)
        cli_usage_error("--%s applies to the search, not to --exercise max-batch", search_flag);
    if (!o.exercise && o.exercise_flag_given)
        cli_usage_error("--layers, --embd, --precision, --optimizer and --max-batch apply to "
                        "--exercise max-batch (the search tries them all)");
    if (!o.train_gpt)
        o.train_gpt = run_find_train_gpt(argv[0]);
    if (o.base)
        read_base(&o, given[OPT_SEQ - OPT_BUDGET]);
    return o;
}

/* The data's vocabulary: the model's V. The dataset is freed again before any trial. */
static int data_vocab(const FitOptions *o)
{
    char err[512];
    Dataset *ds = dataset_open_text(o->data, o->seq, err, sizeof err);
    if (!ds)
        cli_die(1, "--data: %s", err);
    int V = dataset_vocab_size(ds);
    dataset_free(ds);
    return V;
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    FitOptions o = parse(argc, argv);
    /* Sets the thread count only: no OpenMP thread starts before the trials fork. */
    par_set_threads(o.threads);
    int V = data_vocab(&o);
    if (o.exercise)
        return exercise_max_batch(&o, V);
    if (o.base && o.base_model.vocab_size != V)
        cli_die(1, "--base %s has a vocabulary of %d, --data %s of %d: the base was trained on "
                "another text", o.base, o.base_model.vocab_size, o.data, V);

    FitSpace space = fit_space_default(V, o.seq, par_threads());
    space.target_batch = o.target_batch;
    space.base = o.base;
    space.base_model = o.base_model;
    space.offload = o.offload;
    FitGoal goal = { .budget = o.budget, .train_seconds = FIT_TRAIN_SHARE * o.seconds,
                     .min_steps = o.min_steps, .verify = o.verify };
    char b[32];
    printf("budget %s (%zu bytes), time %gs (%.0fs of updates), at least %ld updates of %d "
           "rows of %d tokens\n", mem_format_bytes(o.budget, b, sizeof b), o.budget, o.seconds,
           goal.train_seconds, o.min_steps, o.target_batch, o.seq);
    FitSearch s = fit_search(&space, &goal, stdout);
    fit_print_search(&s, &goal, stdout);
    if (s.winner < 0) {
        fit_search_free(&s);
        cli_die(1, "nothing fits --budget %zu bytes with %ld updates in --time %gs: the "
                "smallest candidate needs %.0f bytes by the calculator; give a larger budget, "
                "more time or a smaller --min-steps", o.budget, o.min_steps, o.seconds,
                s.smallest_predicted);
    }
    if (!o.no_train) {
        FitResult r = fit_train(&o, &s);
        fit_print_result(&o, &s, &r, stdout);
        if (o.out)
            fit_write_tsv(&o, &s, &r);
    }
    fit_search_free(&s);
    return 0;
}

/* memory_calculator: where the memory of training goes, by formula (plan/memcalc.h),
 * and for our own GPT beside what one real training step measures.
 *
 *   --lecture        the lecture's numbers: GPT-2 1.5B's fp16 weights and model states under
 *                    mixed-precision Adam, and ZeRO's stages for 7.5B parameters on 64 ranks;
 *                    GPT-2 1.5B's activations (the slide's count beside our model's, fp32 and
 *                    16-bit, standard and tiled attention, checkpointed) and the 6 GB fused
 *                    gradient buffer
 *   --fragmentation  plan/fragmentation.h: a caching device allocator out of memory with
 *                    enough free bytes in total
 *   --params N       model states and ZeRO stages of a model of N parameters
 *   (default)        our GPT (train_gpt's defaults: the add task, V 40, T 12, L 2, H 4, C 128,
 *                    B 64): model states per optimizer, activations per strategy, and the peak
 *                    of every memory category predicted beside the bytes autograd/mem measured
 *                    in one training step run in this process
 *   --policy P       that step under a precision policy (autograd/policy.h: fp32, tf32, bf16,
 *                    fp16, fp8), as train_gpt --precision P runs it
 *   --sweep N        TSV for the figure: layers 1..N, each strategy, predicted and measured
 *                    peak act bytes (figure.sh draws docs/figures/memory_strategies.png)
 *
 * docs/memory.md explains every formula. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/parallel.h"
#include "cli/settings.h"
#include "examples/common/cli.h"
#include "optim/train.h"
#include "plan/fragmentation.h"
#include "plan/memcalc_lecture.h"

typedef struct {
    bool         lecture, measure, fragmentation;
    double       params;        /* > 0: a model known by its size */
    int          sweep;         /* > 0: layers for the sweep */
    McPrecision  precision;
    McOptimizer  optimizer;
    int          ranks, threads;
    GptConfig    model;
    bool         untied, separate_qkv, no_measure;  /* the switches, into model and measure */
    McRun        run;
    const char  *strategy_text;
    PrecisionPolicy policy;     /* run.policy points here (set in main: Options is copied) */
    int          offload;       /* TRAIN_OFFLOAD_*, into run.offload */
} Options;

enum { FLAG_LECTURE = 256, FLAG_FRAGMENTATION, FLAG_PARAMS, FLAG_SWEEP, FLAG_PRECISION,
       FLAG_OPTIMIZER, FLAG_RANKS, FLAG_VOCAB, FLAG_SEQ, FLAG_LAYERS, FLAG_HEADS, FLAG_EMBD,
       FLAG_UNTIED, FLAG_SEPARATE_QKV, FLAG_BATCH, FLAG_STRATEGY, FLAG_POLICY, FLAG_THREADS,
       FLAG_KERNELS,
       FLAG_NO_MEASURE, FLAG_OFFLOAD };

static void set_policy(void *opts, int id, const char *flag, const char *arg)
{
    (void)id;
    if (!policy_preset(arg, &((Options *)opts)->policy))
        cli_usage_error("%s: unknown policy '%s' (%s)", flag, arg, policy_preset_names());
}

/* The GPT's defaults are train_gpt's on the add task. */
#define FIELD(f) offsetof(Options, f)
static const Setting SETTINGS[] = {
    { .heading = "Modes:" },
    { .name = "lecture", .id = FLAG_LECTURE, .type = SETTING_SWITCH, .offset = FIELD(lecture),
      .help = "the lecture's numbers (GPT-2 1.5B's model states, activations\n"
              "and fused gradient buffer; ZeRO with 7.5B on 64 ranks)" },
    { .name = "fragmentation", .id = FLAG_FRAGMENTATION, .type = SETTING_SWITCH,
      .offset = FIELD(fragmentation),
      .help = "a caching device allocator fails on a scripted training step\n"
              "with enough free bytes in total; the plain allocator serves it" },
    { .name = "params", .id = FLAG_PARAMS, .type = SETTING_DOUBLE, .offset = FIELD(params),
      .lo = 1.0, .hi = 1e15, .arg = "N",
      .help = "model states and ZeRO stages of a model of N parameters\n(e.g. 1.5e9)" },
    { .name = "sweep", .id = FLAG_SWEEP, .type = SETTING_INT, .offset = FIELD(sweep),
      .lo = 1, .hi = 64, .arg = "N",
      .help = "TSV: layers 1..N x strategies, predicted and measured act peak" },
    { .heading = "  (none)              our GPT: predicted beside measured, per memory category\n"
                 "Model states:" },
    { .name = "precision", .id = FLAG_PRECISION, .type = SETTING_CHOICE,
      .offset = FIELD(precision), .choices = MC_PRECISION_NAMES, .def = "fp32", .arg = "P",
      .help = "fp32 or mixed (fp16 weights and gradients, fp32 master weights\n"
              "in the optimizer state)" },
    { .name = "optimizer", .id = FLAG_OPTIMIZER, .type = SETTING_CHOICE,
      .offset = FIELD(optimizer), .choices = MC_OPTIMIZER_NAMES, .def = "adamw", .arg = "NAME",
      .help = "sgd, momentum, adamw, adam8bit or adafactor" },
    { .name = "ranks", .id = FLAG_RANKS, .type = SETTING_INT, .offset = FIELD(ranks),
      .lo = 1, .hi = 1 << 20, .def = "64", .arg = "N",
      .help = "data-parallel ranks for the ZeRO table" },
    { .heading = "Our GPT (defaults: train_gpt's on the add task):" },
    { .name = "vocab", .id = FLAG_VOCAB, .type = SETTING_INT, .offset = FIELD(model.vocab_size),
      .lo = 1, .hi = 1 << 20, .def = "40", .arg = "N", .help = "vocabulary V" },
    { .name = "seq", .id = FLAG_SEQ, .type = SETTING_INT, .offset = FIELD(model.max_seq),
      .lo = 1, .hi = 1 << 16, .def = "12", .arg = "N", .help = "sequence length T" },
    { .name = "layers", .id = FLAG_LAYERS, .type = SETTING_INT, .offset = FIELD(model.n_layer),
      .lo = 1, .hi = 256, .def = "2", .arg = "N", .help = "blocks L" },
    { .name = "heads", .id = FLAG_HEADS, .type = SETTING_INT, .offset = FIELD(model.n_head),
      .lo = 1, .hi = 1 << 12, .def = "4", .arg = "N", .help = "heads H" },
    { .name = "embd", .id = FLAG_EMBD, .type = SETTING_INT, .offset = FIELD(model.n_embd),
      .lo = 1, .hi = 1 << 16, .def = "128", .arg = "N", .help = "width C" },
    { .name = "untied", .id = FLAG_UNTIED, .type = SETTING_SWITCH, .offset = FIELD(untied),
      .help = "a separate output head, as train_gpt" },
    { .name = "separate-qkv", .id = FLAG_SEPARATE_QKV, .type = SETTING_SWITCH,
      .offset = FIELD(separate_qkv), .help = "three q, k, v projections, as train_gpt" },
    { .name = "batch", .id = FLAG_BATCH, .type = SETTING_INT, .offset = FIELD(run.B),
      .lo = 1, .hi = 1 << 16, .def = "64", .arg = "N", .help = "rows per step B" },
    { .name = "strategy", .id = FLAG_STRATEGY, .type = SETTING_STRING,
      .offset = FIELD(strategy_text), .def = "vanilla", .arg = "S",
      .help = "vanilla, memory-poor, sqrt or every:K" },
    { .name = "policy", .id = FLAG_POLICY, .type = SETTING_CUSTOM, .set = set_policy,
      .def = "fp32", .arg = "P",
      .help = "the step under train_gpt's precision policy P (Policies\n"
              "below; also for --sweep)" },
    { .name = "threads", .id = FLAG_THREADS, .type = SETTING_INT, .offset = FIELD(threads),
      .lo = 0, .hi = 1024, .def = "0", .arg = "N",
      .help = "threads, 0 = one per core; the attention backward takes a\n"
              "T x T scratch per thread" },
    { .name = "kernels", .id = FLAG_KERNELS, .type = SETTING_CUSTOM,
      .set = settings_set_kernels, .arg = "K", .help = SETTINGS_KERNELS_HELP },
    { .name = "offload", .id = FLAG_OFFLOAD, .type = SETTING_CHOICE, .offset = FIELD(offload),
      .choices = TRAIN_OFFLOAD_NAMES, .def = "none", .arg = "W",
      .help = "optimizer: the step with train_gpt --offload optimizer (its\n"
              "masters and state on the host): the device's bytes, the\n"
              "host's, and the bytes each update moves" },
    { .name = "no-measure", .id = FLAG_NO_MEASURE, .type = SETTING_SWITCH,
      .offset = FIELD(no_measure), .help = "formulas only" },
    { .heading = "  -h, --help          this text" },
};
#undef FIELD
enum { N_SETTINGS = sizeof SETTINGS / sizeof SETTINGS[0] };

static void usage(void)
{
    printf("Usage: memory_calculator [OPTION]...\n"
           "Model-state, activation and scratch memory of training, by formula; for our GPT,\n"
           "also measured in one real training step, category by category.\n\n");
    settings_usage(SETTINGS, N_SETTINGS);
    printf("\nPolicies: %s\n\n"
           "Examples:\n"
           "  memory_calculator --lecture\n"
           "  memory_calculator --layers 6 --embd 256 --strategy sqrt --optimizer adam8bit\n"
           "  memory_calculator --policy bf16 --strategy sqrt\n", policy_preset_names());
}

static Options parse(int argc, char **argv)
{
    Options o = { 0 };
    settings_defaults(SETTINGS, N_SETTINGS, &o);
    settings_parse(SETTINGS, N_SETTINGS, &o, NULL, FLAG_LECTURE, usage, argc, argv);
    o.model.tied = !o.untied;
    o.model.fused_qkv = !o.separate_qkv;
    o.measure = !o.no_measure;
    /* The modes exclude each other: a second one would be ignored without a word. */
    const char *modes[4];
    int n_modes = 0;
    if (o.lecture)
        modes[n_modes++] = "--lecture";
    if (o.fragmentation)
        modes[n_modes++] = "--fragmentation";
    if (o.params > 0.0)
        modes[n_modes++] = "--params";
    if (o.sweep > 0)
        modes[n_modes++] = "--sweep";
    if (n_modes > 1)
        cli_usage_error("%s and %s are two modes; give one", modes[0], modes[1]);
    char err[160];
    if (!gpt_config_check(&o.model, err, sizeof err))
        cli_usage_error("%s", err);
    if (!ckpt_parse(o.strategy_text, &o.run.strategy, err, sizeof err))
        cli_usage_error("--strategy: %s", err);
    if (o.run.strategy.kind == CKPT_BUDGET)
        cli_usage_error("--strategy: budget:S has no formula here (use vanilla, memory-poor, "
                        "sqrt or every:K)");
    o.run.T = o.model.max_seq;
    o.run.offload = o.offload == TRAIN_OFFLOAD_OPTIMIZER;
    return o;
}

/* ---- model states ---------------------------------------------------------------------------- */

/* One line per stage; decimals 0 for bytes, more for GB. */
static void print_zero(McStates s, int ranks, double unit, const char *unit_name, int decimals)
{
    printf("  %-10s %14s %14s %14s %14s   (%s per rank, %d ranks)\n", "ZeRO", "weights",
           "gradients", "optim", "total", unit_name, ranks);
    for (int stage = 0; stage <= 3; stage++) {
        McStates z = memcalc_zero(s, stage, ranks);
        printf("  %-10s %14.*f %14.*f %14.*f %14.*f\n", MC_ZERO_STAGE_NAMES[stage], decimals,
               z.param / unit, decimals, z.grad / unit, decimals, z.optim / unit, decimals,
               memcalc_states_total(z) / unit);
    }
}

static void print_flat(const Options *o)
{
    McStates s = memcalc_states_flat(o->params, o->precision, o->optimizer);
    printf("%.4g parameters, %s, %s (GB = 1e9 bytes):\n", o->params,
           MC_PRECISION_NAMES[o->precision], MC_OPTIMIZER_NAMES[o->optimizer]);
    print_zero(s, o->ranks, 1e9, "GB", 3);
}

/* ---- our GPT --------------------------------------------------------------------------------- */

static void print_model_states(const Options *o)
{
    const GptConfig *m = &o->model;
    printf("Our GPT: V %d, T %d, L %d, H %d, C %d%s%s: %zu parameters\n\n", m->vocab_size,
           m->max_seq, m->n_layer, m->n_head, m->n_embd, m->tied ? "" : ", untied",
           m->fused_qkv ? "" : ", separate q/k/v", memcalc_gpt_params(m));
    printf("Model states (bytes):\n  %-10s %12s %12s %12s %12s %12s\n", "optimizer",
           "precision", "weights", "gradients", "optim", "total");
    for (int p = 0; p < MC_NPRECISIONS; p++)
        for (int k = 0; k < MC_NOPTIMIZERS; k++) {
            McStates s = memcalc_gpt_states(m, (McPrecision)p, (McOptimizer)k);
            printf("  %-10s %12s %12.0f %12.0f %12.0f %12.0f\n", MC_OPTIMIZER_NAMES[k],
                   MC_PRECISION_NAMES[p], s.param, s.grad, s.optim, memcalc_states_total(s));
        }
    printf("\n%s, %s:\n", MC_OPTIMIZER_NAMES[o->optimizer], MC_PRECISION_NAMES[o->precision]);
    print_zero(memcalc_gpt_states(m, o->precision, o->optimizer), o->ranks, 1.0, "bytes", 0);
}

static void print_activations(const Options *o)
{
    McActParts a = memcalc_act_parts(&o->model, o->run.B, o->run.T);
    printf("\nActivations, B %d x T %d (bytes): embedding %.0f, one block %.0f (%.0f of it the "
           "attention probabilities), head %.0f\n", o->run.B, o->run.T, a.embed, a.block,
           4.0 * o->run.B * o->model.n_head * o->run.T * o->run.T, a.head);
    for (int i = 0; i < MC_NTABLE_STRATEGIES; i++) {
        McRun r = o->run;
        char err[80];
        ckpt_parse(MC_TABLE_STRATEGIES[i], &r.strategy, err, sizeof err);
        printf("  %-12s peak act %12.0f   peak temp %10.0f\n", MC_TABLE_STRATEGIES[i],
               memcalc_act_peak(&o->model, &r), memcalc_temp_peak(&o->model, &r, o->optimizer));
    }
}

/* The lecture's bytes per parameter (2 Psi + 2 Psi + 12 Psi = 16 Psi for AdamW under bf16),
 * the formula's bytes beside the peaks the step measured in those three categories. */
static void print_states_split(const Options *o, const McPeaks *p, const McPeaks *m)
{
    double psi = (double)gpt_config_n_params(&o->model);
    printf("\nModel states per parameter, %s under %s (Psi = %.0f parameters)\n",
           MC_OPTIMIZER_NAMES[o->optimizer], o->policy.name, psi);
    printf("  %-8s %10s %14s %14s\n", "category", "formula", "predicted", "measured");
    for (int c = MEM_PARAM; c <= MEM_OPTIM; c++)
        printf("  %-8s %6.4g Psi %14.0f %14.0f\n", mem_category_name((MemCategory)c),
               p->bytes[c] / psi, p->bytes[c], m->bytes[c]);
    double sum_p = memcalc_states_total(memcalc_peaks_states(p));
    double sum_m = memcalc_states_total(memcalc_peaks_states(m));
    printf("  %-8s %6.4g Psi %14.0f %14.0f\n", "total", sum_p / psi, sum_p, sum_m);
    printf("  (optim: %s%s)\n", memcalc_optim_holds(o->optimizer, o->policy.param != DTYPE_F32),
           o->run.offload ? "; on the host with --offload" : "");
}

/* --offload optimizer: the host pool between steps and the traffic of one update, predicted
 * beside measured (m NULL: formulas only). */
static void print_offload(const McPeaks *p, const McPeaks *m)
{
    printf("\nOffloaded optimizer (optim/offload.h): the host pool's peak bytes (temp: the "
           "update's scratch)\n");
    for (int c = 0; c <= MEM_NCAT; c++) {
        if (c == MEM_ACT)
            continue;
        printf("  host %-8s %14.0f", mem_category_name((MemCategory)c), p->host[c]);
        if (m)
            printf(" %14.0f", m->host[c]);
        printf("\n");
    }
    printf("  per update: down (gradients) %.0f, up (parameters) %.0f", p->to_host,
           p->to_device);
    if (m)
        printf("; measured %.0f and %.0f", m->to_host, m->to_device);
    printf("\n");
}

static void print_predicted_measured(const Options *o)
{
    McPeaks p = memcalc_predict(&o->model, &o->run, o->optimizer);
    char name[32];
    /* The step is --policy's; --precision only changes the model-state tables above. */
    printf("\nOne %s training step, %s, %s, %d thread%s: peak bytes per category\n",
           o->policy.name, MC_OPTIMIZER_NAMES[o->optimizer],
           ckpt_name(o->run.strategy, name, sizeof name), o->run.threads,
           o->run.threads == 1 ? "" : "s");
    if (!o->measure) {
        for (int c = 0; c < MEM_NCAT; c++)
            printf("  %-8s %14.0f\n", mem_category_name((MemCategory)c), p.bytes[c]);
        if (o->run.offload)
            print_offload(&p, NULL);
        return;
    }
    McPeaks m = memcalc_measure(&o->model, &o->run, o->optimizer, 1);
    printf("  %-8s %14s %14s %10s\n", "category", "predicted", "measured", "difference");
    for (int c = 0; c <= MEM_NCAT; c++) {
        double diff = m.bytes[c] > 0 ? 100.0 * (p.bytes[c] / m.bytes[c] - 1.0) : 0.0;
        printf("  %-8s %14.0f %14.0f %9.2f%%\n", mem_category_name((MemCategory)c), p.bytes[c],
               m.bytes[c], diff);
    }
    printf("  (total predicted = the sum of the peaks, an upper bound: the categories do not all "
           "peak at the same moment)\n");
    if (o->run.offload)
        print_offload(&p, &m);
    print_states_split(o, &p, &m);
}

static const double MIB = 1024.0 * 1024.0;

static void show(void *ctx, const char *what, const char *name, size_t bytes,
                 const MemDeviceStats *st)
{
    (void)ctx;
    printf("  %-6s %-22s %7.1f MiB   reserved %5.1f  allocated %5.1f  largest free %5.1f\n",
           what, name, bytes / MIB, st->reserved / MIB, st->allocated / MIB,
           st->largest_free / MIB);
}

/* --fragmentation: the script of plan/fragmentation.h played three times (traced on the
 * caching device allocator; the cache emptied between the steps; the plain allocator under a
 * budget). */
static void print_fragmentation(void)
{
    printf("Fragmentation: a caching device allocator (autograd/mem.h, mem_device_begin), "
           "capacity %.0f MiB,\nsegments of at least %.0f MiB, best-fit blocks, freed blocks "
           "cached, no compaction (MiB):\n", FRAG_CAPACITY / MIB, FRAG_SEGMENT / MIB);
    FragResult s;
    FragWatch watch = { .event = show };
    frag_run_device(false, &watch, &s);
    if (s.failed) {
        const MemDeviceStats *st = &s.end;
        printf("\n  FAILED %s: %s\n", s.failed_name, s.error);
        printf("  capacity %.1f, reserved %.1f in %d segments, allocated %.1f, largest free "
               "block %.1f:\n  free on the device %.1f MiB (reserved but free %.1f, never "
               "reserved %.1f) >= the %.1f MiB asked for\n", st->capacity / MIB,
               st->reserved / MIB, st->segments, st->allocated / MIB, st->largest_free / MIB,
               (st->capacity - st->allocated) / MIB, (st->reserved - st->allocated) / MIB,
               (st->capacity - st->reserved) / MIB, s.failed_bytes / MIB);
        printf("  after mem_device_empty_cache (%.1f MiB of wholly free segments released): "
               "%s, reserved %.1f, allocated %.1f\n", s.released_after / MIB,
               s.retry_served ? "served" : "fails again", s.after_retry.reserved / MIB,
               s.after_retry.allocated / MIB);
    } else {
        printf("  no allocation failed\n");
    }

    FragResult e;
    frag_run_device(true, NULL, &e);
    printf("\n  the cache emptied between the steps (%.1f MiB released): %s%s, reserved %.1f, "
           "allocated %.1f, largest free %.1f\n", e.released_between / MIB,
           e.failed ? "fails at " : "both steps served", e.failed ? e.failed_name : "",
           e.end.reserved / MIB, e.end.allocated / MIB, e.end.largest_free / MIB);

    FragResult p;
    frag_run_plain(&p);
    printf("\n  plain allocator, budget %.0f MiB on the bytes in use: %s, peak in use %.1f MiB\n",
           FRAG_CAPACITY / MIB, p.failed ? p.error : "both steps served", p.peak_in_use / MIB);
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    Options o = parse(argc, argv);
    par_set_threads(o.threads);
    o.run.threads = par_threads();
    o.run.policy = &o.policy;
    if (o.fragmentation) {
        print_fragmentation();
    } else if (o.lecture) {
        memcalc_lecture_print(stdout);
    } else if (o.params > 0.0) {
        print_flat(&o);
    } else if (o.sweep > 0) {
        memcalc_sweep_write(stdout, &o.model, &o.run, o.optimizer, o.sweep, o.measure);
    } else {
        print_model_states(&o);
        print_activations(&o);
        print_predicted_measured(&o);
    }
    return 0;
}

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
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/parallel.h"
#include "examples/common/cli.h"
#include "examples/common/settings.h"
#include "examples/memory_calculator/fragmentation.h"
#include "optim/train.h"
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

static const char *const STAGE_NAMES[4] = { "baseline", "P_os", "P_os+g", "P_os+g+p" };

/* One line per stage; decimals 0 for bytes, more for GB. */
static void print_zero(McStates s, int ranks, double unit, const char *unit_name, int decimals)
{
    printf("  %-10s %14s %14s %14s %14s   (%s per rank, %d ranks)\n", "ZeRO", "weights",
           "gradients", "optim", "total", unit_name, ranks);
    for (int stage = 0; stage <= 3; stage++) {
        McStates z = memcalc_zero(s, stage, ranks);
        printf("  %-10s %14.*f %14.*f %14.*f %14.*f\n", STAGE_NAMES[stage], decimals,
               z.param / unit, decimals, z.grad / unit, decimals, z.optim / unit, decimals,
               memcalc_states_total(z) / unit);
    }
}

static void print_lecture(void)
{
    McStates gpt2 = memcalc_states_flat(1.5e9, MC_MIXED, MC_ADAMW);
    printf("GPT-2 1.5B, mixed-precision Adam (GB = 1e9 bytes):\n");
    printf("  fp16 weights          %5.1f GB   (2 bytes x 1.5e9)\n", gpt2.param / 1e9);
    printf("  model states          %5.1f GB   (16 bytes per parameter: weights 2, gradients 2,"
           " fp32 master 4, m 4, v 4)\n", memcalc_states_total(gpt2) / 1e9);
    McStates big = memcalc_states_flat(7.5e9, MC_MIXED, MC_ADAMW);
    printf("\nZeRO, 7.5e9 parameters, 64 data-parallel ranks, mixed-precision Adam (K = 12):\n");
    for (int stage = 0; stage <= 3; stage++)
        printf("  %-10s %6.1f GB per rank\n", STAGE_NAMES[stage],
               memcalc_states_total(memcalc_zero(big, stage, 64)) / 1e9);
    printf("\nThe same 7.5e9 parameters with the other optimizers (mixed precision, no ZeRO):\n");
    for (int o = 0; o < MC_NOPTIMIZERS; o++)
        printf("  %-10s %6.1f GB\n", MC_OPTIMIZER_NAMES[o],
               memcalc_states_total(memcalc_states_flat(7.5e9, MC_MIXED, (McOptimizer)o)) / 1e9);
}

static void print_lecture_activations(void)
{
    const GptConfig *g = &MC_GPT2_XL;
    McLectureActs a = memcalc_lecture_acts();
    char sq[32];
    snprintf(sq, sizeof sq, "sqrt (every:%d)", a.sqrt_interval);
    printf("\nActivations, GPT-2 1.5B (L %d, C %d, H %d, T %d, V %d), B %d: peak act, GB:\n",
           g->n_layer, g->n_embd, g->n_head, g->max_seq, g->vocab_size, MC_GPT2_XL_BATCH);
    printf("  %-42s %9s %9s   %s\n", "", "fp32", "16-bit", "cited");
    printf("  %-42s %9.1f %9.1f   ~60 GB   (a)\n", "slide's formula, 12 x C B T L",
           a.slide[0] / 1e9, a.slide[1] / 1e9);
    const char *labels[3] = { "vanilla", "per-block (every:1)", sq };
    for (int i = 0; i < 3; i++)
        for (int t = 0; t < 2; t++) {
            char label[64];
            snprintf(label, sizeof label, "ours, %s, %s", labels[i], t ? "tiled" : "standard");
            const char *slide = t        ? ""
                                : i == 0 ? "   ~60 GB   (b)"
                                : i == 2 ? "   ~8 GB*   (c)"
                                         : "";
            printf("  %-42s %9.1f %9.1f%s\n", label, a.ours[i][t][0] / 1e9,
                   a.ours[i][t][1] / 1e9, slide);
        }
    printf("  %-42s %9s %9.1f   ~8 GB*   (d)\n", "slide's formula / sqrt(L)", "",
           a.slide_sqrt / 1e9);
    printf("  %-42s %9s %9.1f   ~8 GB*   (e)\n", "slide's count, per-block checkpoints", "",
           a.slide_per_block / 1e9);
    printf("  cited: ~60 GB is on the slide (the ZeRO paper's estimate, quoted); * ~8 GB is the\n"
           "      ZeRO paper's figure with activation checkpointing, not on the slides.\n");
    printf("  (a) 12 values of C per token and layer (the block's outputs), half precision: no\n"
           "      attention probabilities, no layernorm statistics, no embedding, no head.\n"
           "  (b) every tensor our ops keep: 18 C + 4 values per token per block (memcalc.h), the\n"
           "      attention probabilities P [B, H, T, T] = %.1f GB per block in fp32, the\n"
           "      embedding (3 N C) and the head (ln_f and the N x V logits, %.1f GB in fp32).\n"
           "      16-bit: a bf16 policy, recorded tensors packed to 2 bytes; ids, layernorm\n"
           "      statistics and the logsumexp stay fp32. tiled: L [B, H, T] kept instead of P.\n"
           "  (c) the ZeRO paper's figure with activation checkpointing; ours keeps one block\n"
           "      output x_j per run of blocks, records a run again in backward, and keeps the head.\n"
           "  (d) the slide's count divided by sqrt(L), the saving the ZeRO paper quotes.\n"
           "  (e) the slide's values with one block input (B T C) kept per layer and one layer's\n"
           "      12 B T C recorded again at a time.\n",
           a.probs_fp32 / 1e9, a.logits_fp32 / 1e9);
    printf("\nTemporary buffers: the gradient all-reduce's fused buffer, one fp32 buffer holding\n"
           "every gradient, 1.5e9 x 4 bytes = %.1f GB (slide: 6 GB; category temp). Measured\n"
           "on our model: scripts/mpirun -np 2 build/bin/train_gpt --parallel ddp prints the\n"
           "bucket buffers one rank holds at once: Psi x 4 bytes for every --bucket-kb\n"
           "(docs/memory.md).\n",
           1.5e9 * 4.0 / 1e9);
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
    const char *names[] = { "vanilla", "sqrt", "memory-poor" };
    for (int i = 0; i < 3; i++) {
        McRun r = o->run;
        char err[80];
        ckpt_parse(names[i], &r.strategy, err, sizeof err);
        printf("  %-12s peak act %12.0f   peak temp %10.0f\n", names[i],
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
    double sum_p = 0.0, sum_m = 0.0;
    for (int c = MEM_PARAM; c <= MEM_OPTIM; c++) {
        printf("  %-8s %6.4g Psi %14.0f %14.0f\n", mem_category_name((MemCategory)c),
               p->bytes[c] / psi, p->bytes[c], m->bytes[c]);
        sum_p += p->bytes[c];
        sum_m += m->bytes[c];
    }
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

/* TSV for docs/figures/memory_strategies.png. */
static void print_sweep(const Options *o)
{
    const char *names[] = { "vanilla", "sqrt", "memory-poor" };
    printf("layers\tstrategy\tpredicted_act\tmeasured_act\n");
    for (int L = 1; L <= o->sweep; L++) {
        for (int i = 0; i < 3; i++) {
            GptConfig m = o->model;
            m.n_layer = L;
            McRun r = o->run;
            char err[80];
            ckpt_parse(names[i], &r.strategy, err, sizeof err);
            double measured = o->measure ? memcalc_measure(&m, &r, o->optimizer, 1).bytes[MEM_ACT]
                                         : NAN;
            printf("%d\t%s\t%.0f\t%.0f\n", L, names[i], memcalc_act_peak(&m, &r), measured);
        }
    }
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    Options o = parse(argc, argv);
    par_set_threads(o.threads);
    o.run.threads = par_threads();
    o.run.policy = &o.policy;
    if (o.fragmentation) {
        fragmentation_demo();
    } else if (o.lecture) {
        print_lecture();
        print_lecture_activations();
    } else if (o.params > 0.0) {
        print_flat(&o);
    } else if (o.sweep > 0) {
        print_sweep(&o);
    } else {
        print_model_states(&o);
        print_activations(&o);
        print_predicted_measured(&o);
    }
    return 0;
}

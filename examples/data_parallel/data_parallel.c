/* data_parallel: DDP and ZeRO stages 1-3 on 1, 2 and 4 ranks of one model, measured: the model
 * states each rank holds beside the ZeRO formulas, the bytes each rank puts on the wire per step
 * beside the paper's volumes, and the step time (docs/distributed.md).
 *
 *     scripts/mpirun -np 4 build/bin/data_parallel [--steps 6] [--precision fp32]
 *                    [--grad-wire auto|fp32|bf16|e5m2] [--out DIR]
 *
 * One launch sweeps every rank count up to the world's: the first n ranks form the group of
 * each run (the others wait), so a figure needs one mpirun. Each run trains the same model on
 * the same random tokens for --steps steps; the first warms the allocator's cache and is not
 * timed or counted. Rank 0 prints a table and, with --out, writes DIR/data_parallel.tsv (one
 * row per mode and rank count), from which examples/data_parallel/figure.sh draws. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "autograd/mem.h"
#include "cli/settings.h"
#include "dist/ddp.h"
#include "dist/zero.h"
#include "examples/common/cli.h"
#include "examples/common/tsv.h"
#include "plan/memcalc.h"

typedef struct {
    int         steps, layers, embd, heads, seq, batch;
    const char *precision;
    const char *out;
    bool        modes[4];       /* ddp, zero1, zero2, zero3 */
    int         bucket_kb;      /* DDP's buckets */
    const char *grad_wire;      /* "auto": bf16 under --precision bf16, else fp32 */
} Options;

static const char *const MODES[] = { "ddp", "zero1", "zero2", "zero3", NULL };
static const char *const COLUMNS[] = {
    "mode", "stage", "ranks", "param", "grad", "optim", "pred_param", "pred_grad",
    "pred_optim", "peak_param", "peak_grad", "peak_optim", "peak_act", "peak_temp",
    "sent_per_step", "pred_sent", "step_ms", "tokens_per_s", "grad_wire", NULL
};

static const char *const PRECISIONS[] = { "fp32", "bf16", NULL };
static const char *const WIRES[] = { "auto", "fp32", "bf16", "e5m2", NULL };

/* "ddp,zero3": each name once, at least one. */
static void set_modes(void *opts, int id, const char *flag, const char *list)
{
    (void)id;
    bool *modes = ((Options *)opts)->modes;
    char items[4][CLI_ITEM_LEN];
    int n = cli_list(flag, list, items, 4);
    for (int k = 0; k < 4; k++)
        modes[k] = false;
    for (int i = 0; i < n; i++) {
        int k = cli_choice(flag, items[i], MODES);
        if (modes[k])
            cli_usage_error("%s '%s': %s twice", flag, list, items[i]);
        modes[k] = true;
    }
}

enum { FLAG_STEPS = 256, FLAG_LAYERS, FLAG_EMBD, FLAG_HEADS, FLAG_SEQ, FLAG_BATCH,
       FLAG_PRECISION, FLAG_MODES, FLAG_BUCKET_KB, FLAG_GRAD_WIRE, FLAG_OUT };

#define FIELD(f) offsetof(Options, f)
static const Setting SETTINGS[] = {
    { .name = "steps", .id = FLAG_STEPS, .type = SETTING_INT, .offset = FIELD(steps),
      .lo = 2, .hi = 100000, .def = "6", .arg = "N",
      .help = "steps per run, the first not counted" },
    { .name = "layers", .id = FLAG_LAYERS, .type = SETTING_INT, .offset = FIELD(layers),
      .lo = 1, .hi = 64, .def = "4", .arg = "L", .help = "blocks" },
    { .name = "embd", .id = FLAG_EMBD, .type = SETTING_INT, .offset = FIELD(embd),
      .lo = 1, .hi = 4096, .def = "128", .arg = "C", .help = "width" },
    { .name = "heads", .id = FLAG_HEADS, .type = SETTING_INT, .offset = FIELD(heads),
      .lo = 1, .hi = 64, .def = "4", .arg = "H", .help = "attention heads" },
    { .name = "seq", .id = FLAG_SEQ, .type = SETTING_INT, .offset = FIELD(seq),
      .lo = 1, .hi = 4096, .def = "64", .arg = "T", .help = "tokens per row" },
    { .name = "batch", .id = FLAG_BATCH, .type = SETTING_INT, .offset = FIELD(batch),
      .lo = 1, .hi = 4096, .def = "8", .arg = "B", .help = "rows per rank" },
    { .name = "precision", .id = FLAG_PRECISION, .type = SETTING_STRING,
      .offset = FIELD(precision), .choices = PRECISIONS, .def = "fp32", .arg = "P",
      .help = "fp32 or bf16" },
    { .name = "modes", .id = FLAG_MODES, .type = SETTING_CUSTOM, .set = set_modes,
      .def = "ddp,zero1,zero2,zero3", .arg = "LIST", .help = "some of ddp,zero1,zero2,zero3" },
    { .name = "bucket-kb", .id = FLAG_BUCKET_KB, .type = SETTING_INT, .offset = FIELD(bucket_kb),
      .lo = 0, .hi = 1 << 20, .def = "256", .arg = "N",
      .help = "DDP's gradient buckets, started during backward; 0: one\nafter backward" },
    { .name = "grad-wire", .id = FLAG_GRAD_WIRE, .type = SETTING_STRING,
      .offset = FIELD(grad_wire), .choices = WIRES, .def = "auto", .arg = "W",
      .help = "what the gradients travel as: fp32, bf16, e5m2 (with a\nscale per message);"
              " auto: bf16 under --precision bf16" },
    { .name = "out", .id = FLAG_OUT, .type = SETTING_FOLDER, .offset = FIELD(out), .arg = "DIR",
      .help = "write DIR/data_parallel.tsv (rank 0)" },
    { .heading = "  -h, --help          this text" },
};
#undef FIELD
enum { N_SETTINGS = sizeof SETTINGS / sizeof SETTINGS[0] };

static void usage(void)
{
    printf("Usage: scripts/mpirun -np 4 data_parallel [options]\n"
           "DDP and ZeRO 1-3 on 1, 2, 4 ... ranks (up to mpirun's -np): model states per\n"
           "rank, bytes on the wire per step and step time, measured beside the formulas.\n");
    settings_usage(SETTINGS, N_SETTINGS);
}

static Options parse(int argc, char **argv)
{
    Options o = { 0 };
    settings_defaults(SETTINGS, N_SETTINGS, &o);
    settings_parse(SETTINGS, N_SETTINGS, &o, NULL, FLAG_STEPS, usage, argc, argv);
    if (o.embd % o.heads != 0)
        cli_usage_error("--embd %d is not a multiple of --heads %d", o.embd, o.heads);
    return o;
}

static TrainerConfig config(const Options *o)
{
    TrainerConfig c = trainer_config_default();
    c.model = (GptConfig){ .vocab_size = 65, .max_seq = o->seq, .n_layer = o->layers,
                           .n_head = o->heads, .n_embd = o->embd, .tied = true,
                           .fused_qkv = true };
    policy_preset(o->precision, &c.policy);
    return c;
}

static DistWire wire_of(const Options *o)
{
    if (strcmp(o->grad_wire, "auto") == 0)
        return strcmp(o->precision, "bf16") == 0 ? DIST_WIRE_BF16 : DIST_WIRE_FP32;
    return (DistWire)dist_wire_parse(o->grad_wire);
}

/* What a step should cost: memcalc_zero's states, and the values each rank sends per step
 * (mean over the ranks) times their bytes: gradients on their wire (fp32 4, bf16 2, e5m2 1
 * byte, leaving out e5m2's 4-byte scale per message), weights in their format. */
static McStates predicted_states(const TrainerConfig *c, int stage, int n)
{
    McPrecision p = c->policy.param == DTYPE_F32 ? MC_FP32 : MC_MIXED;
    return memcalc_zero(memcalc_gpt_states(&c->model, p, MC_ADAMW), stage, n);
}

static double predicted_sent(const TrainerConfig *c, DistWire wire, int stage, int n)
{
    static const double grad_bytes[] = { 4, 2, 1 };
    double g = grad_bytes[wire];
    const GptConfig *m = &c->model;
    double psi = (double)memcalc_gpt_params(m), share = (n - 1.0) / n;
    double ends = (double)(m->vocab_size + m->max_seq + 2) * m->n_embd;
    double wbytes = c->policy.param == DTYPE_F32 ? 4 : 2;
    if (stage == 0)
        return 2 * psi * share * g;
    double gathered = stage == 3 ? 2 * (psi - ends) + ends : psi;
    return psi * share * g + gathered * share * wbytes;
}

typedef struct {
    double held[3], peak[MEM_NCAT], sent, ms;
} Measured;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One run on the group c: the measurements of its rank 0 (the ranks hold the same, to a
 * value per tensor), the traffic averaged over the ranks, the median of the slowest rank's
 * step times. */
static Measured run(DistComm *c, const Options *o, int stage)
{
    TrainerConfig cfg = config(o);
    Trainer *t = trainer_new(&cfg);
    DdpConfig dc = { .bucket_bytes = (size_t)o->bucket_kb * 1024, .overlap = o->bucket_kb > 0,
                     .wire = wire_of(o) };
    Ddp *d = stage == 0 ? ddp_new(c, t, &dc) : NULL;
    Zero *z = stage > 0 ? zero_new(c, t, stage) : NULL;
    if (z)
        zero_set_wire(z, wire_of(o));
    int rows = o->batch * o->seq;
    int *tokens = malloc(sizeof *tokens * (size_t)rows), *targets = malloc(sizeof *targets * (size_t)rows);
    double *ms = malloc(sizeof *ms * (size_t)o->steps);
    if (!tokens || !targets || !ms)
        dist_fail("out of memory");
    Rng rng = rng_new(7 + (uint64_t)c->rank, RNG_STREAM_DATA);
    uint64_t sent = 0;
    Measured m = { 0 };
    for (int s = 0; s < o->steps; s++) {
        for (int i = 0; i < rows; i++) {
            tokens[i] = (int)rng_below(&rng, 65);
            targets[i] = (int)rng_below(&rng, 65);
        }
        if (s == 1)
            mem_reset_peaks();
        uint64_t before = c->bytes_sent;
        double t0 = MPI_Wtime();
        if (d)
            ddp_step(d, tokens, targets, o->batch, o->seq, 1e-3);
        else
            zero_step(z, tokens, targets, o->batch, o->seq, 1e-3);
        double mine = 1000.0 * (MPI_Wtime() - t0);
        if (s > 0)
            sent += c->bytes_sent - before;
        ms[s] = dist_max_double(c, mine);
    }
    for (int k = 0; k < 3; k++)
        m.held[k] = (double)mem_current((MemCategory)k);
    for (int k = 0; k < MEM_NCAT; k++)
        m.peak[k] = (double)mem_peak((MemCategory)k);
    /* `sent` includes the control values (N-1 doubles each: the loss, and under ZeRO the skip
     * check and the norm), which the volumes leave out. */
    m.sent = dist_sum_double(c, (double)sent / (o->steps - 1)) / c->size;
    qsort(ms + 1, (size_t)o->steps - 1, sizeof *ms, cmp_double);
    m.ms = ms[1 + (o->steps - 1) / 2];
    ddp_free(d);
    zero_free(z);
    trainer_free(t);
    free(tokens);
    free(targets);
    free(ms);
    return m;
}

static void print_row(const char *mode, int n, const Measured *m, McStates f, double pred_sent)
{
    printf("%-6s %5d  %10.0f %10.0f %10.0f   %10.0f %10.0f %10.0f   %10.0f %10.0f  %8.1f\n",
           mode, n, m->held[0], m->held[1], m->held[2], f.param, f.grad, f.optim, m->sent,
           pred_sent, m->ms);
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    dist_init(&argc, &argv);
    Options o = parse(argc, argv);
    DistComm *w = dist_world();
    bool root = w->rank == 0;
    TrainerConfig cfg = config(&o);
    if (root && o.out)
        mkdir(o.out, 0755);     /* an existing folder is fine; a real failure shows below */
    TsvWriter *tsv = root && o.out ? tsv_open_in(o.out, "data_parallel.tsv", COLUMNS) : NULL;
    if (root) {
        printf("model: V=65 T=%d L=%d H=%d C=%d, %zu parameters, %s, AdamW, gradients on a %s "
               "wire; %d rows of %d tokens per rank; %d steps per run, the first not counted\n",
               o.seq, o.layers, o.heads, o.embd, memcalc_gpt_params(&cfg.model), o.precision,
               DIST_WIRE_NAMES[wire_of(&o)], o.batch, o.seq, o.steps);
        printf("model states per rank at the end (bytes, measured | predicted by the ZeRO "
               "formulas), bytes sent per step per rank (mean over ranks | predicted), step ms "
               "(median, slowest rank)\n");
        printf("%-6s %5s  %10s %10s %10s   %10s %10s %10s   %10s %10s  %8s\n", "mode", "ranks",
               "param", "grad", "optim", "param", "grad", "optim", "sent", "predicted", "ms");
    }
    for (int n = 1; n <= w->size; n *= 2) {
        for (int stage = 0; stage <= 3; stage++) {
            if (!o.modes[stage])
                continue;
            DistComm *c = dist_split(w, w->rank < n ? 0 : -1, w->rank);
            if (!c)
                continue;
            Measured m = run(c, &o, stage);
            dist_comm_free(c);
            if (!root)
                continue;
            McStates f = predicted_states(&cfg, stage, n);
            double ps = predicted_sent(&cfg, wire_of(&o), stage, n);
            print_row(MODES[stage], n, &m, f, ps);
            if (!tsv)
                continue;
            tsv_str(tsv, MODES[stage]);
            tsv_int(tsv, stage);
            tsv_int(tsv, n);
            double row[] = { m.held[0], m.held[1], m.held[2], f.param, f.grad, f.optim,
                             m.peak[MEM_PARAM], m.peak[MEM_GRAD], m.peak[MEM_OPTIM],
                             m.peak[MEM_ACT], m.peak[MEM_TEMP], m.sent, ps, m.ms,
                             (double)n * o.batch * o.seq / (m.ms / 1000.0) };
            for (size_t k = 0; k < sizeof row / sizeof *row; k++)
                tsv_num(tsv, row[k]);
            tsv_str(tsv, DIST_WIRE_NAMES[wire_of(&o)]);
            if (!tsv_end_row(tsv))
                dist_fail("%s/data_parallel.tsv: write failed", o.out);
        }
    }
    if (tsv) {
        tsv_close_or_die(tsv);
        printf("table: %s/data_parallel.tsv\n", o.out);
    }
    dist_finalize();
    return 0;
}

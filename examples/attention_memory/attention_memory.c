/* attention_memory: how much activation memory causal self-attention keeps for its backward
 * pass, standard against tiled, as the sequence grows.
 *
 * Standard attention (op_attention_qkv) saves the probabilities P [B, H, T, T]: its activations
 * grow as T^2. Tiled attention (op_attention_qkv_tiled) computes the same output block by block
 * with an online softmax and saves only the output and one logsumexp per query row: they grow
 * as T. For T = tmin, 2 tmin, ... up to tmax, one forward + backward of each is run and its peak
 * act bytes are read from the accounting allocator (mem_reset_peaks, then mem_peak(MEM_ACT)
 * minus what was in use before), with the median time of --reps more passes.
 *
 * Output: TSV on stdout (attention, T, peak_act_bytes, ms, peak_temp_bytes); --log writes the
 * same to a file and --plot draws it with attention_memory.gp (docs/attention_memory.md). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/parallel.h"
#include "cli/settings.h"
#include "examples/attention_memory/attention_measure.h"
#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/tsv.h"

typedef struct {
    int         tmin, tmax, batch, heads, head_dim, reps, threads;
    const char *log_path, *plot_path;
} Options;

enum { FLAG_TMIN = 256, FLAG_TMAX, FLAG_BATCH, FLAG_HEADS, FLAG_HEAD_DIM, FLAG_REPS,
       FLAG_THREADS, FLAG_KERNELS, FLAG_LOG, FLAG_PLOT };

#define FIELD(f) offsetof(Options, f)
static const Setting SETTINGS[] = {
    { .name = "tmin", .id = FLAG_TMIN, .type = SETTING_INT, .offset = FIELD(tmin),
      .lo = 1, .hi = 1 << 20, .def = "64", .arg = "N", .help = "first sequence length" },
    { .name = "tmax", .id = FLAG_TMAX, .type = SETTING_INT, .offset = FIELD(tmax),
      .lo = 1, .hi = 1 << 20, .def = "2048", .arg = "N", .help = "last sequence length, at most" },
    { .name = "batch", .id = FLAG_BATCH, .type = SETTING_INT, .offset = FIELD(batch),
      .lo = 1, .hi = 1 << 16, .def = "1", .arg = "N", .help = "batch size B" },
    { .name = "heads", .id = FLAG_HEADS, .type = SETTING_INT, .offset = FIELD(heads),
      .lo = 1, .hi = 1 << 12, .def = "4", .arg = "N", .help = "heads H" },
    { .name = "head-dim", .id = FLAG_HEAD_DIM, .type = SETTING_INT, .offset = FIELD(head_dim),
      .lo = 1, .hi = 1 << 12, .def = "64", .arg = "N", .help = "dimensions per head D" },
    { .name = "reps", .id = FLAG_REPS, .type = SETTING_INT, .offset = FIELD(reps),
      .lo = 0, .hi = 10000, .def = "5", .arg = "N",
      .help = "timed passes per point after the measured one; the median is\n"
              "printed (0 skips timing)" },
    { .name = "threads", .id = FLAG_THREADS, .type = SETTING_INT, .offset = FIELD(threads),
      .lo = 0, .hi = 1024, .def = "0", .arg = "N", .help = "threads, 0 = one per core" },
    { .name = "kernels", .id = FLAG_KERNELS, .type = SETTING_CUSTOM,
      .set = settings_set_kernels, .arg = "K", .help = SETTINGS_KERNELS_HELP },
    { .name = "log", .id = FLAG_LOG, .type = SETTING_STRING, .offset = FIELD(log_path),
      .arg = "FILE", .help = "also write the TSV to FILE" },
    { .name = "plot", .id = FLAG_PLOT, .type = SETTING_STRING, .offset = FIELD(plot_path),
      .arg = "FILE",
      .help = "draw peak memory and time against T into FILE (PNG, gnuplot);\nneeds --log" },
    { .heading = "  -h, --help          this text" },
};
#undef FIELD
enum { N_SETTINGS = sizeof SETTINGS / sizeof SETTINGS[0] };

static void usage(void)
{
    printf("Usage: attention_memory [OPTION]...\n"
           "Peak activation bytes and time of one forward + backward of causal self-attention,\n"
           "standard (keeps P [B, H, T, T]) against tiled (keeps the output and L [B, H, T]),\n"
           "for T = tmin, 2 tmin, 4 tmin, ... <= tmax. TSV on stdout.\n\n");
    settings_usage(SETTINGS, N_SETTINGS);
    printf("\nExample (the figure of docs/attention_memory.md):\n"
           "  attention_memory --log attention_memory.tsv --plot attention_memory.png\n");
}

static Options parse(int argc, char **argv)
{
    Options o = { 0 };
    settings_defaults(SETTINGS, N_SETTINGS, &o);
    settings_parse(SETTINGS, N_SETTINGS, &o, NULL, FLAG_TMIN, usage, argc, argv);
    if (o.tmin > o.tmax)
        cli_usage_error("--tmin %d is larger than --tmax %d", o.tmin, o.tmax);
    if (o.plot_path && !o.log_path)
        cli_usage_error("--plot needs --log (the figure is drawn from that TSV)");
    return o;
}

/* One row on stdout and, when logging, in the TSV file. ms is rounded to microseconds. */
static void emit(TsvWriter *log, AttnKind kind, int T, const AttnMeasure *m)
{
    double ms = round(m->ms * 1e3) / 1e3;
    printf("%s\t%d\t%zu\t%.3f\t%zu\n", ATTN_NAME[kind], T, m->peak_act, ms, m->peak_temp);
    fflush(stdout);
    if (!log)
        return;
    tsv_str(log, ATTN_NAME[kind]);
    tsv_int(log, T);
    tsv_int(log, (long long)m->peak_act);
    tsv_num(log, ms);
    tsv_int(log, (long long)m->peak_temp);
    tsv_end_row(log);   /* a failed write is reported by tsv_close, with its reason */
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    Options o = parse(argc, argv);
    par_set_threads(o.threads);

    char err[256];
    const char *columns[] = { "attention", "T", "peak_act_bytes", "ms", "peak_temp_bytes", NULL };
    TsvWriter *log = NULL;
    if (o.log_path && !(log = tsv_open(o.log_path, columns, err, sizeof err)))
        cli_die(1, "%s", err);

    printf("attention\tT\tpeak_act_bytes\tms\tpeak_temp_bytes\n");
    AttnMeasure last[2] = { 0 };
    int last_T = 0;
    for (long T = o.tmin; T <= o.tmax; T *= 2) {
        for (int kind = ATTN_STANDARD; kind <= ATTN_TILED; kind++) {
            last[kind] = attn_measure((AttnKind)kind, o.batch, (int)T, o.heads, o.head_dim,
                                      o.reps, 1);
            emit(log, (AttnKind)kind, (int)T, &last[kind]);
        }
        last_T = (int)T;
    }
    fprintf(stderr, "at T=%d (B=%d H=%d D=%d, %d thread%s): tiled keeps %.4f of standard's "
            "activation bytes", last_T, o.batch, o.heads, o.head_dim, par_threads(),
            par_threads() == 1 ? "" : "s",
            (double)last[ATTN_TILED].peak_act / (double)last[ATTN_STANDARD].peak_act);
    if (o.reps > 0)
        fprintf(stderr, " and takes %.2fx its time", last[ATTN_TILED].ms / last[ATTN_STANDARD].ms);
    fputc('\n', stderr);

    if (log && !tsv_close(log, err, sizeof err))
        cli_die(1, "%s", err);
    if (o.plot_path &&
        plot_run(TAPEGRAD_SOURCE_DIR "/examples/attention_memory/attention_memory.gp", o.log_path,
                 o.plot_path) == PLOT_OK)
        fprintf(stderr, "figure: %s\n", o.plot_path);
    return 0;
}

/* train_gpt --parallel ddp: data parallel training on the ranks mpirun starts (dist/ddp.h).
 *
 *     scripts/mpirun -np 2 build/bin/train_gpt --parallel ddp [--bucket-kb N] ...
 *
 * Every rank parses the same command line, builds the same model and draws the same global
 * batch of N x --batch rows from the same data RNG (the batch `--accum N` would draw); rank r
 * trains on rows r B .. (r + 1) B - 1. Rank 0 alone prints and writes the log, the figure and
 * the snapshot (the replicas are identical). Without --parallel, MPI is never initialised.
 *
 * Failures: the options are the same on every rank, so a bad flag fails on all of them at once;
 * only rank 0's message is shown and every rank leaves MPI cleanly with the usage error's code.
 * Any later failure (a missing file, a diverged loss) happens on one rank or several at
 * different times, so it ends every rank through MPI_Abort: one message, exit code 1, no rank
 * left waiting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autograd/mem.h"
#include "dist/ddp.h"
#include "examples/common/cli.h"
#include "examples/train_gpt/train_gpt.h"

struct ParallelRun {
    Ddp     *ddp;
    DistComm *c;
    long     steps;
    uint64_t grad_sent, grad_recv, sent, recv;     /* summed over the steps */
    DdpStepResult last;
    size_t        bucket_peak;    /* the most bucket-buffer bytes of any step */
};

static enum { PAR_OFF, PAR_PARSING, PAR_RUNNING, PAR_DONE } phase = PAR_OFF;
static int saved_stderr = -1;

void parallel_usage(void)
{
    printf("Parallel (under scripts/mpirun; docs/distributed.md, docs/pipeline.md):\n"
           "  --parallel P        none, ddp, or pipeline:S (next part); ddp: each rank\n"
           "                      trains on --batch rows of a global\n"
           "                      batch of ranks x --batch, gradients all-reduced in rank\n"
           "                      order (the bits of one process adding the same micro-batch\n"
           "                      gradients in order) (default none)\n"
           "  --bucket-kb N       ddp: gradients sent in buckets of N KiB, each started while\n"
           "                      backward still runs; 0 = one bucket after backward\n"
           "                      (default %d, PyTorch's 25 MB scaled to these models)\n",
           PARALLEL_DEFAULT_BUCKET_KB);
}

void parallel_set_option(Options *o, Flag f, const char *flag, const char *arg)
{
    if (f == FLAG_PARALLEL) {
        /* pipeline:... goes to pipeline.c (flags.c) */
        if (strcmp(arg, "none") != 0 && strcmp(arg, "ddp") != 0)
            cli_usage_error("%s '%s': expected none, ddp, pipeline:naive, pipeline:gpipe or "
                            "pipeline:1f1b", flag, arg);
        o->ddp = strcmp(arg, "ddp") == 0;
    } else {
        o->bucket_kb = (int)cli_long(flag, arg, 0, 1 << 20);
    }
}

void parallel_check_options(const Options *o)
{
    if (options_given(o, FLAG_BUCKET_KB) && !o->ddp)
        cli_usage_error("--bucket-kb applies to --parallel ddp");
    if (o->ddp && o->accum > 1)
        cli_usage_error("--accum %d with --parallel ddp: each rank takes one micro-batch of "
                        "--batch rows (accumulation on a rank is not built yet)", o->accum);
    if (o->ddp && o->lora_rank > 0)
        cli_usage_error("--lora with --parallel ddp is not built yet");
}

/* After an exit during parsing every rank is exiting the same way: MPI ends cleanly. Any other
 * exit before the end may leave other ranks waiting: MPI_Abort ends them. */
static void at_exit(void)
{
    if (!dist_initialized())
        return;
    if (phase == PAR_PARSING) {
        dist_finalize();
        return;
    }
    if (phase == PAR_RUNNING)
        MPI_Abort(MPI_COMM_WORLD, 1);
}

void parallel_begin(int *argc, char ***argv)
{
    bool wanted = false;
    for (int i = 1; i < *argc; i++)
        if (strcmp((*argv)[i], "--parallel") == 0 || strncmp((*argv)[i], "--parallel=", 11) == 0)
            wanted = true;
    if (!wanted)
        return;
    dist_init(argc, argv);
    phase = PAR_PARSING;
    atexit(at_exit);
    if (dist_world()->rank != 0) {
        fflush(stdout);
        if (!freopen("/dev/null", "w", stdout))
            perror("freopen");
        /* The same message from every rank would say nothing more. */
        fflush(stderr);
        saved_stderr = dup(2);
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            dup2(fileno(null), 2);
            fclose(null);
        }
    }
}

void parallel_parsed(void)
{
    if (saved_stderr >= 0) {
        dup2(saved_stderr, 2);
        close(saved_stderr);
        saved_stderr = -1;
    }
    if (phase == PAR_PARSING)
        phase = PAR_RUNNING;
}

ParallelRun *parallel_start(const Options *o, Trainer *tr)
{
    if (phase == PAR_OFF || !o->ddp)
        return NULL;
    ParallelRun *p = calloc(1, sizeof *p);
    if (!p)
        dist_fail("out of memory");
    p->c = dist_world();
    DdpConfig cfg = { .bucket_bytes = (size_t)o->bucket_kb * 1024, .overlap = o->bucket_kb > 0 };
    p->ddp = ddp_new(p->c, tr, &cfg);
    return p;
}

bool parallel_is_root(void) { return phase == PAR_OFF || dist_world()->rank == 0; }
int  parallel_ranks(const ParallelRun *p) { return p ? p->c->size : 1; }

void parallel_describe(const ParallelRun *p, int B)
{
    if (!p)
        return;
    printf("parallel: ddp over %d ranks, %d rows each (global batch %d); %d gradient "
           "bucket%s of %zu values in all, %s\n", p->c->size, B, p->c->size * B,
           ddp_bucket_count(p->ddp), ddp_bucket_count(p->ddp) == 1 ? "" : "s",
           ddp_param_count(p->ddp), ddp_bucket_count(p->ddp) > 1 ? "started during backward"
                                                                   : "all-reduced after backward");
}

TrainStepResult parallel_step(ParallelRun *p, const int *tokens, const int *targets, int B,
                              int T, double lr)
{
    size_t mine = (size_t)p->c->rank * B * T;
    DdpStepResult s = ddp_step(p->ddp, tokens + mine, targets + mine, B, T, lr);
    p->steps++;
    p->grad_sent += s.grad_bytes_sent;
    p->grad_recv += s.grad_bytes_recv;
    p->sent += s.bytes_sent;
    p->recv += s.bytes_recv;
    p->last = s;
    p->bucket_peak = s.bucket_bytes_peak > p->bucket_peak ? s.bucket_bytes_peak : p->bucket_peak;
    return s.r;
}

/* Traffic per step on every rank, measured, beside 2 Psi (N-1)/N; then every rank's peak
 * bytes per category over the training steps. Collective. */
void parallel_report(ParallelRun *p, const size_t *step_peak)
{
    if (!p)
        return;
    int N = p->c->size, me = p->c->rank;
    enum { COLS = MEM_NCAT + 1 + 4 };
    double *all = calloc((size_t)N * COLS, sizeof *all);
    if (!all)
        dist_fail("out of memory");
    double *row = all + (size_t)me * COLS;
    double steps = p->steps ? (double)p->steps : 1.0;
    for (int c = 0; c <= MEM_NCAT; c++)
        row[c] = (double)step_peak[c];
    row[MEM_NCAT + 1] = (double)p->grad_sent / steps;
    row[MEM_NCAT + 2] = (double)p->grad_recv / steps;
    row[MEM_NCAT + 3] = (double)p->sent / steps;
    row[MEM_NCAT + 4] = (double)p->recv / steps;
    dist_allgather(p->c, row, all, (size_t)N * COLS, sizeof *all);
    double psi = (double)ddp_param_count(p->ddp);
    printf("traffic per step, bytes (measured by the communicator; predicted gradients "
           "2 Psi (N-1)/N x 4 = %.0f, Psi = %.0f):\n", 2.0 * psi * (N - 1) / N * 4, psi);
    printf("  rank  grads sent  grads recv  all sent  all recv\n");
    for (int r = 0; r < N; r++) {
        const double *x = all + (size_t)r * COLS;
        printf("  %4d  %10.0f  %10.0f  %8.0f  %8.0f\n", r, x[MEM_NCAT + 1], x[MEM_NCAT + 2],
               x[MEM_NCAT + 3], x[MEM_NCAT + 4]);
    }
    printf("gradient buckets: %d, started %s; bucket buffers held at once, rank 0, measured: "
           "%zu bytes (one fused fp32 buffer: Psi x 4 = %.0f; category temp)\n",
           ddp_bucket_count(p->ddp), ddp_bucket_count(p->ddp) > 1 ? "during backward"
                                                                 : "after backward",
           p->bucket_peak, psi * 4);
    printf("memory per rank, peak bytes per category over the training steps:\n  rank");
    for (int c = 0; c <= MEM_NCAT; c++)
        printf(" %10s", mem_category_name((MemCategory)c));
    printf("\n");
    for (int r = 0; r < N; r++) {
        printf("  %4d", r);
        for (int c = 0; c <= MEM_NCAT; c++)
            printf(" %10.0f", all[(size_t)r * COLS + c]);
        printf("\n");
    }
    free(all);
}

void parallel_end(ParallelRun *p)
{
    if (p) {
        ddp_free(p->ddp);
        free(p);
    }
    if (phase != PAR_OFF) {
        phase = PAR_DONE;
        fflush(stdout);
        dist_finalize();
    }
}

/* train_gpt --parallel ddp|zero1|zero2|zero3: data parallel training on the ranks mpirun
 * starts, with replicated model states (dist/ddp.h) or sharded ones (dist/zero.h).
 *
 *     scripts/mpirun -np 2 build/bin/train_gpt --parallel ddp [--bucket-kb N] ...
 *     scripts/mpirun -np 4 build/bin/train_gpt --parallel zero3 ...
 *
 * Every rank parses the same command line, builds the same model and draws the same global
 * batch of N x --batch rows from the same data RNG (the batch `--accum N` would draw); rank r
 * trains on rows r B .. (r + 1) B - 1. Rank 0 alone prints and writes the log, the figure and
 * the snapshot (the replicas are identical). Without --parallel, MPI is never initialised.
 *
 * Failures: the options are usually the same on every rank, so a bad flag fails on all of them
 * at once; only rank 0's message is shown and every rank leaves MPI cleanly with the usage
 * error's code (a bad flag on one rank alone votes like a setup failure). Ranks given different
 * settings are stopped before their first collective with one message naming the first
 * differing setting (agree_on_settings).
 * A failure while the run is set up (a data file missing on one host or on all, a snapshot that
 * does not load) can happen on any set of ranks: they vote (parallel_setup_done, the first
 * collective), the lowest failing rank's message alone is shown, and every rank leaves MPI
 * cleanly, whatever order the ranks got there in. A failure while training (a diverged loss)
 * ends every rank through MPI_Abort: one message, exit code 1, no rank left waiting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autograd/mem.h"
#include "dist/ddp.h"
#include "dist/zero.h"
#include "examples/common/cli.h"
#include "examples/common/memcalc.h"
#include "examples/train_gpt/train_gpt.h"

struct ParallelRun {
    Ddp     *ddp;
    Zero    *zero;                /* one of the two */
    int      stage;
    DistComm *c;
    long     steps;
    uint64_t grad_sent, grad_recv, sent, recv;     /* summed over the steps */
    uint64_t param_sent, param_recv;               /* ZeRO's all-gathers */
    size_t        bucket_peak;    /* the most bucket-buffer bytes of any step */
    size_t        states[3];      /* ZeRO: param, grad, optim bytes held at the last update */
    size_t        psi;            /* values in the model */
    int           micro;          /* micro-batches per rank: --accum on the command line */
    TrainerConfig cfg;
};

/* PARSING: options_parse; SETUP: the data, the model, a snapshot, up to the vote; AGREED: the
 * vote found a failure and every rank is exiting. */
static enum { PAR_OFF, PAR_PARSING, PAR_SETUP, PAR_AGREED, PAR_RUNNING, PAR_DONE } phase = PAR_OFF;
/* stderr's buffer on ranks other than 0 from MPI_Init to the end of the setup: a rank's message
 * is printed only if it is the lowest failing rank's (setup_failed). */
static char held[1 << 14];

/* --parallel other than pipeline:... (that goes to pipeline.c, flags.c). */
void parallel_set_option(void *opts, int f, const char *flag, const char *arg)
{
    (void)f;
    Options *o = opts;
    const char *names[] = { "none", "ddp", "zero1", "zero2", "zero3" };
    int k = 0;
    while (k < 5 && strcmp(arg, names[k]) != 0)
        k++;
    if (k == 5)
        cli_usage_error("%s '%s': expected none, ddp, zero1, zero2, zero3, pipeline:naive, "
                        "pipeline:gpipe or pipeline:1f1b", flag, arg);
    o->ddp = k == 1;
    o->zero_stage = k >= 2 ? k - 1 : 0;
}

void parallel_check_options(const Options *o)
{
    if (o->ddp && o->lora.rank > 0)
        cli_usage_error("--lora with --parallel ddp is not built yet");
    if (!o->zero_stage)
        return;
    if (o->lora.rank > 0)
        cli_usage_error("--parallel zero%d: --lora is not built yet for ZeRO", o->zero_stage);
    if ((o->save_path || o->load_path) && o->cfg.optimizer == TRAIN_ADAM8BIT)
        cli_usage_error("--parallel zero%d: %s with 8-bit Adam is not built (its blocks follow "
                        "the shards, so its state is not gathered into one file)", o->zero_stage,
                        o->save_path ? "--save" : "--load");
    const char *why = zero_check(&o->cfg, o->zero_stage);
    if (why)
        cli_usage_error("--parallel zero%d: %s", o->zero_stage, why);
}

/* The vote that ends the setup: every rank says whether it failed, all learn the lowest rank
 * that did, or -1. It is the first collective of a run, so a rank that fails in setup (voting
 * from at_exit) and one that succeeds (voting from parallel_setup_done) meet in it. */
static int first_failing_rank(bool failed)
{
    DistComm *c = dist_world();
    double m = dist_max_double(c, failed ? (double)(c->size - c->rank) : 0.0);
    return m > 0.0 ? c->size - (int)m : -1;
}

/* What this rank held in stderr's buffer goes to /dev/null: another rank's message is shown. */
static void drop_held_stderr(void)
{
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        dup2(fileno(null), 2);
        fclose(null);
    }
    fflush(stderr);
}

/* This rank failed during the setup: it votes, and only the lowest failing rank's message is
 * printed. Every rank then leaves MPI cleanly (the others exit from parallel_setup_done). */
static void setup_failed(void)
{
    if (first_failing_rank(true) != dist_world()->rank)
        drop_held_stderr();
    fflush(stderr);
    dist_finalize();
}

/* An exit while parsing or setting up: after the vote (setup_failed). The ranks usually parse
 * the same command line, but an MPMD launch (`-np 1 prog A : -np 1 prog B`) gives each its own,
 * and a rank that stopped at a bad flag without voting would leave the others waiting in the
 * vote (and itself in MPI_Finalize, which waits for them). After the vote every rank is exiting
 * alike: MPI ends cleanly. Any later exit before the end may leave other ranks waiting:
 * MPI_Abort ends them. */
static void at_exit(void)
{
    if (!dist_initialized())
        return;
    if (phase == PAR_AGREED) {
        dist_finalize();
        return;
    }
    if (phase == PAR_PARSING || phase == PAR_SETUP) {
        setup_failed();
        return;
    }
    if (phase != PAR_RUNNING)
        return;
    /* A failure every rank meets alike (a missing file, a diverged loss) would print its
     * message N times: the other ranks hold theirs in stderr's buffer (parallel_parsed) for a
     * moment, in which rank 0's MPI_Abort ends them unprinted. A rank failing alone prints after
     * the pause and ends the others itself. */
    if (dist_world()->rank != 0)
        sleep(1);
    fflush(stderr);
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
        /* The same message from every rank would say nothing more: held until the vote. */
        fflush(stderr);
        setvbuf(stderr, held, _IOFBF, sizeof held);
    }
}

void parallel_parsed(void)
{
    if (phase == PAR_PARSING)
        phase = PAR_SETUP;
}

/* Settings agreement (agree.c): MPMD command lines (`mpirun -np 1 prog A : -np 1 prog B`), or a
 * script that passes each host its own flags, can give the ranks different settings; they would
 * wait for each other in different collectives, or train to numbers no command line gives. */
/* Every rank alive after the setup vote: rank 0's settings broadcast and compared. */
static void agree_on_settings(const Options *o, long start_step)
{
    DistComm *c = dist_world();
    static char mine[OPTIONS_AGREED_MAX], theirs[OPTIONS_AGREED_MAX];
    uint64_t n = options_agreed_text(o, start_step, mine, sizeof mine);
    uint64_t n0 = n;
    dist_broadcast(c, &n0, sizeof n0, 0);
    if (n0 >= sizeof theirs)
        n0 = sizeof theirs - 1;
    if (c->rank == 0)
        memcpy(theirs, mine, n0);
    dist_broadcast(c, theirs, n0, 0);
    theirs[n0] = '\0';
    bool differs = n != n0 || memcmp(mine, theirs, n) != 0;
    int first = first_failing_rank(differs);
    if (first < 0)
        return;
    phase = PAR_AGREED;
    if (first == c->rank) {
        char why[1024];
        options_first_difference(mine, theirs, c->rank, why, sizeof why);
        fprintf(stderr, "%s: the ranks were given different settings: %s (every rank must run "
                "the same flags and snapshot)\n", cli_program(), why);
    } else {
        drop_held_stderr();
    }
    fflush(stderr);
    exit(1);
}

void parallel_setup_done(const Options *o, long start_step)
{
    if (phase != PAR_SETUP)
        return;
    if (first_failing_rank(false) >= 0) {
        phase = PAR_AGREED;     /* the failing rank says why; this one leaves quietly */
        drop_held_stderr();
        exit(1);
    }
    agree_on_settings(o, start_step);
    phase = PAR_RUNNING;
}

ParallelRun *parallel_start(const Options *o, Trainer *tr)
{
    parallel_setup_done(o, tr->step);
    if (phase == PAR_OFF || !(o->ddp || o->zero_stage))
        return NULL;
    ParallelRun *p = calloc(1, sizeof *p);
    if (!p)
        dist_fail("out of memory");
    p->c = dist_world();
    p->cfg = tr->cfg;
    p->stage = o->zero_stage;
    /* --accum as given (or a snapshot's, which records it per rank, with the rank count apart) */
    p->micro = o->accum;
    if (p->stage) {
        p->zero = zero_new(p->c, tr, p->stage);
        p->psi = zero_param_count(p->zero);
        return p;
    }
    DdpConfig cfg = { .bucket_bytes = (size_t)o->bucket_kb * 1024, .overlap = o->bucket_kb > 0 };
    p->ddp = ddp_new(p->c, tr, &cfg);
    p->psi = ddp_param_count(p->ddp);
    return p;
}

bool parallel_is_root(void) { return phase == PAR_OFF || dist_world()->rank == 0; }
int  parallel_data_ranks(const Options *o)
{
    return phase != PAR_OFF && (o->ddp || o->zero_stage) ? dist_world()->size : 1;
}
int  parallel_ranks(const ParallelRun *p) { return p ? p->c->size : 1; }
int  parallel_micro_batches(const ParallelRun *p) { return p ? p->micro : 1; }

void parallel_describe(const ParallelRun *p, int B)
{
    if (!p)
        return;
    if (p->zero) {
        static const char *keeps[] = { "", "the optimizer state", "the optimizer state and the "
                                       "gradients", "the optimizer state, the gradients and "
                                       "the weights (FSDP)" };
        printf("parallel: ZeRO-%d over %d ranks, %d rows each (global batch %d); %s sharded: "
               "this rank owns %zu of the %zu values\n", p->stage, p->c->size, B,
               p->c->size * B, keeps[p->stage], zero_shard_values(p->zero),
               zero_param_count(p->zero));
        return;
    }
    printf("parallel: ddp over %d ranks, %d rows each (global batch %d); %d gradient "
           "bucket%s of %zu values in all, %s\n", p->c->size, B, p->c->size * B,
           ddp_bucket_count(p->ddp), ddp_bucket_count(p->ddp) == 1 ? "" : "s",
           ddp_param_count(p->ddp), ddp_bucket_count(p->ddp) > 1 ? "started during backward"
                                                                   : "all-reduced after backward");
}

TrainStepResult parallel_step(ParallelRun *p, const int *tokens, const int *targets, int B,
                              int T, double lr)
{
    size_t mine = (size_t)p->c->rank * p->micro * B * T;
    p->steps++;
    if (p->zero) {
        ZeroStepResult s = zero_step_accum(p->zero, tokens + mine, targets + mine, B, T,
                                           p->micro, lr);
        p->grad_sent += s.grad_bytes_sent;
        p->grad_recv += s.grad_bytes_recv;
        p->param_sent += s.param_bytes_sent;
        p->param_recv += s.param_bytes_recv;
        p->sent += s.bytes_sent;
        p->recv += s.bytes_recv;
        p->states[0] = s.param_bytes;
        p->states[1] = s.grad_bytes;
        p->states[2] = s.optim_bytes;
        return s.r;
    }
    DdpStepResult s = ddp_step_accum(p->ddp, tokens + mine, targets + mine, B, T, p->micro,
                                     lr);
    p->grad_sent += s.grad_bytes_sent;
    p->grad_recv += s.grad_bytes_recv;
    p->sent += s.bytes_sent;
    p->recv += s.bytes_recv;
    p->bucket_peak = s.bucket_bytes_peak > p->bucket_peak ? s.bucket_bytes_peak : p->bucket_peak;
    return s.r;
}

void parallel_whole_weights(ParallelRun *p, bool whole)
{
    if (!p || !p->zero)
        return;
    if (whole)
        zero_gather_weights(p->zero);
    else
        zero_shard_weights(p->zero);
}

/* ZeRO gives the trainer back whole (weights, masters, optimizer state: DDP's), so that the
 * report, the samples and the snapshot (rank 0's, one file) see an ordinary trainer. */
void parallel_training_done(ParallelRun *p)
{
    if (p && p->zero) {
        zero_free(p->zero);
        p->zero = NULL;
    }
}

/* What the memory calculator predicts one rank holds (examples/common/memcalc.h). */
static McStates predicted_states(const ParallelRun *p)
{
    const TrainerConfig *c = &p->cfg;
    McOptimizer opt = MC_ADAMW;
    if (c->optimizer == TRAIN_SGD)
        opt = c->sgd.momentum != 0.0 ? MC_MOMENTUM : MC_SGD;
    else if (c->optimizer == TRAIN_ADAM8BIT)
        opt = MC_ADAM8BIT;
    McPrecision prec = c->policy.param == DTYPE_F32 ? MC_FP32 : MC_MIXED;
    return memcalc_zero(memcalc_gpt_states(&c->model, prec, opt), p->stage, p->c->size);
}

/* ZeRO: the model states each rank held at the update, beside the calculator's formulas, and
 * the traffic split into the gradients' reduce-scatter and the weights' all-gathers. */
static void report_zero(const ParallelRun *p, const double *all, int cols, int first)
{
    int N = p->c->size;
    double psi = (double)p->psi, share = (N - 1.0) / N;
    double wbytes = p->cfg.policy.param == DTYPE_F32 ? 4 : 2;
    double ends = (double)(p->cfg.model.vocab_size + p->cfg.model.max_seq + 2) *
                  p->cfg.model.n_embd + (p->cfg.model.tied ? 0.0 :
                  (double)p->cfg.model.vocab_size * p->cfg.model.n_embd);
    double gathers = p->stage == 3 ? 2 * (psi - ends) + ends : psi;
    printf("traffic per step, bytes (measured by the communicator; predicted, mean over the "
           "ranks: gradients Psi (N-1)/N x 4 = %.0f, weights %s x %.0f = %.0f, Psi = %.0f):\n",
           psi * share * 4, p->stage == 3 ? "(2 Psi_blocks + Psi_ends)(N-1)/N" : "Psi (N-1)/N",
           wbytes, gathers * share * wbytes, psi);
    printf("  rank  grads sent  grads recv  weights sent  weights recv  all sent  all recv\n");
    for (int r = 0; r < N; r++) {
        const double *x = all + (size_t)r * cols + first;
        printf("  %4d  %10.0f  %10.0f  %12.0f  %12.0f  %8.0f  %8.0f\n", r, x[0], x[1], x[4],
               x[5], x[2], x[3]);
    }
    McStates f = predicted_states(p);
    printf("model states held at the update, bytes (measured; predicted by memcalc_zero: "
           "param %.0f, grad %.0f, optim %.0f%s):\n", f.param, f.grad, f.optim,
           p->cfg.policy.param == DTYPE_F32 ? "" : "; gradients are kept in fp32, twice the "
           "formula's 2 bytes");
    printf("  rank       param        grad       optim\n");
    for (int r = 0; r < N; r++) {
        const double *x = all + (size_t)r * cols + first + 6;
        printf("  %4d  %10.0f  %10.0f  %10.0f\n", r, x[0], x[1], x[2]);
    }
}

static void report_ddp(const ParallelRun *p, const double *all, int cols, int first)
{
    int N = p->c->size;
    double psi = (double)ddp_param_count(p->ddp);
    printf("traffic per step, bytes (measured by the communicator; predicted gradients "
           "2 Psi (N-1)/N x 4 = %.0f, Psi = %.0f):\n", 2.0 * psi * (N - 1) / N * 4, psi);
    printf("  rank  grads sent  grads recv  all sent  all recv\n");
    for (int r = 0; r < N; r++) {
        const double *x = all + (size_t)r * cols + first;
        printf("  %4d  %10.0f  %10.0f  %8.0f  %8.0f\n", r, x[0], x[1], x[2], x[3]);
    }
    printf("gradient buckets: %d, started %s; bucket buffers held at once, rank 0, measured: "
           "%zu bytes (one fused fp32 buffer: Psi x 4 = %.0f; category temp)\n",
           ddp_bucket_count(p->ddp), ddp_bucket_count(p->ddp) > 1 ? "during backward"
                                                                 : "after backward",
           p->bucket_peak, psi * 4);
}

/* Traffic per step on every rank, measured, beside the predicted volumes; then every rank's
 * peak bytes per category over the training steps. Collective. */
void parallel_report(ParallelRun *p, const size_t *step_peak)
{
    if (!p)
        return;
    int N = p->c->size, me = p->c->rank;
    enum { FIRST = MEM_NCAT + 1, COLS = FIRST + 9 };
    double *all = calloc((size_t)N * COLS, sizeof *all);
    if (!all)
        dist_fail("out of memory");
    double *row = all + (size_t)me * COLS;
    double steps = p->steps ? (double)p->steps : 1.0;
    for (int c = 0; c <= MEM_NCAT; c++)
        row[c] = (double)step_peak[c];
    double per_step[] = { (double)p->grad_sent, (double)p->grad_recv, (double)p->sent,
                          (double)p->recv, (double)p->param_sent, (double)p->param_recv };
    for (int k = 0; k < 6; k++)
        row[FIRST + k] = per_step[k] / steps;
    for (int k = 0; k < 3; k++)
        row[FIRST + 6 + k] = (double)p->states[k];
    dist_allgather(p->c, row, all, (size_t)N * COLS, sizeof *all);
    if (p->stage)
        report_zero(p, all, COLS, FIRST);
    else
        report_ddp(p, all, COLS, FIRST);
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

void parallel_sum_flops(const ParallelRun *p, TapeFlops *f)
{
    if (!p)
        return;
    enum { K = 6 };
    FlopCount *parts[K / 2] = { &f->forward, &f->backward, &f->recompute };
    int64_t mine[K], *all = calloc((size_t)p->c->size * K, sizeof *all);
    if (!all)
        dist_fail("out of memory");
    for (int k = 0; k < K / 2; k++) {
        mine[2 * k] = parts[k]->matmul;
        mine[2 * k + 1] = parts[k]->other;
    }
    dist_allgather(p->c, mine, all, (size_t)p->c->size * K, sizeof *all);
    for (int k = 0; k < K / 2; k++) {
        parts[k]->matmul = parts[k]->other = 0;
        for (int r = 0; r < p->c->size; r++) {
            parts[k]->matmul += all[(size_t)r * K + 2 * k];
            parts[k]->other += all[(size_t)r * K + 2 * k + 1];
        }
    }
    free(all);
}

double parallel_sum(const ParallelRun *p, double x)
{
    return p ? dist_sum_double(p->c, x) : x;
}

void parallel_end(ParallelRun *p)
{
    if (p) {
        ddp_free(p->ddp);
        parallel_training_done(p);
        free(p);
    }
    if (phase != PAR_OFF) {
        phase = PAR_DONE;
        fflush(stdout);
        dist_finalize();
    }
}

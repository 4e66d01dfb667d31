/* A run's --parallel on MPI ranks (run/ranks.h): the phases from MPI_Init to the end, the setup
 * vote and the settings agreement, the strategy started from dist/run.h, each rank's report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autograd/mem.h"
#include "dist/run.h"
#include "plan/memcalc.h"
#include "run/ranks.h"
#include "run/ranks_internal.h"

struct RunRanks {
    DistRun     *run;               /* the strategy on the ranks (dist/run.h) */
    RunPipe     *pipe;              /* a pipeline's record, events and bubbles
                                     * (ranks_pipeline.c) */
    int          zero_level;        /* ZeRO's level 1-3 (the paper's stage; a pipeline's stage
                                     * is a rank's slice of the blocks) */
    DistComm    *c;                 /* the world */
    size_t       psi;               /* values in the model */
    size_t       zero_owned;        /* ZeRO: the values this rank owned */
    DistWire     wire;              /* what the gradients travel as (dist/wire.h) */
    TrainerConfig cfg;
};

/* PARSING: the settings read; SETUP: the data, the model, a snapshot, up to the vote; AGREED: the
 * vote found a failure and every rank is exiting. */
static enum {
    RANKS_OFF, RANKS_PARSING, RANKS_SETUP, RANKS_AGREED, RANKS_RUNNING, RANKS_DONE
} phase = RANKS_OFF;
/* stderr's buffer on ranks other than 0 from MPI_Init to the end of the setup: a rank's message
 * is printed only if it is the lowest failing rank's (setup_failed). */
static char held[1 << 14];

bool run_parallel_parse(RunParallel *p, const char *text, char *why, size_t len)
{
    if (!dist_plan_parse(text, &p->dist.plan, why, len))
        return false;
    p->text = text;
    return true;
}

void run_ranks_check(const RunLocal *local, const TrainerConfig *cfg, const LoraConfig *lora)
{
    int level = run_parallel_zero(&local->parallel);
    if (run_parallel_ddp(&local->parallel) && lora->rank > 0)
        run_fail(2, "--lora with --parallel ddp is not built yet");
    if (!level)
        return;
    if (lora->rank > 0)
        run_fail(2, "--parallel zero%d: --lora is not built yet for ZeRO", level);
    if ((local->save_path || local->load_path) && cfg->optimizer == TRAIN_ADAM8BIT)
        run_fail(2, "--parallel zero%d: %s with 8-bit Adam is not built (its blocks follow the "
                 "shards, so its state is not gathered into one file)", level,
                 local->save_path ? "--save" : "--load");
    const char *why = zero_check(cfg, level);
    if (why)
        run_fail(2, "--parallel zero%d: %s", level, why);
}

/* The vote that ends the setup: every rank says whether it failed, all learn the lowest rank
 * that did, or -1. It is the first collective of a run, so a rank that fails in setup (voting
 * from at_exit) and one that succeeds (voting from run_ranks_setup_done) meet in it. */
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
 * printed. Every rank then leaves MPI cleanly (the others exit from run_ranks_setup_done). */
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
    if (phase == RANKS_AGREED) {
        dist_finalize();
        return;
    }
    if (phase == RANKS_PARSING || phase == RANKS_SETUP) {
        setup_failed();
        return;
    }
    if (phase != RANKS_RUNNING)
        return;
    /* A failure every rank meets alike (a missing file, a diverged loss) would print its
     * message N times: the other ranks hold theirs in stderr's buffer (run_ranks_parsed) for a
     * moment, in which rank 0's MPI_Abort ends them unprinted. A rank failing alone prints after
     * the pause and ends the others itself. */
    if (dist_world()->rank != 0)
        sleep(1);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

void run_ranks_begin(int *argc, char ***argv)
{
    bool wanted = false;
    for (int i = 1; i < *argc; i++)
        if (strcmp((*argv)[i], "--parallel") == 0 || strncmp((*argv)[i], "--parallel=", 11) == 0)
            wanted = true;
    if (!wanted)
        return;
    dist_init(argc, argv);
    phase = RANKS_PARSING;
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

void run_ranks_parsed(void)
{
    if (phase == RANKS_PARSING)
        phase = RANKS_SETUP;
}

/* Settings agreement: MPMD command lines (`mpirun -np 1 prog A : -np 1 prog B`), or a script
 * that passes each host its own flags, can give the ranks different settings; they would wait
 * for each other in different collectives, or train to numbers no command line gives. Every
 * rank alive after the setup vote: rank 0's text broadcast and compared. */
static void agree_on_settings(const char *mine, size_t n)
{
    DistComm *c = dist_world();
    static char theirs[1 << 16];
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
    phase = RANKS_AGREED;
    if (first == c->rank) {
        char why[1024];
        run_ranks_first_difference(mine, theirs, c->rank, why, sizeof why);
        fprintf(stderr, "%s: the ranks were given different settings: %s (every rank must run "
                "the same flags and snapshot)\n", tensor_program(), why);
    } else {
        drop_held_stderr();
    }
    fflush(stderr);
    exit(1);
}

/* The first line where mine and theirs differ: its name, and each side's value. */
void run_ranks_first_difference(const char *mine, const char *theirs, int rank, char *out,
                                size_t len)
{
    while (*mine || *theirs) {
        size_t a = strcspn(mine, "\n"), b = strcspn(theirs, "\n");
        if (a != b || memcmp(mine, theirs, a) != 0) {
            size_t name = strcspn(mine, "\t");
            size_t tb = strcspn(theirs, "\t");
            if (name > a)
                name = a;
            if (tb > b)
                tb = b;
            snprintf(out, len, "%.*s is %.*s on rank 0, %.*s on rank %d", (int)name, mine,
                     (int)(b - (tb < b ? tb + 1 : b)), theirs + (tb < b ? tb + 1 : b),
                     (int)(a - (name < a ? name + 1 : a)), mine + (name < a ? name + 1 : a),
                     rank);
            return;
        }
        mine += a + (mine[a] != '\0');
        theirs += b + (theirs[b] != '\0');
    }
    snprintf(out, len, "the settings differ");
}

void run_ranks_setup_done(const char *agreed, size_t n)
{
    if (phase != RANKS_SETUP)
        return;
    if (first_failing_rank(false) >= 0) {
        phase = RANKS_AGREED;     /* the failing rank says why; this one leaves quietly */
        drop_held_stderr();
        exit(1);
    }
    agree_on_settings(agreed, n);
    phase = RANKS_RUNNING;
}

/* --grad-wire, auto: the policy's gradient format where a wire has it (bf16, e5m2), else fp32. */
static DistWire grad_wire(const RunParallel *par, const TrainerConfig *cfg)
{
    if (par->grad_wire && strcmp(par->grad_wire, "auto") != 0)
        return (DistWire)dist_wire_parse(par->grad_wire);
    if (cfg->policy.grad == DTYPE_BF16)
        return DIST_WIRE_BF16;
    return cfg->policy.grad == DTYPE_E5M2 ? DIST_WIRE_E5M2 : DIST_WIRE_FP32;
}

/* The same error on every rank (each found it from the same arguments, which the ranks have
 * agreed on: run_ranks_setup_done): nobody waits, and rank 0 alone says it, once. */
static _Noreturn void die_everywhere(const char *flag, const char *why)
{
    if (dist_world()->rank == 0)
        fprintf(stderr, "%s: --parallel %s: %s\n", tensor_program(), flag, why);
    fflush(stderr);
    dist_finalize();
    exit(1);
}

RunRanks *run_ranks_start(const RunKept *kept, const RunLocal *local, Trainer *tr,
                          const char *agreed, size_t n)
{
    run_ranks_setup_done(agreed, n);
    const RunParallel *par = &local->parallel;
    DistPlan plan = par->dist.plan;
    if (phase == RANKS_OFF || plan.kind == DIST_RUN_NONE)
        return NULL;
    RunRanks *p = calloc(1, sizeof *p);
    if (!p)
        dist_fail("out of memory");
    p->c = dist_world();
    p->cfg = tr->cfg;
    p->zero_level = plan.kind == DIST_RUN_ZERO ? plan.zero_level : 0;
    p->wire = grad_wire(par, &tr->cfg);
    /* ddp, ZeRO: --accum as given (or a snapshot's, which records it per rank, with the rank
     * count apart); a pipeline: its --micro-batches */
    DistRunConfig cfg = par->dist;
    cfg.micro_batches = run_parallel_pipeline(par) ? par->dist.micro_batches : kept->accum;
    cfg.wire = p->wire;
    char why[512];
    p->run = dist_run_new(&cfg, tr, why, sizeof why);
    if (!p->run)
        die_everywhere(run_parallel_pipeline(par) ? run_parallel_pipeline(par)
                       : run_parallel_ddp(par) ? "ddp" : "zero", why);
    if (run_parallel_pipeline(par)) {
        p->pipe = run_pipe_start(tr, p->run, par->dist.micro_batches, kept->steps,
                                 kept->batch, kept->seq);
        return p;
    }
    Zero *z = dist_run_zero(p->run);
    p->psi = z ? zero_param_count(z) : ddp_param_count(dist_run_ddp(p->run));
    p->zero_owned = z ? zero_shard_values(z) : 0;
    return p;
}

int run_ranks_regroup(const char *path, long n, long k, int mine, int given, const char *flag)
{
    long global = n * k;
    /* Exact or refused: on another rank count the same global batch sums its micro-batches'
     * gradients in another grouping, so the run goes on, but not bit for bit. That takes an
     * --accum the user gives knowingly; without one, the reason and the two ways on. */
    if (!given && global % mine == 0)
        run_fail(2, "--load %s: the snapshot's run was %ld rank%s x --accum %ld; on %d rank%s its "
                 "gradients would be summed in another grouping and the run would not continue "
                 "bit for bit: resume on %ld rank%s for that, or give %s %ld to continue it "
                 "regrouped", path, n, n == 1 ? "" : "s", k, mine, mine == 1 ? "" : "s", n,
                 n == 1 ? "" : "s", flag, global / mine);
    long want = given ? given : global / mine;
    if (want * mine != global) {
        if (global % mine == 0)
            run_fail(2, "--load %s: the snapshot's run drew %ld micro-batches a step (%ld rank%s "
                     "x --accum %ld); %d rank%s x %s %d draw%s %ld: give %s %ld", path, global,
                     n, n == 1 ? "" : "s", k, mine, mine == 1 ? "" : "s", flag, given,
                     mine == 1 ? "s" : "", (long)mine * given, flag, global / mine);
        run_fail(1, "--load %s: the snapshot's run drew %ld micro-batches a step (%ld rank%s x "
                 "--accum %ld), which %d ranks cannot share evenly: resume on %ld ranks (another "
                 "global batch would draw other batches and not continue the run)", path, global,
                 n, n == 1 ? "" : "s", k, mine, n);
    }
    if (run_ranks_is_root())
        printf("resuming %ld rank%s x --accum %ld on %d rank%s x --accum %ld: the same %ld "
               "micro-batches a step, their gradients summed in another grouping (the last bits "
               "may differ from a run kept on %ld)\n", n, n == 1 ? "" : "s", k, mine,
               mine == 1 ? "" : "s", want, global, n);
    return (int)want;
}

bool run_ranks_is_root(void) { return phase == RANKS_OFF || dist_world()->rank == 0; }
int  run_ranks_data_count(const RunParallel *par)
{
    if (phase == RANKS_OFF)
        return 1;
    return dist_run_batch_groups(&par->dist.plan, dist_world()->size);
}
int  run_ranks_count(const RunRanks *p) { return p ? p->c->size : 1; }
int  run_ranks_stages(const RunRanks *p) { return p && p->pipe ? run_pipe_stages(p->pipe) : 0; }

void run_ranks_describe(const RunRanks *p, int B)
{
    if (!p)
        return;
    if (p->pipe) {
        run_pipe_describe(p->pipe);
        return;
    }
    if (p->zero_level) {
        static const char *keeps[] = { "", "the optimizer state", "the optimizer state and the "
                                       "gradients", "the optimizer state, the gradients and "
                                       "the weights (FSDP)" };
        printf("parallel: ZeRO-%d over %d ranks, %d rows each (global batch %d); %s sharded: "
               "this rank owns %zu of the %zu values; gradients on a %s wire\n",
               p->zero_level, p->c->size, B, p->c->size * B, keeps[p->zero_level],
               p->zero_owned, p->psi, DIST_WIRE_NAMES[p->wire]);
        return;
    }
    const Ddp *d = dist_run_ddp(p->run);
    printf("parallel: ddp over %d ranks, %d rows each (global batch %d); %d gradient "
           "bucket%s of %zu values in all, %s, on a %s wire\n", p->c->size, B,
           p->c->size * B, ddp_bucket_count(d), ddp_bucket_count(d) == 1 ? "" : "s",
           ddp_param_count(d), ddp_bucket_count(d) > 1 ? "started during backward"
                                                       : "all-reduced after backward",
           DIST_WIRE_NAMES[p->wire]);
}

TrainStepResult run_ranks_step(RunRanks *p, const int *tokens, const int *targets, int B,
                               int T, double lr)
{
    return dist_run_step(p->run, tokens, targets, B, T, lr);
}

bool run_ranks_step_report(RunRanks *p, long step, double lr, TrainStepResult r, double seconds,
                           const size_t *peaks, const EvalResult *ev, const RunPipeStep **rec)
{
    *rec = NULL;
    if (!p || !p->pipe)
        return false;
    *rec = run_pipe_step_report(p->pipe, step, lr, r, seconds, peaks[MEM_ACT], ev);
    return true;
}

void run_ranks_whole_weights(RunRanks *p, bool whole)
{
    if (p)
        dist_run_whole_weights(p->run, whole);
}

/* ZeRO gives the trainer back whole (weights, masters, optimizer state: DDP's), and so does the
 * pipeline (one process's, after its last measurements), so that the report, the samples and
 * the snapshot (rank 0's, one file) see an ordinary trainer. */
void run_ranks_training_done(RunRanks *p)
{
    if (p && p->pipe)
        run_pipe_training_done(p->pipe);
    if (p)
        dist_run_give_back(p->run);
}

/* What the memory calculator predicts one rank holds (plan/memcalc.h). */
static McStates predicted_states(const RunRanks *p)
{
    const TrainerConfig *c = &p->cfg;
    McOptimizer opt = MC_ADAMW;
    if (c->optimizer == TRAIN_SGD)
        opt = c->sgd.momentum != 0.0 ? MC_MOMENTUM : MC_SGD;
    else if (c->optimizer == TRAIN_ADAM8BIT)
        opt = MC_ADAM8BIT;
    McPrecision prec = c->policy.param == DTYPE_F32 ? MC_FP32 : MC_MIXED;
    return memcalc_zero(memcalc_gpt_states(&c->model, prec, opt), p->zero_level, p->c->size);
}

/* ZeRO: the model states each rank held at the update, beside the calculator's formulas, and
 * the traffic split into the gradients' reduce-scatter and the weights' all-gathers. */
/* Bytes per gradient value on the wire (e5m2's 4-byte scale per message left out). */
static double wire_value_bytes(DistWire w)
{
    return w == DIST_WIRE_FP32 ? 4.0 : w == DIST_WIRE_BF16 ? 2.0 : 1.0;
}

static void report_zero(const RunRanks *p, const double *all, int cols, int first)
{
    int N = p->c->size;
    double psi = (double)p->psi, share = (N - 1.0) / N;
    double wbytes = p->cfg.policy.param == DTYPE_F32 ? 4 : 2;
    double ends = (double)(p->cfg.model.vocab_size + p->cfg.model.max_seq + 2) *
                  p->cfg.model.n_embd + (p->cfg.model.tied ? 0.0 :
                  (double)p->cfg.model.vocab_size * p->cfg.model.n_embd);
    double gathers = p->zero_level == 3 ? 2 * (psi - ends) + ends : psi;
    double g = wire_value_bytes(p->wire);
    printf("traffic per step, bytes (measured by the communicator; predicted, mean over the "
           "ranks: gradients on a %s wire Psi (N-1)/N x %g = %.0f, weights %s x %.0f = %.0f, "
           "Psi = %.0f):\n", DIST_WIRE_NAMES[p->wire], g, psi * share * g,
           p->zero_level == 3 ? "(2 Psi_blocks + Psi_ends)(N-1)/N" : "Psi (N-1)/N", wbytes,
           gathers * share * wbytes, psi);
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

static void report_ddp(const RunRanks *p, const double *all, int cols, int first)
{
    int N = p->c->size;
    const Ddp *d = dist_run_ddp(p->run);
    double psi = (double)p->psi, g = wire_value_bytes(p->wire);
    printf("traffic per step, bytes (measured by the communicator; predicted gradients on a %s "
           "wire 2 Psi (N-1)/N x %g = %.0f, Psi = %.0f):\n", DIST_WIRE_NAMES[p->wire], g,
           2.0 * psi * (N - 1) / N * g, psi);
    printf("  rank  grads sent  grads recv  all sent  all recv\n");
    for (int r = 0; r < N; r++) {
        const double *x = all + (size_t)r * cols + first;
        printf("  %4d  %10.0f  %10.0f  %8.0f  %8.0f\n", r, x[0], x[1], x[2], x[3]);
    }
    printf("gradient buckets: %d, started %s; bucket buffers held at once, rank 0, measured: "
           "%zu bytes (one fused fp32 buffer: Psi x 4 = %.0f; category temp)\n",
           ddp_bucket_count(d), ddp_bucket_count(d) > 1 ? "during backward" : "after backward",
           dist_run_traffic(p->run)->bucket_peak, psi * 4);
}

/* Traffic per step on every rank, measured, beside the predicted volumes; then every rank's
 * peak bytes per category over the training steps. Collective. */
void run_ranks_report(RunRanks *p, const size_t *step_peak)
{
    if (!p)
        return;
    if (p->pipe) {
        run_pipe_report(p->pipe);
        return;
    }
    int N = p->c->size, me = p->c->rank;
    enum { FIRST = MEM_NCAT + 1, COLS = FIRST + 9 };
    double *all = calloc((size_t)N * COLS, sizeof *all);
    if (!all)
        dist_fail("out of memory");
    double *row = all + (size_t)me * COLS;
    const DistRunTraffic *f = dist_run_traffic(p->run);
    double steps = f->steps ? (double)f->steps : 1.0;
    for (int c = 0; c <= MEM_NCAT; c++)
        row[c] = (double)step_peak[c];
    double per_step[] = { (double)f->grad_sent, (double)f->grad_recv, (double)f->sent,
                          (double)f->recv, (double)f->param_sent, (double)f->param_recv };
    for (int k = 0; k < 6; k++)
        row[FIRST + k] = per_step[k] / steps;
    for (int k = 0; k < 3; k++)
        row[FIRST + 6 + k] = (double)f->states[k];
    dist_allgather(p->c, row, all, (size_t)N * COLS, sizeof *all);
    if (p->zero_level)
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

void run_ranks_sum_flops(const RunRanks *p, TapeFlops *f)
{
    if (p)
        dist_run_sum_flops(p->run, f);
}

double run_ranks_sum(const RunRanks *p, double x)
{
    return p ? dist_sum_double(p->c, x) : x;
}

void run_ranks_end(RunRanks *p)
{
    if (p) {
        run_pipe_end(p->pipe);
        dist_run_free(p->run);
        free(p);
    }
    if (phase != RANKS_OFF) {
        phase = RANKS_DONE;
        fflush(stdout);
        dist_finalize();
    }
}

/* fit_search: the homework's search (fit_search.h says the steps and the order). */
#include "plan/fit_search.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autograd/mem.h"
#include "autograd/outfile.h"
#include "autograd/policy.h"
#include "autograd/rng.h"
#include "autograd/tensor.h"
#include "nn/gpt_snapshot.h"
#include "optim/train.h"

const char *const FIT_PRECISION_NAMES[] = { "fp32", "bf16", NULL };
const int FIT_LORA_RANKS[FIT_N_LORA_RANKS] = { 64, 32, 16, 8, 4 };

const CkptKind FIT_STRATEGIES[FIT_NSTRATEGIES] = { CKPT_VANILLA, CKPT_SQRT, CKPT_MEMORY_POOR };
const McOptimizer FIT_OPTIMIZERS[FIT_NOPTIMIZERS] = { MC_ADAMW, MC_ADAM8BIT, MC_ADAFACTOR };
const char *const FIT_OPTIMIZER_NAMES[] = { "adamw", "adam8bit", "adafactor", NULL };
enum { HEAD_DIM = 32 };

FitSpace fit_space_default(int V, int T, int threads)
{
    FitSpace s = {
        .V = V, .T = T, .target_batch = 32, .threads = threads,
        .layers = { 1, 2, 3, 4, 6, 8, 10, 12, 16 }, .n_layers = 9,
        .widths = { 64, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024 }, .n_widths = 12,
        .batches = { 32, 16, 8, 4 }, .n_batches = 4,
    };
    return s;
}

void fit_predict(FitCandidate *c)
{
    PrecisionPolicy policy;
    policy_preset(FIT_PRECISION_NAMES[c->precision], &policy);
    McRun run = { .B = c->B, .T = c->T, .strategy = c->strategy, .threads = c->threads,
                  .policy = c->precision == FIT_FP32 ? NULL : &policy, .offload = c->offload };
    c->params = memcalc_gpt_params(&c->model);
    c->trainable = memcalc_lora_trainable(&c->model, &c->lora);
    c->predicted = memcalc_predict_lora(&c->model, &run, c->optimizer, &c->lora).bytes[MEM_ALL];
    /* trainer_new_lora's set-up happens under the budget too (before any step). */
    if (c->lora.rank > 0)
        c->predicted = fmax(c->predicted,
                            memcalc_lora_setup_peak(&c->model, run.policy, c->optimizer, &c->lora));
}

/* The LoRA targets a base allows: every Linear with separate q/k/v; o and mlp on a fused qkv
 * (an adapter on a column block of it would need an op of its own: nn/gpt_lora.h). */
unsigned fit_lora_targets(const GptConfig *base)
{
    return base->fused_qkv ? LORA_TARGET_O | LORA_TARGET_MLP : LORA_TARGET_ALL;
}

FitCandidate fit_shape(int V, int T, int L, int C, int threads)
{
    FitCandidate x = {
        .model = { .vocab_size = V, .max_seq = T, .n_layer = L,
                   .n_head = C >= HEAD_DIM ? C / HEAD_DIM : 1, .n_embd = C, .tied = true,
                   .fused_qkv = true },
        .B = 1, .accum = 1, .T = T, .threads = threads,
    };
    return x;
}

/* The ways of one shape, in the order of preference (the loops nest in it). */
static int add_ways(const FitSpace *s, const FitCandidate *shape, FitCandidate *c)
{
    int n = 0;
    for (int k = 0; k < FIT_NSTRATEGIES; k++)
        for (int b = 0; b < s->n_batches; b++) {
            int B = s->batches[b];
            /* Only micro-batches that make up the target batch exactly. */
            if (B > s->target_batch || s->target_batch % B != 0)
                continue;
            for (int p = 0; p < FIT_NPRECISIONS; p++)
                for (int o = 0; o < FIT_NOPTIMIZERS; o++)
                    /* LoRA's prediction has no offload: full training only. */
                    for (int off = 0; off <= (int)(s->offload && !shape->lora.rank); off++) {
                        FitCandidate x = *shape;
                        x.B = B;
                        x.accum = s->target_batch / B;
                        x.strategy = (CkptStrategy){ FIT_STRATEGIES[k], 0 };
                        x.precision = (FitPrecision)p;
                        x.optimizer = FIT_OPTIMIZERS[o];
                        x.offload = off;
                        fit_predict(&x);
                        c[n++] = x;
                    }
        }
    return n;
}

bool fit_lora_rank_useful(int rank, const GptConfig *base)
{
    return 2 * rank < base->n_embd;
}

/* On a base: full fine-tuning, then each rank (largest first), plain then QLoRA. */
static int fine_tuning_candidates(const FitSpace *s, FitCandidate **out)
{
    int per_way = FIT_NSTRATEGIES * s->n_batches * FIT_NPRECISIONS * FIT_NOPTIMIZERS *
                  (1 + (int)s->offload);
    FitCandidate *c = malloc((size_t)(1 + 2 * FIT_N_LORA_RANKS) * per_way * sizeof *c);
    if (!c)
        return *out = NULL, 0;
    FitCandidate shape = { .model = s->base_model, .T = s->T, .threads = s->threads,
                           .base = s->base };
    int n = add_ways(s, &shape, c);
    for (int r = 0; r < FIT_N_LORA_RANKS; r++)
        for (int q = 0; q < 2 && fit_lora_rank_useful(FIT_LORA_RANKS[r], &s->base_model); q++) {
            shape.lora = (McLora){ .rank = FIT_LORA_RANKS[r],
                                   .targets = fit_lora_targets(&s->base_model), .qlora = q };
            n += add_ways(s, &shape, c + n);
        }
    *out = c;
    return n;
}

int fit_candidates(const FitSpace *s, FitCandidate **out)
{
    if (s->base)
        return fine_tuning_candidates(s, out);
    int n_max = s->n_layers * s->n_widths * FIT_NSTRATEGIES * s->n_batches * FIT_NPRECISIONS *
                FIT_NOPTIMIZERS * (1 + (int)s->offload);
    FitCandidate *c = malloc((size_t)n_max * sizeof *c);
    if (!c)
        return *out = NULL, 0;
    int n = 0;
    for (int l = 0; l < s->n_layers; l++)
        for (int w = 0; w < s->n_widths; w++) {
            FitCandidate shape = fit_shape(s->V, s->T, s->layers[l], s->widths[w], s->threads);
            n += add_ways(s, &shape, c + n);
        }
    *out = c;
    return n;
}

/* One shape trained one way: full, or LoRA at one rank, plain or QLoRA. */
static bool same_shape(const FitCandidate *a, const FitCandidate *b)
{
    return a->model.n_layer == b->model.n_layer && a->model.n_embd == b->model.n_embd &&
           a->lora.rank == b->lora.rank && a->lora.qlora == b->lora.qlora;
}

/* The order of preference of the ways to fine-tune (fit_search.h): full (rank 0), then the
 * larger rank, plain before QLoRA. */
static int method_order(const FitCandidate *c)
{
    return c->lora.rank == 0 ? 0 : 2 * (1 << 20) / c->lora.rank + c->lora.qlora;
}

/* Largest first; equal counts (never for different shapes here, but kept total) by depth;
 * one shape's ways of fine-tuning in the order of preference. */
static int by_params(const void *pa, const void *pb)
{
    const FitCandidate *a = pa, *b = pb;
    if (a->params != b->params)
        return a->params > b->params ? -1 : 1;
    if (a->model.n_layer != b->model.n_layer)
        return (a->model.n_layer > b->model.n_layer) - (a->model.n_layer < b->model.n_layer);
    return (method_order(a) > method_order(b)) - (method_order(a) < method_order(b));
}

int fit_filter_sort(FitCandidate *c, int n, size_t budget)
{
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (c[i].predicted > (double)budget)
            continue;
        bool seen = false;      /* an earlier (preferred) candidate of this shape fits */
        for (int j = 0; j < kept && !seen; j++)
            seen = same_shape(&c[j], &c[i]);
        if (!seen)
            c[kept++] = c[i];
    }
    qsort(c, (size_t)kept, sizeof *c, by_params);
    return kept;
}

const char *fit_method(const FitCandidate *c, char *buf, size_t len)
{
    if (!c->base)
        snprintf(buf, len, "from scratch");
    else if (c->lora.rank == 0)
        snprintf(buf, len, "full fine-tuning");
    else
        snprintf(buf, len, "%s r %d", c->lora.qlora ? "QLoRA" : "LoRA", c->lora.rank);
    return buf;
}

const char *fit_describe(const FitCandidate *c, char *buf, size_t len)
{
    char s[32], m[32] = "";
    if (c->base) {
        m[0] = ',', m[1] = ' ';
        fit_method(c, m + 2, sizeof m - 2);
    }
    snprintf(buf, len, "L%d C%d H%d, B %d x %d, %s, %s, %s%s%s", c->model.n_layer,
             c->model.n_embd, c->model.n_head, c->B, c->accum, ckpt_name(c->strategy, s, sizeof s),
             FIT_PRECISION_NAMES[c->precision], MC_OPTIMIZER_NAMES[c->optimizer],
             c->offload ? ", offload" : "", m);
    return buf;
}

/* One argument after another, each formatted into one buffer. */
static void arg(FitArgFn fn, void *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void arg(FitArgFn fn, void *ctx, const char *fmt, ...)
{
    char a[1100];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a, sizeof a, fmt, ap);
    va_end(ap);
    fn(ctx, a);
}

void fit_each_arg(const FitCandidate *c, FitArgFn fn, void *ctx)
{
    char s[32], t[64];
    arg(fn, ctx, "--seq"), arg(fn, ctx, "%d", c->T);
    if (!c->base) {
        arg(fn, ctx, "--layers"), arg(fn, ctx, "%d", c->model.n_layer);
        arg(fn, ctx, "--heads"), arg(fn, ctx, "%d", c->model.n_head);
        arg(fn, ctx, "--embd"), arg(fn, ctx, "%d", c->model.n_embd);
    } else {
        arg(fn, ctx, "--load-base"), arg(fn, ctx, "%s", c->base);
    }
    if (c->lora.rank > 0) {
        arg(fn, ctx, "--lora"), arg(fn, ctx, "%d", c->lora.rank);
        arg(fn, ctx, "--lora-targets");
        arg(fn, ctx, "%s", lora_targets_str(c->lora.targets, t, sizeof t));
        if (c->lora.qlora)
            arg(fn, ctx, "--qlora");
    }
    arg(fn, ctx, "--batch"), arg(fn, ctx, "%d", c->B);
    arg(fn, ctx, "--accum"), arg(fn, ctx, "%d", c->accum);
    arg(fn, ctx, "--checkpoint"), arg(fn, ctx, "%s", ckpt_name(c->strategy, s, sizeof s));
    arg(fn, ctx, "--precision"), arg(fn, ctx, "%s", FIT_PRECISION_NAMES[c->precision]);
    arg(fn, ctx, "--optimizer"), arg(fn, ctx, "%s", MC_OPTIMIZER_NAMES[c->optimizer]);
    if (c->offload)
        arg(fn, ctx, "--offload"), arg(fn, ctx, "optimizer");
}

/* fit_flags' buffer and how much of it is used. */
typedef struct {
    char  *buf;
    size_t len, used;
} Joined;

static void join(void *ctx, const char *a)
{
    Joined *j = ctx;
    if (j->used < j->len)
        j->used += (size_t)snprintf(j->buf + j->used, j->len - j->used, "%s%s",
                                    j->used ? " " : "", a);
}

const char *fit_flags(const FitCandidate *c, char *buf, size_t len)
{
    Joined j = { .buf = buf, .len = len };
    buf[0] = '\0';
    fit_each_arg(c, join, &j);
    return buf;
}

double fit_recompute_factor(const FitCandidate *c)
{
    int L = c->model.n_layer;
    return (2.0 + (double)ckpt_formula_total(c->strategy, L) / L) / 3.0;
}

/* Measurement in a child ---------------------------------------------------------------------- */

/* The optimizer as the trainer names it. */
static TrainOptimizer train_optimizer(McOptimizer o)
{
    switch (o) {
    case MC_ADAM8BIT: return TRAIN_ADAM8BIT;
    case MC_ADAFACTOR: return TRAIN_ADAFACTOR;
    default: return TRAIN_ADAMW;
    }
}

/* The trainer as train_gpt builds it (run_lora_trainer_new, run/lora.c): from scratch; on a
 * base with --lora, trainer_new_lora (adapters seeded with seed + 1, as train_gpt does); on a
 * base without, trainer_new and the base read through the masters. A
 * base that cannot be read ends the child with the message, which the parent reports. */
static Trainer *new_trainer(const FitCandidate *c, const TrainerConfig *cfg)
{
    SnapshotError err;
    if (c->base && c->lora.rank > 0) {
        LoraConfig lc = lora_config_default();
        lc.rank = c->lora.rank;
        lc.targets = c->lora.targets;
        lc.qlora = c->lora.qlora;
        Trainer *tr = trainer_new_lora(cfg, &lc, cfg->seed + 1, c->base, &err);
        if (!tr)
            tensor_fatal("%s", err.message);
        return tr;
    }
    Trainer *tr = trainer_new(cfg);
    if (c->base) {
        optim_expose_masters(tr->optim);
        bool ok = gpt_snapshot_read_weights(tr->model, c->base, &err);
        optim_pack_masters(tr->optim);
        if (!ok)
            tensor_fatal("%s", err.message);
    }
    return tr;
}

/* In the child: the trainer train_gpt would build (optim/train.h: model, optimizer, master
 * weights and packing under the policy, the checkpointing strategy) under the budget, set
 * before the model exists as train_gpt --mem-budget sets it, then an update of accum
 * micro-batches on random tokens, a second one timed with FIT_TIMED (the first pays for
 * starting the threads and for the pages the system hands out on first touch, which a training
 * run pays once), and with FIT_EVAL an evaluation of B rows. The peaks cover all of it. */
static void child_step(const FitCandidate *c, size_t budget, unsigned what, int result_fd)
{
    mem_set_budget(MEM_ALL, budget);
    mem_reset_peaks();
    TrainerConfig cfg = trainer_config_default();
    cfg.model = c->model;
    cfg.optimizer = train_optimizer(c->optimizer);
    cfg.local.checkpoint = c->strategy;
    cfg.local.offload = c->offload ? TRAIN_OFFLOAD_OPTIMIZER : TRAIN_OFFLOAD_NONE;
    policy_preset(FIT_PRECISION_NAMES[c->precision], &cfg.policy);
    Trainer *tr = new_trainer(c, &cfg);
    size_t count = (size_t)c->accum * c->B * c->T;
    /* Token arrays are the program's, not tensor storage: plain malloc, uncounted. */
    int *tokens = malloc(count * sizeof *tokens), *targets = malloc(count * sizeof *targets);
    if (!tokens || !targets)
        _exit(4);
    Rng rng = rng_new(1, RNG_STREAM_DATA);
    for (size_t i = 0; i < count; i++) {
        tokens[i] = (int)rng_below(&rng, (uint32_t)c->model.vocab_size);
        targets[i] = (int)rng_below(&rng, (uint32_t)c->model.vocab_size);
    }
    trainer_step_accum(tr, tokens, targets, c->B, c->T, c->accum, 1e-3);
    double t0 = omp_get_wtime();
    bool timed = what & FIT_TIMED;
    if (timed)
        trainer_step_accum(tr, tokens, targets, c->B, c->T, c->accum, 1e-3);
    FitMeasure m = { .fits = true, .seconds = timed ? omp_get_wtime() - t0 : 0 };
    /* The evaluation of B rows, as train_gpt's: it runs the model without recording, on
     * the trainer's tape, which holds every block's output until trainer_eval_done; under
     * checkpointing that can be more than a training step holds. */
    if (what & FIT_EVAL) {
        double loss;
        trainer_eval(tr, tokens, targets, c->B, c->T, &loss);
        trainer_eval_done(tr);
    }
    for (int k = 0; k <= MEM_NCAT; k++)
        m.peak[k] = (double)mem_peak((MemCategory)k);
    /* A struct under PIPE_BUF bytes is written whole. */
    if (write(result_fd, &m, sizeof m) != (ssize_t)sizeof m)
        _exit(3);
    _exit(0);
}

FitMeasure fit_measure(const FitCandidate *c, size_t budget, unsigned what)
{
    FitMeasure m = { .fits = false };
    int result[2], message[2];
    if (pipe(result) != 0)
        return snprintf(m.error, sizeof m.error, "pipe: %s", strerror(errno)), m;
    if (pipe(message) != 0) {
        close(result[0]);
        close(result[1]);
        return snprintf(m.error, sizeof m.error, "pipe: %s", strerror(errno)), m;
    }
    fflush(NULL);       /* nothing buffered is printed twice */
    pid_t pid = fork();
    if (pid == 0) {
        close(result[0]);
        close(message[0]);
        dup2(message[1], STDERR_FILENO);
        child_step(c, budget, what, result[1]);
    }
    close(result[1]);
    close(message[1]);
    if (pid < 0) {
        close(result[0]);
        close(message[0]);
        return snprintf(m.error, sizeof m.error, "fork: %s", strerror(errno)), m;
    }
    /* The messages first, to the end: a child refused by the budget may write more than a pipe
     * holds (a sanitizer's leak report at exit), and would wait for us forever. The result
     * pipe cannot fill: one struct under PIPE_BUF bytes. */
    char text[sizeof m.error], rest[4096];
    size_t t = outfile_read_all(message[0], text, sizeof text - 1);
    text[t] = '\0';
    while (outfile_read_all(message[0], rest, sizeof rest) > 0)
        ;
    FitMeasure got;
    size_t n = outfile_read_all(result[0], &got, sizeof got);
    close(result[0]);
    close(message[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (n == sizeof got && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return got;
    char *nl = strchr(text, '\n');
    if (nl)
        *nl = '\0';
    size_t name = strlen(tensor_program());
    const char *msg = strncmp(text, tensor_program(), name) == 0 &&
                      strncmp(text + name, ": ", 2) == 0 ? text + name + 2 : text;
    if (*msg)
        snprintf(m.error, sizeof m.error, "%s", msg);
    else if (WIFSIGNALED(status))
        snprintf(m.error, sizeof m.error, "the step died of signal %d", WTERMSIG(status));
    else
        snprintf(m.error, sizeof m.error, "the step exited with status %d",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return m;
}

/* The search ----------------------------------------------------------------------------------- */

/* Model FLOPs of one update: 6 per parameter per token (forward 2, backward 4), the recomputed
 * forwards on top; attention's T^2 terms are left out, as the rate absorbs them. */
static double update_flops(const FitCandidate *c)
{
    /* A frozen weight's backward computes dX alone, not dW: 4 per parameter per token (the
     * adapters' own products, of width r, left out). */
    double per_param = c->lora.rank > 0 ? 4.0 : 6.0;
    return per_param * (double)c->params * c->B * c->T * c->accum * fit_recompute_factor(c);
}

FitSearch fit_search(const FitSpace *space, const FitGoal *goal, FILE *log)
{
    FitSearch s = { .winner = -1 };
    FitCandidate *all;
    s.n_candidates = fit_candidates(space, &all);
    s.smallest_predicted = INFINITY;
    for (int i = 0; i < s.n_candidates; i++)
        if (all[i].predicted < s.smallest_predicted)
            s.smallest_predicted = all[i].predicted;
    s.n = fit_filter_sort(all, s.n_candidates, goal->budget);
    s.rows = calloc(s.n ? (size_t)s.n : 1, sizeof *s.rows);
    if (!s.rows) {
        free(all);
        s.n = 0;
        return s;
    }
    for (int i = 0; i < s.n; i++)
        s.rows[i] = (FitRow){ .c = all[i], .verdict = "not measured" };
    free(all);

    /* The rate is the highest measured so far: optimistic, so a candidate is skipped only when
     * even the best speed seen cannot give it min_steps updates. When a measurement raises it,
     * the pass starts again from the top, where larger candidates skipped at the old rate may
     * now qualify. Every pass but the last measures a candidate, and none is measured twice. */
    double rate = 0;
    bool again = true;
    while (again) {
        again = false;
        for (int i = 0; i < s.n && !again; i++) {
            FitRow *r = &s.rows[i];
            if (r->measured)
                continue;
            if (s.winner >= 0 && i > s.winner && s.measured >= goal->verify)
                break;
            if (rate > 0) {
                r->update_seconds = update_flops(&r->c) / rate;
                r->steps = (long)(goal->train_seconds / r->update_seconds);
                if (r->steps < goal->min_steps) {
                    r->verdict = "too slow (predicted)";
                    continue;
                }
            }
            if (log) {
                char d[128];
                fprintf(log, "measuring %s: %zu parameters, %.0f bytes predicted\n",
                        fit_describe(&r->c, d, sizeof d), r->c.params, r->c.predicted);
                fflush(log);
            }
            r->m = fit_measure(&r->c, goal->budget, FIT_TIMED | FIT_EVAL);
            r->measured = true;
            s.measured++;
            if (!r->m.fits) {
                r->verdict = "over budget (measured)";
                continue;
            }
            r->update_seconds = r->m.seconds;
            r->steps = (long)(goal->train_seconds / r->update_seconds);
            double measured_rate = update_flops(&r->c) / r->update_seconds;
            if (measured_rate > rate) {
                again = rate > 0 && i > 0;      /* rows above i may have been skipped */
                rate = measured_rate;
            }
            if (r->steps < goal->min_steps) {
                r->verdict = "too slow (measured)";
                continue;
            }
            r->verdict = "fits";
            if (s.winner < 0 || i < s.winner)
                s.winner = i;
        }
    }
    if (s.winner >= 0)
        s.rows[s.winner].verdict = "winner";
    return s;
}

void fit_search_free(FitSearch *s)
{
    free(s->rows);
    s->rows = NULL;
    s->n = 0;
}

void fit_search_print(const FitSearch *s, const FitGoal *g, FILE *out)
{
    fprintf(out, "\n%d candidates listed, %d shapes predicted to fit (the preferred way to "
            "train each), %d measured\n", s->n_candidates, s->n, s->measured);
    fprintf(out, "%-4s %-50s %9s %9s %9s %9s %9s %7s  %s\n", "rank", "setup", "params",
            "pred MiB", "meas MiB", "meas-pred", "update s", "updates", "verdict");
    /* Every row up to the last one measured, and three more for context. */
    int last = 0;
    for (int i = 0; i < s->n; i++)
        if (s->rows[i].measured)
            last = i;
    for (int i = 0; i < s->n && i <= last + 3; i++) {
        const FitRow *r = &s->rows[i];
        char d[128], meas[32] = "-", diff[32] = "-", upd[32] = "-", steps[32] = "-";
        if (r->measured && r->m.fits) {
            snprintf(meas, sizeof meas, "%.2f", mem_mib(r->m.peak[MEM_ALL]));
            snprintf(diff, sizeof diff, "%+.0f", r->m.peak[MEM_ALL] - r->c.predicted);
        }
        if (r->update_seconds > 0) {
            snprintf(upd, sizeof upd, "%.3f", r->update_seconds);
            snprintf(steps, sizeof steps, "%ld", r->steps);
        }
        fprintf(out, "%-4d %-50s %9zu %9.2f %9s %9s %9s %7s  %s\n", i + 1,
                fit_describe(&r->c, d, sizeof d), r->c.params, mem_mib(r->c.predicted), meas, diff,
                upd, steps, r->verdict);
        if (r->measured && !r->m.fits)
            fprintf(out, "     %s\n", r->m.error);
    }
    fprintf(out, "(pred: the memory calculator's total, the sum of the category peaks; meas: the "
            "peak of the trainer built and run for two updates under the budget of %zu bytes, "
            "meas-pred in bytes; updates: in %.0fs at the measured update time, or at the "
            "fastest FLOP rate measured)\n", g->budget, g->train_seconds);
}

/* The speed of a full GPT training step, side by side with PyTorch, and the model FLOP
 * utilisation against the machine's measured peak.
 *
 * One step is: gpt_loss (forward to the mean cross-entropy), tape_backward, an AdamW update,
 * clearing the gradients and tape_reset. Tokens are random, targets are the next tokens and all
 * of them count. After some untimed steps, the median of the timed steps is reported at
 *     small: V=65 T=64  L=4 H=4 C=128 B=16      target: tokens/s >= 1.5 x PyTorch's
 *     large: V=65 T=128 L=6 H=6 C=384 B=8       target: tokens/s >= 1.0 x PyTorch's,
 *                                                       model FLOP utilisation >= 60%
 * and memory must be planned up front: the accounting allocator's system allocations may not
 * grow during the timed steps (mem_stats().system_allocations before and after).
 *
 * Both sides use 2 threads. PyTorch runs bench/gpt_torch_bench.py (the reference module of
 * tests/reference/gpt_reference.py) in a child process with torch.set_num_threads(2) and
 * OMP_WAIT_POLICY=PASSIVE, its best setting here, when /usr/bin/python3 can import torch (the
 * comparison is skipped with a line saying so otherwise). tapegrad runs twice: in this process
 * with the wait policy it was started with (OpenMP's default unless the caller set one), and in
 * a child with OMP_WAIT_POLICY=PASSIVE like PyTorch's. That pair is the measurement behind who
 * owns the cores (docs/performance.md): spinning threads start the next parallel region sooner
 * on an idle machine and lose badly to any other process that wants the cores. The ratio
 * targets are checked with the faster of the two, as PyTorch gets its best setting.
 *
 * Model FLOP utilisation = (6 N + 12 L T C) x tokens/s / peak, with N the parameter count (the
 * tied head counted once): 6 N is the forward (2 N) and backward (4 N) multiply-adds of the
 * weight products per token, 12 L T C the attention scores and weighted sums. The peak is
 * measured here (examples/common/peak_fma.h) on 1 thread and on 2 for each vector width the
 * CPU has; the machine's peak for a width is the larger of the 2-thread figure and twice the
 * 1-thread one (other processes can only slow a measurement down). It is reported against two peaks: AVX2's
 * (32 FLOP per cycle per core, the figure the issue quotes, and the widest that the sgemm
 * kernels OpenBLAS is running here can use when OPENBLAS_CORETYPE=Haswell is set) and
 * AVX-512's, the hardware's.
 *
 * A benchmark, not a test: it prints PASS or FAIL for each target and exits 0 either way.
 * Arguments, for profiling: a case name (small, large) runs only that case; --no-torch skips
 * PyTorch; --child NAME is how the PASSIVE run is started (prints "ms_per_step X"). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autograd/parallel.h"
#include "autograd/rng.h"
#include "bench/bench_util.h"
#include "examples/common/peak_fma.h"
#include "nn/gpt.h"
#include "optim/adamw.h"

/* The best of PEAK_RUNS short runs (about 12 ms each) is taken as the peak: on a busy machine
 * some run still gets a core to itself. */
enum { THREADS = 2, MAX_STEPS = 64, PEAK_RUNS = 20 };

static const char *const PYTHON = "/usr/bin/python3";
static const char *const TORCH_SCRIPT = TAPEGRAD_SOURCE_DIR "/bench/gpt_torch_bench.py";

typedef struct {
    const char *name;
    GptConfig   cfg;
    int         B, warmup, steps;
    double      min_ratio;        /* target: our tokens/s over PyTorch's */
    double      min_mfu;          /* target model FLOP utilisation, 0 for none */
} BenchCase;

static const BenchCase CASES[] = {
    { "small", { .vocab_size = 65, .max_seq = 64, .n_layer = 4, .n_head = 4, .n_embd = 128,
                 .tied = true, .fused_qkv = true }, 16, 3, 21, 1.5, 0.0 },
    { "large", { .vocab_size = 65, .max_seq = 128, .n_layer = 6, .n_head = 6, .n_embd = 384,
                 .tied = true, .fused_qkv = true }, 8, 2, 9, 1.0, 0.6 },
};
enum { N_CASES = sizeof CASES / sizeof CASES[0] };

typedef struct {
    double ms;                    /* median per step */
    size_t allocs_before, allocs_after;
} OurRun;

/* Machine peaks (GFLOP/s with THREADS threads); 0 where the CPU lacks the unit. */
typedef struct {
    double avx512, avx2;
} Peaks;

static double flops_per_token(const BenchCase *c, size_t n_params)
{
    const GptConfig *g = &c->cfg;
    return 6.0 * (double)n_params + 12.0 * g->n_layer * g->max_seq * (double)g->n_embd;
}

/* B sequences of T + 1 random tokens: tokens are the first T, targets the last T. */
static void random_batch(const BenchCase *c, int *tokens, int *targets)
{
    int T = c->cfg.max_seq, V = c->cfg.vocab_size;
    Rng rng = rng_new(7, RNG_STREAM_DATA);
    for (int b = 0; b < c->B; b++) {
        int prev = (int)rng_below(&rng, (uint32_t)V);
        for (int t = 0; t < T; t++) {
            int next = (int)rng_below(&rng, (uint32_t)V);
            tokens[b * T + t] = prev;
            targets[b * T + t] = next;
            prev = next;
        }
    }
}

static OurRun run_ours(const BenchCase *c)
{
    int n_tok = c->B * c->cfg.max_seq;
    int *tokens = malloc(sizeof(int) * (size_t)n_tok), *targets = malloc(sizeof(int) * n_tok);
    if (!tokens || !targets)
        tensor_fatal("bench_gpt: out of memory for %d tokens", n_tok);
    random_batch(c, tokens, targets);
    Gpt *m = gpt_new(&c->cfg, 1);
    int n_params;
    Tensor *const *params = gpt_params(m, &n_params);
    AdamW *adam = adamw_new(params, n_params, adamw_defaults());
    Tape *tape = tape_new();
    double times[MAX_STEPS];
    OurRun r = { 0 };
    for (int i = 0; i < c->warmup + c->steps; i++) {
        if (i == c->warmup)
            r.allocs_before = mem_stats().system_allocations;
        double t0 = peak_now_s();
        Tensor *loss = gpt_loss(m, tape, tokens, targets, c->B, c->cfg.max_seq);
        tape_backward(tape, loss);
        optim_step(&adam->base, 1e-4);
        optim_zero_grad(&adam->base);
        tape_reset(tape);
        if (i >= c->warmup)
            times[i - c->warmup] = (peak_now_s() - t0) * 1e3;
    }
    r.allocs_after = mem_stats().system_allocations;
    r.ms = bench_median(times, c->steps);
    tape_free(tape);
    optim_free(&adam->base);
    gpt_free(m);
    free(tokens);
    free(targets);
    return r;
}

/* Runs cmd and returns the number on its "ms_per_step X" line, or NAN (printing what it said
 * instead) when it fails. */
static double ms_from_child(const char *who, const char *cmd)
{
    char line[256];
    double ms = NAN;
    FILE *p = popen(cmd, "r");
    if (!p) {
        printf("%s: could not start a child process\n", who);
        return NAN;
    }
    while (fgets(line, sizeof line, p))
        if (sscanf(line, "ms_per_step %lf", &ms) != 1)
            printf("%s: %s", who, line);
    if (pclose(p) != 0)
        ms = NAN;
    return ms;
}

/* This same program, in a child started with OMP_WAIT_POLICY=PASSIVE (OpenMP reads the policy
 * when a process starts, so it cannot change within one). */
static double run_ours_passive(const BenchCase *c)
{
    char self[512], cmd[700];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return NAN;
    self[len] = '\0';
    snprintf(cmd, sizeof cmd, "OMP_WAIT_POLICY=PASSIVE '%s' --child %s 2>&1", self, c->name);
    return ms_from_child("tapegrad (passive)", cmd);
}

static bool torch_available(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s -c 'import torch' >/dev/null 2>&1", PYTHON);
    return system(cmd) == 0;
}

static double run_torch(const BenchCase *c)
{
    const GptConfig *g = &c->cfg;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "OMP_WAIT_POLICY=PASSIVE %s '%s' %d %d %d %d %d %d %d %d 2>&1",
             PYTHON, TORCH_SCRIPT, g->vocab_size, g->max_seq, g->n_layer, g->n_head, g->n_embd,
             c->B, c->warmup, c->steps);
    return ms_from_child("torch", cmd);
}

static const char *verdict(bool pass) { return pass ? "PASS" : "FAIL (target missed)"; }

static void print_row(const BenchCase *c, const char *who, const char *policy, double ms,
                      double fpt, const Peaks *pk)
{
    if (isnan(ms)) {
        printf("%s\t%s\t%s\t-\t-\t-\t-\t-\n", c->name, who, policy);
        return;
    }
    double tps = (double)c->B * c->cfg.max_seq / (ms * 1e-3), gflops = fpt * tps * 1e-9;
    printf("%s\t%s\t%s\t%.1f\t%.0f\t%.1f\t", c->name, who, policy, ms, tps, gflops);
    if (pk->avx512 > 0.0)
        printf("%.1f%%", 100.0 * gflops / pk->avx512);
    else
        printf("-");
    printf("\t%.1f%%\n", 100.0 * gflops / pk->avx2);
}

static int check_mfu(const BenchCase *c, double mfu, const char *which, double peak)
{
    bool ok = mfu >= c->min_mfu;
    printf("  %s model FLOP utilisation vs the %s: %.1f%% of %.1f GFLOP/s (target >= %.0f%%) "
           "%s\n", c->name, which, 100.0 * mfu, peak, 100.0 * c->min_mfu, verdict(ok));
    return !ok;
}

/* Prints the case's rows and targets; returns the number of targets missed. */
static int report(const BenchCase *c, const OurRun *own, double passive_ms, double torch_ms,
                  const Peaks *pk)
{
    Gpt *m = gpt_new(&c->cfg, 1);
    double fpt = flops_per_token(c, gpt_n_params(m));
    gpt_free(m);
    const char *policy = getenv("OMP_WAIT_POLICY");
    print_row(c, "tapegrad", policy ? policy : "default", own->ms, fpt, pk);
    print_row(c, "tapegrad", "PASSIVE", passive_ms, fpt, pk);
    print_row(c, "pytorch", "PASSIVE", torch_ms, fpt, pk);
    double best = isnan(passive_ms) || own->ms <= passive_ms ? own->ms : passive_ms;
    int missed = 0;
    if (!isnan(torch_ms)) {
        bool ok = torch_ms / best >= c->min_ratio;
        printf("  %s tokens/s vs PyTorch: %.2fx with the default wait policy, %.2fx with "
               "PASSIVE (target >= %.1fx, the faster counts) %s\n", c->name, torch_ms / own->ms,
               isnan(passive_ms) ? 0.0 : torch_ms / passive_ms, c->min_ratio, verdict(ok));
        missed += !ok;
    }
    if (c->min_mfu > 0.0) {
        double gflops = fpt * c->B * c->cfg.max_seq / (best * 1e-3) * 1e-9;
        missed += check_mfu(c, gflops / pk->avx2,
                            "AVX2 peak (32 FLOP/cycle/core: the issue's figure, and all that "
                            "AVX2 sgemm kernels can reach)", pk->avx2);
        if (pk->avx512 > 0.0)
            missed += check_mfu(c, gflops / pk->avx512, "AVX-512 peak (the hardware's)",
                                pk->avx512);
    }
    bool flat = own->allocs_after == own->allocs_before;
    printf("  %s system allocations: %zu before the timed steps, %zu after (must not grow) %s\n",
           c->name, own->allocs_before, own->allocs_after, verdict(flat));
    return missed + !flat;
}

/* The 1-minute load average (Linux), or -1: other jobs on the machine take cores from both
 * sides and make every time here longer, so the output says how busy the machine was. */
static double load_average(void)
{
    double load = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1)
            load = -1.0;
        fclose(f);
    }
    return load;
}

/* Per-core GFLOP/s of every vector width the CPU has, and the machine peaks for THREADS. */
static Peaks measure_peaks(void)
{
    Peaks pk = { 0 };
    printf("peak fp32 FMA throughput (best of %d runs, %d independent accumulators):\n", PEAK_RUNS,
           PEAK_ACC);
    for (int isa = PEAK_AVX512; isa <= PEAK_PORTABLE; isa++) {
        if (!peak_isa_available((PeakIsa)isa))
            continue;
        double one = peak_gflops((PeakIsa)isa, 1, PEAK_RUNS);
        double two = peak_gflops((PeakIsa)isa, THREADS, PEAK_RUNS);
        double machine = fmax(two, THREADS * one);
        printf("  %-8s %.1f GFLOP/s per core on 1 thread; %.1f with %d threads; machine peak "
               "%.1f GFLOP/s\n", peak_isa_name[isa], one, two, THREADS, machine);
        if (isa == PEAK_AVX512)
            pk.avx512 = machine;
        else if (isa == PEAK_AVX2)
            pk.avx2 = machine;
        else if (pk.avx2 == 0.0)
            pk.avx2 = machine;   /* no AVX2: the portable loop stands in */
    }
    const char *core = getenv("OPENBLAS_CORETYPE");
    printf("OpenBLAS runs its %s kernels (OPENBLAS_CORETYPE%s%s)\n", openblas_get_corename(),
           core ? "=" : " unset", core ? core : "");
    return pk;
}

int main(int argc, char **argv)
{
    const char *only = NULL, *child = NULL;
    bool want_torch = true;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-torch") == 0)
            want_torch = false;
        else if (strcmp(argv[i], "--child") == 0 && i + 1 < argc)
            child = argv[++i];
        else
            only = argv[i];
    }
    par_set_threads(THREADS);
    if (child) {
        for (int i = 0; i < N_CASES; i++)
            if (strcmp(CASES[i].name, child) == 0)
                printf("ms_per_step %.3f\n", run_ours(&CASES[i]).ms);
        return 0;
    }
    printf("GPT training step (forward, backward, AdamW, zero grad), %d threads, median of the "
           "timed steps; load average %.2f\n", THREADS, load_average());
    Peaks pk = measure_peaks();
    bool torch = want_torch && torch_available();
    if (want_torch && !torch)
        printf("torch: %s cannot import torch; the PyTorch comparison is skipped "
               "(install python3-torch to run it)\n", PYTHON);
    printf("case\twho\twait_policy\tms_per_step\ttokens_per_s\tGFLOP_per_s\tMFU_avx512"
           "\tMFU_avx2\n");
    int missed = 0;
    for (int i = 0; i < N_CASES; i++) {
        const BenchCase *c = &CASES[i];
        if (only && strcmp(only, c->name) != 0)
            continue;
        OurRun own = run_ours(c);
        double passive_ms = run_ours_passive(c);
        double torch_ms = torch ? run_torch(c) : NAN;
        missed += report(c, &own, passive_ms, torch_ms, &pk);
    }
    printf("load average at the end %.2f (on a machine busy with other jobs every time here is "
           "longer; compare on an idle one)\n", load_average());
    printf("%s\n", missed ? "some targets missed (a benchmark: exit status 0 all the same)"
                          : "all targets met");
    return 0;
}

/* scaling_laws' analysis: the fits of approaches 2 and 3 and of Kaplan's L(N), the tokens per
 * parameter they imply, the TSV files and the figure (scaling_laws.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/scaling_fit.h"
#include "autograd/rng.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "examples/common/tsv.h"
#include "examples/scaling_laws/scaling_laws.h"

enum { MAX_BUDGETS = 32, LINE_POINTS = 41, CURVE_POINTS = 41 };

/* What approach 2 finds at one budget. */
typedef struct {
    double budget;
    int    runs;
    double c[3];            /* loss = c0 + c1 log N + c2 log^2 N */
    bool   ok;              /* the parabola opens upwards */
    bool   inside;          /* its vertex lies between the smallest and largest N trained */
    double N_opt, D_opt, loss_opt, n_lo, n_hi;
} Profile;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The distinct budgets, ascending. */
static int distinct_budgets(const ScalingRun *runs, int n, double *out)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < k; j++)
            seen |= out[j] == runs[i].budget;
        if (!seen && k < MAX_BUDGETS)
            out[k++] = runs[i].budget;
    }
    qsort(out, (size_t)k, sizeof *out, cmp_double);
    return k;
}

static Profile fit_profile(const ScalingRun *runs, int n, double budget)
{
    Profile p = { .budget = budget, .n_lo = INFINITY, .n_hi = 0 };
    double x[512], y[512];
    for (int i = 0; i < n && p.runs < 512; i++)
        if (runs[i].budget == budget) {
            x[p.runs] = log(runs[i].N);
            y[p.runs++] = runs[i].val_loss;
            p.n_lo = fmin(p.n_lo, runs[i].N);
            p.n_hi = fmax(p.n_hi, runs[i].N);
        }
    double xm;
    p.ok = fit_parabola(x, y, p.runs, p.c) && fit_parabola_min(p.c, &xm);
    if (p.ok) {
        p.N_opt = exp(xm);
        p.D_opt = budget / (6 * p.N_opt);
        p.loss_opt = p.c[0] + p.c[1] * xm + p.c[2] * xm * xm;
        p.inside = p.N_opt >= p.n_lo && p.N_opt <= p.n_hi;
    }
    return p;
}

/* The q-quantile of v[n] (sorted in place), by linear interpolation. */
static double quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double pos = q * (n - 1);
    int i = (int)pos;
    return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[n - 1];
}

static double tokens_per_param(const ChinLaw *p, double C)
{
    double N, D;
    chin_optimal(p, C, &N, &D);
    return D / N;
}

enum { B_E, B_A, B_B, B_ALPHA, B_BETA, B_EXP_A, B_TPP, N_BOOT_VALUES };
static const char *const BOOT_NAMES[N_BOOT_VALUES] = { "E", "A", "B", "alpha", "beta",
                                                       "a=beta/(alpha+beta)",
                                                       "D/N at largest C" };

/* Refits approach 3 on `count` resamples of the runs (with replacement), from the small grid
 * and from the full fit; prints the spread of each constant (median, 5th and 95th
 * percentiles) and writes it to the fit file. */
static void bootstrap(const ScalingRun *runs, int n, const ChinLaw *full, double C_max,
                      const AnalyseOptions *o, TsvWriter *fit_tsv)
{
    if (o->bootstrap < 2)
        return;
    double *vals[N_BOOT_VALUES];
    for (int k = 0; k < N_BOOT_VALUES; k++)
        vals[k] = calloc((size_t)o->bootstrap, sizeof(double));
    double *N = malloc((size_t)n * 3 * sizeof(double)), *D = N + n, *L = N + 2 * n;
    Rng rng = rng_new(o->seed, RNG_STREAM_DATA);
    ChinGrid grid = chin_grid_small();
    int good = 0;
    double start = progress_now();
    for (int r = 0; r < o->bootstrap; r++) {
        for (int i = 0; i < n; i++) {
            int j = (int)rng_below(&rng, (uint32_t)n);
            N[i] = runs[j].N;
            D[i] = runs[j].D;
            L[i] = runs[j].val_loss;
        }
        ChinFit f;
        if (!fit_chinchilla(N, D, L, n, 1e-3, &grid, full, &f))
            continue;
        double v[N_BOOT_VALUES] = { f.law.E, f.law.A, f.law.B, f.law.alpha, f.law.beta,
                                    f.law.beta / (f.law.alpha + f.law.beta),
                                    tokens_per_param(&f.law, C_max) };
        for (int k = 0; k < N_BOOT_VALUES; k++)
            vals[k][good] = v[k];
        good++;
    }
    printf("\nbootstrap of approach 3: %d of %d resamples of the %d runs fitted (%.1f s)\n",
           good, o->bootstrap, n, progress_now() - start);
    /* Medians and percentiles, not means: a resample that leaves out the runs pinning one term
     * lets its constant run off (A of 1e100 with alpha of 10 fits as well as any), and one such
     * value swamps a mean. */
    printf("  %-22s %12s %12s %12s %12s\n", "constant", "full fit", "median", "5%", "95%");
    double full_v[N_BOOT_VALUES] = { full->E, full->A, full->B, full->alpha, full->beta,
                                     full->beta / (full->alpha + full->beta),
                                     tokens_per_param(full, C_max) };
    for (int k = 0; k < N_BOOT_VALUES && good > 1; k++) {
        double med = quantile(vals[k], good, 0.5);
        double lo = quantile(vals[k], good, 0.05), hi = quantile(vals[k], good, 0.95);
        printf("  %-22s %12.4g %12.4g %12.4g %12.4g\n", BOOT_NAMES[k], full_v[k], med, lo, hi);
        const char *suffix[3] = { "boot_median", "boot_p05", "boot_p95" };
        double vv[3] = { med, lo, hi };
        for (int s = 0; s < 3; s++) {
            char name[64];
            snprintf(name, sizeof name, "a3_%s_%s", k == B_EXP_A ? "a" : k == B_TPP
                     ? "tokens_per_param" : BOOT_NAMES[k], suffix[s]);
            tsv_str(fit_tsv, name);
            tsv_num(fit_tsv, vv[s]);
            tsv_end_row(fit_tsv);
        }
    }
    for (int k = 0; k < N_BOOT_VALUES; k++)
        free(vals[k]);
    free(N);
}

static void fit_value(TsvWriter *w, const char *name, double v)
{
    tsv_str(w, name);
    tsv_num(w, v);
    tsv_end_row(w);
}

static void draw(const AnalyseOptions *o, const ChinLaw *law, const double *budgets, int nb,
                 double n_lo, double n_hi, double d_lo, double d_hi)
{
    char bl[MAX_BUDGETS * 16] = "";
    for (int b = 0; b < nb; b++)
        snprintf(bl + strlen(bl), sizeof bl - strlen(bl), "%s%.3g", b ? " " : "", budgets[b]);
    char path[5][1024], vals[9][64];
    const char *files[5] = { "scaling_points.tsv", "scaling_isoflop.tsv", "scaling_optimal.tsv",
                             "scaling_lines.tsv", "scaling_laws.png" };
    for (int i = 0; i < 5; i++)
        snprintf(path[i], sizeof path[i], "%s/%s", o->out, files[i]);
    double v[9] = { law->E, law->A, law->B, law->alpha, law->beta, n_lo, n_hi, d_lo, d_hi };
    for (int i = 0; i < 9; i++)
        snprintf(vals[i], sizeof vals[i], "%.17g", v[i]);
    char nbs[16];
    snprintf(nbs, sizeof nbs, "%d", nb);
    const char *names[] = { "points", "isoflop", "optimal", "lines", "output", "E", "A", "B",
                            "alpha", "beta", "nlo", "nhi", "dlo", "dhi", "nb", "budgets" };
    const char *values[] = { path[0], path[1], path[2], path[3], path[4], vals[0], vals[1],
                             vals[2], vals[3], vals[4], vals[5], vals[6], vals[7], vals[8],
                             nbs, bl };
    if (plot_run_vars(TAPEGRAD_SOURCE_DIR "/examples/scaling_laws/scaling_laws.gp", names, values,
                      16, "output") == PLOT_OK)
        printf("wrote %s\n", path[4]);
}

/* The budgets are 6ND; the tape counted what each run really did (attention, the head, the
 * elementwise ops included). Per token the ratio depends on the size only, so one row a size. */
static void counted_against_6nd(const ScalingRun *runs, int n, TsvWriter *fit_tsv)
{
    printf("\ncounted training FLOP against the budget's 6ND (one row per size):\n");
    printf("  %6s %6s %10s %14s %14s %8s\n", "layers", "width", "N", "6N per token",
           "counted/token", "ratio");
    int shown = 0;
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = runs[j].layers == runs[i].layers && runs[j].width == runs[i].width;
        if (seen || !isfinite(runs[i].flop))
            continue;
        double per_token = runs[i].flop / runs[i].D, ratio = runs[i].flop / runs[i].C;
        printf("  %6d %6d %10.4g %14.4g %14.4g %8.3f\n", runs[i].layers, runs[i].width,
               runs[i].N, 6 * runs[i].N, per_token, ratio);
        char name[64];
        snprintf(name, sizeof name, "counted_over_6ND_L%d_C%d", runs[i].layers, runs[i].width);
        fit_value(fit_tsv, name, ratio);
        shown++;
    }
    if (!shown)
        printf("  (the results file has no counted FLOP: written before the tape counted them)\n");
}

bool scaling_analyse(const ScalingRun *runs, int n, const AnalyseOptions *o)
{
    double budgets[MAX_BUDGETS];
    int nb = distinct_budgets(runs, n, budgets);
    Profile prof[MAX_BUDGETS];
    double lc[MAX_BUDGETS], lno[MAX_BUDGETS], ldo[MAX_BUDGETS];
    int n2 = 0;
    TsvWriter *fit_tsv = tsv_open_in(o->out, "scaling_fit.tsv",
                                     (const char *const[]){ "quantity", "value", NULL });

    counted_against_6nd(runs, n, fit_tsv);

    printf("\nChinchilla approach 2: a parabola in log N through each IsoFLOP profile\n");
    printf("  %10s %5s %10s %10s %8s %9s\n", "C (6ND)", "runs", "N_opt", "D_opt", "D/N",
           "loss_opt");
    for (int b = 0; b < nb; b++) {
        prof[b] = fit_profile(runs, n, budgets[b]);
        const Profile *p = &prof[b];
        if (!p->ok) {
            printf("  %10.3g %5d  no minimum (fewer than 3 sizes, or the losses fall or rise "
                   "throughout)\n", p->budget, p->runs);
            continue;
        }
        printf("  %10.3g %5d %10.4g %10.4g %8.3g %9.4f%s\n", p->budget, p->runs, p->N_opt,
               p->D_opt, p->D_opt / p->N_opt, p->loss_opt,
               p->inside ? "" : "  (vertex outside the sizes trained: extrapolated)");
        lc[n2] = log(p->budget);
        lno[n2] = log(p->N_opt);
        ldo[n2++] = log(p->D_opt);
    }
    double kn = NAN, a2 = NAN, kd = NAN, b2 = NAN;
    if (fit_line(lc, lno, n2, &kn, &a2) && fit_line(lc, ldo, n2, &kd, &b2))
        printf("  N_opt = %.4g C^%.3f,  D_opt = %.4g C^%.3f   (Chinchilla: a = 0.49, b = 0.51; "
               "Kaplan: N_opt ~ C^0.73)\n", exp(kn), a2, exp(kd), b2);
    else
        printf("  fewer than 2 budgets with a minimum: no power law\n");
    fit_value(fit_tsv, "a2_a", a2);
    fit_value(fit_tsv, "a2_b", b2);
    fit_value(fit_tsv, "a2_N_coef", exp(kn));
    fit_value(fit_tsv, "a2_D_coef", exp(kd));

    if (n < 5) {
        fprintf(stderr, "scaling_laws: %d runs: approach 3 needs at least 5\n", n);
        tsv_close_or_die(fit_tsv);
        return false;
    }
    double *N = malloc((size_t)n * 3 * sizeof(double)), *D = N + n, *L = N + 2 * n;
    for (int i = 0; i < n; i++) {
        N[i] = runs[i].N;
        D[i] = runs[i].D;
        L[i] = runs[i].val_loss;
    }
    ChinGrid grid = chin_grid_paper();
    ChinFit fit;
    double t0 = progress_now();
    bool ok3 = fit_chinchilla(N, D, L, n, 1e-3, &grid, NULL, &fit);
    const ChinLaw *law = &fit.law;
    printf("\nChinchilla approach 3: L(N, D) = E + A / N^alpha + B / D^beta, Huber (delta 1e-3) "
           "on log L, L-BFGS from %d starts (%.1f s)\n", fit.starts, progress_now() - t0);
    if (!ok3) {
        fprintf(stderr, "scaling_laws: approach 3 found no finite fit\n");
        free(N);
        tsv_close_or_die(fit_tsv);
        return false;
    }
    printf("  E %.4g  A %.4g  B %.4g  alpha %.4f  beta %.4f   (objective %.3g)\n", law->E,
           law->A, law->B, law->alpha, law->beta, fit.objective);
    printf("  paper:  E 1.69  A 406.4  B 410.7  alpha 0.34  beta 0.28\n");
    printf("  N_opt ~ C^%.3f, D_opt ~ C^%.3f   (paper's approach 3: a = 0.46, b = 0.54)\n",
           law->beta / (law->alpha + law->beta), law->alpha / (law->alpha + law->beta));
    double rms = 0;
    for (int i = 0; i < n; i++) {
        double r = log(chin_loss(law, N[i], D[i])) - log(L[i]);
        rms += r * r;
    }
    rms = sqrt(rms / n);
    printf("  rms residual of log L: %.4f\n", rms);
    fit_value(fit_tsv, "a3_E", law->E);
    fit_value(fit_tsv, "a3_A", law->A);
    fit_value(fit_tsv, "a3_B", law->B);
    fit_value(fit_tsv, "a3_alpha", law->alpha);
    fit_value(fit_tsv, "a3_beta", law->beta);
    fit_value(fit_tsv, "a3_rms_log_residual", rms);
    double C_max = budgets[nb - 1];
    bootstrap(runs, n, law, C_max, o, fit_tsv);

    /* Kaplan's L(N) = (N_c / N)^alpha_N is the loss of a model trained to convergence. The
     * nearest this grid comes is each size's longest run: its lowest loss over the budgets
     * (for the sizes trained at the largest budget, that budget's run). */
    double xk[512], yk[512], tpp_lo = INFINITY, tpp_hi = 0;
    int nk = 0;
    for (int i = 0; i < n && nk < 512; i++) {
        bool best = true;
        for (int j = 0; j < n; j++)
            if (runs[j].N == runs[i].N &&
                (runs[j].val_loss < runs[i].val_loss || (runs[j].val_loss == runs[i].val_loss &&
                                                         j < i)))
                best = false;
        if (!best)
            continue;
        xk[nk] = log(runs[i].N);
        yk[nk++] = log(runs[i].val_loss);
        tpp_lo = fmin(tpp_lo, runs[i].D / runs[i].N);
        tpp_hi = fmax(tpp_hi, runs[i].D / runs[i].N);
    }
    double k0, k1;
    printf("\nKaplan's L(N) = (N_c / N)^alpha_N through each size's lowest loss (%d sizes, %.3g to "
           "%.3g tokens per parameter)", nk, tpp_lo, tpp_hi);
    if (fit_line(xk, yk, nk, &k0, &k1)) {
        double alpha_n = -k1, n_c = exp(k0 / alpha_n);
        printf(":\n  alpha_N %.4f, N_c %.4g   (Kaplan: alpha_N 0.076, N_c 8.8e13, on words)\n",
               alpha_n, n_c);
        fit_value(fit_tsv, "kaplan_alpha_N", alpha_n);
        fit_value(fit_tsv, "kaplan_N_c", n_c);
    } else {
        printf(": too few\n");
    }

    ChinLaw paper = chin_paper();
    printf("\ncompute-optimal tokens per parameter D_opt / N_opt:\n");
    printf("  %10s %12s %12s %12s %16s\n", "C", "approach 2", "approach 3", "Chinchilla",
           "paper's consts");
    for (int b = 0; b < nb; b++) {
        double t2 = prof[b].ok ? prof[b].D_opt / prof[b].N_opt : NAN;
        double t3 = tokens_per_param(law, budgets[b]), tp = tokens_per_param(&paper, budgets[b]);
        printf("  %10.3g %12.3g %12.3g %12s %16.3g\n", budgets[b], t2, t3, "~20", tp);
        char name[64];
        snprintf(name, sizeof name, "tokens_per_param_a2_C%.3g", budgets[b]);
        fit_value(fit_tsv, name, t2);
        snprintf(name, sizeof name, "tokens_per_param_a3_C%.3g", budgets[b]);
        fit_value(fit_tsv, name, t3);
    }
    double tg = tokens_per_param(&paper, 5.76e23), t3g = tokens_per_param(law, 5.76e23);
    printf("  %10.3g %12s %12.3g %12s %16.3g   (Gopher's budget: extrapolated 1e12-fold)\n",
           5.76e23, "", t3g, "~20", tg);
    fit_value(fit_tsv, "tokens_per_param_paper_C_max", tokens_per_param(&paper, C_max));
    fit_value(fit_tsv, "tokens_per_param_paper_gopher", tg);
    tsv_close_or_die(fit_tsv);

    /* The figure's data: runs with their profile's index, the parabolas, the vertices, and the
     * fitted N_opt(C), D_opt(C) lines over the budgets (and a decade either side). */
    TsvWriter *w = tsv_open_in(o->out, "scaling_points.tsv", (const char *const[]){
        "budget_index", "budget", "N", "D", "val_loss", "a3_loss", NULL });
    double n_lo = INFINITY, n_hi = 0, d_lo = INFINITY, d_hi = 0;
    for (int i = 0; i < n; i++) {
        int b = 0;
        while (budgets[b] != runs[i].budget)
            b++;
        double v[6] = { b, runs[i].budget, N[i], D[i], L[i], chin_loss(law, N[i], D[i]) };
        tsv_row(w, v);
        n_lo = fmin(n_lo, N[i]);
        n_hi = fmax(n_hi, N[i]);
        d_lo = fmin(d_lo, D[i]);
        d_hi = fmax(d_hi, D[i]);
    }
    tsv_close_or_die(w);
    w = tsv_open_in(o->out, "scaling_isoflop.tsv", (const char *const[]){
        "budget_index", "budget", "N", "parabola", "a3_loss", NULL });
    for (int b = 0; b < nb; b++)
        for (int k = 0; k < CURVE_POINTS && prof[b].ok; k++) {
            double x = log(prof[b].n_lo / 1.5) + k * log(2.25 * prof[b].n_hi / prof[b].n_lo) /
                       (CURVE_POINTS - 1);
            double v[5] = { b, budgets[b], exp(x), prof[b].c[0] + prof[b].c[1] * x +
                            prof[b].c[2] * x * x,
                            chin_loss(law, exp(x), budgets[b] / (6 * exp(x))) };
            tsv_row(w, v);
        }
    tsv_close_or_die(w);
    w = tsv_open_in(o->out, "scaling_optimal.tsv", (const char *const[]){
        "budget", "N_opt", "D_opt", "inside", NULL });
    for (int b = 0; b < nb; b++)
        if (prof[b].ok) {
            double v[4] = { budgets[b], prof[b].N_opt, prof[b].D_opt, prof[b].inside };
            tsv_row(w, v);
        }
    tsv_close_or_die(w);
    w = tsv_open_in(o->out, "scaling_lines.tsv", (const char *const[]){
        "C", "N_opt_a2", "D_opt_a2", "N_opt_a3", "D_opt_a3", "N_opt_20", "D_opt_20", NULL });
    for (int k = 0; k < LINE_POINTS; k++) {
        double C = budgets[0] / 10 * pow(100 * C_max / budgets[0], (double)k / (LINE_POINTS - 1));
        double n3, d3;
        chin_optimal(law, C, &n3, &d3);
        double v[7] = { C, exp(kn) * pow(C, a2), exp(kd) * pow(C, b2), n3, d3, sqrt(C / 120),
                        C / (6 * sqrt(C / 120)) };
        tsv_row(w, v);
    }
    tsv_close_or_die(w);
    free(N);
    draw(o, law, budgets, nb, n_lo, n_hi, d_lo, d_hi);
    return true;
}

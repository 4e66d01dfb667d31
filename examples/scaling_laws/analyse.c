/* scaling_laws' analysis: Chinchilla's approaches 2 and 3 with 5-95% intervals, the Kaplan-style
 * fits of the same runs, the branches against the cosine references, the compute saved, the
 * summary line (scaling_laws.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/scaling_fit.h"
#include "autograd/rng.h"
#include "examples/common/progress.h"
#include "examples/common/tsv.h"
#include "examples/scaling_laws/scaling_laws.h"

enum { MAX_BUDGETS = 32, MAX_SET = 2048 };

/* The points one fit sees: N counted one way, losses under one schedule. */
typedef struct {
    int    n;
    double N[MAX_SET], D[MAX_SET], L[MAX_SET], budget[MAX_SET];
    int    group[MAX_SET];      /* points of one (size, budget): the seeds of one pair */
} Set;

static Set *select_set(const ScalingPoint *pts, int n, ScalingCount count,
                       ScalingSchedule sched, bool n_all)
{
    Set *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "scaling_laws: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < n && s->n < MAX_SET; i++) {
        const ScalingPoint *p = &pts[i];
        if (p->count != count || p->schedule != sched)
            continue;
        int k = s->n++;
        s->N[k] = n_all ? p->N_all : p->N_nonemb;
        s->D[k] = p->D;
        s->L[k] = p->val_loss;
        s->budget[k] = p->budget;
        s->group[k] = k;
        for (int j = 0; j < k; j++)
            if (s->budget[j] == p->budget && s->D[j] == p->D) {
                s->group[k] = s->group[j];
                break;
            }
    }
    return s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of v[n] (sorted in place), by linear interpolation; NAN for n = 0. */
static double quantile(double *v, int n, double q)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double pos = q * (n - 1);
    int i = (int)pos;
    return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[n - 1];
}

static int distinct_budgets(const Set *s, double *out)
{
    int k = 0;
    for (int i = 0; i < s->n; i++) {
        bool seen = false;
        for (int j = 0; j < k; j++)
            seen |= out[j] == s->budget[i];
        if (!seen && k < MAX_BUDGETS)
            out[k++] = s->budget[i];
    }
    qsort(out, (size_t)k, sizeof *out, cmp_double);
    return k;
}

/* Approach 2 on the losses L (s's or a resample's): a parabola in log N per budget, then the
 * lines of log N_opt and log D_opt against log C. */
static void approach2(const Set *s, const double *L, const double *budgets, int nb,
                      ScalingProfile *prof, ScalingLine *line)
{
    double lc[MAX_BUDGETS], ln[MAX_BUDGETS], ld[MAX_BUDGETS];
    int m = 0;
    static double x[MAX_SET], y[MAX_SET];
    for (int b = 0; b < nb; b++) {
        ScalingProfile *p = &prof[b];
        *p = (ScalingProfile){ .budget = budgets[b], .n_min = INFINITY };
        int k = 0;
        for (int i = 0; i < s->n; i++)
            if (s->budget[i] == budgets[b]) {
                x[k] = log(s->N[i]);
                y[k++] = L[i];
                p->n_min = fmin(p->n_min, s->N[i]);
                p->n_max = fmax(p->n_max, s->N[i]);
            }
        double xm;
        p->ok = fit_parabola(x, y, k, p->c) && fit_parabola_min(p->c, &xm);
        if (!p->ok)
            continue;
        p->N_opt = exp(xm);
        p->loss_opt = p->c[0] + p->c[1] * xm + p->c[2] * xm * xm;
        p->inside = p->N_opt >= p->n_min && p->N_opt <= p->n_max;
        lc[m] = log(budgets[b]);
        ln[m] = log(p->N_opt);
        ld[m++] = log(budgets[b] / (6 * p->N_opt));
    }
    double k0, k1;
    line->ok = fit_line(lc, ln, m, &k0, &line->a) && fit_line(lc, ld, m, &k1, &line->b);
    line->coef = exp(k0);
    line->b_coef = exp(k1);
    if (!line->ok)
        line->a = line->b = NAN;
}

static double tpp_of(const ScalingProfile *p)
{
    return p->ok ? p->budget / (6 * p->N_opt) / p->N_opt : NAN;
}

typedef struct {
    double a_lo, a_hi, tpp_lo, tpp_hi;
    int    good;
} Interval;

/* The seeds' spread of approach 2: every pair's loss replaced by one of its seeds' losses,
 * drawn with replacement, `count` times; the 5-95% of each vertex (into prof's N_lo, N_hi), of
 * a and of D/N at the largest budget. */
static Interval seed_bootstrap(const Set *s, const double *budgets, int nb,
                               ScalingProfile *prof, int count, uint64_t seed)
{
    Interval iv = { NAN, NAN, NAN, NAN, 0 };
    if (count < 2)
        return iv;
    double *a = malloc((size_t)count * sizeof *a), *t = malloc((size_t)count * sizeof *t);
    double *v = malloc((size_t)count * nb * sizeof *v);
    int *nv = calloc((size_t)nb, sizeof *nv);
    static double L[MAX_SET];
    static int members[MAX_SET][16], n_members[MAX_SET];
    memset(n_members, 0, sizeof n_members);
    for (int i = 0; i < s->n; i++)
        if (n_members[s->group[i]] < 16)
            members[s->group[i]][n_members[s->group[i]]++] = i;
    Rng rng = rng_new(seed, RNG_STREAM_DATA);
    int na = 0, nt = 0;
    ScalingProfile pr[MAX_BUDGETS];
    for (int r = 0; r < count; r++) {
        for (int i = 0; i < s->n; i++) {
            int g = s->group[i];
            L[i] = s->L[members[g][rng_below(&rng, (uint32_t)n_members[g])]];
        }
        ScalingLine line;
        approach2(s, L, budgets, nb, pr, &line);
        for (int b = 0; b < nb; b++)
            if (pr[b].ok)
                v[b * count + nv[b]++] = pr[b].N_opt;
        if (line.ok)
            a[na++] = line.a;
        if (pr[nb - 1].ok)
            t[nt++] = tpp_of(&pr[nb - 1]);
    }
    for (int b = 0; b < nb; b++) {
        prof[b].N_lo = quantile(v + b * count, nv[b], 0.05);
        prof[b].N_hi = quantile(v + b * count, nv[b], 0.95);
    }
    iv = (Interval){ quantile(a, na, 0.05), quantile(a, na, 0.95), quantile(t, nt, 0.05),
                     quantile(t, nt, 0.95), na };
    free(a);
    free(t);
    free(v);
    free(nv);
    return iv;
}

static double law_tpp(const ChinLaw *p, double C)
{
    double N, D;
    chin_optimal(p, C, &N, &D);
    return D / N;
}

static double law_a(const ChinLaw *p)
{
    return p->beta / (p->alpha + p->beta);
}

/* Approach 3 on s: from the paper's grid of starts (full) or the small one with `extra`. */
static bool approach3(const Set *s, bool full, const ChinLaw *extra, ChinFit *f)
{
    ChinGrid grid = full ? chin_grid_paper() : chin_grid_small();
    return s->n >= 5 && fit_chinchilla(s->N, s->D, s->L, s->n, 1e-3, &grid, extra, f);
}

/* The points resampled with replacement, refitted from the small grid and the full fit. */
static Interval point_bootstrap(const Set *s, const ChinLaw *full, double C_max, int count,
                                uint64_t seed)
{
    Interval iv = { NAN, NAN, NAN, NAN, 0 };
    if (count < 2)
        return iv;
    double *a = malloc((size_t)count * sizeof *a), *t = malloc((size_t)count * sizeof *t);
    Set *r = calloc(1, sizeof *r);
    Rng rng = rng_new(seed, RNG_STREAM_DATA);
    ChinGrid grid = chin_grid_small();
    int good = 0;
    r->n = s->n;
    for (int k = 0; k < count; k++) {
        for (int i = 0; i < s->n; i++) {
            int j = (int)rng_below(&rng, (uint32_t)s->n);
            r->N[i] = s->N[j];
            r->D[i] = s->D[j];
            r->L[i] = s->L[j];
        }
        ChinFit f;
        if (!fit_chinchilla(r->N, r->D, r->L, r->n, 1e-3, &grid, full, &f))
            continue;
        a[good] = law_a(&f.law);
        t[good++] = law_tpp(&f.law, C_max);
    }
    iv = (Interval){ quantile(a, good, 0.05), quantile(a, good, 0.95), quantile(t, good, 0.05),
                     quantile(t, good, 0.95), good };
    free(a);
    free(t);
    free(r);
    return iv;
}

static void fit_value(TsvWriter *w, const char *name, double v)
{
    tsv_str(w, name);
    tsv_num(w, v);
    tsv_end_row(w);
}

static void print_profiles(const char *title, const ScalingProfile *prof, int nb, bool bars)
{
    printf("%s\n", title);
    printf("  %9s %9s %9s %9s %10s %9s %9s %9s %8s\n", "C (6ND)", "N_opt", bars ? "5%" : "",
           bars ? "95%" : "", "D_opt chr", "D/N chr", "D/N BPE", "loss_opt", "");
    for (int b = 0; b < nb; b++) {
        const ScalingProfile *p = &prof[b];
        if (!p->ok) {
            printf("  %9.3g  no valley (the losses fall or rise throughout)\n", p->budget);
            continue;
        }
        double D = p->budget / (6 * p->N_opt);
        printf("  %9.3g %9.4g %9.4g %9.4g %10.4g %9.4g %9.4g %9.4f %s\n", p->budget, p->N_opt,
               bars ? p->N_lo : NAN, bars ? p->N_hi : NAN, D, D / p->N_opt,
               D / p->N_opt / SCALING_CHARS_PER_BPE, p->loss_opt,
               p->inside ? "" : "outside");
    }
}

/* The branches against the separate cosine runs of the same (size, budget). */
static void compare_cosine(const ScalingPoint *pts, int n, TsvWriter *fit)
{
    printf("\ncooldown branches against fixed-length cosine runs (mean over seeds; spread: the "
           "larger of the two seed ranges)\n");
    printf("  %4s %4s %9s %6s %9s %9s %9s %9s %9s %s\n", "L", "C", "budget", "seeds", "cosine",
           "branch", "constant", "diff", "spread", "");
    int shown = 0, agree = 0;
    for (int i = 0; i < n; i++) {
        const ScalingPoint *p = &pts[i];
        if (p->schedule != SCALING_SCHED_COSINE)
            continue;
        bool first = true;
        for (int j = 0; j < i; j++)
            first &= !(pts[j].schedule == SCALING_SCHED_COSINE && pts[j].width == p->width &&
                       pts[j].layers == p->layers && pts[j].budget == p->budget);
        if (!first)
            continue;
        double sum[3] = { 0 }, lo[3], hi[3];
        int cnt[3] = { 0 };
        for (int k = 0; k < 3; k++) {
            lo[k] = INFINITY;
            hi[k] = -INFINITY;
        }
        for (int j = 0; j < n; j++) {
            const ScalingPoint *q = &pts[j];
            if (q->width != p->width || q->layers != p->layers || q->budget != p->budget ||
                q->count != SCALING_COUNT_ALL)
                continue;
            int k = q->schedule == SCALING_SCHED_COSINE ? 0
                    : q->schedule == SCALING_SCHED_COOLDOWN ? 1 : 2;
            sum[k] += q->val_loss;
            cnt[k]++;
            lo[k] = fmin(lo[k], q->val_loss);
            hi[k] = fmax(hi[k], q->val_loss);
        }
        if (!cnt[1])
            continue;
        double mc = sum[0] / cnt[0], mb = sum[1] / cnt[1], mk = cnt[2] ? sum[2] / cnt[2] : NAN;
        double spread = fmax(hi[0] - lo[0], hi[1] - lo[1]), diff = mb - mc;
        bool ok = fabs(diff) <= spread;
        printf("  %4d %4d %9.3g %6d %9.4f %9.4f %9.4f %+9.4f %9.4f %s\n", p->layers, p->width,
               p->budget, cnt[0], mc, mb, mk, diff, spread,
               ok ? "within the seeds' spread" : "outside the seeds' spread");
        char name[64];
        snprintf(name, sizeof name, "branch_minus_cosine_L%d_C%d", p->layers, p->width);
        fit_value(fit, name, diff);
        snprintf(name, sizeof name, "seed_spread_L%d_C%d", p->layers, p->width);
        fit_value(fit, name, spread);
        shown++;
        agree += ok;
    }
    if (shown)
        printf("  %d of %d compared points agree within the seeds' spread\n", agree, shown);
    else
        printf("  (no cosine references in these results)\n");
    fit_value(fit, "cosine_points_compared", shown);
    fit_value(fit, "cosine_points_agree", agree);
}

/* The budgets are 6ND; the tape counted what each run really did (attention's scores, the head,
 * the elementwise ops). Per token the ratio depends on the size only: one row a size, from its
 * first trunk point. */
static void counted_against_6nd(const ScalingPoint *pts, int n, TsvWriter *fit)
{
    printf("\ncounted training FLOP per token against 6N (one row a size):\n");
    printf("  %4s %4s %9s %9s %14s %10s %10s\n", "L", "C", "N_all", "N_nonemb", "counted/token",
           "/ 6N_all", "/ 6N_nonemb");
    for (int i = 0; i < n; i++) {
        const ScalingPoint *p = &pts[i];
        bool first = p->schedule == SCALING_SCHED_CONSTANT && p->trained > 0 &&
                     isfinite(p->flop);
        for (int j = 0; j < i && first; j++)
            first = !(pts[j].schedule == SCALING_SCHED_CONSTANT && pts[j].N_all == p->N_all);
        if (!first)
            continue;
        double per_token = p->flop / p->trained;
        printf("  %4d %4d %9.0f %9.0f %14.4g %10.3f %10.3f\n", p->layers, p->width, p->N_all,
               p->N_nonemb, per_token, per_token / (6 * p->N_all),
               per_token / (6 * p->N_nonemb));
        char name[64];
        snprintf(name, sizeof name, "counted_over_6N_all_L%d_C%d", p->layers, p->width);
        fit_value(fit, name, per_token / (6 * p->N_all));
    }
}

/* What the branches cost against a separate cosine run for every cooldown point. */
static void compute_saved(const ScalingPoint *pts, int n, double seconds, TsvWriter *fit)
{
    double trained = 0, trained_c = 0, separate = 0, separate_c = 0, flop = 0, cos_flop = 0,
           cos_c = 0, kaplan_c = 0;
    for (int i = 0; i < n; i++) {
        const ScalingPoint *p = &pts[i];
        if (p->schedule == SCALING_SCHED_COSINE) {
            cos_flop += p->flop;
            cos_c += 6 * p->N_all * p->trained;
            continue;
        }
        /* a trunk's steps past its size's last cooldown point serve Kaplan's points alone */
        bool kaplan_only = false;
        if (p->schedule == SCALING_SCHED_CONSTANT) {
            long last = 0;
            for (int j = 0; j < n; j++)
                if (pts[j].seed == p->seed && pts[j].N_all == p->N_all &&
                    pts[j].schedule == SCALING_SCHED_COOLDOWN && pts[j].steps > last)
                    last = pts[j].steps;
            kaplan_only = p->steps > last;
        }
        if (kaplan_only) {
            kaplan_c += 6 * p->N_all * p->trained;
            continue;
        }
        trained += p->trained;
        trained_c += 6 * p->N_all * p->trained;
        flop += p->flop;
        if (p->schedule == SCALING_SCHED_COOLDOWN) {
            separate += p->D;
            separate_c += 6 * p->N_all * p->D;
        }
    }
    printf("\ncompute: the trunks and branches trained %.4g characters (%.4g FLOP as 6ND, %.4g "
           "counted by the tape); a separate cosine run for each cooldown point would train "
           "%.4g (%.4g FLOP as 6ND): %.1f%% saved. The cosine references added %.4g FLOP as "
           "6ND (%.4g counted); the trunks' steps past their last cooldown point, for Kaplan's "
           "points alone, %.4g.", trained, trained_c, flop, separate, separate_c,
           100 * (1 - trained_c / separate_c), cos_c, cos_flop, kaplan_c);
    if (seconds > 0)
        printf(" The study took %.0f s (%.1f min) of wall clock.", seconds, seconds / 60);
    printf("\n");
    fit_value(fit, "compute_branches_6ND", trained_c);
    fit_value(fit, "compute_separate_6ND", separate_c);
    fit_value(fit, "compute_saved_percent", 100 * (1 - trained_c / separate_c));
    fit_value(fit, "compute_cosine_refs_6ND", cos_c);
    fit_value(fit, "compute_kaplan_extension_6ND", kaplan_c);
    if (seconds > 0)
        fit_value(fit, "study_seconds", seconds);
}

bool scaling_analyse(const ScalingPoint *pts, int n, const AnalyseOptions *o)
{
    TsvWriter *fit = tsv_open_in(o->out, "scaling_fit.tsv",
                                 (const char *const[]){ "quantity", "value", NULL });
    Set *chin = select_set(pts, n, SCALING_COUNT_ALL, SCALING_SCHED_COOLDOWN, true);
    Set *kap = select_set(pts, n, SCALING_COUNT_NONEMB, SCALING_SCHED_CONSTANT, false);
    double budgets[MAX_BUDGETS], kb[MAX_BUDGETS];
    int nb = distinct_budgets(chin, budgets), nkb = distinct_budgets(kap, kb);
    if (chin->n < 5 || nb < 2) {
        fprintf(stderr, "scaling_laws: %d cooldown points over %d budgets: too few to fit\n",
                chin->n, nb);
        tsv_close_or_die(fit);
        return false;
    }
    double C_max = budgets[nb - 1];

    /* Chinchilla: every parameter, a schedule matched to the run (the branches). */
    ScalingProfile prof[MAX_BUDGETS], kprof[MAX_BUDGETS];
    ScalingLine a2, k2;
    approach2(chin, chin->L, budgets, nb, prof, &a2);
    Interval i2 = seed_bootstrap(chin, budgets, nb, prof, o->bootstrap, o->seed);
    print_profiles("\nChinchilla approach 2 (N every parameter, cooldown branches): a parabola "
                   "in log N per budget; the vertex's 5-95% over the seeds", prof, nb, true);
    double tpp2 = tpp_of(&prof[nb - 1]);
    printf("  N_opt = %.4g C^%.3f (5-95%% %.3f to %.3f), D_opt = %.4g C^%.3f   (Chinchilla: "
           "a = 0.49, b = 0.51; Kaplan: a = 0.73)\n", a2.coef, a2.a, i2.a_lo, i2.a_hi,
           a2.b_coef, a2.b);
    fit_value(fit, "a2_a", a2.a);
    fit_value(fit, "a2_a_p05", i2.a_lo);
    fit_value(fit, "a2_a_p95", i2.a_hi);
    fit_value(fit, "a2_b", a2.b);
    fit_value(fit, "a2_tpp_Cmax", tpp2);
    fit_value(fit, "a2_tpp_Cmax_p05", i2.tpp_lo);
    fit_value(fit, "a2_tpp_Cmax_p95", i2.tpp_hi);
    for (int b = 0; b < nb; b++) {
        char name[64];
        snprintf(name, sizeof name, "a2_N_opt_C%.3g", budgets[b]);
        fit_value(fit, name, prof[b].ok ? prof[b].N_opt : NAN);
        snprintf(name, sizeof name, "a2_tpp_C%.3g", budgets[b]);
        fit_value(fit, name, tpp_of(&prof[b]));
    }

    ChinFit f3;
    double t0 = progress_now();
    if (!approach3(chin, true, NULL, &f3)) {
        fprintf(stderr, "scaling_laws: approach 3 found no finite fit\n");
        tsv_close_or_die(fit);
        return false;
    }
    const ChinLaw *law = &f3.law;
    double a3 = law_a(law), tpp3 = law_tpp(law, C_max);
    t0 = progress_now() - t0;
    double t1 = progress_now();
    Interval i3 = point_bootstrap(chin, law, C_max, o->bootstrap, o->seed);
    printf("\nChinchilla approach 3 (the same %d points): L = E + A / N^alpha + B / D^beta, "
           "Huber on log L, %d starts (%.1f s), %d resamples (%.1f s)\n", chin->n, f3.starts,
           t0, i3.good, progress_now() - t1);
    printf("  E %.4g  A %.4g  B %.4g  alpha %.4f  beta %.4f   (paper: 1.69, 406.4, 410.7, "
           "0.34, 0.28)\n", law->E, law->A, law->B, law->alpha, law->beta);
    printf("  N_opt ~ C^%.3f (5-95%% %.3f to %.3f), D_opt ~ C^%.3f   (paper: a = 0.46)\n", a3,
           i3.a_lo, i3.a_hi, 1 - a3);
    printf("  D/N at the optimum:");
    for (int b = 0; b < nb; b++)
        printf(" %.3g: %.4g", budgets[b], law_tpp(law, budgets[b]));
    printf(" characters\n");
    fit_value(fit, "a3_E", law->E);
    fit_value(fit, "a3_A", law->A);
    fit_value(fit, "a3_B", law->B);
    fit_value(fit, "a3_alpha", law->alpha);
    fit_value(fit, "a3_beta", law->beta);
    fit_value(fit, "a3_a", a3);
    fit_value(fit, "a3_a_p05", i3.a_lo);
    fit_value(fit, "a3_a_p95", i3.a_hi);
    fit_value(fit, "a3_tpp_Cmax", tpp3);
    fit_value(fit, "a3_tpp_Cmax_p05", i3.tpp_lo);
    fit_value(fit, "a3_tpp_Cmax_p95", i3.tpp_hi);

    /* Kaplan: non-embedding N, the trunk's constant-rate losses (a schedule longer than the
     * run), the budgets as 6 N_nonemb D; then each choice alone, by approach 3. */
    k2 = (ScalingLine){ .a = NAN };
    if (nkb >= 2 && kap->n >= 5) {
        approach2(kap, kap->L, kb, nkb, kprof, &k2);
        print_profiles("\nKaplan-style approach 2 on the same trunks (N non-embedding, no "
                       "cooldown: the trunk evaluated at D = C / 6N)", kprof, nkb, false);
        printf("  N_opt = %.4g C^%.3f, D_opt = %.4g C^%.3f\n", k2.coef, k2.a, k2.b_coef, k2.b);
    }
    fit_value(fit, "kaplan_a2_a", k2.a);
    fit_value(fit, "kaplan_a2_tpp_Cmax", nkb ? tpp_of(&kprof[nkb - 1]) : NAN);
    printf("\nwhich choice moves the exponent (approach 3, %s):\n",
           "the small grid of starts and the full fit's end point");
    printf("  %-12s %-34s %8s %12s\n", "N counted", "schedule", "a", "D/N at Cmax");
    struct { ScalingCount c; ScalingSchedule s; bool all; const char *nn, *sn, *key; } rows[] = {
        { SCALING_COUNT_ALL, SCALING_SCHED_COOLDOWN, true, "all", "matched (cooldown branch)",
          "a3_all_cooldown" },
        { SCALING_COUNT_ALL, SCALING_SCHED_COOLDOWN, false, "non-emb", "matched (cooldown branch)",
          "a3_nonemb_cooldown" },
        { SCALING_COUNT_ALL, SCALING_SCHED_CONSTANT, true, "all", "longer than the run (trunk)",
          "a3_all_constant" },
        { SCALING_COUNT_NONEMB, SCALING_SCHED_CONSTANT, false, "non-emb",
          "longer than the run (trunk)", "a3_nonemb_constant" },
    };
    double kaplan_a3 = NAN;
    for (int r = 0; r < 4; r++) {
        Set *s = select_set(pts, n, rows[r].c, rows[r].s, rows[r].all);
        ChinFit f;
        bool ok = approach3(s, false, law, &f);
        double a = ok ? law_a(&f.law) : NAN, t = ok ? law_tpp(&f.law, C_max) : NAN;
        printf("  %-12s %-34s %8.3f %12.4g%s\n", rows[r].nn, rows[r].sn, a, t,
               r == 0 ? "   (Chinchilla's choices)" : r == 3 ? "   (Kaplan's choices)" : "");
        fit_value(fit, rows[r].key, a);
        if (r == 3)
            kaplan_a3 = a;
        free(s);
    }
    fit_value(fit, "kaplan_a3_a", kaplan_a3);

    compare_cosine(pts, n, fit);
    compute_saved(pts, n, o->seconds, fit);
    counted_against_6nd(pts, n, fit);

    printf("\nat the largest budget, C = %.3g: D/N %.4g characters (approach 2), %.4g "
           "(approach 3): about %.3g and %.3g BPE tokens per parameter at %.0f characters a "
           "token (assumed)\n", C_max, tpp2, tpp3, tpp2 / SCALING_CHARS_PER_BPE,
           tpp3 / SCALING_CHARS_PER_BPE, SCALING_CHARS_PER_BPE);
    double ratio = fmax(tpp2, tpp3) / fmin(tpp2, tpp3);
    printf("agreement: D/N ratio %.2f (%s 1.5), |a2 - a3| = %.3f (%s 0.1); Kaplan-style a = "
           "%.3f (approach 2), %.3f (approach 3)\n", ratio, ratio <= 1.5 ? "within" : "beyond",
           fabs(a2.a - a3), fabs(a2.a - a3) <= 0.1 ? "within" : "beyond", k2.a, kaplan_a3);
    printf("intervals (5-95%%): D/N approach2 %.4g to %.4g, approach3 %.4g to %.4g; a approach2 "
           "%.3f to %.3f, approach3 %.3f to %.3f\n", i2.tpp_lo, i2.tpp_hi, i3.tpp_lo, i3.tpp_hi,
           i2.a_lo, i2.a_hi, i3.a_lo, i3.a_hi);
    fit_value(fit, "tpp_ratio", ratio);
    fit_value(fit, "a_difference", fabs(a2.a - a3));
    tsv_close_or_die(fit);

    double G = pow(law->alpha * law->A / (law->beta * law->B), 1 / (law->alpha + law->beta));
    scaling_figure(o, pts, n, prof, budgets, nb, kprof, kb, k2.ok ? nkb : 0, &a2, &k2,
                   law->alpha, law->beta, G);
    printf("summary: D/N approach2 %.4g approach3 %.4g; a approach2 %.3f approach3 %.3f\n",
           tpp2, tpp3, a2.a, a3);
    free(chin);
    free(kap);
    return true;
}

/* The analysis of a scaling-law study: approaches 2 and 3 with their intervals, Kaplan's
 * choices, the branches against the cosine runs, the compute, the figure's rows
 * (scaling_study.h). */
#include "analysis/scaling_study.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autograd/rng.h"

enum { MAX_SET = 2048, MAX_SEEDS_PER_PAIR = 16 };

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The points one fit sees: N counted one way, losses under one schedule. */
typedef struct {
    int    n;
    double N[MAX_SET], D[MAX_SET], L[MAX_SET], budget[MAX_SET];
    int    group[MAX_SET];      /* points of one (size, budget): the seeds of one pair */
} Set;

/* NULL when out of memory. */
static Set *select_set(const ScalingPoint *pts, int n, ScalingCount count,
                       ScalingSchedule sched, bool n_all)
{
    Set *s = calloc(1, sizeof *s);
    for (int i = 0; s && i < n && s->n < MAX_SET; i++) {
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
        if (!seen && k < SCALING_MAX_BUDGETS)
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
    double lc[SCALING_MAX_BUDGETS], ln[SCALING_MAX_BUDGETS], ld[SCALING_MAX_BUDGETS];
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
    double k0 = NAN, k1 = NAN;     /* a failed fit leaves them unset, and the line not ok */
    line->ok = fit_line(lc, ln, m, &k0, &line->a) && fit_line(lc, ld, m, &k1, &line->b);
    line->coef = exp(k0);
    line->b_coef = exp(k1);
    if (!line->ok)
        line->a = line->b = NAN;
}

double scaling_profile_tpp(const ScalingProfile *p)
{
    return p->ok ? p->budget / (6 * p->N_opt) / p->N_opt : NAN;
}

/* The seeds' spread of approach 2: every pair's loss replaced by one of its seeds' losses,
 * drawn with replacement, `count` times; the 5-95% of each vertex (into prof's N_lo, N_hi), of
 * a and of D/N at the largest budget. */
static ScalingInterval seed_bootstrap(const Set *s, const double *budgets, int nb,
                                      ScalingProfile *prof, int count, uint64_t seed)
{
    ScalingInterval iv = { NAN, NAN, NAN, NAN, 0 };
    if (count < 2)
        return iv;
    double *a = malloc((size_t)count * sizeof *a), *t = malloc((size_t)count * sizeof *t);
    double *v = malloc((size_t)count * nb * sizeof *v);
    int *nv = calloc((size_t)nb, sizeof *nv);
    static double L[MAX_SET];
    static int members[MAX_SET][MAX_SEEDS_PER_PAIR], n_members[MAX_SET];
    if (!a || !t || !v || !nv) {
        free(a), free(t), free(v), free(nv);
        return iv;
    }
    memset(n_members, 0, sizeof n_members);
    for (int i = 0; i < s->n; i++)
        if (n_members[s->group[i]] < MAX_SEEDS_PER_PAIR)
            members[s->group[i]][n_members[s->group[i]]++] = i;
    Rng rng = rng_new(seed, RNG_STREAM_DATA);
    int na = 0, nt = 0;
    ScalingProfile pr[SCALING_MAX_BUDGETS];
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
            t[nt++] = scaling_profile_tpp(&pr[nb - 1]);
    }
    for (int b = 0; b < nb; b++) {
        prof[b].N_lo = quantile(v + b * count, nv[b], 0.05);
        prof[b].N_hi = quantile(v + b * count, nv[b], 0.95);
    }
    iv = (ScalingInterval){ quantile(a, na, 0.05), quantile(a, na, 0.95), quantile(t, nt, 0.05),
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
static ScalingInterval point_bootstrap(const Set *s, const ChinLaw *full, double C_max,
                                       int count, uint64_t seed)
{
    ScalingInterval iv = { NAN, NAN, NAN, NAN, 0 };
    if (count < 2)
        return iv;
    double *a = malloc((size_t)count * sizeof *a), *t = malloc((size_t)count * sizeof *t);
    Set *r = calloc(1, sizeof *r);
    if (!a || !t || !r) {
        free(a), free(t), free(r);
        return iv;
    }
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
    iv = (ScalingInterval){ quantile(a, good, 0.05), quantile(a, good, 0.95),
                            quantile(t, good, 0.05), quantile(t, good, 0.95), good };
    free(a);
    free(t);
    free(r);
    return iv;
}

/* Appends a named quantity; the name is printf's format with its arguments. */
__attribute__((format(printf, 3, 4)))
static void put(ScalingStudy *s, double value, const char *fmt, ...)
{
    if (s->nq >= SCALING_MAX_QUANTITIES)
        return;
    ScalingQuantity *q = &s->q[s->nq++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->name, sizeof q->name, fmt, ap);
    va_end(ap);
    q->value = value;
}

/* Mean, range and count of the losses of the points like p's pair (N, budget, count) under
 * schedule sched. */
typedef struct {
    double sum, lo, hi;
    int    n;
} SeedRange;

static SeedRange pair_range(const ScalingPoint *pts, int n, const ScalingPoint *p,
                            ScalingSchedule sched)
{
    SeedRange r = { 0, INFINITY, -INFINITY, 0 };
    for (int j = 0; j < n; j++) {
        const ScalingPoint *q = &pts[j];
        if (q->N_all != p->N_all || q->budget != p->budget || q->count != p->count ||
            q->schedule != sched)
            continue;
        r.sum += q->val_loss;
        r.lo = fmin(r.lo, q->val_loss);
        r.hi = fmax(r.hi, q->val_loss);
        r.n++;
    }
    return r;
}

/* The first point of its pair (N, budget, count, schedule) among pts[0..i]. */
static bool first_of_pair(const ScalingPoint *pts, int i)
{
    for (int j = 0; j < i; j++)
        if (pts[j].N_all == pts[i].N_all && pts[j].budget == pts[i].budget &&
            pts[j].count == pts[i].count && pts[j].schedule == pts[i].schedule)
            return false;
    return true;
}

/* The branches against the separate cosine runs of the same (size, budget); a size is its
 * N_all (in one study, the sizes' counts differ). */
static void compare_cosine(const ScalingPoint *pts, int n, ScalingStudy *s)
{
    for (int i = 0; i < n && s->n_cosine < SCALING_MAX_ROWS; i++) {
        const ScalingPoint *p = &pts[i];
        if (p->schedule != SCALING_SCHED_COSINE || !first_of_pair(pts, i))
            continue;
        SeedRange c = pair_range(pts, n, p, SCALING_SCHED_COSINE);
        SeedRange b = pair_range(pts, n, p, SCALING_SCHED_COOLDOWN);
        SeedRange k = pair_range(pts, n, p, SCALING_SCHED_CONSTANT);
        if (!b.n)
            continue;
        ScalingCosineRow *r = &s->cosine[s->n_cosine++];
        *r = (ScalingCosineRow){ .layers = p->layers, .width = p->width, .seeds = c.n,
                                 .budget = p->budget, .cosine = c.sum / c.n,
                                 .branch = b.sum / b.n, .constant = k.n ? k.sum / k.n : NAN,
                                 .spread = fmax(c.hi - c.lo, b.hi - b.lo) };
        r->diff = r->branch - r->cosine;
        r->agree = fabs(r->diff) <= r->spread;
        s->n_agree += r->agree;
        put(s, r->diff, "branch_minus_cosine_L%d_C%d", p->layers, p->width);
        put(s, r->spread, "seed_spread_L%d_C%d", p->layers, p->width);
    }
    put(s, s->n_cosine, "cosine_points_compared");
    put(s, s->n_agree, "cosine_points_agree");
}

/* What the branches cost against a separate cosine run for every cooldown point. */
static void compute_saved(const ScalingPoint *pts, int n, double seconds, ScalingStudy *s)
{
    ScalingCompute c = { 0 };
    for (int i = 0; i < n; i++) {
        const ScalingPoint *p = &pts[i];
        if (p->schedule == SCALING_SCHED_COSINE) {
            c.cosine_counted += p->flop;
            c.cosine_6nd += 6 * p->N_all * p->trained;
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
            c.kaplan_6nd += 6 * p->N_all * p->trained;
            continue;
        }
        c.trained += p->trained;
        c.trained_6nd += 6 * p->N_all * p->trained;
        c.counted += p->flop;
        if (p->schedule == SCALING_SCHED_COOLDOWN) {
            c.separate += p->D;
            c.separate_6nd += 6 * p->N_all * p->D;
        }
    }
    c.saved_percent = 100 * (1 - c.trained_6nd / c.separate_6nd);
    s->compute = c;
    put(s, c.trained_6nd, "compute_branches_6ND");
    put(s, c.separate_6nd, "compute_separate_6ND");
    put(s, c.saved_percent, "compute_saved_percent");
    put(s, c.cosine_6nd, "compute_cosine_refs_6ND");
    put(s, c.kaplan_6nd, "compute_kaplan_extension_6ND");
    if (seconds > 0)
        put(s, seconds, "study_seconds");
}

/* The budgets are 6ND; the tape counted what each run really did (attention's scores, the head,
 * the elementwise ops). Per token the ratio depends on the size only: one row a size, from its
 * first trunk point. */
static void counted_against_6nd(const ScalingPoint *pts, int n, ScalingStudy *s)
{
    for (int i = 0; i < n && s->n_flop < SCALING_MAX_ROWS; i++) {
        const ScalingPoint *p = &pts[i];
        bool first = p->schedule == SCALING_SCHED_CONSTANT && p->trained > 0 &&
                     isfinite(p->flop);
        for (int j = 0; j < i && first; j++)
            first = !(pts[j].schedule == SCALING_SCHED_CONSTANT && pts[j].N_all == p->N_all);
        if (!first)
            continue;
        ScalingFlopRow *r = &s->flop[s->n_flop++];
        *r = (ScalingFlopRow){ p->layers, p->width, p->N_all, p->N_nonemb,
                               p->flop / p->trained };
        put(s, r->per_token / (6 * p->N_all), "counted_over_6N_all_L%d_C%d", p->layers,
            p->width);
    }
}

/* Chinchilla's approach 2 and its seed interval, with their quantities. */
static void chinchilla_approach2(const Set *chin, int bootstrap, uint64_t seed, ScalingStudy *s)
{
    int nb = s->nb;
    approach2(chin, chin->L, s->budgets, nb, s->prof, &s->a2);
    s->i2 = seed_bootstrap(chin, s->budgets, nb, s->prof, bootstrap, seed);
    s->tpp2 = scaling_profile_tpp(&s->prof[nb - 1]);
    put(s, s->a2.a, "a2_a");
    put(s, s->i2.a_lo, "a2_a_p05");
    put(s, s->i2.a_hi, "a2_a_p95");
    put(s, s->a2.b, "a2_b");
    put(s, s->tpp2, "a2_tpp_Cmax");
    put(s, s->i2.tpp_lo, "a2_tpp_Cmax_p05");
    put(s, s->i2.tpp_hi, "a2_tpp_Cmax_p95");
    for (int b = 0; b < nb; b++) {
        put(s, s->prof[b].ok ? s->prof[b].N_opt : NAN, "a2_N_opt_C%.3g", s->budgets[b]);
        put(s, scaling_profile_tpp(&s->prof[b]), "a2_tpp_C%.3g", s->budgets[b]);
    }
}

/* Approach 3 and its point interval; false when it found no finite fit. */
static bool chinchilla_approach3(const Set *chin, int bootstrap, uint64_t seed, ScalingStudy *s)
{
    double t0 = now_seconds();
    if (!approach3(chin, true, NULL, &s->f3))
        return false;
    const ChinLaw *law = &s->f3.law;
    s->a3 = law_a(law);
    s->tpp3 = law_tpp(law, s->C_max);
    for (int b = 0; b < s->nb; b++)
        s->tpp3_at[b] = law_tpp(law, s->budgets[b]);
    s->fit_seconds = now_seconds() - t0;
    double t1 = now_seconds();
    s->i3 = point_bootstrap(chin, law, s->C_max, bootstrap, seed);
    s->bootstrap_seconds = now_seconds() - t1;
    put(s, law->E, "a3_E");
    put(s, law->A, "a3_A");
    put(s, law->B, "a3_B");
    put(s, law->alpha, "a3_alpha");
    put(s, law->beta, "a3_beta");
    put(s, s->a3, "a3_a");
    put(s, s->i3.a_lo, "a3_a_p05");
    put(s, s->i3.a_hi, "a3_a_p95");
    put(s, s->tpp3, "a3_tpp_Cmax");
    put(s, s->i3.tpp_lo, "a3_tpp_Cmax_p05");
    put(s, s->i3.tpp_hi, "a3_tpp_Cmax_p95");
    return true;
}

/* Kaplan: non-embedding N, the trunk's constant-rate losses (a schedule longer than the run),
 * the budgets as 6 N_nonemb D; then each choice alone, by approach 3. */
static void kaplan_choices(const ScalingPoint *pts, int n, const Set *kap, ScalingStudy *s)
{
    s->k2 = (ScalingLine){ .a = NAN };
    s->kaplan_fitted = s->nkb >= 2 && kap->n >= 5;
    if (s->kaplan_fitted)
        approach2(kap, kap->L, s->kbudgets, s->nkb, s->kprof, &s->k2);
    put(s, s->k2.a, "kaplan_a2_a");
    put(s, s->nkb ? scaling_profile_tpp(&s->kprof[s->nkb - 1]) : NAN, "kaplan_a2_tpp_Cmax");
    static const struct { ScalingCount c; ScalingSchedule s; bool all; const char *key; }
    choice[SCALING_CHOICES] = {
        { SCALING_COUNT_ALL, SCALING_SCHED_COOLDOWN, true, "a3_all_cooldown" },
        { SCALING_COUNT_ALL, SCALING_SCHED_COOLDOWN, false, "a3_nonemb_cooldown" },
        { SCALING_COUNT_ALL, SCALING_SCHED_CONSTANT, true, "a3_all_constant" },
        { SCALING_COUNT_NONEMB, SCALING_SCHED_CONSTANT, false, "a3_nonemb_constant" },
    };
    for (int r = 0; r < SCALING_CHOICES; r++) {
        Set *set = select_set(pts, n, choice[r].c, choice[r].s, choice[r].all);
        ChinFit f;
        bool ok = set && approach3(set, false, &s->f3.law, &f);
        s->choice_a[r] = ok ? law_a(&f.law) : NAN;
        s->choice_tpp[r] = ok ? law_tpp(&f.law, s->C_max) : NAN;
        put(s, s->choice_a[r], "%s", choice[r].key);
        free(set);
    }
    put(s, s->choice_a[SCALING_CHOICE_KAPLAN], "kaplan_a3_a");
}

ScalingStudyStatus scaling_study_analyse(const ScalingPoint *pts, int n, int bootstrap,
                                         uint64_t seed, double seconds, ScalingStudy *s)
{
    memset(s, 0, sizeof *s);
    Set *chin = select_set(pts, n, SCALING_COUNT_ALL, SCALING_SCHED_COOLDOWN, true);
    Set *kap = select_set(pts, n, SCALING_COUNT_NONEMB, SCALING_SCHED_CONSTANT, false);
    s->status = SCALING_STUDY_TOO_FEW;
    if (!chin || !kap)
        goto done;
    s->n_points = chin->n;
    s->nb = distinct_budgets(chin, s->budgets);
    s->nkb = distinct_budgets(kap, s->kbudgets);
    if (chin->n < 5 || s->nb < 2)
        goto done;
    s->C_max = s->budgets[s->nb - 1];
    chinchilla_approach2(chin, bootstrap, seed, s);
    s->status = SCALING_STUDY_NO_FIT;
    if (!chinchilla_approach3(chin, bootstrap, seed, s))
        goto done;
    kaplan_choices(pts, n, kap, s);
    compare_cosine(pts, n, s);
    compute_saved(pts, n, seconds, s);
    counted_against_6nd(pts, n, s);
    s->tpp_ratio = fmax(s->tpp2, s->tpp3) / fmin(s->tpp2, s->tpp3);
    s->a_difference = fabs(s->a2.a - s->a3);
    put(s, s->tpp_ratio, "tpp_ratio");
    put(s, s->a_difference, "a_difference");
    s->status = SCALING_STUDY_OK;
done:
    free(chin);
    free(kap);
    return s->status;
}

const char *const SCALING_PAIR_COLUMNS[] = { "budget_index", "budget", "N", "D", "loss",
                                             "loss_lo", "loss_hi", "seeds", NULL };
const char *const SCALING_OPTIMAL_COLUMNS[] = { "budget", "N_opt", "N_lo", "N_hi", "D_opt",
                                                "D_lo", "D_hi", "tpp", "tpp_lo", "tpp_hi",
                                                "loss_opt", "inside", NULL };
const char *const SCALING_LINE_COLUMNS[] = { "C", "N_a2", "D_a2", "N_a3", "D_a3", "N_k2",
                                             "D_k2", "N_073", "D_027", "N_050", "D_050",
                                             "tpp_a2", "tpp_a3", "tpp_k2", "tpp_20bpe", NULL };

int scaling_study_pairs(const ScalingPoint *pts, int n, const ScalingStudy *s, double (*rows)[8],
                        int max)
{
    int m = 0;
    for (int i = 0; i < n && m < max; i++) {
        const ScalingPoint *p = &pts[i];
        if (p->count != SCALING_COUNT_ALL || p->schedule != SCALING_SCHED_COOLDOWN ||
            !first_of_pair(pts, i))
            continue;
        int b = 0;
        while (b < s->nb && s->budgets[b] != p->budget)
            b++;
        SeedRange r = pair_range(pts, n, p, SCALING_SCHED_COOLDOWN);
        double row[8] = { b < s->nb ? b : -1, p->budget, p->N_all, p->D, r.sum / r.n, r.lo,
                          r.hi, r.n };
        memcpy(rows[m++], row, sizeof row);
    }
    return m;
}

void scaling_study_optimal_row(const ScalingProfile *p, double row[12])
{
    double C6 = p->budget / 6;
    /* a larger N_opt is a smaller D_opt: the interval's ends swap */
    double v[12] = { p->budget, p->N_opt, p->N_lo, p->N_hi, C6 / p->N_opt, C6 / p->N_hi,
                     C6 / p->N_lo, C6 / (p->N_opt * p->N_opt), C6 / (p->N_hi * p->N_hi),
                     C6 / (p->N_lo * p->N_lo), p->loss_opt, p->inside };
    memcpy(row, v, sizeof v);
}

void scaling_study_line_row(const ScalingStudy *s, double C, double row[15])
{
    /* the papers' slopes go through the first approach-2 vertex, so only their steepness is
     * compared */
    int first = 0;
    while (first < s->nb - 1 && !s->prof[first].ok)
        first++;
    const ScalingProfile *p0 = &s->prof[first];
    double C0 = s->budgets[first], N0 = p0->ok ? p0->N_opt : NAN, D0 = C0 / 6 / N0, r = C / C0;
    const ChinLaw *law = &s->f3.law;
    double G = pow(law->alpha * law->A / (law->beta * law->B), 1 / (law->alpha + law->beta));
    double n3 = G * pow(C / 6, law->beta / (law->alpha + law->beta));
    double d3 = pow(C / 6, law->alpha / (law->alpha + law->beta)) / G;
    const ScalingLine *a2 = &s->a2, *k2 = &s->k2;
    double n2 = a2->coef * pow(C, a2->a), d2 = a2->b_coef * pow(C, a2->b);
    double nk = k2->ok ? k2->coef * pow(C, k2->a) : NAN;
    double dk = k2->ok ? k2->b_coef * pow(C, k2->b) : NAN;
    double v[15] = { C, n2, d2, n3, d3, nk, dk, N0 * pow(r, 0.73), D0 * pow(r, 0.27),
                     N0 * pow(r, 0.5), D0 * pow(r, 0.5), d2 / n2, d3 / n3, dk / nk,
                     20 * SCALING_CHARS_PER_BPE };
    memcpy(row, v, sizeof v);
}

/* scaling_laws' report of its analysis (analysis/scaling_study.h): the fits' tables and lines,
 * OUT/scaling_fit.tsv (every fitted number), the figure's TSV files and gnuplot, and the summary
 * line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/tsv.h"
#include "examples/scaling_laws/scaling_laws.h"

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

static void print_approach2(const ScalingStudy *s)
{
    print_profiles("\nChinchilla approach 2 (N every parameter, cooldown branches): a parabola "
                   "in log N per budget; the vertex's 5-95% over the seeds", s->prof, s->nb, true);
    printf("  N_opt = %.4g C^%.3f (5-95%% %.3f to %.3f), D_opt = %.4g C^%.3f   (Chinchilla: "
           "a = 0.49, b = 0.51; Kaplan: a = 0.73)\n", s->a2.coef, s->a2.a, s->i2.a_lo,
           s->i2.a_hi, s->a2.b_coef, s->a2.b);
}

static void print_approach3(const ScalingStudy *s)
{
    const ChinLaw *law = &s->f3.law;
    printf("\nChinchilla approach 3 (the same %d points): L = E + A / N^alpha + B / D^beta, "
           "Huber on log L, %d starts (%.1f s), %d resamples (%.1f s)\n", s->n_points,
           s->f3.starts, s->fit_seconds, s->i3.good, s->bootstrap_seconds);
    printf("  E %.4g  A %.4g  B %.4g  alpha %.4f  beta %.4f   (paper: 1.69, 406.4, 410.7, "
           "0.34, 0.28)\n", law->E, law->A, law->B, law->alpha, law->beta);
    printf("  N_opt ~ C^%.3f (5-95%% %.3f to %.3f), D_opt ~ C^%.3f   (paper: a = 0.46)\n",
           s->a3, s->i3.a_lo, s->i3.a_hi, 1 - s->a3);
    printf("  D/N at the optimum:");
    for (int b = 0; b < s->nb; b++)
        printf(" %.3g: %.4g", s->budgets[b], s->tpp3_at[b]);
    printf(" characters\n");
}

static void print_kaplan(const ScalingStudy *s)
{
    if (s->kaplan_fitted) {
        print_profiles("\nKaplan-style approach 2 on the same trunks (N non-embedding, no "
                       "cooldown: the trunk evaluated at D = C / 6N)", s->kprof, s->nkb, false);
        printf("  N_opt = %.4g C^%.3f, D_opt = %.4g C^%.3f\n", s->k2.coef, s->k2.a,
               s->k2.b_coef, s->k2.b);
    }
    printf("\nwhich choice moves the exponent (approach 3, %s):\n",
           "the small grid of starts and the full fit's end point");
    printf("  %-12s %-34s %8s %12s\n", "N counted", "schedule", "a", "D/N at Cmax");
    static const char *const count[] = { "all", "non-emb", "all", "non-emb" };
    static const char *const sched[] = { "matched (cooldown branch)", "matched (cooldown branch)",
                                         "longer than the run (trunk)",
                                         "longer than the run (trunk)" };
    for (int r = 0; r < SCALING_CHOICES; r++)
        printf("  %-12s %-34s %8.3f %12.4g%s\n", count[r], sched[r], s->choice_a[r],
               s->choice_tpp[r], r == SCALING_CHOICE_CHINCHILLA ? "   (Chinchilla's choices)"
               : r == SCALING_CHOICE_KAPLAN ? "   (Kaplan's choices)" : "");
}

static void print_cosine(const ScalingStudy *s)
{
    printf("\ncooldown branches against fixed-length cosine runs (mean over seeds; spread: the "
           "larger of the two seed ranges)\n");
    printf("  %4s %4s %9s %6s %9s %9s %9s %9s %9s %s\n", "L", "C", "budget", "seeds", "cosine",
           "branch", "constant", "diff", "spread", "");
    for (int i = 0; i < s->n_cosine; i++) {
        const ScalingCosineRow *r = &s->cosine[i];
        printf("  %4d %4d %9.3g %6d %9.4f %9.4f %9.4f %+9.4f %9.4f %s\n", r->layers, r->width,
               r->budget, r->seeds, r->cosine, r->branch, r->constant, r->diff, r->spread,
               r->agree ? "within the seeds' spread" : "outside the seeds' spread");
    }
    if (s->n_cosine)
        printf("  %d of %d compared points agree within the seeds' spread\n", s->n_agree,
               s->n_cosine);
    else
        printf("  (no cosine references in these results)\n");
}

static void print_compute(const ScalingStudy *s, double seconds)
{
    const ScalingCompute *c = &s->compute;
    printf("\ncompute: the trunks and branches trained %.4g characters (%.4g FLOP as 6ND, %.4g "
           "counted by the tape); a separate cosine run for each cooldown point would train "
           "%.4g (%.4g FLOP as 6ND): %.1f%% saved. The cosine references added %.4g FLOP as "
           "6ND (%.4g counted); the trunks' steps past their last cooldown point, for Kaplan's "
           "points alone, %.4g.", c->trained, c->trained_6nd, c->counted, c->separate,
           c->separate_6nd, c->saved_percent, c->cosine_6nd, c->cosine_counted, c->kaplan_6nd);
    if (seconds > 0)
        printf(" The study took %.0f s (%.1f min) of wall clock.", seconds, seconds / 60);
    printf("\n");
    printf("\ncounted training FLOP per token against 6N (one row a size):\n");
    printf("  %4s %4s %9s %9s %14s %10s %10s\n", "L", "C", "N_all", "N_nonemb", "counted/token",
           "/ 6N_all", "/ 6N_nonemb");
    for (int i = 0; i < s->n_flop; i++) {
        const ScalingFlopRow *r = &s->flop[i];
        printf("  %4d %4d %9.0f %9.0f %14.4g %10.3f %10.3f\n", r->layers, r->width, r->N_all,
               r->N_nonemb, r->per_token, r->per_token / (6 * r->N_all),
               r->per_token / (6 * r->N_nonemb));
    }
}

static void print_agreement(const ScalingStudy *s)
{
    printf("\nat the largest budget, C = %.3g: D/N %.4g characters (approach 2), %.4g "
           "(approach 3): about %.3g and %.3g BPE tokens per parameter at %.0f characters a "
           "token (assumed)\n", s->C_max, s->tpp2, s->tpp3, s->tpp2 / SCALING_CHARS_PER_BPE,
           s->tpp3 / SCALING_CHARS_PER_BPE, SCALING_CHARS_PER_BPE);
    printf("agreement: D/N ratio %.2f (%s 1.5), |a2 - a3| = %.3f (%s 0.1); Kaplan-style a = "
           "%.3f (approach 2), %.3f (approach 3)\n", s->tpp_ratio,
           s->tpp_ratio <= 1.5 ? "within" : "beyond", s->a_difference,
           s->a_difference <= 0.1 ? "within" : "beyond", s->k2.a,
           s->choice_a[SCALING_CHOICE_KAPLAN]);
    printf("intervals (5-95%%): D/N approach2 %.4g to %.4g, approach3 %.4g to %.4g; a approach2 "
           "%.3f to %.3f, approach3 %.3f to %.3f\n", s->i2.tpp_lo, s->i2.tpp_hi, s->i3.tpp_lo,
           s->i3.tpp_hi, s->i2.a_lo, s->i2.a_hi, s->i3.a_lo, s->i3.a_hi);
}

enum { LINE_POINTS = 41, CURVE_POINTS = 41, MAX_PAIRS = 2048 };

static void write_optimal(const char *out, const char *name, const ScalingProfile *prof, int nb)
{
    TsvWriter *w = tsv_open_in(out, name, SCALING_OPTIMAL_COLUMNS);
    for (int b = 0; b < nb; b++) {
        double v[12];
        if (prof[b].ok) {
            scaling_study_optimal_row(&prof[b], v);
            tsv_row(w, v);
        }
    }
    tsv_close_or_die(w);
}

static void write_tables(const char *out, const ScalingPoint *pts, int n, const ScalingStudy *s)
{
    static double pairs[MAX_PAIRS][8];
    TsvWriter *w = tsv_open_in(out, "scaling_points.tsv", SCALING_PAIR_COLUMNS);
    for (int i = 0, np = scaling_study_pairs(pts, n, s, pairs, MAX_PAIRS); i < np; i++)
        tsv_row(w, pairs[i]);
    tsv_close_or_die(w);
    write_optimal(out, "scaling_optimal.tsv", s->prof, s->nb);
    write_optimal(out, "scaling_optimal_kaplan.tsv", s->kprof, s->k2.ok ? s->nkb : 0);
    w = tsv_open_in(out, "scaling_isoflop.tsv", (const char *const[]){
        "budget_index", "budget", "N", "parabola", NULL });
    for (int b = 0; b < s->nb; b++) {
        const ScalingProfile *p = &s->prof[b];
        for (int k = 0; k < CURVE_POINTS && p->ok; k++) {
            double x = log(p->n_min / 1.3) + k * log(1.69 * p->n_max / p->n_min) /
                       (CURVE_POINTS - 1);
            double v[4] = { b, s->budgets[b], exp(x), p->c[0] + p->c[1] * x + p->c[2] * x * x };
            tsv_row(w, v);
        }
    }
    tsv_close_or_die(w);
    /* the lines over the budgets and a little beyond */
    w = tsv_open_in(out, "scaling_lines.tsv", SCALING_LINE_COLUMNS);
    double lo = s->budgets[0] / 2, hi = s->budgets[s->nb - 1] * 2, v[15];
    for (int k = 0; k < LINE_POINTS; k++) {
        scaling_study_line_row(s, lo * pow(hi / lo, (double)k / (LINE_POINTS - 1)), v);
        tsv_row(w, v);
    }
    tsv_close_or_die(w);
}

/* Writes the figure's tables: OUT/scaling_points.tsv, scaling_isoflop.tsv, scaling_optimal.tsv,
 * scaling_optimal_kaplan.tsv, scaling_lines.tsv; draws OUT/scaling_laws.png (scaling_laws.gp). */
static void draw_figure(const AnalyseOptions *o, const ScalingPoint *pts, int n,
                        const ScalingStudy *s)
{
    write_tables(o->out, pts, n, s);
    char bl[512] = "";
    for (int b = 0; b < s->nb; b++)
        snprintf(bl + strlen(bl), sizeof bl - strlen(bl), "%s%.3g", b ? " " : "", s->budgets[b]);
    const char *files[6] = { "scaling_points.tsv", "scaling_isoflop.tsv", "scaling_optimal.tsv",
                             "scaling_optimal_kaplan.tsv", "scaling_lines.tsv",
                             "scaling_laws.png" };
    char path[6][1024], nbs[16], a2s[32], a3s[32], k2s[32];
    for (int i = 0; i < 6; i++)
        snprintf(path[i], sizeof path[i], "%s/%s", o->out, files[i]);
    snprintf(nbs, sizeof nbs, "%d", s->nb);
    snprintf(a2s, sizeof a2s, "%.3f", s->a2.a);
    snprintf(a3s, sizeof a3s, "%.3f", s->a3);
    snprintf(k2s, sizeof k2s, "%.3f", s->k2.a);
    const char *names[] = { "points", "isoflop", "optimal", "kaplan", "lines", "output", "nb",
                            "budgets", "a2", "a3", "k2" };
    const char *values[] = { path[0], path[1], path[2], path[3], path[4], path[5], nbs, bl,
                             a2s, a3s, k2s };
    if (plot_run_vars(TAPEGRAD_SOURCE_DIR "/examples/scaling_laws/scaling_laws.gp", names,
                      values, 11, "output") == PLOT_OK)
        printf("wrote %s\n", path[5]);
}

bool scaling_analyse(const ScalingPoint *pts, int n, const AnalyseOptions *o)
{
    TsvWriter *fit = tsv_open_in(o->out, "scaling_fit.tsv",
                                 (const char *const[]){ "quantity", "value", NULL });
    ScalingStudy *s = malloc(sizeof *s);
    if (!s)
        cli_die(1, "out of memory");
    ScalingStudyStatus status = scaling_study_analyse(pts, n, o->bootstrap, o->seed, o->seconds,
                                                      s);
    if (status == SCALING_STUDY_TOO_FEW)
        fprintf(stderr, "scaling_laws: %d cooldown points over %d budgets: too few to fit\n",
                s->n_points, s->nb);
    else
        print_approach2(s);
    if (status == SCALING_STUDY_NO_FIT)
        fprintf(stderr, "scaling_laws: approach 3 found no finite fit\n");
    for (int i = 0; i < s->nq; i++) {
        tsv_str(fit, s->q[i].name);
        tsv_num(fit, s->q[i].value);
        tsv_end_row(fit);
    }
    tsv_close_or_die(fit);
    if (status == SCALING_STUDY_OK) {
        print_approach3(s);
        print_kaplan(s);
        print_cosine(s);
        print_compute(s, o->seconds);
        print_agreement(s);
        draw_figure(o, pts, n, s);
        printf("summary: D/N approach2 %.4g approach3 %.4g; a approach2 %.3f approach3 %.3f\n",
               s->tpp2, s->tpp3, s->a2.a, s->a3);
    }
    free(s);
    return status == SCALING_STUDY_OK;
}

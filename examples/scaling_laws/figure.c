/* scaling_laws' figure: the TSV files it is drawn from, and gnuplot (scaling_laws.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/scaling_fit.h"
#include "examples/common/plot.h"
#include "examples/common/tsv.h"
#include "examples/scaling_laws/scaling_laws.h"

enum { LINE_POINTS = 41, CURVE_POINTS = 41 };

static int budget_index(const double *budgets, int nb, double C)
{
    for (int b = 0; b < nb; b++)
        if (budgets[b] == C)
            return b;
    return -1;
}

/* One row per (size, budget) of the cooldown points: the mean loss and the seeds' range. */
static void write_points(const char *out, const ScalingPoint *pts, int n, const double *budgets,
                         int nb)
{
    TsvWriter *w = tsv_open_in(out, "scaling_points.tsv", (const char *const[]){
        "budget_index", "budget", "N", "D", "loss", "loss_lo", "loss_hi", "seeds", NULL });
    for (int i = 0; i < n; i++) {
        const ScalingPoint *p = &pts[i];
        if (p->count != SCALING_COUNT_ALL || p->schedule != SCALING_SCHED_COOLDOWN)
            continue;
        bool first = true;
        for (int j = 0; j < i && first; j++)
            first = !(pts[j].count == p->count && pts[j].schedule == p->schedule &&
                      pts[j].budget == p->budget && pts[j].N_all == p->N_all);
        if (!first)
            continue;
        double sum = 0, lo = INFINITY, hi = -INFINITY;
        int k = 0;
        for (int j = i; j < n; j++)
            if (pts[j].count == p->count && pts[j].schedule == p->schedule &&
                pts[j].budget == p->budget && pts[j].N_all == p->N_all) {
                sum += pts[j].val_loss;
                lo = fmin(lo, pts[j].val_loss);
                hi = fmax(hi, pts[j].val_loss);
                k++;
            }
        double v[8] = { budget_index(budgets, nb, p->budget), p->budget, p->N_all, p->D,
                        sum / k, lo, hi, k };
        tsv_row(w, v);
    }
    tsv_close_or_die(w);
}

static void write_optimal(const char *out, const char *name, const ScalingProfile *prof, int nb)
{
    TsvWriter *w = tsv_open_in(out, name, (const char *const[]){
        "budget", "N_opt", "N_lo", "N_hi", "D_opt", "D_lo", "D_hi", "tpp", "tpp_lo", "tpp_hi",
        "loss_opt", "inside", NULL });
    for (int b = 0; b < nb; b++) {
        const ScalingProfile *p = &prof[b];
        if (!p->ok)
            continue;
        double C6 = p->budget / 6;
        /* a larger N_opt is a smaller D_opt: the interval's ends swap */
        double v[12] = { p->budget, p->N_opt, p->N_lo, p->N_hi, C6 / p->N_opt, C6 / p->N_hi,
                         C6 / p->N_lo, C6 / (p->N_opt * p->N_opt), C6 / (p->N_hi * p->N_hi),
                         C6 / (p->N_lo * p->N_lo), p->loss_opt, p->inside };
        tsv_row(w, v);
    }
    tsv_close_or_die(w);
}

void scaling_figure(const AnalyseOptions *o, const ScalingPoint *pts, int n,
                    const ScalingProfile *chin, const double *budgets, int nb,
                    const ScalingProfile *kap, const double *kbudgets, int nkb,
                    const ScalingLine *a2, const ScalingLine *k2, double a3_alpha,
                    double a3_beta, double a3_G)
{
    (void)kbudgets;
    write_points(o->out, pts, n, budgets, nb);
    write_optimal(o->out, "scaling_optimal.tsv", chin, nb);
    write_optimal(o->out, "scaling_optimal_kaplan.tsv", kap, nkb);
    TsvWriter *w = tsv_open_in(o->out, "scaling_isoflop.tsv", (const char *const[]){
        "budget_index", "budget", "N", "parabola", NULL });
    for (int b = 0; b < nb; b++)
        for (int k = 0; k < CURVE_POINTS && chin[b].ok; k++) {
            double x = log(chin[b].n_min / 1.3) + k * log(1.69 * chin[b].n_max / chin[b].n_min) /
                       (CURVE_POINTS - 1);
            double v[4] = { b, budgets[b], exp(x),
                            chin[b].c[0] + chin[b].c[1] * x + chin[b].c[2] * x * x };
            tsv_row(w, v);
        }
    tsv_close_or_die(w);

    /* The lines over the budgets and a little beyond; the papers' slopes drawn through the
     * first approach-2 vertex, so only their steepness is compared. */
    int first = 0;
    while (first < nb - 1 && !chin[first].ok)
        first++;
    double C0 = budgets[first], N0 = chin[first].ok ? chin[first].N_opt : NAN, D0 = C0 / 6 / N0;
    w = tsv_open_in(o->out, "scaling_lines.tsv", (const char *const[]){
        "C", "N_a2", "D_a2", "N_a3", "D_a3", "N_k2", "D_k2", "N_073", "D_027", "N_050",
        "D_050", "tpp_a2", "tpp_a3", "tpp_k2", "tpp_20bpe", NULL });
    double lo = budgets[0] / 2, hi = budgets[nb - 1] * 2;
    for (int k = 0; k < LINE_POINTS; k++) {
        double C = lo * pow(hi / lo, (double)k / (LINE_POINTS - 1)), r = C / C0;
        double n3 = a3_G * pow(C / 6, a3_beta / (a3_alpha + a3_beta));
        double d3 = pow(C / 6, a3_alpha / (a3_alpha + a3_beta)) / a3_G;
        double n2 = a2->coef * pow(C, a2->a), d2 = a2->b_coef * pow(C, a2->b);
        double nk = k2->ok ? k2->coef * pow(C, k2->a) : NAN;
        double dk = k2->ok ? k2->b_coef * pow(C, k2->b) : NAN;
        double v[15] = { C, n2, d2, n3, d3, nk, dk, N0 * pow(r, 0.73), D0 * pow(r, 0.27),
                         N0 * pow(r, 0.5), D0 * pow(r, 0.5), d2 / n2, d3 / n3, dk / nk,
                         20 * SCALING_CHARS_PER_BPE };
        tsv_row(w, v);
    }
    tsv_close_or_die(w);

    char bl[512] = "";
    for (int b = 0; b < nb; b++)
        snprintf(bl + strlen(bl), sizeof bl - strlen(bl), "%s%.3g", b ? " " : "", budgets[b]);
    const char *files[6] = { "scaling_points.tsv", "scaling_isoflop.tsv", "scaling_optimal.tsv",
                             "scaling_optimal_kaplan.tsv", "scaling_lines.tsv",
                             "scaling_laws.png" };
    char path[6][1024], nbs[16], a2s[32], a3s[32], k2s[32];
    for (int i = 0; i < 6; i++)
        snprintf(path[i], sizeof path[i], "%s/%s", o->out, files[i]);
    snprintf(nbs, sizeof nbs, "%d", nb);
    snprintf(a2s, sizeof a2s, "%.3f", a2->a);
    snprintf(a3s, sizeof a3s, "%.3f", a3_beta / (a3_alpha + a3_beta));
    snprintf(k2s, sizeof k2s, "%.3f", k2->a);
    const char *names[] = { "points", "isoflop", "optimal", "kaplan", "lines", "output", "nb",
                            "budgets", "a2", "a3", "k2" };
    const char *values[] = { path[0], path[1], path[2], path[3], path[4], path[5], nbs, bl,
                             a2s, a3s, k2s };
    if (plot_run_vars(TAPEGRAD_SOURCE_DIR "/examples/scaling_laws/scaling_laws.gp", names,
                      values, 11, "output") == PLOT_OK)
        printf("wrote %s\n", path[5]);
}

/* A scaling-law study's result tables as scaling_laws prints them (declared in
 * analysis/scaling_study.h): approach 2's IsoFLOP vertices per budget with their 5-95% over the
 * seeds and the power laws through them, approach 3's parametric fit with its interval and D/N
 * at each budget, and Kaplan-style approach 2 on the trunks with the table of which choice moves
 * the exponent. In: an analysed ScalingStudy; out: the lines, into the FILE the program gives.
 * The program keeps its own lines (its runs, the cosine check, the compute, the summary). */
#include <math.h>
#include <stdio.h>

#include "analysis/scaling_study.h"

/* One budget a row: the vertex (N, its 5-95% when bars), D and D/N in characters and BPE
 * tokens, the loss there, and whether the vertex lies outside the sizes run. */
static void print_profiles(const char *title, const ScalingProfile *prof, int nb, bool bars,
                           FILE *out)
{
    fprintf(out, "%s\n", title);
    fprintf(out, "  %9s %9s %9s %9s %10s %9s %9s %9s %8s\n", "C (6ND)", "N_opt",
            bars ? "5%" : "", bars ? "95%" : "", "D_opt chr", "D/N chr", "D/N BPE", "loss_opt",
            "");
    for (int b = 0; b < nb; b++) {
        const ScalingProfile *p = &prof[b];
        if (!p->ok) {
            fprintf(out, "  %9.3g  no valley (the losses fall or rise throughout)\n", p->budget);
            continue;
        }
        double D = p->budget / (6 * p->N_opt);
        fprintf(out, "  %9.3g %9.4g %9.4g %9.4g %10.4g %9.4g %9.4g %9.4f %s\n", p->budget,
                p->N_opt, bars ? p->N_lo : NAN, bars ? p->N_hi : NAN, D, D / p->N_opt,
                D / p->N_opt / SCALING_CHARS_PER_BPE, p->loss_opt, p->inside ? "" : "outside");
    }
}

void scaling_study_print_approach2(const ScalingStudy *s, FILE *out)
{
    print_profiles("\nChinchilla approach 2 (N every parameter, cooldown branches): a parabola "
                   "in log N per budget; the vertex's 5-95% over the seeds", s->prof, s->nb, true,
                   out);
    fprintf(out, "  N_opt = %.4g C^%.3f (5-95%% %.3f to %.3f), D_opt = %.4g C^%.3f   "
            "(Chinchilla: a = 0.49, b = 0.51; Kaplan: a = 0.73)\n", s->a2.coef, s->a2.a,
            s->i2.a_lo, s->i2.a_hi, s->a2.b_coef, s->a2.b);
}

void scaling_study_print_approach3(const ScalingStudy *s, FILE *out)
{
    const ChinLaw *law = &s->f3.law;
    fprintf(out, "\nChinchilla approach 3 (the same %d points): L = E + A / N^alpha + B / D^beta, "
            "Huber on log L, %d starts (%.1f s), %d resamples (%.1f s)\n", s->n_points,
            s->f3.starts, s->fit_seconds, s->i3.good, s->bootstrap_seconds);
    fprintf(out, "  E %.4g  A %.4g  B %.4g  alpha %.4f  beta %.4f   (paper: 1.69, 406.4, 410.7, "
            "0.34, 0.28)\n", law->E, law->A, law->B, law->alpha, law->beta);
    fprintf(out, "  N_opt ~ C^%.3f (5-95%% %.3f to %.3f), D_opt ~ C^%.3f   (paper: a = 0.46)\n",
            s->a3, s->i3.a_lo, s->i3.a_hi, 1 - s->a3);
    fprintf(out, "  D/N at the optimum:");
    for (int b = 0; b < s->nb; b++)
        fprintf(out, " %.3g: %.4g", s->budgets[b], s->tpp3_at[b]);
    fprintf(out, " characters\n");
}

void scaling_study_print_kaplan(const ScalingStudy *s, FILE *out)
{
    if (s->kaplan_fitted) {
        print_profiles("\nKaplan-style approach 2 on the same trunks (N non-embedding, no "
                       "cooldown: the trunk evaluated at D = C / 6N)", s->kprof, s->nkb, false,
                       out);
        fprintf(out, "  N_opt = %.4g C^%.3f, D_opt = %.4g C^%.3f\n", s->k2.coef, s->k2.a,
                s->k2.b_coef, s->k2.b);
    }
    fprintf(out, "\nwhich choice moves the exponent (approach 3, %s):\n",
            "the small grid of starts and the full fit's end point");
    fprintf(out, "  %-12s %-34s %8s %12s\n", "N counted", "schedule", "a", "D/N at Cmax");
    static const char *const count[] = { "all", "non-emb", "all", "non-emb" };
    static const char *const sched[] = { "matched (cooldown branch)", "matched (cooldown branch)",
                                         "longer than the run (trunk)",
                                         "longer than the run (trunk)" };
    for (int r = 0; r < SCALING_CHOICES; r++)
        fprintf(out, "  %-12s %-34s %8.3f %12.4g%s\n", count[r], sched[r], s->choice_a[r],
                s->choice_tpp[r], r == SCALING_CHOICE_CHINCHILLA ? "   (Chinchilla's choices)"
                : r == SCALING_CHOICE_KAPLAN ? "   (Kaplan's choices)" : "");
}

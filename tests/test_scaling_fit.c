/* The scaling-law fits (analysis/scaling_fit.h) on synthetic data with known constants:
 * lines and parabolas recover their coefficients exactly (to rounding); approach 2 on IsoFLOP
 * profiles drawn from a known L(N, D) recovers the exponent beta / (alpha + beta) that
 * chin_optimal predicts; approach 3 recovers E, A, B, alpha, beta from noiseless points (to
 * 1e-3 relative) and from points with 0.5% multiplicative noise (within the tolerances stated
 * below); L-BFGS minimises a Rosenbrock function. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "analysis/scaling_fit.h"

/* |got - want| <= tol, with both values printed when not. */
static void near(double got, double want, double tol, const char *what)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("%s: got %.12g, want %.12g (tolerance %g)", what, got, want, tol);
}
#define assert_double_equal(got, want, tol) near((got), (want), (tol), #got)

/* The synthetic law: of the order of what a character-level model shows. */
static const ChinLaw TRUE_LAW = { .E = 1.2, .A = 60.0, .B = 300.0, .alpha = 0.45, .beta = 0.35 };

static void test_line_exact(void **state)
{
    (void)state;
    double x[6], y[6], b0, b1;
    for (int i = 0; i < 6; i++) {
        x[i] = 0.7 * i - 1.3;
        y[i] = 2.25 - 0.375 * x[i];
    }
    assert_true(fit_line(x, y, 6, &b0, &b1));
    assert_double_equal(b0, 2.25, 1e-13);
    assert_double_equal(b1, -0.375, 1e-13);
    double same[2] = { 1.0, 1.0 };
    assert_false(fit_line(same, y, 2, &b0, &b1));
}

/* A parabola far from the origin (x near 10, as log N is): centring must keep it exact. */
static void test_parabola_exact(void **state)
{
    (void)state;
    double x[7], y[7], c[3], xm;
    for (int i = 0; i < 7; i++) {
        x[i] = 8.0 + 0.55 * i;
        y[i] = 3.0 + 0.25 * (x[i] - 9.7) * (x[i] - 9.7);
    }
    assert_true(fit_parabola(x, y, 7, c));
    assert_double_equal(c[2], 0.25, 1e-10);
    assert_double_equal(c[1], -2 * 0.25 * 9.7, 1e-9);
    assert_true(fit_parabola_min(c, &xm));
    assert_double_equal(xm, 9.7, 1e-10);
    double down[3] = { 0, 1, -1 };
    assert_false(fit_parabola_min(down, &xm));
}

/* Approach 2 on exact IsoFLOP profiles of a law with alpha = beta: then log L is symmetric
 * in log N about N_opt along the profile, so the parabola's vertex is N_opt exactly and
 * N_opt ~ C^0.5 exactly. (With alpha != beta the parabola is only an approximation.) */
static void test_approach2_exponent(void **state)
{
    (void)state;
    ChinLaw law = { .E = 0.0, .A = 100.0, .B = 100.0, .alpha = 0.4, .beta = 0.4 };
    double lc[4], ln_opt[4], ld_opt[4];
    for (int b = 0; b < 4; b++) {
        double C = 1e10 * pow(4.0, b), Nopt, Dopt;
        chin_optimal(&law, C, &Nopt, &Dopt);
        double x[9], y[9];
        for (int i = 0; i < 9; i++) {
            double N = Nopt * pow(2.0, i - 4);
            x[i] = log(N);
            /* With E = 0 and equal constants, log L is even in log N - log N_opt. */
            y[i] = log(chin_loss(&law, N, C / (6 * N)));
        }
        double c[3], xm;
        assert_true(fit_parabola(x, y, 9, c));
        assert_true(fit_parabola_min(c, &xm));
        assert_double_equal(xm, log(Nopt), 1e-8);
        lc[b] = log(C);
        ln_opt[b] = xm;
        ld_opt[b] = log(C / (6 * exp(xm)));
    }
    double k, a, kb, bexp;
    assert_true(fit_line(lc, ln_opt, 4, &k, &a));
    assert_true(fit_line(lc, ld_opt, 4, &kb, &bexp));
    assert_double_equal(a, 0.5, 1e-9);
    assert_double_equal(bexp, 0.5, 1e-9);
}

/* chin_optimal against a brute-force minimum along the budget. */
static void test_optimal_allocation(void **state)
{
    (void)state;
    double C = 1e21, Nopt, Dopt;
    chin_optimal(&TRUE_LAW, C, &Nopt, &Dopt);
    assert_double_equal(6 * Nopt * Dopt / C, 1.0, 1e-12);
    double best = INFINITY, bestN = 0;
    for (double lN = log(Nopt) - 1; lN < log(Nopt) + 1; lN += 1e-5) {
        double N = exp(lN), L = chin_loss(&TRUE_LAW, N, C / (6 * N));
        if (L < best) {
            best = L;
            bestN = N;
        }
    }
    assert_double_equal(bestN / Nopt, 1.0, 2e-5);
    /* The paper's approach-3 constants at Gopher's budget, 5.76e23 FLOP: N_opt 32.19e9 and
     * 92.6 tokens per parameter (by hand from the formula; the paper's Table 3 rounds them). */
    ChinLaw p = chin_paper();
    chin_optimal(&p, 5.76e23, &Nopt, &Dopt);
    assert_double_equal(Nopt / 32.19e9, 1.0, 1e-3);
    assert_double_equal(Dopt / Nopt, 92.65, 0.05);
}

static double rosenbrock(const double *x, double *g, void *ctx)
{
    (void)ctx;
    double a = 1 - x[0], b = x[1] - x[0] * x[0];
    if (g) {
        g[0] = -2 * a - 400 * x[0] * b;
        g[1] = 200 * b;
    }
    return a * a + 100 * b * b;
}

static void test_lbfgs_rosenbrock(void **state)
{
    (void)state;
    double x[2] = { -1.2, 1.0 };
    int it = fit_lbfgs(rosenbrock, NULL, x, 2, 1e-9, 1000);
    assert_true(it > 0);
    assert_double_equal(x[0], 1.0, 1e-6);
    assert_double_equal(x[1], 1.0, 1e-6);
}

/* The gradient of the Huber objective against central differences, on both sides of delta. */
static void test_objective_gradient(void **state)
{
    (void)state;
    double N[4] = { 1e3, 1e4, 3e4, 1e5 }, D[4] = { 1e6, 3e5, 1e5, 3e4 }, L[4];
    for (int i = 0; i < 4; i++)
        L[i] = chin_loss(&TRUE_LAW, N[i], D[i]) * (1 + 0.004 * (i - 1.5));
    double x[5] = { log(50.0), log(350.0), log(1.1), 0.4, 0.38 }, g[5];
    chin_objective(x, N, D, L, 4, 1e-3, g);
    for (int k = 0; k < 5; k++) {
        double h = 1e-6, xp[5], xm[5];
        memcpy(xp, x, sizeof xp);
        memcpy(xm, x, sizeof xm);
        xp[k] += h;
        xm[k] -= h;
        double fd = (chin_objective(xp, N, D, L, 4, 1e-3, NULL) -
                     chin_objective(xm, N, D, L, 4, 1e-3, NULL)) / (2 * h);
        assert_double_equal(g[k], fd, 1e-7 + 1e-5 * fabs(fd));
    }
}

/* A grid of 6 sizes x 4 budgets, as the program trains. noise: relative, deterministic. */
static int synthetic(double noise, double *N, double *D, double *L)
{
    int n = 0;
    Rng rng = rng_new(7, 1);
    for (int b = 0; b < 4; b++)
        for (int s = 0; s < 6; s++) {
            double C = 3e10 * pow(3.0, b);
            N[n] = 3e3 * pow(2.0, s);
            D[n] = C / (6 * N[n]);
            L[n] = chin_loss(&TRUE_LAW, N[n], D[n]) * (1 + noise * rng_normal(&rng));
            n++;
        }
    return n;
}

static void test_approach3_noiseless(void **state)
{
    (void)state;
    double N[24], D[24], L[24];
    int n = synthetic(0.0, N, D, L);
    ChinGrid grid = chin_grid_paper();
    ChinFit fit;
    assert_true(fit_chinchilla(N, D, L, n, 1e-3, &grid, NULL, &fit));
    assert_int_equal(fit.starts, 5 * 5 * 5 * 6 * 6);
    const ChinLaw *p = &fit.law;
    assert_double_equal(p->E / TRUE_LAW.E, 1.0, 1e-4);
    assert_double_equal(p->A / TRUE_LAW.A, 1.0, 1e-3);
    assert_double_equal(p->B / TRUE_LAW.B, 1.0, 1e-3);
    assert_double_equal(p->alpha, TRUE_LAW.alpha, 1e-4);
    assert_double_equal(p->beta, TRUE_LAW.beta, 1e-4);
}

/* 0.5% noise on each loss (24 points): the exponents within 0.05, E, A and B within 20% (E
 * and B trade against each other over a factor 27 of budgets: this draw gives E 1.08, A 52.5,
 * B 291, alpha 0.427, beta 0.346), and the compute-optimal tokens per parameter at the
 * largest budget within 30%. */
static void test_approach3_noisy(void **state)
{
    (void)state;
    double N[24], D[24], L[24];
    int n = synthetic(0.005, N, D, L);
    ChinGrid grid = chin_grid_paper();
    ChinFit fit;
    assert_true(fit_chinchilla(N, D, L, n, 1e-3, &grid, NULL, &fit));
    const ChinLaw *p = &fit.law;
    printf("noisy fit: E %.4g A %.4g B %.4g alpha %.4g beta %.4g\n", p->E, p->A, p->B, p->alpha,
           p->beta);
    assert_double_equal(p->alpha, TRUE_LAW.alpha, 0.05);
    assert_double_equal(p->beta, TRUE_LAW.beta, 0.05);
    assert_double_equal(p->E / TRUE_LAW.E, 1.0, 0.2);
    assert_double_equal(p->A / TRUE_LAW.A, 1.0, 0.2);
    assert_double_equal(p->B / TRUE_LAW.B, 1.0, 0.2);
    double C = 3e10 * 27, n1, d1, n2, d2;
    chin_optimal(p, C, &n1, &d1);
    chin_optimal(&TRUE_LAW, C, &n2, &d2);
    assert_double_equal((d1 / n1) / (d2 / n2), 1.0, 0.3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_exact),
        cmocka_unit_test(test_parabola_exact),
        cmocka_unit_test(test_approach2_exponent),
        cmocka_unit_test(test_optimal_allocation),
        cmocka_unit_test(test_lbfgs_rosenbrock),
        cmocka_unit_test(test_objective_gradient),
        cmocka_unit_test(test_approach3_noiseless),
        cmocka_unit_test(test_approach3_noisy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

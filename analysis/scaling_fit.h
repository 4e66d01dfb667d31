#ifndef TAPEGRAD_SCALING_FIT_H
#define TAPEGRAD_SCALING_FIT_H
/* The fits of the scaling-law papers, on a handful of (N, D, loss) points (docs/scaling_laws.md).
 *
 * Kaplan et al. 2020 and Hoffmann et al. 2022 ("Chinchilla") both describe the final loss L of a
 * model with N parameters trained on D tokens, with a compute budget C = 6 N D:
 *
 *     Chinchilla approach 2   for each budget C, a parabola in log N through the losses of the
 *                             models of that budget (an IsoFLOP profile); its vertex is N_opt(C),
 *                             D_opt(C) = C / (6 N_opt). Then N_opt ~ C^a and D_opt ~ C^b, each a
 *                             straight line in log-log space (least squares): fit_parabola,
 *                             fit_line.
 *     Chinchilla approach 3   L(N, D) = E + A / N^alpha + B / D^beta, fitted by minimising the
 *                             Huber loss (delta 1e-3) of the residuals of log L, with
 *                             A = exp(a), B = exp(b), E = exp(e) and log L(N, D) written as
 *                             LSE(a - alpha log N, b - beta log D, e); L-BFGS from a grid of
 *                             initialisations, the best end point kept: fit_chinchilla.
 *     Kaplan's L(N)           L = (N_c / N)^alpha_N, a straight line in log-log space.
 *
 * The compute-optimal allocation of a fitted L(N, D), minimising it on 6 N D = C:
 *     N_opt = G (C/6)^(beta/(alpha+beta)),  D_opt = (C/6)^(alpha/(alpha+beta)) / G,
 *     G = (alpha A / (beta B))^(1/(alpha+beta))                          (chin_optimal). */
#include <stdbool.h>
#include <stdint.h>

/* y = intercept + slope x by least squares; false for fewer than 2 points or all x equal. */
bool   fit_line(const double *x, const double *y, int n, double *intercept, double *slope);
/* y = c[0] + c[1] x + c[2] x^2 by least squares; false for fewer than 3 distinct x. */
bool   fit_parabola(const double *x, const double *y, int n, double c[3]);
/* The vertex -c[1] / (2 c[2]) of a parabola that opens upwards; false (and NAN) otherwise. */
bool   fit_parabola_min(const double c[3], double *x_min);

typedef struct {
    double E, A, B, alpha, beta;
} ChinLaw;

/* Hoffmann et al.'s own approach-3 fit: E 1.69, A 406.4, B 410.7, alpha 0.34, beta 0.28. */
ChinLaw chin_paper(void);
/* L(N, D). */
double  chin_loss(const ChinLaw *p, double N, double D);
/* The compute-optimal N and D for budget C under p (see above). */
void    chin_optimal(const ChinLaw *p, double C, double *N_opt, double *D_opt);

/* Where fit_chinchilla starts L-BFGS: the product grid of these values (the paper's grid is
 * alpha, beta in {0, 0.5, ..., 2}, e in {-1, -0.5, ..., 1}, a, b in {0, 5, ..., 25}). */
typedef struct {
    const double *alpha, *beta, *e, *a, *b;
    int           n_alpha, n_beta, n_e, n_a, n_b;
} ChinGrid;

ChinGrid chin_grid_paper(void);
/* A smaller grid (3 x 3 x 3 x 3 x 3 = 243 starts) for the bootstrap's many refits. */
ChinGrid chin_grid_small(void);

typedef struct {
    ChinLaw law;
    double  objective;     /* the sum of Huber losses at the end point */
    int     starts;        /* initialisations tried */
    int     converged;     /* of them, those that met the gradient tolerance */
} ChinFit;

/* The Huber loss of r with threshold delta: r^2 / 2 inside, delta (|r| - delta / 2) outside. */
double  fit_huber(double r, double delta);
/* The objective of approach 3 at parameters x = (a, b, e, alpha, beta), and its gradient in g
 * (may be NULL). */
double  chin_objective(const double x[5], const double *N, const double *D, const double *L,
                       int n, double delta, double g[5]);
/* Approach 3 on n points (n >= 5): the best of L-BFGS runs from every start of grid, plus
 * `extra` if not NULL. False when no run ended at a finite objective. */
bool    fit_chinchilla(const double *N, const double *D, const double *L, int n, double delta,
                       const ChinGrid *grid, const ChinLaw *extra, ChinFit *out);

/* Minimises f over x[n] (n <= 8) by L-BFGS (memory 8) with a backtracking Armijo line search,
 * from x; x receives the end point. Stops when the gradient's largest component is below gtol,
 * when no step decreases f, or after max_iter iterations. Returns the iterations done, negative
 * when it stopped without meeting gtol. Exposed for the tests. */
typedef double (*FitObjective)(const double *x, double *g, void *ctx);
int     fit_lbfgs(FitObjective f, void *ctx, double *x, int n, double gtol, int max_iter);

#endif

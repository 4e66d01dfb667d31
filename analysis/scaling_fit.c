/* The scaling-law fits (scaling_fit.h): least-squares lines and parabolas, and Chinchilla's
 * approach 3 by L-BFGS on a Huber loss. */
#include "analysis/scaling_fit.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

bool fit_line(const double *x, const double *y, int n, double *intercept, double *slope)
{
    *intercept = *slope = NAN;
    if (n < 2)
        return false;
    double mx = 0, my = 0;
    for (int i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= n;
    my /= n;
    double sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
    }
    if (!(sxx > 0))
        return false;
    *slope = sxy / sxx;
    *intercept = my - *slope * mx;
    return true;
}

/* Solves the 3x3 system m z = r by Gaussian elimination with partial pivoting. */
static bool solve3(double m[3][3], double r[3], double z[3])
{
    for (int c = 0; c < 3; c++) {
        int p = c;
        for (int i = c + 1; i < 3; i++)
            if (fabs(m[i][c]) > fabs(m[p][c]))
                p = i;
        if (!(fabs(m[p][c]) > 1e-300))
            return false;
        for (int j = 0; j < 3; j++) {
            double t = m[c][j]; m[c][j] = m[p][j]; m[p][j] = t;
        }
        double t = r[c]; r[c] = r[p]; r[p] = t;
        for (int i = c + 1; i < 3; i++) {
            double f = m[i][c] / m[c][c];
            for (int j = c; j < 3; j++)
                m[i][j] -= f * m[c][j];
            r[i] -= f * r[c];
        }
    }
    for (int i = 2; i >= 0; i--) {
        double s = r[i];
        for (int j = i + 1; j < 3; j++)
            s -= m[i][j] * z[j];
        z[i] = s / m[i][i];
    }
    return true;
}

bool fit_parabola(const double *x, const double *y, int n, double c[3])
{
    c[0] = c[1] = c[2] = NAN;
    if (n < 3)
        return false;
    /* Centred and scaled x keeps the normal equations well conditioned; the coefficients are
     * mapped back to x at the end. */
    double mx = 0, sx = 0;
    for (int i = 0; i < n; i++)
        mx += x[i];
    mx /= n;
    for (int i = 0; i < n; i++)
        sx = fmax(sx, fabs(x[i] - mx));
    if (!(sx > 0))
        return false;
    double m[3][3] = { { 0 } }, r[3] = { 0 }, z[3];
    for (int i = 0; i < n; i++) {
        double u = (x[i] - mx) / sx, p[3] = { 1, u, u * u };
        for (int a = 0; a < 3; a++) {
            r[a] += p[a] * y[i];
            for (int b = 0; b < 3; b++)
                m[a][b] += p[a] * p[b];
        }
    }
    if (!solve3(m, r, z))
        return false;
    /* y = z0 + z1 (x - mx)/sx + z2 (x - mx)^2/sx^2 */
    c[2] = z[2] / (sx * sx);
    c[1] = z[1] / sx - 2 * mx * c[2];
    c[0] = z[0] - z[1] * mx / sx + c[2] * mx * mx;
    return true;
}

bool fit_parabola_min(const double c[3], double *x_min)
{
    *x_min = NAN;
    if (!(c[2] > 0))
        return false;
    *x_min = -c[1] / (2 * c[2]);
    return true;
}

ChinLaw chin_paper(void)
{
    return (ChinLaw){ .E = 1.69, .A = 406.4, .B = 410.7, .alpha = 0.34, .beta = 0.28 };
}

double chin_loss(const ChinLaw *p, double N, double D)
{
    return p->E + p->A / pow(N, p->alpha) + p->B / pow(D, p->beta);
}

void chin_optimal(const ChinLaw *p, double C, double *N_opt, double *D_opt)
{
    double s = p->alpha + p->beta;
    double G = pow(p->alpha * p->A / (p->beta * p->B), 1.0 / s);
    *N_opt = G * pow(C / 6.0, p->beta / s);
    *D_opt = pow(C / 6.0, p->alpha / s) / G;
}

static const double GRID_EXP[] = { 0.0, 0.5, 1.0, 1.5, 2.0 };
static const double GRID_E[] = { -1.0, -0.5, 0.0, 0.5, 1.0 };
static const double GRID_AB[] = { 0.0, 5.0, 10.0, 15.0, 20.0, 25.0 };
static const double SMALL_EXP[] = { 0.25, 0.5, 1.0 };
static const double SMALL_E[] = { -1.0, 0.0, 1.0 };
static const double SMALL_AB[] = { 0.0, 5.0, 10.0 };

ChinGrid chin_grid_paper(void)
{
    return (ChinGrid){ GRID_EXP, GRID_EXP, GRID_E, GRID_AB, GRID_AB, 5, 5, 5, 6, 6 };
}

ChinGrid chin_grid_small(void)
{
    return (ChinGrid){ SMALL_EXP, SMALL_EXP, SMALL_E, SMALL_AB, SMALL_AB, 3, 3, 3, 3, 3 };
}

double fit_huber(double r, double delta)
{
    double a = fabs(r);
    return a <= delta ? 0.5 * r * r : delta * (a - 0.5 * delta);
}

/* x = (a, b, e, alpha, beta). log L_pred = LSE(u1, u2, u3) with u1 = a - alpha log N,
 * u2 = b - beta log D, u3 = e; its derivatives are the softmax weights w_k of the u_k:
 *     d/da = w1, d/dalpha = -w1 log N, d/db = w2, d/dbeta = -w2 log D, d/de = w3,
 * and the Huber loss's derivative is r inside delta, delta sign(r) outside. */
double chin_objective(const double x[5], const double *N, const double *D, const double *L,
                      int n, double delta, double g[5])
{
    double sum = 0.0;
    if (g)
        memset(g, 0, 5 * sizeof *g);
    for (int i = 0; i < n; i++) {
        double lN = log(N[i]), lD = log(D[i]);
        double u1 = x[0] - x[3] * lN, u2 = x[1] - x[4] * lD, u3 = x[2];
        double m = fmax(u1, fmax(u2, u3));
        double e1 = exp(u1 - m), e2 = exp(u2 - m), e3 = exp(u3 - m), s = e1 + e2 + e3;
        double r = m + log(s) - log(L[i]);
        sum += fit_huber(r, delta);
        if (g) {
            double h = fabs(r) <= delta ? r : (r > 0 ? delta : -delta);
            double w1 = e1 / s, w2 = e2 / s, w3 = e3 / s;
            g[0] += h * w1;
            g[1] += h * w2;
            g[2] += h * w3;
            g[3] -= h * w1 * lN;
            g[4] -= h * w2 * lD;
        }
    }
    return sum;
}

enum { LBFGS_M = 8, LBFGS_MAX_N = 8 };

static double dot(const double *a, const double *b, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static double max_abs(const double *a, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        m = fmax(m, fabs(a[i]));
    return m;
}

/* The two-loop recursion (Nocedal and Wright, algorithm 7.4): d = -H g, with H the inverse
 * Hessian built from the last k pairs (s, y), scaled by s.y / y.y of the newest pair. */
static void lbfgs_direction(const double *g, int n, double s[][LBFGS_MAX_N],
                            double y[][LBFGS_MAX_N], int k, int newest, double *d)
{
    double alpha[LBFGS_M];
    for (int i = 0; i < n; i++)
        d[i] = -g[i];
    for (int j = 0; j < k; j++) {
        int p = (newest - j + LBFGS_M) % LBFGS_M;
        alpha[j] = dot(s[p], d, n) / dot(y[p], s[p], n);
        for (int i = 0; i < n; i++)
            d[i] -= alpha[j] * y[p][i];
    }
    if (k > 0) {
        double gamma = dot(s[newest], y[newest], n) / dot(y[newest], y[newest], n);
        for (int i = 0; i < n; i++)
            d[i] *= gamma;
    }
    for (int j = k - 1; j >= 0; j--) {
        int p = (newest - j + LBFGS_M) % LBFGS_M;
        double beta = dot(y[p], d, n) / dot(y[p], s[p], n);
        for (int i = 0; i < n; i++)
            d[i] += (alpha[j] - beta) * s[p][i];
    }
}

int fit_lbfgs(FitObjective f, void *ctx, double *x, int n, double gtol, int max_iter)
{
    double s[LBFGS_M][LBFGS_MAX_N], y[LBFGS_M][LBFGS_MAX_N];
    double g[LBFGS_MAX_N], d[LBFGS_MAX_N], xn[LBFGS_MAX_N], gn[LBFGS_MAX_N];
    int k = 0, newest = LBFGS_M - 1;
    double fx = f(x, g, ctx);
    if (!isfinite(fx))
        return -1;
    for (int it = 0; it < max_iter; it++) {
        if (max_abs(g, n) < gtol)
            return it;
        lbfgs_direction(g, n, s, y, k, newest, d);
        double slope = dot(g, d, n);
        if (!(slope < 0)) {       /* not a descent direction: forget the curvature pairs */
            k = 0;
            for (int i = 0; i < n; i++)
                d[i] = -g[i];
            slope = -dot(g, g, n);
        }
        /* The first step has no curvature to scale it: a unit move of the largest component. */
        double t = k == 0 ? 1.0 / fmax(1.0, max_abs(d, n)) : 1.0, fn = NAN;
        bool moved = false;
        for (int tries = 0; tries < 60; tries++, t *= 0.5) {
            for (int i = 0; i < n; i++)
                xn[i] = x[i] + t * d[i];
            fn = f(xn, gn, ctx);
            if (isfinite(fn) && fn <= fx + 1e-4 * t * slope) {
                moved = true;
                break;
            }
        }
        if (!moved || !(fn < fx))
            return -(it + 1);
        newest = (newest + 1) % LBFGS_M;
        for (int i = 0; i < n; i++) {
            s[newest][i] = xn[i] - x[i];
            y[newest][i] = gn[i] - g[i];
        }
        if (dot(s[newest], y[newest], n) > 1e-300) {
            k = k < LBFGS_M ? k + 1 : LBFGS_M;
        } else {                  /* no positive curvature along the step: start afresh */
            k = 0;
        }
        memcpy(x, xn, (size_t)n * sizeof *x);
        memcpy(g, gn, (size_t)n * sizeof *g);
        fx = fn;
    }
    return -max_iter;
}

typedef struct {
    const double *N, *D, *L;
    int           n;
    double        delta;
} ChinCtx;

static double chin_f(const double *x, double *g, void *ctx)
{
    const ChinCtx *c = ctx;
    return chin_objective(x, c->N, c->D, c->L, c->n, c->delta, g);
}

static void chin_try(const ChinCtx *ctx, double x[5], ChinFit *best)
{
    int it = fit_lbfgs(chin_f, (void *)ctx, x, 5, 1e-12, 400);
    double fx = chin_f(x, NULL, (void *)ctx);
    best->starts++;
    best->converged += it >= 0;
    /* Exponents are kept positive (a negative one is no power law), the rest finite. */
    bool ok = isfinite(fx) && x[3] > 0 && x[4] > 0 && fabs(x[0]) < 700 && fabs(x[1]) < 700 &&
              fabs(x[2]) < 700;
    if (ok && (!(best->objective == best->objective) || fx < best->objective)) {
        best->objective = fx;
        best->law = (ChinLaw){ .E = exp(x[2]), .A = exp(x[0]), .B = exp(x[1]),
                               .alpha = x[3], .beta = x[4] };
    }
}

bool fit_chinchilla(const double *N, const double *D, const double *L, int n, double delta,
                    const ChinGrid *grid, const ChinLaw *extra, ChinFit *out)
{
    ChinCtx ctx = { N, D, L, n, delta };
    *out = (ChinFit){ .law = { NAN, NAN, NAN, NAN, NAN }, .objective = NAN };
    if (n < 5)
        return false;
    for (int i = 0; i < grid->n_alpha; i++)
        for (int j = 0; j < grid->n_beta; j++)
            for (int k = 0; k < grid->n_e; k++)
                for (int l = 0; l < grid->n_a; l++)
                    for (int m = 0; m < grid->n_b; m++) {
                        double x[5] = { grid->a[l], grid->b[m], grid->e[k], grid->alpha[i],
                                        grid->beta[j] };
                        chin_try(&ctx, x, out);
                    }
    if (extra) {
        double x[5] = { log(extra->A), log(extra->B), log(extra->E), extra->alpha, extra->beta };
        chin_try(&ctx, x, out);
    }
    return isfinite(out->objective);
}

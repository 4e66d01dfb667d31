#ifndef TAPEGRAD_SEED_STATS_H
#define TAPEGRAD_SEED_STATS_H
/* The same experiment over several seeds: a list of seeds from the command line, and the few
 * statistics that say whether two settings differ by more than the seeds do.
 *
 * Losses are positive and their differences are relative, so everything is on a log scale: the
 * centre is the geometric mean, the spread the standard deviation of ln x, and a comparison of
 * setting A with a reference R is the ratio A/R of the same seed (a paired design: the seed's
 * luck, good or bad, cancels as far as both share it). The geometric mean of those ratios is
 * the ratio of the geometric means when both have every seed.
 *
 * Values that are not finite or not positive (a run that diverged, NAN for "no value") are left
 * out of every statistic; SeedStats.n says how many were used. */

/* At most this many seeds in a list (the interval below has a t quantile for up to 30 degrees
 * of freedom). */
enum { SEED_MAX = 31 };

typedef struct {
    int    n;                  /* values used */
    double geomean;            /* exp(mean of ln x) */
    double log_sd;             /* sample standard deviation of ln x (n - 1); NAN below 2 */
    /* 95% interval of the geometric mean, Student's t on ln x: exp(mean +- t s / sqrt(n)).
     * For a set of paired ratios, an interval that excludes 1 is a difference the seeds
     * resolve. NAN below 2 values. */
    double ci_lo, ci_hi;
    double median;             /* the mean of the middle two when n is even */
    double min, max;
} SeedStats;

/* The plain mean and sample standard deviation of a quantity that may be 0 (an accuracy), over
 * the finite values of x: mean NAN and sd NAN when there are none, sd 0 for one. */
typedef struct {
    int    n;                  /* finite values used */
    double mean, sd;
} SeedMeanSd;

/* Parses "1-8", "1,2,5" or a mix ("1-3,7") into seeds[], in the order given; returns the count,
 * or -1 if the text is malformed, a range runs backwards, a seed repeats, a seed is outside
 * [0, 2^40], or there are more than max. */
int       seed_list_parse(const char *s, long *seeds, int max);

/* The statistics of x[0..n-1] (see above for what is left out). */
SeedStats seed_stats(const double *x, int n);

/* The mean and sample standard deviation (n - 1) of x[0..n-1] (see SeedMeanSd). */
SeedMeanSd seed_mean_sd(const double *x, int n);

/* r[k] = x[k] / ref[k]; NAN where either is not finite and positive. */
void      seed_ratios(const double *x, const double *ref, int n, double *r);

/* How many of r[0..n-1] lie within tol of 1: |r - 1| <= tol (NANs are not). */
int       seed_within(const double *r, int n, double tol);

/* Student's t distribution's 97.5% quantile for df degrees of freedom, 1..30; NAN otherwise. */
double    seed_t975(int df);

#endif

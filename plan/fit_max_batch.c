/* fit_max_batch: the checkpointing exercise's search (declared in fit_search.h): for one
 * candidate, the largest micro-batch under a budget, by the memory calculator's prediction (a
 * bisection) and by real steps in a child (fit_measure: doubling, then a bisection). It reads
 * a candidate and a budget and gives batch sizes, bytes, a count of trials and the time they
 * took; fit_largest --exercise max-batch prints them. */
#include <time.h>

#include "plan/fit_search.h"

int fit_max_batch_predicted(const FitCandidate *c, size_t budget, int max_batch)
{
    FitCandidate x = *c;
    int lo = 0, hi = max_batch + 1;     /* lo fits (or is 0), hi does not (or is past the end) */
    while (hi - lo > 1) {
        x.B = lo + (hi - lo) / 2;
        fit_predict(&x);
        if (x.predicted <= (double)budget)
            lo = x.B;
        else
            hi = x.B;
    }
    return lo;
}

int fit_max_batch_measured(const FitCandidate *c, size_t budget, unsigned what, int max_batch,
                           int *trials, double *peak)
{
    FitCandidate x = *c;
    *trials = 0;
    *peak = 0;
    int lo = 0, hi = max_batch + 1;
    /* Doubling: the first batch that does not fit bounds the search from above. */
    for (int B = 1; B <= max_batch; B *= 2) {
        x.B = B;
        FitMeasure m = fit_measure(&x, budget, what);
        ++*trials;
        if (!m.fits) {
            hi = B;
            break;
        }
        lo = B;
        *peak = m.peak[MEM_ALL];
    }
    while (hi - lo > 1) {
        x.B = lo + (hi - lo) / 2;
        FitMeasure m = fit_measure(&x, budget, what);
        ++*trials;
        if (m.fits) {
            lo = x.B;
            *peak = m.peak[MEM_ALL];
        } else {
            hi = x.B;
        }
    }
    return lo;
}

FitMaxBatch fit_max_batch(const FitCandidate *c, size_t budget, int max_batch)
{
    FitMaxBatch r = { .predicted = fit_max_batch_predicted(c, budget, max_batch) };
    if (r.predicted > 0) {
        FitCandidate at = *c;
        at.B = r.predicted;
        fit_predict(&at);
        r.predicted_bytes = at.predicted;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int trials, trials_eval;
    r.measured = fit_max_batch_measured(c, budget, 0, max_batch, &trials, &r.measured_bytes);
    r.measured_eval = fit_max_batch_measured(c, budget, FIT_EVAL, max_batch, &trials_eval,
                                             &r.measured_eval_bytes);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r.trials = trials + trials_eval;
    r.seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return r;
}

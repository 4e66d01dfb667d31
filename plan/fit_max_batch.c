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

const char *const FIT_MAX_BATCH_COLUMNS[] = {
    "budget", "strategy", "predicted_batch", "predicted_bytes", "measured_batch",
    "measured_bytes", "measured_eval_batch", "measured_eval_bytes", "trials", "seconds", NULL,
};

static bool write_row(TsvWriter *t, size_t budget, const char *strategy, const FitMaxBatch *m)
{
    tsv_int(t, (long long)budget);
    tsv_str(t, strategy);
    tsv_int(t, m->predicted);
    tsv_num(t, m->predicted_bytes);
    tsv_int(t, m->measured);
    tsv_num(t, m->measured_bytes);
    tsv_int(t, m->measured_eval);
    tsv_num(t, m->measured_eval_bytes);
    tsv_int(t, m->trials);
    tsv_num(t, (double)(long)(m->seconds * 10) / 10);
    return tsv_end_row(t);
}

bool fit_max_batch_rows(const FitCandidate *c, size_t budget, int max_batch, TsvWriter *t,
                        FitMaxBatchFn fn, void *ctx)
{
    FitCandidate x = *c;
    for (int k = 0; k < FIT_NSTRATEGIES; k++) {
        x.strategy = (CkptStrategy){ FIT_STRATEGIES[k], 0 };
        FitMaxBatch m = fit_max_batch(&x, budget, max_batch);
        char name[32];
        ckpt_name(x.strategy, name, sizeof name);
        fn(ctx, name, &m);
        if (t && !write_row(t, budget, name, &m))
            return false;
    }
    return true;
}

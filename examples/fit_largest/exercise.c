/* fit_largest --exercise max-batch: the course's checkpointing exercise, "find the largest
 * batch with and without checkpointing". For one model, each strategy's largest micro-batch
 * under the budget: the memory calculator's answer, and the measured one (real steps under the
 * budget, each in a child process: plan/fit_max_batch.c's fit_max_batch_rows). */
#include <stdio.h>

#include "autograd/parallel.h"
#include "examples/common/cli.h"
#include "examples/fit_largest/fit_largest.h"

static void print_row(void *ctx, const char *strategy, const FitMaxBatch *m)
{
    (void)ctx;
    printf("%-12s %9d %12.0f %9d %12.0f %9d %12.0f %7d %7.1f\n", strategy, m->predicted,
           m->predicted_bytes, m->measured, m->measured_bytes, m->measured_eval,
           m->measured_eval_bytes, m->trials, m->seconds);
    fflush(stdout);
}

int exercise_max_batch(const FitOptions *o, int V)
{
    FitCandidate c = fit_shape(V, o->seq, o->layers, o->embd, par_threads());
    c.precision = o->precision;
    c.optimizer = o->optimizer;
    fit_predict(&c);
    char b[32], err[512];
    printf("the largest micro-batch under a budget of %s (%zu bytes): L%d C%d H%d, T %d, %s, %s, "
           "%zu parameters, %d thread(s)\n", mem_format_bytes(o->budget, b, sizeof b), o->budget,
           c.model.n_layer, c.model.n_embd, c.model.n_head, c.T, FIT_PRECISION_NAMES[c.precision],
           MC_OPTIMIZER_NAMES[c.optimizer], c.params, c.threads);
    TsvWriter *t = o->out ? tsv_open(o->out, FIT_MAX_BATCH_COLUMNS, err, sizeof err) : NULL;
    if (o->out && !t)
        cli_die(1, "--out: %s", err);
    printf("%-12s %9s %12s %9s %12s %9s %12s %7s %7s\n", "strategy", "pred B", "pred bytes",
           "meas B", "meas bytes", "+eval B", "+eval bytes", "trials", "time s");
    if (!fit_max_batch_rows(&c, o->budget, o->max_batch, t, print_row, NULL))
        cli_die(1, "--out: cannot write %s", o->out);
    printf("(pred: the calculator's total, the sum of the category peaks, an upper bound on the "
           "training step; meas: the trainer built and run for one update under the budget, B "
           "doubled from 1, then bisected; +eval: the same followed by an evaluation of B rows, "
           "as train_gpt runs one, which the calculator does not predict)\n");
    if (t) {
        if (!tsv_close(t, err, sizeof err))
            cli_die(1, "--out: %s", err);
        printf("table: %s\n", o->out);
    }
    return 0;
}

/* fit_largest --exercise max-batch: the course's checkpointing exercise, "find the largest
 * batch with and without checkpointing". For one model, each strategy's largest micro-batch
 * under the budget: the memory calculator's answer, and the measured one (real steps under the
 * budget, each in a child process: fit_search.h). */
#include <stdio.h>

#include "autograd/parallel.h"
#include "examples/common/cli.h"
#include "examples/common/progress.h"
#include "examples/common/tsv.h"
#include "examples/fit_largest/fit_largest.h"

int exercise_max_batch(const FitOptions *o, int V)
{
    static const CkptKind kinds[] = { CKPT_VANILLA, CKPT_SQRT, CKPT_MEMORY_POOR };
    FitCandidate c = {
        .model = { .vocab_size = V, .max_seq = o->seq, .n_layer = o->layers,
                   .n_head = o->embd / 32, .n_embd = o->embd, .tied = true, .fused_qkv = true },
        .B = 1, .accum = 1, .T = o->seq, .precision = o->precision, .optimizer = o->optimizer,
        .threads = par_threads(),
    };
    fit_predict(&c);
    char b[32];
    printf("the largest micro-batch under a budget of %s (%zu bytes): L%d C%d H%d, T %d, %s, %s, "
           "%zu parameters, %d thread(s)\n", mem_format_bytes(o->budget, b, sizeof b), o->budget,
           c.model.n_layer, c.model.n_embd, c.model.n_head, c.T, FIT_PRECISION_NAMES[c.precision],
           MC_OPTIMIZER_NAMES[c.optimizer], c.params, c.threads);
    TsvWriter *t = NULL;
    if (o->out) {
        static const char *const cols[] = {
            "budget", "strategy", "predicted_batch", "predicted_bytes", "measured_batch",
            "measured_bytes", "measured_eval_batch", "measured_eval_bytes", "trials", "seconds",
            NULL,
        };
        char err[512];
        t = tsv_open(o->out, cols, err, sizeof err);
        if (!t)
            cli_die(1, "--out: %s", err);
    }
    printf("%-12s %9s %12s %9s %12s %9s %12s %7s %7s\n", "strategy", "pred B", "pred bytes",
           "meas B", "meas bytes", "+eval B", "+eval bytes", "trials", "time s");
    for (int k = 0; k < 3; k++) {
        c.strategy = (CkptStrategy){ kinds[k], 0 };
        int pred = fit_max_batch_predicted(&c, o->budget, o->max_batch);
        FitCandidate at = c;
        at.B = pred > 0 ? pred : 1;
        fit_predict(&at);
        int trials, trials_eval;
        double peak, peak_eval, t0 = progress_now();
        int meas = fit_max_batch_measured(&c, o->budget, 0, o->max_batch, &trials, &peak);
        int meas_eval = fit_max_batch_measured(&c, o->budget, FIT_EVAL, o->max_batch,
                                               &trials_eval, &peak_eval);
        double secs = progress_now() - t0;
        char name[32];
        ckpt_name(c.strategy, name, sizeof name);
        printf("%-12s %9d %12.0f %9d %12.0f %9d %12.0f %7d %7.1f\n", name, pred,
               pred ? at.predicted : 0, meas, peak, meas_eval, peak_eval, trials + trials_eval,
               secs);
        fflush(stdout);
        if (t) {
            tsv_int(t, (long long)o->budget);
            tsv_str(t, name);
            tsv_int(t, pred);
            tsv_num(t, pred ? at.predicted : 0);
            tsv_int(t, meas);
            tsv_num(t, peak);
            tsv_int(t, meas_eval);
            tsv_num(t, peak_eval);
            tsv_int(t, trials + trials_eval);
            tsv_num(t, (double)(long)(secs * 10) / 10);
            if (!tsv_end_row(t))
                cli_die(1, "--out: cannot write %s", o->out);
        }
    }
    printf("(pred: the calculator's total, the sum of the category peaks, an upper bound on the "
           "training step; meas: the trainer built and run for one update under the budget, B "
           "doubled from 1, then bisected; +eval: the same followed by an evaluation of B rows, "
           "as train_gpt runs one, which the calculator does not predict)\n");
    if (t) {
        char err[512];
        if (!tsv_close(t, err, sizeof err))
            cli_die(1, "--out: %s", err);
        printf("table: %s\n", o->out);
    }
    return 0;
}

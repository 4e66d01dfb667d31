/* A trainer's model on a dataset's validation rows (analysis/eval.h). */
#include "analysis/eval.h"

#include <math.h>
#include <stdlib.h>

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p)
        tensor_fatal("out of memory (%zu bytes)", bytes);
    return p;
}

static int counted_targets(const int *targets, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += targets[i] >= 0;
    return k;
}

EvalResult eval_teacher_forced(Trainer *tr, const Dataset *ds, int B, int max_examples)
{
    int T = dataset_seq_len(ds), V = tr->model->cfg.vocab_size;
    int total = dataset_val_count(ds);
    if (max_examples < total)
        total = max_examples;
    int *tokens = xmalloc((size_t)B * T * sizeof *tokens);
    int *targets = xmalloc((size_t)B * T * sizeof *targets);
    double loss_sum = 0.0;
    long counted = 0, exact = 0;
    for (int first = 0; first < total; first += B) {
        dataset_val_batch(ds, first, B, tokens, targets);
        /* Rows past max_examples are real validation rows the caller asked us to leave out. */
        for (int b = total - first; b < B; b++)
            for (int t = 0; t < T; t++)
                targets[b * T + t] = -1;
        int n = counted_targets(targets, (size_t)B * T);
        double loss = 0.0;
        Tensor *logits = trainer_eval(tr, tokens, targets, B, T, &loss);
        loss_sum += loss * n;     /* the batch's mean, weighted back into a sum */
        counted += n;
        /* Under a precision policy the logits may be packed: their values, decoded. */
        if (dataset_task(ds))
            exact += task_count_exact(tensor_unpack(logits), targets, B, T, V);
        tensor_release(logits);
        trainer_eval_done(tr);
    }
    free(tokens);
    free(targets);
    return (EvalResult){ .loss = counted ? loss_sum / (double)counted : NAN,
                         .accuracy = dataset_task(ds) && total ? (double)exact / total : NAN,
                         .examples = total };
}

void eval_predict_next(void *ctx, const int *tokens, int B, int len, int *next)
{
    Trainer *tr = ctx;
    int V = tr->model->cfg.vocab_size;
    Tensor *logits = trainer_eval(tr, tokens, NULL, B, len, NULL);
    const float *x = tensor_unpack(logits);
    for (int b = 0; b < B; b++)
        next[b] = task_argmax(&x[((size_t)b * len + (size_t)len - 1) * V], V);
    tensor_release(logits);
    trainer_eval_done(tr);
}

double eval_greedy_accuracy(Trainer *tr, const Dataset *ds, int B, int max_examples)
{
    return task_accuracy_greedy(dataset_task(ds), eval_predict_next, tr, B, max_examples).accuracy;
}

#ifndef TAPEGRAD_EVAL_H
#define TAPEGRAD_EVAL_H
/* How well a trainer's model does on a dataset's validation rows (data/dataset.h):
 *
 *     teacher-forced   every validation row through one forward pass with its true tokens as
 *                      input: the mean cross-entropy over every counted target, and for a task
 *                      the rows whose every answer position is the argmax (task_count_exact)
 *     greedy           a task's exact match by decoding: each answer token is the model's own
 *                      argmax fed back in, the definition of "solved" (task_accuracy_greedy)
 *
 * The teacher-forced loss of a batch is its mean, weighted back into a sum by its counted
 * targets, so the result is the mean over every counted target of the rows evaluated, whatever
 * B is. Under a precision policy the model runs as it trains (trainer_eval). */
#include "data/dataset.h"
#include "optim/train.h"

typedef struct {
    double loss;                 /* mean cross-entropy over every counted target */
    double accuracy;             /* exact match (tasks only; NAN for text) */
    int    examples;
} EvalResult;

/* Teacher-forced loss and exact match over the first max_examples validation rows (all of them
 * when there are fewer), in batches of B. */
EvalResult eval_teacher_forced(Trainer *tr, const Dataset *ds, int B, int max_examples);
/* Exact match by greedy decoding over the first max_examples validation examples (tasks only). */
double     eval_greedy_accuracy(Trainer *tr, const Dataset *ds, int B, int max_examples);
/* The next token of each of B contexts of length len (rows of tokens): the argmax of the
 * trainer's (ctx) logits at the last position. A task's TaskPredictFn (data/tasks.h). */
void       eval_predict_next(void *ctx, const int *tokens, int B, int len, int *next);

#endif

#ifndef TAPEGRAD_TASKS_H
#define TAPEGRAD_TASKS_H
/* Built-in tasks: small algorithmic problems generated from a seed, so a tiny GPT has something
 * to learn without a download, and "did it learn?" is one number (exact-match accuracy).
 *
 * Every example is a prompt followed by an answer, one character per token, and every example
 * of a task has the same length L. Vocabulary (shared by all tasks, 40 tokens):
 *     id 0 '.'  end of answer (also the padding token)
 *     ids 1..10 '0'..'9',  11 '+',  12 '-',  13 '=',  ids 14..39 'a'..'z'
 *
 * The tasks (n = size, the number of digits or letters):
 *     add      "042+917=" then the n+1 digits of the sum, least significant digit FIRST, then '.'
 *              42 + 917 = 959 is "042+917=9590." (the sum 0959 written backwards). Written this
 *              way each answer digit depends only on digits already seen plus one carry, a known
 *              trick that lets a tiny model learn addition; answer_msd_first = true writes
 *              "042+917=0959." instead, to show how much harder that is. Default n = 3.
 *     sub      "917-042=" then the n digits of the difference, least significant first, then '.'.
 *              The operands are ordered so the first is >= the second: results are never
 *              negative and need no sign. answer_msd_first works as for add. Default n = 3.
 *     reverse  "hello=" then "olleh." (n random letters). Default n = 5.
 *     sort     "31415=" then "11345." (n random digits, sorted ascending). Default n = 5.
 *
 * Operands and strings are uniform random; numbers are zero-padded to n digits.
 *
 * Train / validation split: a problem belongs to validation when a hash of its prompt falls in
 * a fixed 10% of the hash range. The split depends on the problem only, never on the seed, so
 * no seed, batch size or run length can leak a validation problem into training: training
 * batches redraw any problem that hashes into validation. The validation set is a fixed list
 * of distinct validation problems drawn once with a constant seed, so runs with different
 * seeds are scored on the same problems.
 *
 * A training row is one example shifted by one: tokens[t] = example[t], targets[t] =
 * example[t + 1], for t in 0..T-1 with T = L - 1. Targets at prompt positions (whose next token
 * is still part of the prompt) are -1, which op_cross_entropy ignores: the loss counts only the
 * answer tokens, the '.' included. */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/rng.h"

enum {
    TASK_VOCAB = 40,
    TASK_END = 0,           /* '.': end of answer, and padding */
    TASK_MAX_SIZE = 32,
    TASK_DEFAULT_VAL = 1000,
    TASK_VAL_PERCENT = 10,
};

typedef struct {
    const char *name;       /* "add", "sub", "reverse", "sort" */
    int  size;              /* digits or letters; 0 means the task's default */
    int  n_val;             /* validation examples wanted; 0 means TASK_DEFAULT_VAL */
    bool answer_msd_first;  /* add, sub: write the answer most significant digit first */
} TaskSpec;

typedef struct Task Task;

/* The names, NULL-terminated, default first: for --help and cli_choice. */
extern const char *const task_names[];

/* A task, or NULL with a message in err: unknown name, size out of range, or a problem space
 * too small to hold both a training and a validation problem. The validation set can hold
 * fewer than n_val examples when the task has fewer distinct validation problems. */
Task       *task_new(const TaskSpec *spec, char *err, size_t errlen);
void        task_free(Task *t);

const char *task_name(const Task *t);
int         task_size(const Task *t);
int         task_example_len(const Task *t);     /* L: prompt + answer */
int         task_prompt_len(const Task *t);
int         task_answer_len(const Task *t);      /* includes the final '.' */
int         task_seq_len(const Task *t);         /* T = L - 1: the length of a training row */
int         task_vocab_size(const Task *t);      /* TASK_VOCAB */

/* One random training example (L tokens), never a validation problem. */
void        task_sample(const Task *t, Rng *rng, int *example);
/* B training rows: tokens and targets are [B * T] with T = task_seq_len. */
void        task_train_batch(const Task *t, Rng *rng, int B, int *tokens, int *targets);

int         task_val_count(const Task *t);
const int  *task_val_example(const Task *t, int i);   /* L tokens */
/* Rows for validation examples first, first + 1, ...: fills all B rows and returns how many
 * are real examples; rows past the end of the set are padding (tokens '.', targets -1) that
 * the loss and the accuracy ignore. */
int         task_val_batch(const Task *t, int first, int B, int *tokens, int *targets);

/* True when this prompt (task_prompt_len tokens) is a validation problem. */
bool        task_is_val_prompt(const Task *t, const int *prompt);

/* The character of a token id ('?' for an id outside the vocabulary), the id of a character
 * (-1 if none), and n tokens as text in buf (truncated to fit; always terminated). */
char        task_char(int id);
int         task_token(char c);
const char *task_decode(const int *tokens, int n, char *buf, size_t len);

/* Exact-match accuracy: an example counts only if every answer token, '.' included, is right.
 *
 * The definition is greedy decoding: the model sees the prompt, its most likely next token is
 * appended, and so on for task_answer_len tokens. task_accuracy_greedy does exactly that, a
 * batch of examples at a time: the predictor gets B contexts of equal length len (every prompt
 * of a task has the same length, so a batch stays rectangular) and writes the id of the most
 * likely next token of each into next[B]. A GPT does one forward pass over tokens [B, len] and
 * takes the argmax of the logits at position len - 1. */
typedef void (*TaskPredictFn)(void *ctx, const int *tokens, int B, int len, int *next);

typedef struct {
    int    correct;
    int    total;
    double accuracy;        /* correct / total, 0 when total is 0 */
} TaskAccuracy;

/* Greedy exact match over the first max_examples of the validation set (0 means all of it),
 * `batch` examples per predictor call. */
TaskAccuracy task_accuracy_greedy(const Task *t, TaskPredictFn predict, void *ctx, int batch,
                                  int max_examples);

/* The cheap form: rows of a teacher-forced forward pass (logits [B * T, V] and the targets of
 * task_val_batch or task_train_batch) whose argmax equals the target at every position with a
 * target >= 0. Rows without any such position (padding) count for nothing. Returns the number
 * of rows that are right.
 *
 * It gives the same exact-match count as greedy decoding: if every answer token is right with
 * the true previous tokens fed in, greedy decoding feeds in exactly those tokens and so makes
 * the same predictions; if some token is wrong, the first wrong one is wrong in both. (Per-token
 * accuracy differs between the two; exact match does not.) The one caveat is arithmetic: a
 * causal model gives the same logits for a prefix whatever follows, mathematically, but a
 * different batch shape can round differently, which matters only for near-ties in the argmax.
 * Use it during training, where it comes free with the validation loss; use greedy decoding for
 * the final figure. task_argmax breaks ties toward the lowest id; a predictor that uses it too
 * makes the two agree on ties as well. */
int         task_count_exact(const float *logits, const int *targets, int B, int T, int V);
/* Index of the largest of v[0..n-1], the lowest index on ties. */
int         task_argmax(const float *v, int n);

#endif

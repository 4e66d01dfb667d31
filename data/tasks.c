#include "data/tasks.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tensor.h"

typedef enum { KIND_ADD, KIND_SUB, KIND_REVERSE, KIND_SORT } TaskKind;

const char *const task_names[] = { "add", "sub", "reverse", "sort", NULL };
static const int default_size[] = { 3, 3, 5, 5 };

/* The vocabulary, one character per id. */
static const char VOCAB[] = ".0123456789+-=abcdefghijklmnopqrstuvwxyz";
enum { TOK_DIGIT0 = 1, TOK_PLUS = 11, TOK_MINUS = 12, TOK_EQUALS = 13, TOK_LETTER_A = 14 };

/* The validation set is drawn with this seed whatever the training seed (see tasks.h). */
static const uint64_t VAL_SEED = 0x5eed0fa11da7aULL;
enum { MAX_VAL = 1000000, SPACE_PROBE = 10000 };

struct Task {
    TaskKind kind;
    int      size;
    bool     msd_first;
    int      prompt_len, answer_len;
    int      n_val;
    int     *val;          /* n_val examples of example_len tokens */
};

/* ---- problems ------------------------------------------------------------------------------ */

static void draw_digits(Rng *rng, int n, int *d)
{
    for (int i = 0; i < n; i++)
        d[i] = (int)rng_below(rng, 10);
}

/* Writes digits (given least significant first) as tokens, in the order the task asks for. */
static void put_number(const Task *t, const int *lsd_first, int n, int *out)
{
    for (int i = 0; i < n; i++)
        out[i] = TOK_DIGIT0 + (t->msd_first ? lsd_first[n - 1 - i] : lsd_first[i]);
}

static void put_operands(const int *a, int op, const int *b, int n, int *out)
{
    for (int i = 0; i < n; i++) {
        out[i] = TOK_DIGIT0 + a[i];
        out[n + 1 + i] = TOK_DIGIT0 + b[i];
    }
    out[n] = op;
    out[2 * n + 1] = TOK_EQUALS;
}

/* Schoolbook addition, from the last (least significant) digit, carrying. */
static void make_add(const Task *t, Rng *rng, int *ex)
{
    int n = t->size, a[TASK_MAX_SIZE], b[TASK_MAX_SIZE], sum[TASK_MAX_SIZE + 1];
    draw_digits(rng, n, a);
    draw_digits(rng, n, b);
    int carry = 0;
    for (int i = 0; i < n; i++) {
        int s = a[n - 1 - i] + b[n - 1 - i] + carry;
        sum[i] = s % 10;
        carry = s / 10;
    }
    sum[n] = carry;
    put_operands(a, TOK_PLUS, b, n, ex);
    put_number(t, sum, n + 1, ex + t->prompt_len);
}

/* Equal-length, zero-padded digit strings compare like the numbers they write: the first digit
 * that differs decides. */
static bool digits_less(const int *a, const int *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i])
            return a[i] < b[i];
    return false;
}

static void make_sub(const Task *t, Rng *rng, int *ex)
{
    int n = t->size, a[TASK_MAX_SIZE], b[TASK_MAX_SIZE], diff[TASK_MAX_SIZE];
    draw_digits(rng, n, a);
    draw_digits(rng, n, b);
    if (digits_less(a, b, n)) {
        int tmp[TASK_MAX_SIZE];
        size_t bytes = (size_t)n * sizeof *a;
        memcpy(tmp, a, bytes);
        memcpy(a, b, bytes);
        memcpy(b, tmp, bytes);
    }
    int borrow = 0;
    for (int i = 0; i < n; i++) {
        int d = a[n - 1 - i] - b[n - 1 - i] - borrow;
        borrow = d < 0;
        diff[i] = d + 10 * borrow;
    }
    put_operands(a, TOK_MINUS, b, n, ex);
    put_number(t, diff, n, ex + t->prompt_len);
}

static void make_reverse(const Task *t, Rng *rng, int *ex)
{
    int n = t->size;
    for (int i = 0; i < n; i++)
        ex[i] = TOK_LETTER_A + (int)rng_below(rng, 26);
    ex[n] = TOK_EQUALS;
    for (int i = 0; i < n; i++)
        ex[n + 1 + i] = ex[n - 1 - i];
}

/* Counting sort: ten bins are all a digit string needs. */
static void make_sort(const Task *t, Rng *rng, int *ex)
{
    int n = t->size, count[10] = { 0 };
    for (int i = 0; i < n; i++) {
        int d = (int)rng_below(rng, 10);
        ex[i] = TOK_DIGIT0 + d;
        count[d]++;
    }
    ex[n] = TOK_EQUALS;
    int k = n + 1;
    for (int d = 0; d < 10; d++)
        for (int c = 0; c < count[d]; c++)
            ex[k++] = TOK_DIGIT0 + d;
}

/* Any problem, train or validation. */
static void make_problem(const Task *t, Rng *rng, int *ex)
{
    switch (t->kind) {
    case KIND_ADD: make_add(t, rng, ex); break;
    case KIND_SUB: make_sub(t, rng, ex); break;
    case KIND_REVERSE: make_reverse(t, rng, ex); break;
    case KIND_SORT: make_sort(t, rng, ex); break;
    }
    ex[task_example_len(t) - 1] = TASK_END;
}

/* ---- the split ----------------------------------------------------------------------------- */

/* FNV-1a over the prompt, then the splitmix64 finaliser so that every bit of the result depends
 * on every token (FNV alone leaves the low bits weakly mixed). */
static uint64_t prompt_hash(const int *prompt, int n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(unsigned)prompt[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

bool task_is_val_prompt(const Task *t, const int *prompt)
{
    return prompt_hash(prompt, t->prompt_len) % 100 < TASK_VAL_PERCENT;
}

/* Distinct validation problems, found by drawing problems and keeping the new validation ones.
 * An open-addressing set of prompt hashes spots repeats; small problem spaces run out of new
 * problems, so the search stops after a bounded number of draws. */
static void build_val_set(Task *t, int wanted)
{
    int L = task_example_len(t);
    size_t cap = 1;
    while (cap < 2 * (size_t)wanted)
        cap <<= 1;
    uint64_t *seen = calloc(cap, sizeof *seen);
    t->val = malloc((size_t)wanted * (size_t)L * sizeof *t->val);
    if (!seen || !t->val)
        tensor_fatal("out of memory for a validation set of %d examples", wanted);
    Rng rng = rng_new(VAL_SEED, RNG_STREAM_DATA);
    long max_draws = 100L * wanted + SPACE_PROBE;
    for (long draw = 0; draw < max_draws && t->n_val < wanted; draw++) {
        int *ex = t->val + (size_t)t->n_val * (size_t)L;
        make_problem(t, &rng, ex);
        if (!task_is_val_prompt(t, ex))
            continue;
        uint64_t h = prompt_hash(ex, t->prompt_len) | 1u;   /* 0 marks an empty slot */
        size_t slot = h & (cap - 1);
        while (seen[slot] && seen[slot] != h)
            slot = (slot + 1) & (cap - 1);
        if (seen[slot])
            continue;
        seen[slot] = h;
        t->n_val++;
    }
    free(seen);
}

static bool has_training_problem(const Task *t)
{
    int ex[4 * TASK_MAX_SIZE];
    Rng rng = rng_new(VAL_SEED + 1, RNG_STREAM_DATA);
    for (int i = 0; i < SPACE_PROBE; i++) {
        make_problem(t, &rng, ex);
        if (!task_is_val_prompt(t, ex))
            return true;
    }
    return false;
}

/* ---- construction -------------------------------------------------------------------------- */

static int find_kind(const char *name)
{
    for (int k = 0; task_names[k]; k++)
        if (strcmp(name, task_names[k]) == 0)
            return k;
    return -1;
}

static Task *fail(Task *t, char *err, size_t errlen, const char *msg, const char *name)
{
    if (err && errlen)
        snprintf(err, errlen, msg, name);
    task_free(t);
    return NULL;
}

Task *task_new(const TaskSpec *spec, char *err, size_t errlen)
{
    const char *name = spec->name ? spec->name : task_names[0];
    int kind = find_kind(name);
    if (kind < 0)
        return fail(NULL, err, errlen, "unknown task '%s' (add, sub, reverse, sort)", name);
    int size = spec->size ? spec->size : default_size[kind];
    if (size < 1 || size > TASK_MAX_SIZE)
        return fail(NULL, err, errlen, "task %s: size must be in 1..32", name);
    int wanted = spec->n_val ? spec->n_val : TASK_DEFAULT_VAL;
    if (wanted < 1 || wanted > MAX_VAL)
        return fail(NULL, err, errlen, "task %s: validation size must be in 1..1000000", name);

    Task *t = calloc(1, sizeof *t);
    if (!t)
        tensor_fatal("out of memory for a task");
    t->kind = (TaskKind)kind;
    t->size = size;
    t->msd_first = spec->answer_msd_first;
    bool arithmetic = t->kind == KIND_ADD || t->kind == KIND_SUB;
    t->prompt_len = arithmetic ? 2 * size + 2 : size + 1;
    t->answer_len = (t->kind == KIND_ADD ? size + 1 : size) + 1;
    build_val_set(t, wanted);
    if (t->n_val == 0)
        return fail(t, err, errlen, "task %s: too few problems at this size for a validation "
                    "set; use a larger size", name);
    if (!has_training_problem(t))
        return fail(t, err, errlen, "task %s: too few problems at this size for training; "
                    "use a larger size", name);
    return t;
}

void task_free(Task *t)
{
    if (!t)
        return;
    free(t->val);
    free(t);
}

const char *task_name(const Task *t) { return task_names[t->kind]; }
int task_size(const Task *t) { return t->size; }
int task_example_len(const Task *t) { return t->prompt_len + t->answer_len; }
int task_prompt_len(const Task *t) { return t->prompt_len; }
int task_answer_len(const Task *t) { return t->answer_len; }
int task_seq_len(const Task *t) { return task_example_len(t) - 1; }
int task_vocab_size(const Task *t) { (void)t; return TASK_VOCAB; }
int task_val_count(const Task *t) { return t->n_val; }

const int *task_val_example(const Task *t, int i)
{
    if (i < 0 || i >= t->n_val)
        tensor_fatal("validation example %d of %d", i, t->n_val);
    return t->val + (size_t)i * (size_t)task_example_len(t);
}

/* ---- batches ------------------------------------------------------------------------------- */

void task_sample(const Task *t, Rng *rng, int *example)
{
    do
        make_problem(t, rng, example);
    while (task_is_val_prompt(t, example));
}

/* One example shifted by one; only positions whose next token is an answer token get a target. */
static void make_row(const Task *t, const int *ex, int *tokens, int *targets)
{
    for (int i = 0; i < task_seq_len(t); i++) {
        tokens[i] = ex[i];
        targets[i] = i + 1 >= t->prompt_len ? ex[i + 1] : -1;
    }
}

void task_train_batch(const Task *t, Rng *rng, int B, int *tokens, int *targets)
{
    int T = task_seq_len(t), ex[4 * TASK_MAX_SIZE];
    for (int b = 0; b < B; b++) {
        task_sample(t, rng, ex);
        make_row(t, ex, tokens + (size_t)b * T, targets + (size_t)b * T);
    }
}

int task_val_batch(const Task *t, int first, int B, int *tokens, int *targets)
{
    int T = task_seq_len(t), real = 0;
    for (int b = 0; b < B; b++) {
        int *tok = tokens + (size_t)b * T, *tgt = targets + (size_t)b * T;
        int i = first + b;
        if (i >= 0 && i < t->n_val) {
            make_row(t, task_val_example(t, i), tok, tgt);
            real++;
            continue;
        }
        for (int k = 0; k < T; k++) {
            tok[k] = TASK_END;
            tgt[k] = -1;
        }
    }
    return real;
}

/* ---- text ---------------------------------------------------------------------------------- */

char task_char(int id) { return id >= 0 && id < TASK_VOCAB ? VOCAB[id] : '?'; }

int task_token(char c)
{
    const char *p = c ? strchr(VOCAB, c) : NULL;
    return p ? (int)(p - VOCAB) : -1;
}

const char *task_decode(const int *tokens, int n, char *buf, size_t len)
{
    if (len == 0)
        return buf;
    size_t k = 0;
    for (int i = 0; i < n && k + 1 < len; i++)
        buf[k++] = task_char(tokens[i]);
    buf[k] = '\0';
    return buf;
}

/* ---- accuracy ------------------------------------------------------------------------------ */

int task_argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

int task_count_exact(const float *logits, const int *targets, int B, int T, int V)
{
    int correct = 0;
    for (int b = 0; b < B; b++) {
        bool any = false, right = true;
        for (int i = 0; i < T; i++) {
            size_t row = (size_t)b * T + i;
            if (targets[row] < 0)
                continue;
            any = true;
            right = right && task_argmax(logits + row * V, V) == targets[row];
        }
        correct += any && right;
    }
    return correct;
}

/* Greedy decoding of one batch of validation examples [first, first + B): the contexts start as
 * the prompts and grow by the predicted token, packed to stride len for each call. */
static int greedy_batch(const Task *t, TaskPredictFn predict, void *ctx, int first, int B,
                        int *seq, int *packed, int *next, bool *right)
{
    int L = task_example_len(t), P = t->prompt_len;
    for (int b = 0; b < B; b++) {
        memcpy(seq + (size_t)b * L, task_val_example(t, first + b), (size_t)P * sizeof *seq);
        right[b] = true;
    }
    for (int len = P; len < L; len++) {
        for (int b = 0; b < B; b++)
            memcpy(packed + (size_t)b * len, seq + (size_t)b * L, (size_t)len * sizeof *seq);
        predict(ctx, packed, B, len, next);
        for (int b = 0; b < B; b++) {
            seq[(size_t)b * L + len] = next[b];
            right[b] = right[b] && next[b] == task_val_example(t, first + b)[len];
        }
    }
    int correct = 0;
    for (int b = 0; b < B; b++)
        correct += right[b];
    return correct;
}

TaskAccuracy task_accuracy_greedy(const Task *t, TaskPredictFn predict, void *ctx, int batch,
                                  int max_examples)
{
    int total = max_examples > 0 && max_examples < t->n_val ? max_examples : t->n_val;
    if (batch < 1)
        tensor_fatal("task_accuracy_greedy: batch %d", batch);
    size_t cells = (size_t)batch * (size_t)task_example_len(t);
    int *seq = malloc(cells * sizeof *seq), *packed = malloc(cells * sizeof *packed);
    int *next = malloc((size_t)batch * sizeof *next);
    bool *right = malloc((size_t)batch * sizeof *right);
    if (!seq || !packed || !next || !right)
        tensor_fatal("out of memory for greedy decoding");
    TaskAccuracy acc = { 0, total, 0.0 };
    for (int first = 0; first < total; first += batch) {
        int B = total - first < batch ? total - first : batch;
        acc.correct += greedy_batch(t, predict, ctx, first, B, seq, packed, next, right);
    }
    acc.accuracy = total ? (double)acc.correct / total : 0.0;
    free(seq);
    free(packed);
    free(next);
    free(right);
    return acc;
}

/* What the model writes after a run (run/run.h, run_print_samples): a task's answers beside the
 * expected ones, or text drawn at a temperature (its validation loss and exact match are
 * analysis/eval.h's). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/eval.h"
#include "nn/sample.h"
#include "run/run.h"

/* A stream of its own, so sampling never shifts the data or the initial weights. */
enum { SAMPLE_STREAM = 16, TEXT_PROMPT = 32 };

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p)
        tensor_fatal("out of memory (%zu bytes)", bytes);
    return p;
}

/* Tasks: prompt, the model's answer by greedy decoding, and the expected one. */
static void print_task_samples(Trainer *tr, const Task *task, int n)
{
    int P = task_prompt_len(task), A = task_answer_len(task), L = task_example_len(task);
    if (n > task_val_count(task))
        n = task_val_count(task);
    int *seq = xmalloc((size_t)n * L * sizeof *seq), *ctx = xmalloc((size_t)n * L * sizeof *ctx);
    int *next = xmalloc((size_t)n * sizeof *next);
    for (int i = 0; i < n; i++)
        memcpy(&seq[i * L], task_val_example(task, i), (size_t)P * sizeof *seq);
    for (int len = P; len < P + A; len++) {
        for (int i = 0; i < n; i++)
            memcpy(&ctx[i * len], &seq[i * L], (size_t)len * sizeof *ctx);
        eval_predict_next(tr, ctx, n, len, next);
        for (int i = 0; i < n; i++)
            seq[i * L + len] = next[i];
    }
    printf("validation samples (prompt, the model's answer, the expected answer):\n");
    for (int i = 0; i < n; i++) {
        char prompt[128], got[128], want[128];
        const int *ex = task_val_example(task, i);
        task_decode(ex, P, prompt, sizeof prompt);
        task_decode(&seq[i * L + P], A, got, sizeof got);
        task_decode(ex + P, A, want, sizeof want);
        bool right = memcmp(&seq[i * L + P], ex + P, (size_t)A * sizeof *seq) == 0;
        printf("  %s%-*s expected %-*s %s\n", prompt, A + 1, got, A + 1, want,
               right ? "right" : "WRONG");
    }
    free(seq);
    free(ctx);
    free(next);
}

/* Text: the first characters of the validation text as a prompt, then n characters drawn one
 * at a time, each from the model's distribution given the last T characters, at the given
 * temperature (nn/sample.h; 0 is greedy). */
static void print_text_sample(Trainer *tr, const Dataset *ds, int n, double temperature,
                              uint64_t seed)
{
    int T = dataset_seq_len(ds), V = tr->model->cfg.vocab_size;
    int prompt = T < TEXT_PROMPT ? T : TEXT_PROMPT;
    int *text = xmalloc((size_t)(prompt + n + T) * sizeof *text);
    int *targets = xmalloc((size_t)T * sizeof *targets);
    dataset_val_batch(ds, 0, 1, text, targets);
    Rng rng = rng_new(seed, SAMPLE_STREAM);
    for (int len = prompt; len < prompt + n; len++) {
        int ctx = len < T ? len : T;
        Tensor *logits = trainer_eval(tr, &text[len - ctx], NULL, 1, ctx, NULL);
        text[len] = sample_token(&tensor_unpack(logits)[(size_t)(ctx - 1) * V], V, temperature,
                                 &rng);
        tensor_release(logits);
        trainer_eval_done(tr);
    }
    size_t cap = (size_t)(prompt + n) + 1;
    char *out = xmalloc(cap);
    dataset_decode(ds, text, prompt, out, cap);
    printf("sample (the prompt, from the validation text, then %d generated characters at "
           "temperature %g, sample seed %llu):\n----\n%s", n, temperature,
           (unsigned long long)seed, out);
    dataset_decode(ds, text + prompt, n, out, cap);
    printf("%s\n----\n", out);
    free(out);
    free(text);
    free(targets);
}

void run_print_samples(Trainer *tr, const Dataset *ds, int n, double temperature, uint64_t seed)
{
    if (n <= 0)
        return;
    if (dataset_task(ds))
        print_task_samples(tr, dataset_task(ds), n);
    else
        print_text_sample(tr, ds, n, temperature, seed);
}

/* Built-in tasks and text data: the same seed gives the same batches; answers are right (the
 * test parses each example and does the arithmetic itself); targets are -1 exactly on prompt
 * positions; training never sees a validation problem; the two accuracy measures agree; text
 * windows come from the right part of the file; bad files give messages, not crashes. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "data/dataset.h"
#include "data/tasks.h"
#include "data/text.h"

enum { SAMPLES = 1000, MAXL = 128 };

static Task *open_task(const char *name, int size, bool msd_first)
{
    char err[256] = "";
    TaskSpec spec = { .name = name, .size = size, .answer_msd_first = msd_first };
    Task *t = task_new(&spec, err, sizeof err);
    if (!t)
        fail_msg("%s", err);
    return t;
}

/* The number written by digit tokens s[0..n), most significant first. */
static long long number(const int *s, int n)
{
    long long v = 0;
    for (int i = 0; i < n; i++) {
        int d = task_char(s[i]) - '0';
        assert_true(d >= 0 && d <= 9);
        v = v * 10 + d;
    }
    return v;
}

static void reversed(const int *s, int n, int *out)
{
    for (int i = 0; i < n; i++)
        out[i] = s[n - 1 - i];
}

/* Checks one add or sub example as text: "aaa+bbb=" then the answer digits and '.'. */
static void check_arithmetic(const Task *t, const int *ex, bool msd_first, char op)
{
    int n = task_size(t), P = task_prompt_len(t), A = task_answer_len(t) - 1, digits[MAXL];
    assert_int_equal(task_char(ex[n]), op);
    assert_int_equal(task_char(ex[2 * n + 1]), '=');
    assert_int_equal(ex[P + A], TASK_END);
    long long a = number(ex, n), b = number(ex + n + 1, n);
    if (msd_first)
        memcpy(digits, ex + P, (size_t)A * sizeof *digits);
    else
        reversed(ex + P, A, digits);
    long long want = op == '+' ? a + b : a - b;
    assert_true(want >= 0);
    assert_int_equal(number(digits, A), want);
}

static void test_add_and_sub_answers(void **state)
{
    (void)state;
    for (int msd = 0; msd < 2; msd++) {
        for (int op = 0; op < 2; op++) {
            Task *t = open_task(op ? "sub" : "add", op ? 4 : 3, msd);
            /* "aaaa-bbbb=dddd." and "aaa+bbb=ssss." */
            assert_int_equal(task_example_len(t), op ? 15 : 13);
            Rng rng = rng_new(7, RNG_STREAM_DATA);
            int ex[MAXL];
            for (int i = 0; i < SAMPLES; i++) {
                task_sample(t, &rng, ex);
                check_arithmetic(t, ex, msd, op ? '-' : '+');
            }
            task_free(t);
        }
    }
}

/* The worked example of tasks.h, byte for byte. */
static void test_add_text_format(void **state)
{
    (void)state;
    Task *t = open_task("add", 3, false);
    int ex[MAXL];
    const char *text = "042+917=9590.";
    for (int i = 0; text[i]; i++)
        ex[i] = task_token(text[i]);
    char buf[64];
    assert_string_equal(task_decode(ex, 13, buf, sizeof buf), text);
    check_arithmetic(t, ex, false, '+');
    assert_int_equal(task_token('?'), -1);
    assert_int_equal(task_char(TASK_VOCAB), '?');
    assert_string_equal(task_decode(ex, 13, buf, 5), "042+");   /* truncated, terminated */
    task_free(t);
}

static void test_reverse_and_sort_answers(void **state)
{
    (void)state;
    Task *rev = open_task("reverse", 7, false), *srt = open_task("sort", 6, false);
    Rng rng = rng_new(8, RNG_STREAM_DATA);
    int ex[MAXL];
    for (int i = 0; i < SAMPLES; i++) {
        task_sample(rev, &rng, ex);
        assert_int_equal(task_char(ex[7]), '=');
        for (int k = 0; k < 7; k++) {
            assert_true(task_char(ex[k]) >= 'a' && task_char(ex[k]) <= 'z');
            assert_int_equal(ex[8 + k], ex[6 - k]);
        }
        assert_int_equal(ex[15], TASK_END);

        task_sample(srt, &rng, ex);
        int count[10] = { 0 };
        for (int k = 0; k < 6; k++)
            count[task_char(ex[k]) - '0']++;
        for (int k = 0; k < 6; k++) {
            count[task_char(ex[7 + k]) - '0']--;
            if (k > 0)
                assert_true(ex[7 + k] >= ex[6 + k]);
        }
        for (int d = 0; d < 10; d++)
            assert_int_equal(count[d], 0);   /* the answer is a permutation of the prompt */
        assert_int_equal(ex[13], TASK_END);
    }
    task_free(rev);
    task_free(srt);
}

static void test_same_seed_same_batches(void **state)
{
    (void)state;
    Task *t = open_task("add", 0, false);
    int B = 16, T = task_seq_len(t);
    int x1[16 * MAXL], y1[16 * MAXL], x2[16 * MAXL], y2[16 * MAXL];
    Rng r1 = rng_new(42, RNG_STREAM_DATA), r2 = rng_new(42, RNG_STREAM_DATA);
    Rng r3 = rng_new(43, RNG_STREAM_DATA);
    for (int step = 0; step < 5; step++) {
        task_train_batch(t, &r1, B, x1, y1);
        task_train_batch(t, &r2, B, x2, y2);
        assert_memory_equal(x1, x2, (size_t)B * T * sizeof *x1);
        assert_memory_equal(y1, y2, (size_t)B * T * sizeof *y1);
    }
    task_train_batch(t, &r3, B, x2, y2);
    assert_true(memcmp(x1, x2, (size_t)B * T * sizeof *x1) != 0);
    /* The validation set does not depend on anything but the task. */
    Task *u = open_task("add", 3, false);
    assert_int_equal(task_val_count(u), task_val_count(t));
    assert_memory_equal(task_val_example(u, 0), task_val_example(t, 0),
                        (size_t)task_val_count(t) * task_example_len(t) * sizeof(int));
    task_free(t);
    task_free(u);
}

/* tokens[t] = example[t]; targets[t] = example[t + 1] on answer positions, -1 before. */
static void test_targets_mask_the_prompt(void **state)
{
    (void)state;
    for (int k = 0; task_names[k]; k++) {
        Task *t = open_task(task_names[k], 0, false);
        int B = 8, T = task_seq_len(t), P = task_prompt_len(t);
        int x[8 * MAXL], y[8 * MAXL], ex[MAXL];
        Rng rng = rng_new(5, RNG_STREAM_DATA), again = rng_new(5, RNG_STREAM_DATA);
        task_train_batch(t, &rng, B, x, y);
        for (int b = 0; b < B; b++) {
            task_sample(t, &again, ex);   /* the same draws, one example at a time */
            int answer_positions = 0;
            for (int i = 0; i < T; i++) {
                assert_int_equal(x[b * T + i], ex[i]);
                if (i < P - 1) {
                    assert_int_equal(y[b * T + i], -1);
                } else {
                    assert_int_equal(y[b * T + i], ex[i + 1]);
                    answer_positions++;
                }
            }
            assert_int_equal(answer_positions, task_answer_len(t));
        }
        task_free(t);
    }
}

static int compare_prompts(const void *a, const void *b) { return strcmp(a, b); }

/* 20000 training draws never hit a validation prompt, checked by string against the set
 * itself; the set is distinct and entirely validation-hashed; about 10% of all problems are
 * validation problems. */
static void test_train_and_val_disjoint(void **state)
{
    (void)state;
    Task *t = open_task("add", 3, false);
    int nv = task_val_count(t), P = task_prompt_len(t);
    assert_int_equal(nv, TASK_DEFAULT_VAL);
    char (*val)[MAXL] = calloc((size_t)nv, sizeof *val);
    for (int i = 0; i < nv; i++) {
        assert_true(task_is_val_prompt(t, task_val_example(t, i)));
        task_decode(task_val_example(t, i), P, val[i], MAXL);
    }
    qsort(val, (size_t)nv, sizeof *val, compare_prompts);
    for (int i = 1; i < nv; i++)
        assert_true(strcmp(val[i - 1], val[i]) != 0);

    Rng rng = rng_new(1, RNG_STREAM_DATA), any = rng_new(2, RNG_STREAM_DATA);
    int ex[MAXL], hits = 0;
    char key[MAXL];
    for (int i = 0; i < 20000; i++) {
        task_sample(t, &rng, ex);
        task_decode(ex, P, key, sizeof key);
        assert_null(bsearch(key, val, (size_t)nv, sizeof *val, compare_prompts));
        /* A uniform problem, as a check on the split's share: digits drawn here directly. */
        for (int k = 0; k < P; k++)
            ex[k] = task_token(k == 3 ? '+' : k == 7 ? '=' : (char)('0' + rng_below(&any, 10)));
        hits += task_is_val_prompt(t, ex);
    }
    printf("validation share of uniform problems: %.4f (expected 0.10)\n", hits / 20000.0);
    assert_true(hits > 1800 && hits < 2200);
    free(val);
    task_free(t);
}

/* With 1-digit addition there are 100 problems: the validation set holds every validation one
 * of them, no more, whatever was asked for. */
static void test_small_space_val_set_is_complete(void **state)
{
    (void)state;
    Task *t = open_task("add", 1, false);
    int expected = 0, ex[MAXL];
    for (int a = 0; a < 10; a++)
        for (int b = 0; b < 10; b++) {
            ex[0] = task_token((char)('0' + a));
            ex[1] = task_token('+');
            ex[2] = task_token((char)('0' + b));
            ex[3] = task_token('=');
            expected += task_is_val_prompt(t, ex);
        }
    printf("add size 1: %d of 100 problems validate\n", expected);
    assert_int_equal(task_val_count(t), expected);
    task_free(t);
}

static void test_bad_specs(void **state)
{
    (void)state;
    char err[256];
    TaskSpec bad[] = { { .name = "mul" }, { .name = "add", .size = 33 },
                       { .name = "sort", .size = -1 }, { .name = "add", .n_val = -5 } };
    const char *says[] = { "unknown task 'mul'", "size", "size", "validation size" };
    for (int i = 0; i < 4; i++) {
        err[0] = '\0';
        assert_null(task_new(&bad[i], err, sizeof err));
        assert_non_null(strstr(err, says[i]));
    }
    /* sort of 1 digit has 10 problems; whether any validates depends on the hash, and either
     * way the task must be usable or refused with a message, never hang. */
    TaskSpec tiny = { .name = "sort", .size = 1 };
    Task *t = task_new(&tiny, err, sizeof err);
    if (t)
        assert_true(task_val_count(t) >= 1 && task_val_count(t) < 10);
    task_free(t);
}

/* ---- accuracy ------------------------------------------------------------------------------- */

/* A fake model for add (answers least significant digit first): it reads the operands from the
 * context and predicts the right next token, except that it gets answer digit `wrong_at` wrong
 * when the first operand is odd. It also checks that the context it is given is its own earlier
 * predictions, as greedy decoding must feed it. */
typedef struct {
    int P, n, wrong_at;
    int calls;
} FakeModel;

static int fake_next(const FakeModel *m, const int *ctx, int len)
{
    long long a = number(ctx, m->n), b = number(ctx + m->n + 1, m->n), s = a + b;
    int k = len - m->P;   /* answer token being predicted */
    if (k == m->n + 1)
        return TASK_END;
    for (int i = 0; i < k; i++)
        s /= 10;
    int d = (int)(s % 10);
    if (k == m->wrong_at && a % 2 == 1)
        d = (d + 1) % 10;
    return task_token((char)('0' + d));
}

static void fake_predict(void *ctx, const int *tokens, int B, int len, int *next)
{
    FakeModel *m = ctx;
    m->calls++;
    for (int b = 0; b < B; b++) {
        const int *row = tokens + (size_t)b * len;
        for (int k = m->P; k < len; k++)
            assert_int_equal(row[k], fake_next(m, row, k));
        next[b] = fake_next(m, row, len);
    }
}

/* Teacher forcing with the same fake model: logits one-hot at its prediction for each true
 * prefix. */
static int fake_teacher_forced(const Task *t, FakeModel *m, int B)
{
    int T = task_seq_len(t), V = TASK_VOCAB, correct = 0, rows = 0;
    int *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    float *logits = malloc((size_t)B * T * V * sizeof *logits);
    for (int first = 0; first < task_val_count(t); first += B) {
        rows += task_val_batch(t, first, B, x, y);
        memset(logits, 0, (size_t)B * T * V * sizeof *logits);
        for (int r = 0; r < B * T; r++)
            if (y[r] >= 0)
                logits[(size_t)r * V + fake_next(m, x + (r / T) * T, r % T + 1)] = 1.0f;
        correct += task_count_exact(logits, y, B, T, V);
    }
    assert_int_equal(rows, task_val_count(t));
    free(x);
    free(y);
    free(logits);
    return correct;
}

static void test_accuracy_greedy_and_teacher_forced_agree(void **state)
{
    (void)state;
    Task *t = open_task("add", 3, false);
    FakeModel m = { .P = task_prompt_len(t), .n = 3, .wrong_at = -1 };
    TaskAccuracy acc = task_accuracy_greedy(t, fake_predict, &m, 7, 0);
    assert_int_equal(acc.total, task_val_count(t));
    assert_int_equal(acc.correct, acc.total);
    assert_true(acc.accuracy == 1.0);
    int batches = (task_val_count(t) + 6) / 7;
    assert_int_equal(m.calls, batches * task_answer_len(t));

    int odd = 0;
    for (int i = 0; i < task_val_count(t); i++)
        odd += number(task_val_example(t, i), 3) % 2;
    for (int wrong_at = 0; wrong_at <= 3; wrong_at++) {
        m.wrong_at = wrong_at;
        acc = task_accuracy_greedy(t, fake_predict, &m, 64, 0);
        assert_int_equal(acc.correct, acc.total - odd);
        assert_int_equal(fake_teacher_forced(t, &m, 64), acc.correct);
    }
    /* The first 100 examples only. */
    int odd100 = 0;
    for (int i = 0; i < 100; i++)
        odd100 += number(task_val_example(t, i), 3) % 2;
    acc = task_accuracy_greedy(t, fake_predict, &m, 64, 100);
    assert_int_equal(acc.total, 100);
    assert_int_equal(acc.correct, 100 - odd100);
    printf("fake model wrong on odd first operands: greedy and teacher-forced %d/%d right\n",
           task_val_count(t) - odd, task_val_count(t));
    task_free(t);
}

/* Padding rows of the last validation batch count for nothing; ties go to the lowest id. */
static void test_count_exact_details(void **state)
{
    (void)state;
    Task *t = open_task("sort", 4, false);
    int n = task_val_count(t), T = task_seq_len(t), V = TASK_VOCAB, B = 4;
    int x[4 * MAXL], y[4 * MAXL];
    assert_int_equal(task_val_batch(t, n - 1, B, x, y), 1);
    for (int i = T; i < B * T; i++)
        assert_true(x[i] == TASK_END && y[i] == -1);
    float *logits = calloc((size_t)B * T * V, sizeof *logits);
    for (int r = 0; r < B * T; r++)
        logits[(size_t)r * V + (y[r] >= 0 ? y[r] : 0)] = 2.0f;
    assert_int_equal(task_count_exact(logits, y, B, T, V), 1);
    /* A tie between the target and a lower id goes to the lower id: wrong. */
    int r = T - 2;   /* the last digit of the answer: a target id > 0 */
    assert_true(y[r] > 0);
    logits[(size_t)r * V + y[r] - 1] = 2.0f;
    assert_int_equal(task_count_exact(logits, y, B, T, V), 0);
    assert_int_equal(task_argmax((float[]){ 1, 3, 3, 2 }, 4), 1);
    free(logits);
    task_free(t);
}

/* ---- text ----------------------------------------------------------------------------------- */

static char tmpdir[] = "/tmp/test_tasks_XXXXXX";

static const char *write_file(const char *name, const char *bytes, size_t n)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    fclose(f);
    return path;
}

/* 1000 bytes of a text whose byte at i is known: windows can be located exactly. */
static void make_text(char *buf, size_t n)
{
    const char *words = "the quick brown fox jumps over the lazy dog\n";
    for (size_t i = 0; i < n; i++)
        buf[i] = words[(i * 7 + i / 13) % strlen(words)];
}

static void test_text_split_and_windows(void **state)
{
    (void)state;
    char text[1001];
    make_text(text, 1000);
    text[1000] = '\0';
    char err[256] = "";
    int T = 8, B = 32;
    TextData *d = text_open(write_file("t.txt", text, 1000), T, err, sizeof err);
    assert_non_null(d);
    assert_int_equal(text_train_len(d), 900);
    assert_int_equal(text_val_len(d), 100);
    /* Vocabulary: the distinct bytes, sorted. */
    const char *sorted = "\n abcdefghijklmnopqrstuvwxyz";
    assert_int_equal(text_vocab_size(d), (int)strlen(sorted));
    for (int i = 0; sorted[i]; i++) {
        assert_int_equal(text_char(d, i), (unsigned char)sorted[i]);
        assert_int_equal(text_token(d, (unsigned char)sorted[i]), i);
    }
    assert_int_equal(text_token(d, 'Q'), -1);

    int x[32 * 8], y[32 * 8];
    char wx[16], wy[16];
    Rng rng = rng_new(3, RNG_STREAM_DATA);
    for (int step = 0; step < 50; step++) {
        text_train_batch(d, &rng, B, x, y);
        for (int b = 0; b < B; b++) {
            /* Each window of T+1 bytes lies in the first 900 bytes; targets are shifted. */
            text_decode(d, x + b * T, T, wx, sizeof wx);
            text_decode(d, y + b * T, T, wy, sizeof wy);
            assert_memory_equal(wx + 1, wy, (size_t)T - 1);
            bool found = false;
            for (int s = 0; s + T < 900 && !found; s++)
                found = memcmp(text + s, wx, (size_t)T) == 0 && text[s + T] == wy[T - 1];
            assert_true(found);
        }
    }
    /* Validation windows: offsets 0, 8, ... of the last 100 bytes, (100 - 1) / 8 = 12 of them. */
    assert_int_equal(text_val_count(d), 12);
    assert_int_equal(text_val_batch(d, 8, B, x, y), 4);
    for (int w = 0; w < 4; w++) {
        text_decode(d, x + w * T, T, wx, sizeof wx);
        text_decode(d, y + w * T, T, wy, sizeof wy);
        assert_memory_equal(wx, text + 900 + (8 + w) * T, (size_t)T);
        assert_memory_equal(wy, text + 901 + (8 + w) * T, (size_t)T);
    }
    for (int i = 4 * T; i < B * T; i++)
        assert_int_equal(y[i], -1);
    text_free(d);
}

static void test_text_bad_files(void **state)
{
    (void)state;
    char err[256], text[200];
    make_text(text, sizeof text);
    char missing[300];
    snprintf(missing, sizeof missing, "%s/no-such-file.txt", tmpdir);
    assert_null(text_open(missing, 8, err, sizeof err));
    assert_non_null(strstr(err, "no-such-file.txt"));
    assert_non_null(strstr(err, "No such file"));
    assert_null(text_open(write_file("empty.txt", "", 0), 8, err, sizeof err));
    assert_non_null(strstr(err, "empty"));
    /* T = 8 needs 10 * 9 = 90 bytes. */
    assert_null(text_open(write_file("short.txt", text, 89), 8, err, sizeof err));
    assert_non_null(strstr(err, "89 bytes"));
    TextData *d = text_open(write_file("ok.txt", text, 90), 8, err, sizeof err);
    assert_non_null(d);
    assert_int_equal(text_val_count(d), 1);
    text_free(d);
    assert_null(text_open(tmpdir, 8, err, sizeof err));   /* a directory: a read error */
    printf("directory as data: %s\n", err);
}

static void test_dataset_facade(void **state)
{
    (void)state;
    char err[256], text[1000], line[256];
    make_text(text, sizeof text);
    TaskSpec spec = { .name = "reverse" };
    Dataset *a = dataset_open_task(&spec, err, sizeof err);
    Dataset *b = dataset_open_text(write_file("d.txt", text, sizeof text), 16, err, sizeof err);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(dataset_task(a));
    assert_null(dataset_task(b));
    assert_int_equal(dataset_seq_len(a), 11);
    assert_int_equal(dataset_seq_len(b), 16);
    assert_int_equal(dataset_vocab_size(a), TASK_VOCAB);
    assert_int_equal(dataset_val_count(b), (100 - 1) / 16);
    int x[4 * 16], y[4 * 16];
    Rng rng = rng_new(1, RNG_STREAM_DATA);
    dataset_train_batch(a, &rng, 4, x, y);
    assert_int_equal(task_char(x[5]), '=');
    assert_int_equal(dataset_val_batch(b, 0, 4, x, y), 4);
    assert_memory_equal(dataset_decode(b, x, 16, line, sizeof line), text + 900, 16);
    printf("%s\n", dataset_describe(a, line, sizeof line));
    printf("%s\n", dataset_describe(b, line, sizeof line));
    spec.name = "nope";
    assert_null(dataset_open_task(&spec, err, sizeof err));
    dataset_free(a);
    dataset_free(b);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_and_sub_answers),
        cmocka_unit_test(test_add_text_format),
        cmocka_unit_test(test_reverse_and_sort_answers),
        cmocka_unit_test(test_same_seed_same_batches),
        cmocka_unit_test(test_targets_mask_the_prompt),
        cmocka_unit_test(test_train_and_val_disjoint),
        cmocka_unit_test(test_small_space_val_set_is_complete),
        cmocka_unit_test(test_bad_specs),
        cmocka_unit_test(test_accuracy_greedy_and_teacher_forced_agree),
        cmocka_unit_test(test_count_exact_details),
        cmocka_unit_test(test_text_split_and_windows),
        cmocka_unit_test(test_text_bad_files),
        cmocka_unit_test(test_dataset_facade),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* fit_largest's search (plan/fit_search.h) on models small enough to run in
 * milliseconds: the filter keeps exactly the candidates predicted within the budget, one per
 * shape, the preferred way first, largest first; a measured trial fits at the bisected batch and
 * not one row above it; a budget too small for anything fails with the allocator's message; and
 * the size and time flags parse exactly; the search's and the homework's tables print as
 * fit_largest shows them. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "examples/common/cli.h"
#include "nn/gpt_lora.h"
#include "nn/gpt_snapshot.h"
#include "plan/fit_search.h"

/* A space of tiny models: V 16, T 8, L 1..2, C 32..64, B 4 or 2 towards a batch of 4. */
static FitSpace tiny_space(void)
{
    FitSpace s = {
        .V = 16, .T = 8, .target_batch = 4, .threads = 1,
        .layers = { 1, 2 }, .n_layers = 2,
        .widths = { 32, 64 }, .n_widths = 2,
        .batches = { 4, 2 }, .n_batches = 2,
    };
    return s;
}

static void test_parse_sizes_and_times(void **state)
{
    (void)state;
    size_t b;
    assert_true(cli_parse_bytes("64MiB", &b));
    assert_int_equal(b, 67108864);
    assert_true(cli_parse_bytes("1.5KiB", &b));
    assert_int_equal(b, 1536);
    assert_true(cli_parse_bytes("1000", &b));
    assert_int_equal(b, 1000);
    assert_true(cli_parse_bytes("2GiB", &b));
    assert_int_equal(b, (size_t)2 << 30);
    assert_false(cli_parse_bytes("12x", &b));
    assert_false(cli_parse_bytes("64MB", &b));      /* binary units only: MiB, not MB */
    assert_false(cli_parse_bytes("-1MiB", &b));
    assert_false(cli_parse_bytes("0.5B", &b));      /* not a whole byte */
    assert_false(cli_parse_bytes("", &b));
    double s;
    assert_true(cli_parse_seconds("120s", &s));
    assert_true(s == 120.0);
    assert_true(cli_parse_seconds("2min", &s));
    assert_true(s == 120.0);
    assert_true(cli_parse_seconds("1.5min", &s));
    assert_true(s == 90.0);
    assert_true(cli_parse_seconds("45", &s));
    assert_true(s == 45.0);
    assert_false(cli_parse_seconds("3 days", &s));
    assert_false(cli_parse_seconds("s", &s));
}

/* The budget lies between the second and third shapes' cheapest predictions, so exactly two
 * shapes fit. */
static int shape_index(const FitCandidate *c)
{
    return (c->model.n_layer - 1) * 2 + (c->model.n_embd == 64);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_filter_sort(void **state)
{
    (void)state;
    FitSpace space = tiny_space();
    FitCandidate *all;
    int n = fit_candidates(&space, &all);
    assert_int_equal(n, 2 * 2 * 3 * 2 * 2 * 3);
    /* Micro-batches that do not make up the target batch exactly are left out: of 8, 4 and 3
     * rows toward 4, only 4 (accumulation 1). */
    FitSpace odd = space;
    odd.batches[0] = 8, odd.batches[1] = 4, odd.batches[2] = 3, odd.n_batches = 3;
    FitCandidate *some;
    int n_odd = fit_candidates(&odd, &some);
    assert_int_equal(n_odd, 2 * 2 * 3 * 1 * 2 * 3);
    for (int i = 0; i < n_odd; i++)
        assert_true(some[i].B == 4 && some[i].accum == 1);
    free(some);
    /* After the 6 ways at B 4 (2 precisions x 3 optimizers), B 2 accumulates twice. */
    assert_int_equal(all[6].B, 2);
    assert_int_equal(all[6].accum, 2);
    assert_int_equal(all[5].B, 4);
    double cheapest[4] = { INFINITY, INFINITY, INFINITY, INFINITY };
    for (int i = 0; i < n; i++) {
        int k = shape_index(&all[i]);
        cheapest[k] = all[i].predicted < cheapest[k] ? all[i].predicted : cheapest[k];
    }
    qsort(cheapest, 4, sizeof cheapest[0], by_value);
    size_t budget = (size_t)((cheapest[1] + cheapest[2]) / 2);
    /* The expected survivors, worked out independently: per shape, the first candidate in list
     * order within the budget. */
    int first_of_shape[4] = { -1, -1, -1, -1 };
    for (int i = 0; i < n; i++) {
        int shape = shape_index(&all[i]);
        if (first_of_shape[shape] < 0 && all[i].predicted <= (double)budget)
            first_of_shape[shape] = i;
    }
    FitCandidate want[4];
    int n_want = 0;
    for (int k = 0; k < 4; k++)
        if (first_of_shape[k] >= 0)
            want[n_want++] = all[first_of_shape[k]];
    assert_int_equal(n_want, 2);

    int kept = fit_filter_sort(all, n, budget);
    assert_int_equal(kept, n_want);
    for (int i = 0; i < kept; i++) {
        assert_true(all[i].predicted <= (double)budget);
        if (i > 0)
            assert_true(all[i - 1].params >= all[i].params);
        bool found = false;
        for (int k = 0; k < n_want; k++)
            found |= memcmp(&want[k], &all[i], sizeof want[k]) == 0;
        assert_true(found);
    }
    /* With an ample budget every shape is trained the preferred way: vanilla, the largest
     * batch, fp32, AdamW; the largest model first. */
    free(all);
    n = fit_candidates(&space, &all);
    kept = fit_filter_sort(all, n, (size_t)1 << 40);
    assert_int_equal(kept, 4);
    for (int i = 0; i < kept; i++) {
        assert_int_equal(all[i].strategy.kind, CKPT_VANILLA);
        assert_int_equal(all[i].B, 4);
        assert_int_equal(all[i].accum, 1);
        assert_int_equal(all[i].precision, FIT_FP32);
        assert_int_equal(all[i].optimizer, MC_ADAMW);
    }
    assert_int_equal(all[0].model.n_layer, 2);
    assert_int_equal(all[0].model.n_embd, 64);
    free(all);
}

/* The whole search on a budget that admits some of the tiny models: the winner is predicted
 * and measured within the budget, and measured is the largest that fits. */
static void test_search_winner_fits(void **state)
{
    (void)state;
    FitSpace space = tiny_space();
    FitCandidate *all;
    int n = fit_candidates(&space, &all);
    double lo = all[0].predicted;
    for (int i = 0; i < n; i++)
        lo = all[i].predicted < lo ? all[i].predicted : lo;
    free(all);
    size_t budget = (size_t)(lo * 4);
    FitGoal goal = { .budget = budget, .train_seconds = 1e6, .min_steps = 1, .verify = 2 };
    FitSearch s = fit_search(&space, &goal, NULL);
    assert_true(s.n >= 2);
    assert_int_equal(s.winner, 0);      /* everything is fast: the largest predicted wins */
    const FitRow *w = &s.rows[0];
    printf("winner L%d C%d B %d x %d: %zu parameters, predicted %.0f, measured %.0f, budget "
           "%zu\n", w->c.model.n_layer, w->c.model.n_embd, w->c.B, w->c.accum, w->c.params,
           w->c.predicted, w->m.peak[MEM_ALL], budget);
    assert_true(w->measured && w->m.fits);
    assert_true(w->c.predicted <= (double)budget);
    assert_true(w->m.peak[MEM_ALL] <= (double)budget);
    assert_true(w->m.peak[MEM_PARAM] > 0 && w->m.peak[MEM_ACT] > 0);
    assert_true(w->steps >= 1);
    assert_string_equal(w->verdict, "winner");
    assert_int_equal(s.measured, 2);
    assert_true(s.rows[1].c.params < w->c.params);
    fit_search_free(&s);
}

/* Too small for the smallest model: nothing is predicted to fit, and a real step under that
 * budget fails with the allocator's message naming a category and the bytes. */
static void test_too_small_budget(void **state)
{
    (void)state;
    FitSpace space = tiny_space();
    FitGoal goal = { .budget = 4096, .train_seconds = 1e6, .min_steps = 1, .verify = 1 };
    FitSearch s = fit_search(&space, &goal, NULL);
    assert_int_equal(s.n, 0);
    assert_int_equal(s.winner, -1);
    assert_true(s.smallest_predicted > 4096);
    fit_search_free(&s);

    FitCandidate *all;
    fit_candidates(&space, &all);
    FitMeasure m = fit_measure(&all[0], 4096, 0);
    free(all);
    printf("refused: %s\n", m.error);
    assert_false(m.fits);
    assert_non_null(strstr(m.error, "memory budget exceeded"));
    assert_non_null(strstr(m.error, "param allocation"));
    assert_non_null(strstr(m.error, "budget 4.0 KiB (4096 bytes)"));
}

/* The measured largest batch fits and one more row does not: the bisection's boundary is the
 * budget's, checked by trials of its own. The prediction, an upper bound, is not above it. */
static void test_max_batch_boundary(void **state)
{
    (void)state;
    FitCandidate c = {
        .model = { .vocab_size = 16, .max_seq = 8, .n_layer = 2, .n_head = 2, .n_embd = 64,
                   .tied = true, .fused_qkv = true },
        .B = 1, .accum = 1, .T = 8, .strategy = { CKPT_VANILLA, 0 }, .precision = FIT_FP32,
        .optimizer = MC_ADAMW, .threads = 1,
    };
    fit_predict(&c);
    size_t budget = (size_t)(c.predicted * 1.3);
    int trials;
    double peak;
    int B = fit_max_batch_measured(&c, budget, 0, 1024, &trials, &peak);
    int predicted = fit_max_batch_predicted(&c, budget, 1024);
    printf("budget %zu: measured B %d (%.0f bytes, %d trials), predicted B %d\n", budget, B,
           peak, trials, predicted);
    assert_true(B > 1 && B < 1024);
    assert_true(peak <= (double)budget);
    FitCandidate at = c;
    at.B = B;
    assert_true(fit_measure(&at, budget, 0).fits);
    at.B = B + 1;
    assert_false(fit_measure(&at, budget, 0).fits);
    assert_true(predicted >= 1 && predicted <= B);
    /* The exercise's row: both searches, the prediction at its batch, and the measurement with
     * an evaluation, which holds more and so fits no larger a batch. */
    FitMaxBatch row = fit_max_batch(&c, budget, 1024);
    at.B = predicted;
    fit_predict(&at);
    assert_int_equal(row.predicted, predicted);
    assert_true(row.predicted_bytes == at.predicted);
    assert_int_equal(row.measured, B);
    assert_true(row.measured_bytes == peak);
    assert_true(row.measured_eval >= 1 && row.measured_eval <= B);
    assert_true(row.measured_eval_bytes <= (double)budget);
    assert_true(row.trials > trials);
    assert_true(row.seconds > 0);
}

/* The train_gpt arguments of a candidate, in order (fit_largest prints them as the winner's
 * command): a shape from scratch (fit_shape: heads of 32 dimensions, B 1 x 1), then one on a
 * base with QLoRA adapters, offloaded. */
static void test_flags(void **state)
{
    (void)state;
    FitCandidate c = fit_shape(65, 64, 3, 96, 2);
    assert_int_equal(c.model.n_head, 3);
    char buf[512];
    assert_string_equal(fit_flags(&c, buf, sizeof buf),
                        "--seq 64 --layers 3 --heads 3 --embd 96 --batch 1 --accum 1 "
                        "--checkpoint vanilla --precision fp32 --optimizer sgd");
    c.base = "/tmp/base file.safetensors";
    c.lora = (McLora){ .rank = 8, .targets = LORA_TARGET_O | LORA_TARGET_MLP, .qlora = true };
    c.B = 4, c.accum = 8, c.strategy = (CkptStrategy){ CKPT_SQRT, 0 };
    c.precision = FIT_BF16, c.optimizer = MC_ADAM8BIT, c.offload = true;
    assert_string_equal(fit_flags(&c, buf, sizeof buf),
                        "--seq 64 --load-base /tmp/base file.safetensors --lora 8 --lora-targets "
                        "o,mlp --qlora --batch 4 --accum 8 --checkpoint sqrt --precision bf16 "
                        "--optimizer adam8bit --offload optimizer");
}

/* The whole file as a string (at most len - 1 bytes). */
static const char *slurp(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void join_arg(void *ctx, const char *a)
{
    char *buf = ctx;
    if (buf[0])
        strcat(buf, " ");
    strcat(buf, a);
}

/* The winner's run: the text, the candidate's own arguments, then the run's, in order. */
static void test_run_args(void **state)
{
    (void)state;
    FitCandidate c = fit_shape(65, 32, 2, 64, 1);
    FitRunArgs a = { .data = "data/x.txt", .steps = 123, .sample = 50, .threads = 2,
                     .budget = 8388608 };
    char buf[1024] = "";
    fit_each_run_arg(&c, &a, join_arg, buf);
    assert_string_equal(buf, "--data data/x.txt --seq 32 --layers 2 --heads 2 --embd 64 "
                        "--batch 1 --accum 1 --checkpoint vanilla --precision fp32 --optimizer "
                        "sgd --steps 123 --eval-every 0 --eval-examples 256 --sample 50 "
                        "--mem-budget 8388608 --threads 2");
}

/* The homework's row: the candidate's parts, the run's numbers, the prediction rounded to a
 * byte, the seconds to a tenth, the sample on one line. */
static void test_write_table(void **state)
{
    (void)state;
    FitRow w = { .c = fit_shape(65, 32, 2, 64, 1) };
    w.c.B = 4, w.c.accum = 8, w.c.strategy = (CkptStrategy){ CKPT_SQRT, 0 };
    w.c.precision = FIT_BF16, w.c.optimizer = MC_ADAM8BIT;
    w.c.params = 1000, w.c.trainable = 1000, w.c.predicted = 5000.6;
    w.m.peak[MEM_ALL] = 4500;
    FitTrained r = { .steps = 7, .val_loss = 1.5, .seconds = 12.34, .peak_step = 4400,
                     .peak_run = 4600 };
    snprintf(r.sample, sizeof r.sample, "ab\ncd\te");
    char path[] = "/tmp/test_fit_table.XXXXXX", err[512], text[2048];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_true(fit_write_table(path, 8388608, &w, &r, err, sizeof err));
    assert_string_equal(slurp(path, text, sizeof text),
        "budget\tsetup\tlayers\tembd\theads\tbatch\taccum\tcheckpoint\tprecision\toptimizer\t"
        "params\tpeak_step\tpeak_run\tmeasured_step\tpredicted\teval_loss\tsteps\tseconds\t"
        "sample\tmethod\tlora_rank\ttrainable\n"
        "8388608\tL2 C64 H2, B 4 x 8, sqrt, bf16, adam8bit\t2\t64\t2\t4\t8\tsqrt\tbf16\t"
        "adam8bit\t1000\t4400\t4600\t4500\t5001\t1.5\t7\t12.3\tab / cd e\tfrom scratch\t0\t"
        "1000\n");
    remove(path);
    assert_false(fit_write_table("/nonexistent/dir/t.tsv", 1, &w, &r, err, sizeof err));
    assert_non_null(strstr(err, "/nonexistent/dir/t.tsv"));
}

/* The search's table as fit_largest prints it: the rows up to the last one measured and three
 * more, a measured row's MiB and its difference from the prediction in bytes, "-" where
 * nothing was measured, the error under a row that did not fit, the budget in the legend. */
static void test_search_print(void **state)
{
    (void)state;
    FitRow rows[6];
    for (int i = 0; i < 6; i++) {
        rows[i] = (FitRow){ .c = fit_shape(65, 32, 2, 64, 1), .verdict = "not measured" };
        rows[i].c.predicted = 3 * 1048576.0;
    }
    rows[0].measured = true, rows[0].verdict = "over budget (measured)";
    snprintf(rows[0].m.error, sizeof rows[0].m.error, "over by 12 bytes");
    rows[1].measured = rows[1].m.fits = true, rows[1].verdict = "winner";
    rows[1].m.peak[MEM_ALL] = 2.5 * 1048576, rows[1].update_seconds = 0.0125;
    rows[1].steps = 480;
    FitSearch s = { .n_candidates = 99, .n = 6, .rows = rows, .winner = 1, .measured = 2 };
    FitGoal g = { .budget = 4194304, .train_seconds = 6 };
    char text[4096];
    FILE *f = fmemopen(text, sizeof text, "w");
    assert_non_null(f);
    fit_search_print(&s, &g, f);
    fclose(f);
    assert_non_null(strstr(text, "\n99 candidates listed, 6 shapes predicted to fit"));
    assert_non_null(strstr(text, "\n     over by 12 bytes\n2    L2 C64 H2"));
    assert_non_null(strstr(text, "      3.00      2.50   -524288     0.013     480  winner\n"));
    assert_non_null(strstr(text, "\n5    L2 C64 H2"));    /* the last measured (2) and 3 more */
    assert_null(strstr(text, "\n6    L2 C64 H2"));
    assert_non_null(strstr(text, "      3.00         -         -         -       -  not "));
    assert_non_null(strstr(text, "under the budget of 4194304 bytes, meas-pred in bytes; "
                                 "updates: in 6s at"));
}

/* The homework's table as printed: the adapters' share of the parameters, the peaks in bytes
 * and MiB, the batch as B x accum, the seconds to a tenth, the sample between rules. */
static void test_trained_print(void **state)
{
    (void)state;
    FitRow w = { .c = fit_shape(65, 32, 2, 64, 1) };
    w.c.B = 4, w.c.accum = 8, w.c.params = 1000, w.c.trainable = 125;
    w.c.lora.rank = 4, w.c.base = "b.safetensors", w.c.predicted = 2 * 1048576.0;
    w.m.peak[MEM_ALL] = 1500000;
    FitTrained r = { .steps = 7, .val_loss = 1.23456, .seconds = 12.34,
                     .peak_step = 3 * 1048576, .peak_run = 1572864 };
    snprintf(r.sample, sizeof r.sample, "ab\ncd");
    char text[4096];
    FILE *f = fmemopen(text, sizeof text, "w");
    assert_non_null(f);
    fit_trained_print(&r, &w, 8388608, 120, f);
    fclose(f);
    assert_non_null(strstr(text, "\nthe homework's table (budget 8.0 MiB, time 120s):\n"));
    assert_non_null(strstr(text, "  base               b.safetensors (fine-tuned: LoRA"));
    assert_non_null(strstr(text, "  parameters         1000, of which 125 trained (12.50%: "));
    assert_non_null(strstr(text, "  peak memory        3145728 bytes (3.00 MiB) over the "
                                 "training steps, 1572864 (1.50 MiB) over the run; one step "
                                 "measured 1500000, predicted 2097152 (2.00 MiB)\n"));
    assert_non_null(strstr(text, "  eval loss          1.2346 (validation, 256 rows, after 7 "));
    assert_non_null(strstr(text, "  batch size         32 rows = 4 x 8 accumulated, of 32 "));
    assert_non_null(strstr(text, "  time               12.3 s"));
    assert_non_null(strstr(text, "prompt)\n----\nab\ncd\n----\n"));
}

/* One row of the exercise per strategy, in order: what fit_max_batch gives for each, to fn and
 * to the file. */
static void count_row(void *ctx, const char *strategy, const FitMaxBatch *m)
{
    static const char *const order[] = { "vanilla", "sqrt", "memory-poor" };
    int *n = ctx;
    assert_string_equal(strategy, order[*n]);
    printf("%s: predicted B %d, measured B %d\n", strategy, m->predicted, m->measured);
    assert_true(m->predicted >= 1 && m->measured >= 1);
    ++*n;
}

static void test_max_batch_rows(void **state)
{
    (void)state;
    FitCandidate c = fit_shape(16, 8, 2, 64, 1);
    c.optimizer = MC_ADAMW;
    fit_predict(&c);
    size_t budget = (size_t)(c.predicted * 1.3);
    char path[] = "/tmp/test_fit_rows.XXXXXX", err[512], text[2048], want[256];
    int fd = mkstemp(path), n = 0;
    assert_true(fd >= 0);
    close(fd);
    TsvWriter *t = tsv_open(path, FIT_MAX_BATCH_COLUMNS, err, sizeof err);
    assert_non_null(t);
    assert_true(fit_max_batch_rows(&c, budget, 8, t, count_row, &n));
    assert_true(tsv_close(t, err, sizeof err));
    assert_int_equal(n, 3);
    slurp(path, text, sizeof text);
    remove(path);
    /* sqrt's row: the same predicted batch as fit_max_batch_predicted alone */
    c.strategy = (CkptStrategy){ CKPT_SQRT, 0 };
    snprintf(want, sizeof want, "\n%zu\tsqrt\t%d\t", budget,
             fit_max_batch_predicted(&c, budget, 8));
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "budget\tstrategy\tpredicted_batch\t"));
    int lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 4);
}

/* Offload as a way (FitSpace.offload, fit_largest --offload): each way comes twice, as it is and
 * then offloaded, the latter predicted lower by exactly the device's optim bytes (AdamW's state
 * and masters), run with train_gpt --offload optimizer; under a budget between the two, a real
 * step fits offloaded and not on the device, with no optim bytes on the device. */
static void test_offload_method(void **state)
{
    (void)state;
    FitSpace space = tiny_space();
    FitCandidate *plain, *all;
    int n_plain = fit_candidates(&space, &plain);
    space.offload = true;
    int n = fit_candidates(&space, &all);
    assert_int_equal(n, 2 * n_plain);
    const FitCandidate *pick = NULL;
    for (int i = 0; i < n; i += 2) {
        const FitCandidate *a = &all[i], *b = &all[i + 1];
        assert_false(a->offload);
        assert_true(b->offload);
        assert_true(a->predicted == plain[i / 2].predicted);
        assert_true(a->model.n_embd == b->model.n_embd && a->B == b->B &&
                    a->optimizer == b->optimizer && a->precision == b->precision);
        PrecisionPolicy policy;
        policy_preset(FIT_PRECISION_NAMES[a->precision], &policy);
        McRun run = { .B = a->B, .T = a->T, .strategy = a->strategy, .threads = a->threads,
                      .policy = a->precision == FIT_FP32 ? NULL : &policy };
        double optim = memcalc_predict(&a->model, &run, a->optimizer).bytes[MEM_OPTIM];
        if (a->optimizer == MC_ADAMW) {
            assert_true(a->predicted - b->predicted == optim);
            if (!pick && a->model.n_embd == 64 && a->model.n_layer == 2)
                pick = a;
        } else {
            assert_true(a->predicted - b->predicted >= optim);
        }
    }
    assert_non_null(pick);
    char buf[512];
    assert_non_null(strstr(fit_flags(pick + 1, buf, sizeof buf), " --offload optimizer"));
    assert_null(strstr(fit_flags(pick, buf, sizeof buf), "--offload"));
    assert_non_null(strstr(fit_describe(pick + 1, buf, sizeof buf), ", offload"));
    size_t budget = (size_t)pick[1].predicted;
    FitMeasure on = fit_measure(pick, budget, 0), off = fit_measure(pick + 1, budget, 0);
    printf("budget %zu: on the device %s; offloaded %.0f bytes (predicted %.0f, %.0f without)\n",
           budget, on.error, off.peak[MEM_ALL], pick[1].predicted, pick[0].predicted);
    assert_false(on.fits);
    assert_true(off.fits);
    assert_true(off.peak[MEM_OPTIM] == 0);
    assert_true(off.peak[MEM_ALL] <= (double)budget);
    free(plain);
    free(all);
}

/* Fine-tuning a base (FitSpace.base): a tiny model saved as a file. */
static FitSpace base_space(char *path, size_t len)
{
    FitSpace s = tiny_space();
    s.T = 8;
    s.base_model = (GptConfig){ .vocab_size = 16, .max_seq = 8, .n_layer = 2, .n_head = 2,
                                .n_embd = 64, .tied = true, .fused_qkv = true };
    snprintf(path, len, "/tmp/test_fit_search_base.%d.safetensors", (int)getpid());
    Gpt *m = gpt_new(&s.base_model, 5);
    SnapshotError err;
    assert_true(gpt_snapshot_save(m, path, &err));
    gpt_free(m);
    s.base = path;
    return s;
}

/* The least predicted need of the ways of one kind: full (rank -1 here), plain or QLoRA. */
static double least(const FitCandidate *c, int n, bool full, bool qlora)
{
    double lo = INFINITY;
    for (int i = 0; i < n; i++)
        if ((c[i].lora.rank == 0) == full && (full || c[i].lora.qlora == qlora))
            lo = fmin(lo, c[i].predicted);
    return lo;
}

/* Full fine-tuning wins when it fits; below its need, LoRA at the largest rank that fits
 * (plain or QLoRA, plain first at one rank); below every plain LoRA's, QLoRA. Each winner is
 * measured within the budget. */
static void test_fine_tuning_preference(void **state)
{
    (void)state;
    char path[128];
    FitSpace space = base_space(path, sizeof path);
    FitCandidate *all;
    int n = fit_candidates(&space, &all);
    /* ranks 16, 8, 4 (32 and 64 are not below C / 2 = 32): 1 + 3 x 2 ways */
    assert_int_equal(n, 7 * 3 * 2 * 2 * 3);
    assert_int_equal(all[0].lora.rank, 0);
    assert_int_equal(all[n - 1].lora.rank, 4);
    assert_true(all[n - 1].lora.qlora);
    assert_int_equal(all[n - 1].trainable, 2 * 4 * (2 * 64 + 10 * 64));  /* o and mlp */
    double full = least(all, n, true, false), plain = least(all, n, false, false);
    double qlora = least(all, n, false, true);
    free(all);
    printf("least predicted: full %.0f, LoRA %.0f, QLoRA %.0f\n", full, plain, qlora);
    assert_true(qlora < plain && plain < full);
    struct { double budget; int kind; } cases[] = {
        { 1.3 * full, 0 }, { 0.5 * (plain + full), 1 }, { 0.5 * (qlora + plain), 2 },
    };
    for (int k = 0; k < 3; k++) {
        FitGoal goal = { .budget = (size_t)cases[k].budget, .train_seconds = 1e6,
                         .min_steps = 1, .verify = 1 };
        FitSearch s = fit_search(&space, &goal, NULL);
        assert_true(s.winner >= 0);
        const FitRow *w = &s.rows[s.winner];
        char d[160];
        printf("budget %zu: %s, measured %.0f\n", goal.budget,
               fit_describe(&w->c, d, sizeof d), w->m.peak[MEM_ALL]);
        assert_true(w->m.fits && w->m.peak[MEM_ALL] <= (double)goal.budget);
        int kind = w->c.lora.rank == 0 ? 0 : 1 + w->c.lora.qlora;
        if (cases[k].kind == 1)
            assert_true(kind >= 1);
        else
            assert_int_equal(kind, cases[k].kind);
        /* Rows are in the order of preference: every earlier row failed its measurement. */
        for (int i = 0; i < s.winner; i++)
            assert_false(s.rows[i].m.fits);
        for (int i = 1; i < s.n; i++) {
            const McLora *a = &s.rows[i - 1].c.lora, *b = &s.rows[i].c.lora;
            int ra = a->rank ? a->rank : 1 << 30, rb = b->rank ? b->rank : 1 << 30;
            assert_true(ra > rb || (ra == rb && !a->qlora && b->qlora));
        }
        if (kind == 1 || cases[k].kind == 1)    /* the largest rank predicted to fit */
            assert_int_equal(w->c.lora.rank, s.rows[0].c.lora.rank);
        fit_search_free(&s);
    }
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_sizes_and_times),
        cmocka_unit_test(test_filter_sort),
        cmocka_unit_test(test_search_winner_fits),
        cmocka_unit_test(test_too_small_budget),
        cmocka_unit_test(test_max_batch_boundary),
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_run_args),
        cmocka_unit_test(test_write_table),
        cmocka_unit_test(test_search_print),
        cmocka_unit_test(test_trained_print),
        cmocka_unit_test(test_max_batch_rows),
        cmocka_unit_test(test_offload_method),
        cmocka_unit_test(test_fine_tuning_preference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

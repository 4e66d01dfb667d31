/* Adafactor against the paper's algorithm written out again here in double precision (a [3, 4]
 * matrix and a vector of 5, several steps, every mode), against values worked by hand (the
 * first step of a rank-1 gradient; update clipping), and its state: (rows + cols) floats for a
 * matrix, named buffers, thread-count independence. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "optim/adafactor.h"

enum { R = 3, C = 4, NV = 5, N = R * C + NV, STEPS = 6 };

/* The gradient of step k at element j (matrix elements first): varied in sign and scale. */
static double grad_at(int k, int j) { return (j % 3 - 1) * 0.5 + 0.4 * sin(1.0 + k * j) + 0.01 * k; }

static double initial(int j) { return 0.3 * (j - 6) + 0.05; }

/* ---- the double reference ------------------------------------------------------------------- */

static double rms(const double *x, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += x[i] * x[i];
    return sqrt(s / n);
}

/* One Adafactor step on a [rows, cols] tensor x (factored: row and col sums, else full v). */
typedef struct {
    int    rows, cols;
    bool   factored;
    double x[R * C], row[R], col[C], v[R * C], m[R * C];
} RefTensor;

static void ref_step(RefTensor *t, const AdafactorConfig *c, const double *g, int step,
                     double lr, bool decayed)
{
    int n = t->rows * t->cols;
    double b2 = 1.0 - pow(step, -c->decay_exponent), u[R * C];
    if (t->factored) {
        double sum_r = 0.0;
        for (int i = 0; i < t->rows; i++) {
            double s = 0.0;
            for (int j = 0; j < t->cols; j++)
                s += g[i * t->cols + j] * g[i * t->cols + j] + c->eps1;
            t->row[i] = b2 * t->row[i] + (1 - b2) * s;
            sum_r += t->row[i];
        }
        for (int j = 0; j < t->cols; j++) {
            double s = 0.0;
            for (int i = 0; i < t->rows; i++)
                s += g[i * t->cols + j] * g[i * t->cols + j] + c->eps1;
            t->col[j] = b2 * t->col[j] + (1 - b2) * s;
        }
        for (int i = 0; i < t->rows; i++)
            for (int j = 0; j < t->cols; j++)
                u[i * t->cols + j] = g[i * t->cols + j] /
                                     sqrt(t->row[i] * t->col[j] / sum_r);
    } else {
        for (int k = 0; k < n; k++) {
            t->v[k] = b2 * t->v[k] + (1 - b2) * (g[k] * g[k] + c->eps1);
            u[k] = g[k] / sqrt(t->v[k]);
        }
    }
    double clip = fmax(1.0, rms(u, n) / c->clip_threshold);
    double rho = c->relative_step ? fmin(1e-2, 1.0 / sqrt(step)) : lr;
    double alpha = c->scale_parameter ? rho * fmax(c->eps2, rms(t->x, n)) : rho;
    for (int k = 0; k < n; k++) {
        double uk = u[k] / clip;
        if (c->beta1 > 0) {
            t->m[k] = c->beta1 * t->m[k] + (1 - c->beta1) * uk;
            uk = t->m[k];
        }
        t->x[k] -= alpha * (decayed ? c->weight_decay : 0.0) * t->x[k] + alpha * uk;
    }
}

/* ---- against the reference ------------------------------------------------------------------ */

/* STEPS steps on a matrix [3, 4] and a vector [5], float against double; the largest relative
 * difference of the parameters, each within 2e-6 of their magnitude (a few float roundings per
 * step, accumulated). */
static double check_against_reference(AdafactorConfig c, double lr, const char *label)
{
    Tensor *w = tensor_param("w", 2, (int[]){ R, C }), *b = tensor_param("b", 1, (int[]){ NV });
    RefTensor rw = { .rows = R, .cols = C, .factored = c.factored };
    RefTensor rb = { .rows = 1, .cols = NV, .factored = false };
    for (int j = 0; j < N; j++) {
        float x0 = (float)initial(j);
        if (j < R * C)
            w->data[j] = x0, rw.x[j] = x0;
        else
            b->data[j - R * C] = x0, rb.x[j - R * C] = x0;
    }
    Adafactor *a = adafactor_new((Tensor *[]){ w, b }, 2, c);
    assert_true(adafactor_is_factored(a, 0) == c.factored && !adafactor_is_factored(a, 1));
    for (int k = 0; k < STEPS; k++) {
        double gw[R * C], gb[NV];
        float *fw = tensor_grad(w), *fb = tensor_grad(b);
        for (int j = 0; j < N; j++) {
            float g = (float)grad_at(k, j);
            if (j < R * C)
                fw[j] = g, gw[j] = g;
            else
                fb[j - R * C] = g, gb[j - R * C] = g;
        }
        optim_step(&a->base, lr);
        ref_step(&rw, &c, gw, k + 1, lr, true);
        ref_step(&rb, &c, gb, k + 1, lr, false);
    }
    double worst = 0.0;
    for (int j = 0; j < N; j++) {
        double got = j < R * C ? w->data[j] : b->data[j - R * C];
        double want = j < R * C ? rw.x[j] : rb.x[j - R * C];
        double rel = fabs(got - want) / fmax(fabs(want), 1e-3);
        worst = fmax(worst, rel);
        assert_true(rel <= 2e-6);
        assert_true(fabs(got - initial(j)) > 1e-4);   /* it moved */
    }
    printf("adafactor %-28s %d steps: max relative |float - double| = %.2e (tolerance 2e-6)\n",
           label, STEPS, worst);
    optim_free(&a->base);
    tensor_free(w);
    tensor_free(b);
    return worst;
}

static void test_matches_reference(void **state)
{
    (void)state;
    AdafactorConfig c = adafactor_defaults();
    check_against_reference(c, 0.0, "relative step (paper)");
    c.beta1 = 0.9;
    check_against_reference(c, 0.0, "relative step, b1 = 0.9");
    c.relative_step = false;
    c.weight_decay = 0.1;
    check_against_reference(c, 0.05, "absolute lr 0.05, decay 0.1");
    c.scale_parameter = false;
    check_against_reference(c, 0.01, "absolute lr 0.01, unscaled");
    c.factored = false;
    c.clip_threshold = 0.5;
    check_against_reference(c, 0.01, "unfactored, d = 0.5");
}

/* ---- by hand -------------------------------------------------------------------------------- */

/* Step 1 on X = 2 everywhere with a rank-1 gradient g_ij = a_i b_j: b2 = 0, so R_i = a_i^2 sum
 * b^2, C_j = b_j^2 sum a^2 (e1 is negligible) and V = R C / sum R = g^2 exactly: U = sign(g),
 * RMS(U) = 1, no clipping. rho = min(1e-2, 1) = 0.01 and RMS(X) = 2, so X = 2 - 0.02 sign(g). */
static void test_first_step_by_hand(void **state)
{
    (void)state;
    const float av[R] = { 1.0f, -2.0f, 0.5f }, bv[C] = { 3.0f, -1.0f, 0.25f, 2.0f };
    Tensor *w = tensor_param("w", 2, (int[]){ R, C });
    tensor_fill(w, 2.0f);
    float *g = tensor_grad(w);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            g[i * C + j] = av[i] * bv[j];
    Adafactor *a = adafactor_new(&w, 1, adafactor_defaults());
    optim_step(&a->base, 123.0);   /* relative step: the lr argument is ignored */
    for (int k = 0; k < R * C; k++)
        assert_float_equal(w->data[k], g[k] > 0 ? 1.98f : 2.02f, 1e-6f);
    /* R = a^2 (9 + 1 + 1/16 + 4) = a^2 14.0625, C = b^2 (1 + 4 + 1/4) = b^2 5.25. */
    const float *row = optim_find_buffer(&a->base, "adafactor.row.w")->data;
    const float *col = optim_find_buffer(&a->base, "adafactor.col.w")->data;
    assert_float_equal(row[1], 4.0f * 14.0625f, 1e-5f);
    assert_float_equal(col[0], 9.0f * 5.25f, 1e-5f);
    optim_free(&a->base);
    tensor_free(w);
}

/* A vector with g = 1 everywhere, then g = 10: step 2 has b2 = 1 - 2^-0.8 = 0.425651, V =
 * 0.425651 + 0.574349 * 100 = 57.860551, U = 10 / sqrt(V) = 1.314641 everywhere, so RMS(U) > 1
 * and the update is clipped to exactly 1 per element: X moves by a = 0.01 * RMS(X) again. */
static void test_clipping_by_hand(void **state)
{
    (void)state;
    Tensor *b = tensor_param("b", 1, (int[]){ 4 });
    tensor_fill(b, 1.0f);
    AdafactorConfig c = adafactor_defaults();
    Adafactor *a = adafactor_new(&b, 1, c);
    float *g = tensor_grad(b);
    for (int j = 0; j < 4; j++)
        g[j] = 1.0f;
    optim_step(&a->base, 0.0);   /* U = 1: X = 1 - 0.01 */
    for (int j = 0; j < 4; j++)
        assert_float_equal(b->data[j], 0.99f, 1e-7f);
    for (int j = 0; j < 4; j++)
        g[j] = 10.0f;
    optim_step(&a->base, 0.0);   /* rho = min(0.01, 1/sqrt 2) = 0.01; a = 0.0099 */
    for (int j = 0; j < 4; j++)
        assert_float_equal(b->data[j], 0.99f - 0.0099f, 1e-7f);
    const float *v = optim_find_buffer(&a->base, "adafactor.v.b")->data;
    assert_float_equal(v[0], 57.860551f, 1e-4f);
    /* Without clipping the same step would be 1.314641 times longer. */
    Tensor *u = tensor_param("u", 1, (int[]){ 4 });
    tensor_fill(u, 1.0f);
    c.clip_threshold = 0.0;
    Adafactor *noclip = adafactor_new(&u, 1, c);
    float *gu = tensor_grad(u);
    for (int j = 0; j < 4; j++)
        gu[j] = 1.0f;
    optim_step(&noclip->base, 0.0);
    for (int j = 0; j < 4; j++)
        gu[j] = 10.0f;
    optim_step(&noclip->base, 0.0);
    assert_float_equal(u->data[0], 0.99f - 0.0099f * 1.314641f, 1e-6f);
    optim_free(&a->base);
    optim_free(&noclip->base);
    tensor_free(b);
    tensor_free(u);
}

/* ---- state ---------------------------------------------------------------------------------- */

/* A [300, 200] matrix holds 300 + 200 floats; a vector of 50 holds 50; b1 adds one float per
 * element. Measured in MEM_OPTIM. */
static void test_state_bytes(void **state)
{
    (void)state;
    Tensor *w = tensor_param("w", 2, (int[]){ 300, 200 }), *b = tensor_param("b", 1, (int[]){ 50 });
    Tensor *list[] = { w, b };
    size_t base = mem_current(MEM_OPTIM);
    Adafactor *a = adafactor_new(list, 2, adafactor_defaults());
    size_t bytes = mem_current(MEM_OPTIM) - base;
    assert_int_equal(bytes, (300 + 200 + 50) * sizeof(float));
    assert_int_equal(optim_state_bytes(&a->base), bytes);
    printf("adafactor state: [300, 200] matrix + [50] vector = %zu bytes (AdamW: %zu)\n", bytes,
           (size_t)2 * (300 * 200 + 50) * sizeof(float));
    AdafactorConfig c = adafactor_defaults();
    c.beta1 = 0.9;
    Adafactor *m = adafactor_new(list, 2, c);
    assert_int_equal(optim_state_bytes(&m->base), (300 + 200 + 50 + 300 * 200 + 50) * 4);
    const char *names[] = { "adafactor.row.w", "adafactor.col.w", "adafactor.m.w",
                            "adafactor.v.b", "adafactor.m.b" };
    const size_t counts[] = { 300, 200, 60000, 50, 50 };
    assert_int_equal(optim_buffer_count(&m->base), 5);
    for (int i = 0; i < 5; i++) {
        assert_string_equal(optim_buffer(&m->base, i)->name, names[i]);
        assert_int_equal(optim_buffer(&m->base, i)->count, counts[i]);
    }
    optim_free(&a->base);
    optim_free(&m->base);
    assert_int_equal(mem_current(MEM_OPTIM), base);
    tensor_free(w);
    tensor_free(b);
}

/* A matrix large enough for the parallel loops gives the same bits on 1 thread as on all. */
static void test_threads(void **state)
{
    (void)state;
    enum { RR = 256, CC = 256 };
    Tensor *w[2];
    Adafactor *a[2];
    int threads = par_threads();
    for (int r = 0; r < 2; r++) {
        w[r] = tensor_param("w", 2, (int[]){ RR, CC });
        Rng rng = rng_new(2, 0);
        for (int k = 0; k < RR * CC; k++)
            w[r]->data[k] = rng_normal(&rng);
        a[r] = adafactor_new(&w[r], 1, adafactor_defaults());
        par_set_threads(r == 0 ? 1 : threads);
        for (int s = 0; s < 3; s++) {
            float *g = tensor_grad(w[r]);
            for (int k = 0; k < RR * CC; k++)
                g[k] = rng_normal(&rng);
            optim_step(&a[r]->base, 0.0);
        }
    }
    par_set_threads(threads);
    assert_memory_equal(w[0]->data, w[1]->data, RR * CC * sizeof(float));
    for (int r = 0; r < 2; r++) {
        optim_free(&a[r]->base);
        tensor_free(w[r]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_reference),
        cmocka_unit_test(test_first_step_by_hand),
        cmocka_unit_test(test_clipping_by_hand),
        cmocka_unit_test(test_state_bytes),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

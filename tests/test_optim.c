/* Optimizers and clipping: AdamW and SGD against the update rules written out again here in
 * double precision, and against values worked by hand; decoupled weight decay; the size of the
 * first AdamW step; clipping by the global norm; state in the optim memory category, named,
 * and restorable from a snapshot. */
#include "tests/test_helpers.h"

#include <stdio.h>
#include <string.h>

#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/sgd.h"

enum { NW = 6, NB = 3, STEPS = 6 };

/* A matrix w [2, 3] and a bias b [3], named, with gradients allocated. */
typedef struct {
    Tensor *w, *b;
    Tensor *list[2];
} Params;

static Params make_params(void)
{
    Params p;
    p.w = tensor_param("w", 2, (int[]){ 2, 3 });
    p.b = tensor_param("b", 1, (int[]){ NB });
    for (int i = 0; i < NW; i++)
        p.w->data[i] = 0.3f * (float)(i - 2);
    for (int i = 0; i < NB; i++)
        p.b->data[i] = 1.0f - 0.7f * (float)i;
    tensor_grad(p.w);
    tensor_grad(p.b);
    p.list[0] = p.w;
    p.list[1] = p.b;
    return p;
}

static void free_params(Params *p)
{
    tensor_free(p->w);
    tensor_free(p->b);
}

/* The gradient of step k at element j: varied in sign and scale, so that m and v differ. */
static float grad_at(int k, int j) { return (float)((j % 3 - 1) * 0.5 + 0.3 * sin(1.0 + k * j)); }

static void set_grads(Params *p, int k)
{
    for (int j = 0; j < NW; j++)
        p->w->grad[j] = grad_at(k, j);
    for (int j = 0; j < NB; j++)
        p->b->grad[j] = grad_at(k, NW + j);
}

/* Element j of the matrix and then the bias, as one list. */
static float *param_elem(Params *p, int j)
{
    return j < NW ? &p->w->data[j] : &p->b->data[j - NW];
}

/* One element's value after STEPS steps from p0, by an update rule written out in double. */
typedef double (*ReferenceFn)(double p0, int j, double lr, double wd, const void *cfg);

/* Runs STEPS steps of opt and compares every element with ref, the matrix decayed by wd and the
 * bias not (the default rule). Returns the largest difference; each must be within 5e-7, a few
 * float roundings of values near 1. */
static double run_against_reference(Optim *opt, Params *p, double lr, double wd, ReferenceFn ref,
                                    const void *cfg)
{
    double p0[NW + NB], worst = 0.0;
    for (int j = 0; j < NW + NB; j++)
        p0[j] = *param_elem(p, j);
    for (int k = 0; k < STEPS; k++) {
        set_grads(p, k);
        optim_step(opt, lr);
    }
    assert_int_equal(opt->step, STEPS);
    for (int j = 0; j < NW + NB; j++) {
        double want = ref(p0[j], j, lr, j < NW ? wd : 0.0, cfg);
        double diff = fabs(*param_elem(p, j) - want);
        worst = fmax(worst, diff);
        if (!(diff <= 5e-7))
            fail_msg("element %d (of w then b) after %d steps: expected %.9g, got %.9g "
                     "(tolerance 5e-7)", j, STEPS, want, *param_elem(p, j));
    }
    return worst;
}

/* ---- AdamW ---------------------------------------------------------------------------------- */

/* The rule of adamw.h in double. */
static double adamw_reference(double p, int j, double lr, double wd, const void *cfg)
{
    const AdamWConfig c = *(const AdamWConfig *)cfg;
    double m = 0.0, v = 0.0;
    for (int t = 1; t <= STEPS; t++) {
        double g = grad_at(t - 1, j);
        p -= lr * wd * p;
        m = c.beta1 * m + (1 - c.beta1) * g;
        v = c.beta2 * v + (1 - c.beta2) * g * g;
        double mhat = m / (1 - pow(c.beta1, t)), vhat = v / (1 - pow(c.beta2, t));
        p -= lr * mhat / (sqrt(vhat) + c.eps);
    }
    return p;
}

static void test_adamw_matches_reference(void **state)
{
    (void)state;
    Params p = make_params();
    AdamWConfig c = adamw_defaults();
    c.weight_decay = 0.1;
    c.beta2 = 0.99;   /* so that v moves within a few steps */
    AdamW *opt = adamw_new(p.list, 2, c);
    double worst = run_against_reference(&opt->base, &p, 0.05, c.weight_decay, adamw_reference,
                                         &c);
    printf("adamw: %d steps, max |float - double reference| = %.2e (tolerance 5e-7)\n", STEPS,
           worst);
    optim_free(&opt->base);
    free_params(&p);
}

/* p = 1, g = 0.5, lr = 0.1, wd = 0.1 by hand: decay gives 0.99; m = 0.05, v = 0.00025, and the
 * corrected m / sqrt(v) = 0.5 / 0.5 = 1, so p = 0.99 - 0.1 = 0.89. */
/* |got - want| <= tol, or a failure that names the element and both values. */
static void assert_close_at(const char *what, int i, double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("%s[%d]: expected %.9g, got %.9g (tolerance %.3g)", what, i, want, got, tol);
}

static void test_adamw_first_step_by_hand(void **state)
{
    (void)state;
    Tensor *w = tensor_param("w", 2, (int[]){ 1, 1 });
    w->data[0] = 1.0f;
    tensor_grad(w)[0] = 0.5f;
    AdamWConfig c = adamw_defaults();
    c.weight_decay = 0.1;
    AdamW *opt = adamw_new(&w, 1, c);
    optim_step(&opt->base, 0.1);
    assert_float_equal(w->data[0], 0.89f, 1e-6f);
    assert_float_equal(opt->base.state[0]->data[0], 0.05f, 1e-8f);      /* m */
    assert_float_equal(opt->base.state[1]->data[0], 0.00025f, 1e-10f);  /* v */
    optim_free(&opt->base);
    tensor_free(w);
}

/* Bias correction makes the first step lr * g / (|g| + eps): lr * sign(g) for any scale of g. */
static void test_adamw_first_step_is_lr_sign(void **state)
{
    (void)state;
    const float g[] = { 1e-3f, -1e-3f, 1.0f, -7.5f, 1e3f, -1e4f };
    int n = (int)(sizeof g / sizeof g[0]);
    Tensor *w = tensor_param("w", 1, (int[]){ n });
    tensor_fill(w, 0.0f);
    memcpy(tensor_grad(w), g, sizeof g);
    AdamWConfig c = adamw_defaults();
    AdamW *opt = adamw_new(&w, 1, c);
    double lr = 1e-2;
    optim_step(&opt->base, lr);
    for (int i = 0; i < n; i++) {
        double want = -lr * (g[i] > 0 ? 1.0 : -1.0);
        /* Off by lr * eps / |g| from eps, plus float rounding. */
        assert_close_at("w", i, w->data[i], want, lr * (c.eps / fabs(g[i]) + 1e-6));
    }
    optim_free(&opt->base);
    tensor_free(w);
}

/* With zero gradients m and v stay 0, so only the decay acts: p = p0 (1 - lr wd)^k. An L2 term
 * (wd p added to g) would instead be normalised by sqrt(v) into steps of about lr each. */
static void test_adamw_decay_is_decoupled(void **state)
{
    (void)state;
    Params p = make_params();
    float b0[NB], w0[NW];
    memcpy(w0, p.w->data, sizeof w0);
    memcpy(b0, p.b->data, sizeof b0);
    AdamWConfig c = adamw_defaults();
    c.weight_decay = 0.2;
    AdamW *opt = adamw_new(p.list, 2, c);
    double lr = 0.1, k = 10;
    for (int s = 0; s < k; s++)
        optim_step(&opt->base, lr);
    for (int j = 0; j < NW; j++)
        assert_close_at("w", j, p.w->data[j], w0[j] * pow(1 - lr * c.weight_decay, k), 1e-6);
    /* The bias is not decayed by the default rule, and has no gradient to move it. */
    assert_memory_equal(p.b->data, b0, sizeof b0);
    for (int i = 0; i < optim_state_count(&opt->base); i++)
        for (size_t j = 0; j < opt->base.state[i]->size; j++)
            if (opt->base.state[i]->data[j] != 0.0f)
                fail_msg("state %s [%zu]: expected 0 (no gradient), got %g",
                         opt->base.state[i]->name, j, (double)opt->base.state[i]->data[j]);
    optim_free(&opt->base);
    free_params(&p);
}

static void test_decay_rules(void **state)
{
    (void)state;
    Params p = make_params();
    AdamWConfig c = adamw_defaults();
    c.decay_rule = OPTIM_DECAY_ALL;
    AdamW *all = adamw_new(p.list, 2, c);
    assert_true(all->base.decay[0] && all->base.decay[1]);
    c.decay_rule = OPTIM_DECAY_NONE;
    AdamW *none = adamw_new(p.list, 2, c);
    assert_true(!none->base.decay[0] && !none->base.decay[1]);
    c.decay_rule = OPTIM_DECAY_MATRICES;
    AdamW *mat = adamw_new(p.list, 2, c);
    assert_true(mat->base.decay[0] && !mat->base.decay[1]);
    optim_free(&all->base);
    optim_free(&none->base);
    optim_free(&mat->base);
    free_params(&p);
}

/* A parameter without a gradient is left alone, decay included. */
static void test_param_without_grad_is_skipped(void **state)
{
    (void)state;
    Tensor *w = tensor_param("w", 2, (int[]){ 2, 2 });
    tensor_fill(w, 0.5f);
    AdamW *opt = adamw_new(&w, 1, adamw_defaults());
    Sgd *sgd = sgd_new(&w, 1, sgd_defaults());
    optim_step(&opt->base, 0.1);
    optim_step(&sgd->base, 0.1);
    for (int i = 0; i < 4; i++)
        assert_true(w->data[i] == 0.5f);
    optim_free(&opt->base);
    optim_free(&sgd->base);
    tensor_free(w);
}

/* ---- SGD ------------------------------------------------------------------------------------ */

/* The rule of sgd.h in double. */
static double sgd_reference(double p, int j, double lr, double wd, const void *cfg)
{
    const SgdConfig c = *(const SgdConfig *)cfg;
    double b = 0.0;
    for (int t = 0; t < STEPS; t++) {
        double g = grad_at(t, j) + wd * p;
        b = c.momentum * b + g;
        g = c.nesterov ? g + c.momentum * b : b;
        p -= lr * g;
    }
    return p;
}

static void check_sgd(SgdConfig c, const char *label)
{
    Params p = make_params();
    Sgd *opt = sgd_new(p.list, 2, c);
    double worst = run_against_reference(&opt->base, &p, 0.1, c.weight_decay, sgd_reference, &c);
    printf("sgd %s: max |float - double reference| = %.2e (tolerance 5e-7)\n", label, worst);
    optim_free(&opt->base);
    free_params(&p);
}

static void test_sgd_matches_reference(void **state)
{
    (void)state;
    SgdConfig c = sgd_defaults();
    c.momentum = 0.0;
    check_sgd(c, "plain");
    c.momentum = 0.9;
    c.weight_decay = 0.05;
    check_sgd(c, "momentum");
    c.nesterov = true;
    check_sgd(c, "nesterov");
}

/* p = 1, g = 1 every step, lr = 0.1, mu = 0.9, by hand.
 * Momentum: b = 1, 1.9, 2.71, so p = 0.9, 0.71, 0.439.
 * Nesterov: b = 1, 1.9, 2.71; steps use g + mu b = 1.9, 2.71, 3.439, so p = 0.81, 0.539, 0.1951. */
static void test_sgd_by_hand(void **state)
{
    (void)state;
    const float want[2][3] = { { 0.9f, 0.71f, 0.439f }, { 0.81f, 0.539f, 0.1951f } };
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        Tensor *w = tensor_param("w", 1, (int[]){ 1 });
        w->data[0] = 1.0f;
        SgdConfig c = sgd_defaults();
        c.nesterov = nesterov;
        Sgd *opt = sgd_new(&w, 1, c);
        for (int k = 0; k < 3; k++) {
            tensor_grad(w)[0] = 1.0f;
            optim_step(&opt->base, 0.1);
            assert_float_equal(w->data[0], want[nesterov][k], 1e-6f);
        }
        optim_free(&opt->base);
        tensor_free(w);
    }
}

/* ---- clipping ------------------------------------------------------------------------------- */

/* Gradients (3, 4) and (12) and one parameter without a gradient: the norm is 13 exactly. */
static void test_clip(void **state)
{
    (void)state;
    Tensor *a = tensor_param("a", 1, (int[]){ 2 }), *b = tensor_param("b", 1, (int[]){ 1 });
    Tensor *none = tensor_param("none", 1, (int[]){ 4 });
    Tensor *list[] = { a, none, b };
    tensor_grad(a)[0] = 3.0f;
    a->grad[1] = 4.0f;
    tensor_grad(b)[0] = 12.0f;
    assert_true(clip_grad_norm(list, 3) == 13.0);

    /* Below the limit: untouched, bit for bit. */
    assert_true(clip_grad_norm_to(list, 3, 20.0) == 13.0);
    assert_true(a->grad[0] == 3.0f && a->grad[1] == 4.0f && b->grad[0] == 12.0f);

    /* Above: every gradient times the same float factor 6.5 / (13 + 1e-6). */
    assert_true(clip_grad_norm_to(list, 3, 6.5) == 13.0);
    float f = (float)(6.5 / (13.0 + 1e-6));
    assert_true(a->grad[0] == 3.0f * f && a->grad[1] == 4.0f * f && b->grad[0] == 12.0f * f);
    assert_true(fabs(clip_grad_norm(list, 3) - 6.5) <= 1e-5);
    assert_null(none->grad);

    /* Not finite: returned, nothing scaled. */
    b->grad[0] = INFINITY;
    float a0 = a->grad[0];
    assert_true(isinf(clip_grad_norm_to(list, 3, 1.0)));
    assert_true(a->grad[0] == a0);
    tensor_free(a);
    tensor_free(b);
    tensor_free(none);
}

/* The norm is summed in double: 10^6 gradients of 1e-3 after one of 1 give sqrt(2) to 1e-9.
 * A float running sum would be off by percents: each 1e-6 added to a sum near 1.5 is rounded
 * to a multiple of the float spacing there, 1.2e-7. */
static void test_clip_norm_is_double(void **state)
{
    (void)state;
    int n = 1000000;
    Tensor *a = tensor_param("a", 1, (int[]){ n });
    float *g = tensor_grad(a);
    for (int i = 0; i < n; i++)
        g[i] = 1e-3f;
    g[0] = 1.0f;
    double want = sqrt(1.0 + (n - 1) * (double)1e-3f * (double)1e-3f);
    assert_true(fabs(clip_grad_norm(&a, 1) - want) <= 1e-9);
    tensor_free(a);
}

/* clip_sum_squares's order, written out again: element j into running sum j mod 8, the eight
 * added in order. Bit for bit, at lengths around the eight-wide body and its tail. */
static void test_clip_sum_squares_order(void **state)
{
    (void)state;
    Rng rng = rng_new(3, 1);
    float g[1001];
    for (int j = 0; j < 1001; j++)
        g[j] = rng_normal(&rng) * (j % 3 ? 1.0f : 1e-4f);
    const int lengths[] = { 0, 1, 7, 8, 9, 16, 1001 };
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        int n = lengths[l];
        double acc[8] = { 0 }, want = 0.0;
        for (int j = 0; j < n; j++)
            acc[j % 8] += (double)g[j] * (double)g[j];
        for (int k = 0; k < 8; k++)
            want += acc[k];
        double got = clip_sum_squares(g, (size_t)n);
        if (memcmp(&got, &want, sizeof got) != 0)
            fail_msg("n = %d: %.17g, want %.17g", n, got, want);
    }
}

/* ---- state ---------------------------------------------------------------------------------- */

static void test_state_memory(void **state)
{
    (void)state;
    Params p = make_params();
    size_t base = mem_current(MEM_OPTIM);
    size_t elems = NW + NB;
    AdamW *adam = adamw_new(p.list, 2, adamw_defaults());
    assert_int_equal(mem_current(MEM_OPTIM) - base, 2 * elems * sizeof(float));
    assert_int_equal(optim_state_bytes(&adam->base), 2 * elems * sizeof(float));
    SgdConfig c = sgd_defaults();
    Sgd *sgd = sgd_new(p.list, 2, c);
    assert_int_equal(mem_current(MEM_OPTIM) - base, 3 * elems * sizeof(float));
    c.momentum = 0.0;
    Sgd *plain = sgd_new(p.list, 2, c);
    assert_int_equal(optim_state_count(&plain->base), 0);
    assert_int_equal(mem_current(MEM_OPTIM) - base, 3 * elems * sizeof(float));
    optim_free(&adam->base);
    optim_free(&sgd->base);
    optim_free(&plain->base);
    assert_int_equal(mem_current(MEM_OPTIM), base);
    free_params(&p);
}

static void test_state_names(void **state)
{
    (void)state;
    Params p = make_params();
    Tensor *anon = tensor_new2(MEM_PARAM, 1, 2);
    Tensor *list[] = { p.w, p.b, anon };
    AdamW *adam = adamw_new(list, 3, adamw_defaults());
    const char *want[] = { "adamw.m.w", "adamw.v.w", "adamw.m.b", "adamw.v.b", "adamw.m.#2",
                           "adamw.v.#2" };
    char buf[128];
    assert_int_equal(optim_state_count(&adam->base), 6);
    for (int i = 0; i < 6; i++) {
        assert_string_equal(optim_state_name(&adam->base, i, buf, sizeof buf), want[i]);
        assert_ptr_equal(optim_find_state(&adam->base, want[i]),
                         optim_state_tensor(&adam->base, i));
        assert_true(tensor_same_shape(optim_state_tensor(&adam->base, i), list[i / 2]));
    }
    assert_null(optim_find_state(&adam->base, "adamw.m.nothing"));
    Sgd *sgd = sgd_new(list, 3, sgd_defaults());
    assert_string_equal(optim_state_name(&sgd->base, 1, buf, sizeof buf), "sgd.momentum.b");
    optim_free(&adam->base);
    optim_free(&sgd->base);
    tensor_free(anon);
    free_params(&p);
}

/* A snapshot restores state by name and the step counter; the next step is then identical. The
 * counter matters: restoring the state without it gives a different step. */
static void test_state_restore(void **state)
{
    (void)state;
    Params p = make_params(), q = make_params();
    AdamWConfig c = adamw_defaults();
    AdamW *a = adamw_new(p.list, 2, c);
    for (int k = 0; k < 3; k++) {
        set_grads(&p, k);
        optim_step(&a->base, 0.01);
    }
    AdamW *b = adamw_new(q.list, 2, c);
    tensor_copy_data(q.w, p.w);
    tensor_copy_data(q.b, p.b);
    char name[128];
    for (int i = 0; i < optim_state_count(&a->base); i++) {
        optim_state_name(&a->base, i, name, sizeof name);
        tensor_copy_data(optim_find_state(&b->base, name), optim_state_tensor(&a->base, i));
    }
    AdamW *stale = adamw_new(q.list, 2, c);   /* same state, step counter left at 0 */
    for (int i = 0; i < optim_state_count(&a->base); i++)
        tensor_copy_data(stale->base.state[i], a->base.state[i]);
    b->base.step = a->base.step;

    float w_before[NW];
    memcpy(w_before, q.w->data, sizeof w_before);
    set_grads(&p, 3);
    set_grads(&q, 3);
    optim_step(&a->base, 0.01);
    optim_step(&b->base, 0.01);
    assert_memory_equal(p.w->data, q.w->data, sizeof w_before);
    assert_memory_equal(p.b->data, q.b->data, NB * sizeof(float));

    memcpy(q.w->data, w_before, sizeof w_before);
    optim_step(&stale->base, 0.01);
    assert_true(memcmp(p.w->data, q.w->data, sizeof w_before) != 0);
    optim_free(&a->base);
    optim_free(&b->base);
    optim_free(&stale->base);
    free_params(&p);
    free_params(&q);
}

static void make_duplicate_names(void *arg)
{
    (void)arg;
    Tensor *x = tensor_param("same", 1, (int[]){ 2 }), *y = tensor_param("same", 1, (int[]){ 2 });
    adamw_new((Tensor *[]){ x, y }, 2, adamw_defaults());
}

static void make_nesterov_without_momentum(void *arg)
{
    (void)arg;
    Tensor *x = tensor_param("x", 1, (int[]){ 2 });
    SgdConfig c = sgd_defaults();
    c.momentum = 0.0;
    c.nesterov = true;
    sgd_new(&x, 1, c);
}

static void test_bad_configs_abort(void **state)
{
    (void)state;
    assert_true(test_aborts(make_duplicate_names, NULL));
    assert_true(test_aborts(make_nesterov_without_momentum, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_matches_reference),
        cmocka_unit_test(test_adamw_first_step_by_hand),
        cmocka_unit_test(test_adamw_first_step_is_lr_sign),
        cmocka_unit_test(test_adamw_decay_is_decoupled),
        cmocka_unit_test(test_decay_rules),
        cmocka_unit_test(test_param_without_grad_is_skipped),
        cmocka_unit_test(test_sgd_matches_reference),
        cmocka_unit_test(test_sgd_by_hand),
        cmocka_unit_test(test_clip),
        cmocka_unit_test(test_clip_norm_is_double),
        cmocka_unit_test(test_clip_sum_squares_order),
        cmocka_unit_test(test_state_memory),
        cmocka_unit_test(test_state_names),
        cmocka_unit_test(test_state_restore),
        cmocka_unit_test(test_bad_configs_abort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

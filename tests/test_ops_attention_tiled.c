/* Tiled (online-softmax) attention: equal to the standard op within fp32 rounding, in values and
 * in every gradient, for separate q, k, v, the fused [q | k | v] form and one tensor used three
 * times; gradchecked on its own; exactly causal; bit-identical across layouts and thread
 * counts; and the activation memory it keeps measured to the byte. T = 1, 5, 33, 70, 130 is
 * never a multiple of the 64 x 64 tiles, so partial blocks, blocks cut by the mask and rows
 * with a single key all occur. */
#include "tests/test_helpers.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/parallel.h"

typedef struct {
    int B, T, C, H;
} Shape;

/* Which inputs a case feeds the op: three tensors, one fused [B, T, 3C], or one tensor [B, T, C]
 * passed as q, k and v alike. */
typedef enum { FORM_SEPARATE, FORM_FUSED, FORM_SAME } Form;

static const char *const FORM_NAME[] = { "q,k,v", "qkv", "x,x,x" };

typedef struct {
    int  n_head;
    bool tiled;
} Which;

static Tensor *f_separate(Tape *t, Tensor *const *in, void *c)
{
    const Which *w = c;
    return (w->tiled ? op_attention_tiled : op_attention)(t, in[0], in[1], in[2], w->n_head);
}

static Tensor *f_fused(Tape *t, Tensor *const *in, void *c)
{
    const Which *w = c;
    return (w->tiled ? op_attention_qkv_tiled : op_attention_qkv)(t, in[0], w->n_head);
}

static Tensor *f_same(Tape *t, Tensor *const *in, void *c)
{
    const Which *w = c;
    return (w->tiled ? op_attention_tiled : op_attention)(t, in[0], in[0], in[0], w->n_head);
}

static const GradcheckFn FORM_FN[] = { f_separate, f_fused, f_same };
static const int FORM_INPUTS[] = { 3, 1, 1 };

static void make_inputs(Rng *rng, Shape s, Form form, float scale, Tensor **in)
{
    int width = form == FORM_FUSED ? 3 : 1;
    for (int i = 0; i < FORM_INPUTS[form]; i++)
        in[i] = test_leaf(rng, scale, 3, (int[]){ s.B, s.T, width * s.C });
}

static void free_inputs(Tensor **in, int n)
{
    for (int i = 0; i < n; i++)
        tensor_free(in[i]);
}

/* The output and the inputs' gradients of one forward + backward, copied out (free with
 * pass_free). The backward is seeded with N(0, 1) weights drawn from a fixed seed, so two runs
 * see the same dO. */
typedef struct {
    float *out, *grad[3];
    size_t n_out, n_grad[3];
    int    n_in;
} Pass;

static float *copy_floats(const float *src, size_t n)
{
    float *dst = malloc(n * sizeof *dst);
    memcpy(dst, src, n * sizeof *dst);
    return dst;
}

static Pass run_pass(GradcheckFn fn, Tensor *const *in, int n_in, Which which)
{
    for (int i = 0; i < n_in; i++)
        tensor_zero_grad(in[i]);
    Tape *tape = tape_new();
    Tensor *y = fn(tape, in, &which);
    Pass p = { .out = copy_floats(y->data, y->size), .n_out = y->size, .n_in = n_in };
    float *seed = malloc(y->size * sizeof *seed);
    Rng rng = rng_new(77, 3);
    for (size_t i = 0; i < y->size; i++)
        seed[i] = rng_normal(&rng);
    tape_backward_seeded(tape, y, seed);
    for (int i = 0; i < n_in; i++) {
        p.grad[i] = copy_floats(in[i]->grad, in[i]->size);
        p.n_grad[i] = in[i]->size;
    }
    free(seed);
    tape_free(tape);
    return p;
}

static void pass_free(Pass *p)
{
    free(p->out);
    for (int i = 0; i < p->n_in; i++)
        free(p->grad[i]);
}

static double max_abs(const float *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)x[i]));
    return m;
}

/* ---- equal to standard attention ------------------------------------------------------------
 * Both ops compute in fp32 with fp32 accumulation and the same exp, and differ in summation
 * order (tiles of 64 keys, a rescaled running sum) and in one thing more: the tiled backward
 * recomputes P = exp(S - L) from L = m + log(l) stored as one float, whose rounding, half an ulp
 * of |L| ~ eps |S|, becomes a relative error of P. So the tolerance, for the output and for the
 * gradients, relative to the largest value of each, is
 *     1e-5 + 4 eps max|S|
 * where max|S| is the largest score a query sees (computed here in double). The distances
 * measured are a few ulp of the largest terms, times the growth of rounding over T <= 130 terms:
 * up to 2.5e-6 with inputs of scale 1 (max|S| <= 14), and up to 1e-5 for x,x,x with inputs of
 * scale 3, where each query sees itself at a score of ~|x|^2 / sqrt(D), up to 110 (all printed
 * below). That leaves margins of 6x or more; a real mistake (a missed rescale, a mask off by
 * one, a lost 1/sqrt(D), one of the three gradient terms of x,x,x dropped) moves results by 1e-2
 * of the scale or more. Inputs of scale 3 give near one-hot rows whose running maximum jumps
 * between blocks, the case the rescaling exists for. */
static double max_score(Tensor *const *in, Form form, Shape s)
{
    int D = s.C / s.H, ld = form == FORM_FUSED ? 3 * s.C : s.C;
    const float *q = in[0]->data;
    const float *k = form == FORM_SEPARATE ? in[1]->data : q + (form == FORM_FUSED ? s.C : 0);
    double worst = 0.0;
    for (long bt = 0; bt < (long)s.B * s.T; bt++)
        for (int h = 0; h < s.H; h++)
            for (int j = 0; j <= bt % s.T; j++) {
                const float *qt = q + bt * ld + h * D, *kj = k + (bt - bt % s.T + j) * ld + h * D;
                double dot = 0.0;
                for (int d = 0; d < D; d++)
                    dot += (double)qt[d] * kj[d];
                worst = fmax(worst, fabs(dot) / sqrt(D));
            }
    return worst;
}

static void check_equal(Shape s, Form form, float input_scale, Rng *rng, double *margin)
{
    Tensor *in[3];
    make_inputs(rng, s, form, input_scale, in);
    int n = FORM_INPUTS[form];
    double smax = max_score(in, form, s), tol = 1e-5 + 4.0 * FLT_EPSILON * smax;
    Pass ref = run_pass(FORM_FN[form], in, n, (Which){ s.H, false });
    Pass got = run_pass(FORM_FN[form], in, n, (Which){ s.H, true });
    double value = test_max_abs_diff(got.out, ref.out, ref.n_out) / max_abs(ref.out, ref.n_out);
    double grad = 0.0, grad_scale = 0.0;
    for (int i = 0; i < n; i++) {
        grad = fmax(grad, test_max_abs_diff(got.grad[i], ref.grad[i], ref.n_grad[i]));
        grad_scale = fmax(grad_scale, max_abs(ref.grad[i], ref.n_grad[i]));
    }
    grad /= grad_scale;
    printf("B=%d T=%3d C=%3d H=%d %-5s x%.0f max|S| %5.1f: |tiled - standard| / scale: value "
           "%.2g, gradient %.2g (tolerance %.2g)\n", s.B, s.T, s.C, s.H, FORM_NAME[form],
           input_scale, smax, value, grad, tol);
    assert_true(value <= tol);
    assert_true(grad <= tol);
    *margin = fmin(*margin, tol / fmax(value, grad));
    pass_free(&ref);
    pass_free(&got);
    free_inputs(in, n);
}

static void test_equals_standard(void **state)
{
    (void)state;
    const Shape shapes[] = { { 2, 1, 8, 2 }, { 2, 5, 12, 3 }, { 1, 33, 16, 2 },
                             { 2, 70, 32, 4 }, { 1, 130, 64, 1 }, { 1, 130, 128, 2 } };
    Rng rng = rng_new(31, 1);
    double margin = INFINITY;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int form = FORM_SEPARATE; form <= FORM_SAME; form++)
            for (float scale = 1.0f; scale <= 3.0f; scale += 2.0f)
                check_equal(shapes[i], (Form)form, scale, &rng, &margin);
    printf("smallest margin (tolerance / distance) over all cases: %.1fx\n", margin);
}

/* ---- gradcheck ------------------------------------------------------------------------------
 * The tolerances of test_ops_attention.c, for the same reason: h = 1e-2 on O(1) inputs leaves a
 * truncation error ~h^2/6 |f'''| ~ 2e-5 and an fp32 rounding error ~1e-5. The worst measured is
 * 1.3e-4 (x,x,x at T = 70), against atol 5e-4 + rtol 1e-3 |numeric|; a real mistake is
 * O(|gradient|) ~ 0.1-1. T = 70 puts queries and keys in two blocks each, so the off-diagonal
 * block and the partial diagonal one are both checked. */
static GradcheckOptions tolerances(void)
{
    GradcheckOptions opt = gradcheck_defaults();
    opt.atol = 5e-4;
    opt.rtol = 1e-3;
    return opt;
}

static void test_tiled_gradcheck(void **state)
{
    (void)state;
    const Shape shapes[] = { { 2, 5, 6, 2 }, { 1, 70, 4, 1 } };
    Rng rng = rng_new(32, 1);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int form = FORM_SEPARATE; form <= FORM_SAME; form++) {
            Tensor *in[3];
            make_inputs(&rng, shapes[i], (Form)form, 1.0f, in);
            char label[64];
            snprintf(label, sizeof label, "attention_tiled %s T=%d", FORM_NAME[form],
                     shapes[i].T);
            test_gradcheck(label, FORM_FN[form], in, FORM_INPUTS[form],
                           &(Which){ shapes[i].H, true }, tolerances());
            free_inputs(in, FORM_INPUTS[form]);
        }
}

/* ---- exact properties -----------------------------------------------------------------------*/

/* The fused op runs the same kernel with another row stride: bit-identical to the separate op
 * on copies of the three slices, output and gradients. */
static void test_fused_matches_separate_exactly(void **state)
{
    (void)state;
    const Shape s = { 2, 70, 16, 2 };
    Rng rng = rng_new(33, 1);
    Tensor *qkv, *part[3];
    make_inputs(&rng, s, FORM_FUSED, 1.0f, &qkv);
    make_inputs(&rng, s, FORM_SEPARATE, 1.0f, part);
    for (long r = 0; r < (long)s.B * s.T; r++)
        for (int j = 0; j < 3; j++)
            memcpy(part[j]->data + r * s.C, qkv->data + r * 3 * s.C + j * s.C,
                   (size_t)s.C * sizeof(float));
    Pass fused = run_pass(f_fused, &qkv, 1, (Which){ s.H, true });
    Pass separate = run_pass(f_separate, part, 3, (Which){ s.H, true });
    assert_memory_equal(fused.out, separate.out, fused.n_out * sizeof(float));
    for (long r = 0; r < (long)s.B * s.T; r++)
        for (int j = 0; j < 3; j++)
            assert_memory_equal(fused.grad[0] + r * 3 * s.C + j * s.C,
                                separate.grad[j] + r * s.C, (size_t)s.C * sizeof(float));
    pass_free(&fused);
    pass_free(&separate);
    free_inputs(part, 3);
    tensor_free(qkv);
}

/* One (b, h) pair is one thread's work with fixed arithmetic: 1 and 2 threads give the same
 * bits. B * H = 3 is odd, so the two threads get unequal shares. */
static void test_thread_count_invariance(void **state)
{
    (void)state;
    const Shape s = { 3, 130, 16, 1 };
    Rng rng = rng_new(34, 1);
    Tensor *qkv;
    make_inputs(&rng, s, FORM_FUSED, 1.0f, &qkv);
    par_set_threads(1);
    Pass one = run_pass(f_fused, &qkv, 1, (Which){ s.H, true });
    par_set_threads(2);
    Pass two = run_pass(f_fused, &qkv, 1, (Which){ s.H, true });
    assert_memory_equal(one.out, two.out, one.n_out * sizeof(float));
    assert_memory_equal(one.grad[0], two.grad[0], one.n_grad[0] * sizeof(float));
    pass_free(&one);
    pass_free(&two);
    tensor_free(qkv);
}

/* Changing the inputs at position t leaves every output before t bit-identical (no key after a
 * query leaks in, even through a rescale), and changes the output at t. Positions straddle the
 * 64-row blocks. */
static void test_causality_exact(void **state)
{
    (void)state;
    const Shape s = { 1, 130, 8, 2 };
    const int positions[] = { 0, 1, 63, 64, 65, 127, 128, 129 };
    Rng rng = rng_new(35, 1);
    Tensor *qkv, *changed;
    make_inputs(&rng, s, FORM_FUSED, 1.0f, &qkv);
    make_inputs(&rng, s, FORM_FUSED, 1.0f, &changed);
    Tape *tape = tape_new();
    Tensor *base = op_attention_qkv_tiled(tape, qkv, s.H);
    for (size_t i = 0; i < sizeof positions / sizeof positions[0]; i++) {
        int t = positions[i];
        tensor_copy_data(changed, qkv);
        for (int c = 0; c < 3 * s.C; c++)
            changed->data[(long)t * 3 * s.C + c] += 0.5f + rng_uniform(&rng);
        Tensor *y = op_attention_qkv_tiled(tape, changed, s.H);
        assert_memory_equal(y->data, base->data, (size_t)t * s.C * sizeof(float));
        int moved = 0;
        for (int c = 0; c < s.C; c++)
            moved += y->data[(long)t * s.C + c] != base->data[(long)t * s.C + c];
        assert_true(moved > 0);
    }
    tape_free(tape);
    tensor_free(changed);
    tensor_free(qkv);
}

/* ---- memory ---------------------------------------------------------------------------------
 * What one op call adds to the act category, and the temp peak of its forward + backward. */
typedef struct {
    size_t act, temp_peak;
} OpBytes;

static OpBytes measure(Shape s, bool tiled, bool want_grad)
{
    Rng rng = rng_new(36, 1);
    Tensor *qkv;
    make_inputs(&rng, s, FORM_FUSED, 1.0f, &qkv);
    qkv->requires_grad = want_grad;
    Tape *tape = tape_new();
    size_t act0 = mem_current(MEM_ACT), temp0 = mem_current(MEM_TEMP);
    mem_reset_peaks();
    Tensor *y = (tiled ? op_attention_qkv_tiled : op_attention_qkv)(tape, qkv, s.H);
    OpBytes bytes = { .act = mem_current(MEM_ACT) - act0 };
    if (want_grad) {
        float *ones = malloc(y->size * sizeof *ones);
        for (size_t i = 0; i < y->size; i++)
            ones[i] = 1.0f;
        tape_backward_seeded(tape, y, ones);
        free(ones);
    }
    bytes.temp_peak = mem_peak(MEM_TEMP) - temp0;
    tape_free(tape);
    assert_int_equal(mem_current(MEM_ACT), act0);
    tensor_free(qkv);
    return bytes;
}

/* Exactly the output and B*H*T floats of L, to the byte; without a gradient only the output.
 * The backward leaves no temp behind but the input's own gradient, and the values do not depend
 * on whether L was saved. */
static void test_saves_output_and_lse_only(void **state)
{
    (void)state;
    const Shape s = { 2, 70, 16, 2 };
    size_t out_bytes = (size_t)s.B * s.T * s.C * sizeof(float);
    size_t lse_bytes = (size_t)s.B * s.H * s.T * sizeof(float);
    assert_int_equal(measure(s, true, true).act, out_bytes + lse_bytes);
    assert_int_equal(measure(s, true, false).act, out_bytes);

    Rng rng = rng_new(37, 1);
    Tensor *qkv;
    make_inputs(&rng, s, FORM_FUSED, 1.0f, &qkv);
    size_t temp0 = mem_current(MEM_TEMP);
    Tape *tape = tape_new();
    Tensor *y = op_attention_qkv_tiled(tape, qkv, s.H);
    float *recorded = copy_floats(y->data, y->size);
    tape_backward_seeded(tape, y, recorded);
    assert_int_equal(mem_current(MEM_TEMP) - temp0, qkv->size * sizeof(float));
    tape_reset(tape);
    qkv->requires_grad = false;
    y = op_attention_qkv_tiled(tape, qkv, s.H);
    assert_memory_equal(y->data, recorded, out_bytes);
    free(recorded);
    tape_free(tape);
    tensor_free(qkv);
}

/* Doubling T doubles what the tiled op keeps, exactly, and nearly quadruples what the standard
 * op keeps; the temp peak of the tiled forward + backward (the input's gradient, dO, scratch
 * tiles and D_t) at most doubles too, so no T x T buffer hides there either. */
static void test_memory_linear_in_T(void **state)
{
    (void)state;
    const Shape s256 = { 1, 256, 64, 4 }, s512 = { 1, 512, 64, 4 };
    OpBytes tiled256 = measure(s256, true, true), tiled512 = measure(s512, true, true);
    OpBytes std256 = measure(s256, false, true), std512 = measure(s512, false, true);
    printf("act bytes T=256 -> 512: tiled %zu -> %zu (x%.3f), standard %zu -> %zu (x%.3f)\n",
           tiled256.act, tiled512.act, (double)tiled512.act / tiled256.act, std256.act,
           std512.act, (double)std512.act / std256.act);
    printf("temp peak T=256 -> 512: tiled %zu -> %zu, standard %zu -> %zu\n", tiled256.temp_peak,
           tiled512.temp_peak, std256.temp_peak, std512.temp_peak);
    assert_int_equal(tiled512.act, 2 * tiled256.act);
    assert_true(std512.act > 3.5 * std256.act);
    assert_true(tiled512.act * 10 < std512.act);
    assert_true(tiled512.temp_peak <= 2 * tiled256.temp_peak);
}

/* ---- misuse ----------------------------------------------------------------------------------*/
static void run_misfit(void *arg)
{
    int which = *(int *)arg;
    Rng rng = rng_new(38, 1);
    Tape *tape = tape_new();
    Tensor *x = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 5, 12 });
    Tensor *y = test_leaf(&rng, 1.0f, 3, (int[]){ 2, 6, 12 });
    Tensor *flat = test_leaf(&rng, 1.0f, 2, (int[]){ 10, 12 });
    switch (which) {
    case 0: op_attention_tiled(tape, x, x, x, 5); break;        /* 12 not divisible by 5 */
    case 1: op_attention_tiled(tape, x, y, x, 2); break;        /* T differs */
    case 2: op_attention_tiled(tape, flat, flat, flat, 2); break;
    case 3: op_attention_qkv_tiled(tape, x, 8); break;          /* 12 = 3 * 4, not 8 heads */
    case 4: op_attention_qkv_tiled(tape, x, 0); break;
    default: op_attention_qkv_tiled(tape, x, 2); break;         /* fits: C = 4, D = 2 */
    }
}

static void test_shape_misfits_abort(void **state)
{
    (void)state;
    for (int which = 0; which <= 4; which++)
        assert_true(test_aborts(run_misfit, &which));
    assert_false(test_aborts(run_misfit, &(int){ -1 }));
}

int main(void)
{
    par_set_split_always(true);    /* the small cases still take the threaded paths */
    par_set_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equals_standard),
        cmocka_unit_test(test_tiled_gradcheck),
        cmocka_unit_test(test_fused_matches_separate_exactly),
        cmocka_unit_test(test_thread_count_invariance),
        cmocka_unit_test(test_causality_exact),
        cmocka_unit_test(test_saves_output_and_lse_only),
        cmocka_unit_test(test_memory_linear_in_T),
        cmocka_unit_test(test_shape_misfits_abort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

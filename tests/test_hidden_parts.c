/* Hidden tests of the coursework (tests/parts.tsv marks them "hidden"): scripts/assignment.sh
 * keeps this file out of the student tree and scripts/grade.sh builds it against the student's
 * code. They look where the visible tests do not: GELU's slope far out on both tails, AdamW over
 * several steps on a tensor longer than one vector (the vector loop and the scalar tail), and
 * the loss scaler through a sequence of overflows and growths. In the instructor tree they are
 * ordinary tests and must pass. */
#include "tests/test_helpers.h"

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "optim/adamw.h"
#include "optim/loss_scale.h"

/* dy/dx of 0.5 x (1 + tanh(c (x + a x^3))), in double. */
static double gelu_slope(double x)
{
    const double c = 0.7978845608028654, a = 0.044715;
    double t = tanh(c * (x + a * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * a * x * x);
}

static void test_gelu_slope_on_the_tails(void **state)
{
    (void)state;
    const float xs[] = { -9.0f, -5.0f, -2.5f, -0.75f, 0.0f, 0.3f, 1.7f, 4.0f, 9.0f };
    int n = (int)(sizeof xs / sizeof xs[0]);
    Tape *tape = tape_new();
    Tensor *x = tensor_new1(MEM_TEMP, n);
    x->requires_grad = true;
    for (int i = 0; i < n; i++)
        x->data[i] = xs[i];
    tape_backward(tape, op_sum(tape, op_gelu(tape, x)));
    for (int i = 0; i < n; i++) {
        printf("gelu'(%g): analytic %.7f, reference %.7f\n", xs[i], x->grad[i], gelu_slope(xs[i]));
        assert_float_equal(x->grad[i], gelu_slope(xs[i]), 2e-6);
    }
    tape_free(tape);
    tensor_free(x);
}

/* Three AdamW steps with weight decay on 37 elements (two 16-wide vectors and a tail of 5),
 * against the rule computed in double from the same gradients. */
static void test_adamw_three_steps_on_37_elements(void **state)
{
    (void)state;
    enum { N = 37 };
    Tensor *w = tensor_param("w", 2, (int[]){ N, 1 });
    double ref[N], m[N] = { 0 }, v[N] = { 0 };
    AdamWConfig c = adamw_defaults();
    c.weight_decay = 0.1;
    for (int j = 0; j < N; j++)
        ref[j] = w->data[j] = 0.1f * (float)(j - 18);
    AdamW *opt = adamw_new(&w, 1, c);
    const double lr = 0.01;
    for (int t = 1; t <= 3; t++) {
        for (int j = 0; j < N; j++) {
            float g = (float)(sin(0.7 * j + t) * (j % 3 + 1));
            tensor_grad(w)[j] = g;
            ref[j] *= 1.0 - lr * c.weight_decay;
            m[j] = c.beta1 * m[j] + (1.0 - c.beta1) * g;
            v[j] = c.beta2 * v[j] + (1.0 - c.beta2) * g * g;
            double mhat = m[j] / (1.0 - pow(c.beta1, t)), vhat = v[j] / (1.0 - pow(c.beta2, t));
            ref[j] -= lr * mhat / (sqrt(vhat) + c.eps);
        }
        optim_step(&opt->base, lr);
    }
    double worst = 0.0;
    int first = -1;
    for (int j = 0; j < N; j++) {
        worst = fmax(worst, fabs(w->data[j] - ref[j]));
        if (first < 0 && !(fabs(w->data[j] - ref[j]) < 1e-5))
            first = j;
    }
    printf("AdamW, 3 steps on 37 elements: max |w - reference| = %.3g (tolerance 1e-5)\n", worst);
    if (first >= 0)
        printf("first element over the tolerance: w[%d] expected %.9g, got %.9g\n", first,
               ref[first], (double)w->data[first]);
    assert_true(worst < 1e-5);
    optim_free(&opt->base);
    tensor_free(w);
}

/* growth interval 3: clean, clean, inf (halve, count restarts), clean x 3 (double), inf, NaN. */
static void test_loss_scaler_through_a_sequence(void **state)
{
    (void)state;
    LossScaleConfig c = loss_scale_defaults();
    c.mode = LOSS_SCALE_DYNAMIC;
    c.growth_interval = 3;
    LossScaler s = loss_scale_new(&c);
    const bool inf[] = { false, false, true, false, false, false, true, true };
    const float want[] = { 65536, 65536, 32768, 32768, 32768, 65536, 32768, 16384 };
    for (int i = 0; i < 8; i++) {
        bool skip = loss_scale_update(&s, inf[i]);
        printf("step %d: %s, scale %g (reference %g)\n", i, inf[i] ? "inf" : "clean",
               loss_scale_value(&s), want[i]);
        assert_true(skip == inf[i]);
        assert_true(loss_scale_value(&s) == want[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gelu_slope_on_the_tails),
        cmocka_unit_test(test_adamw_three_steps_on_37_elements),
        cmocka_unit_test(test_loss_scaler_through_a_sequence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

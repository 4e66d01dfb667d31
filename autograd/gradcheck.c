#include "autograd/gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/rng.h"

GradcheckOptions gradcheck_defaults(void)
{
    return (GradcheckOptions){ .h = 1e-2, .atol = 1e-3, .rtol = 1e-2, .seed = 1234 };
}

/* L = sum_i r_i y_i for one forward pass on a tape that does not record. */
static double weighted_output(GradcheckFn fn, Tensor *const *inputs, void *ctx, const float *r)
{
    Tape *tape = tape_new();
    tape->recording = false;
    Tensor *y = fn(tape, inputs, ctx);
    double acc = 0.0;
    for (size_t i = 0; i < y->size; i++)
        acc += (double)r[i] * y->data[i];
    tape_free(tape);
    return acc;
}

static void compare(GradcheckResult *res, int input, size_t index, double analytic,
                    double numeric, const GradcheckOptions *opt)
{
    double err = fabs(analytic - numeric);
    res->checked++;
    if (err > opt->atol + opt->rtol * fabs(numeric))
        res->failed++;
    if (err > res->max_abs_err || res->checked == 1) {
        res->max_abs_err = err;
        res->worst_input = input;
        res->worst_index = index;
        res->worst_analytic = analytic;
        res->worst_numeric = numeric;
    }
}

GradcheckResult gradcheck(GradcheckFn fn, Tensor *const *inputs, int n_inputs, void *ctx,
                          GradcheckOptions opt)
{
    GradcheckResult res = { 0 };

    /* Analytic: one recorded forward and one backward seeded with r. */
    Tape *tape = tape_new();
    for (int k = 0; k < n_inputs; k++)
        tensor_zero_grad(inputs[k]);
    Tensor *y = fn(tape, inputs, ctx);
    float *r = malloc(y->size * sizeof *r);
    Rng rng = rng_new(opt.seed, 7);
    for (size_t i = 0; i < y->size; i++)
        r[i] = rng_normal(&rng);
    tape_backward_seeded(tape, y, r);
    tape_free(tape);

    /* Numeric: perturb one element at a time, restore it exactly afterwards. */
    for (int k = 0; k < n_inputs; k++) {
        Tensor *x = inputs[k];
        if (!x->requires_grad)
            continue;
        for (size_t j = 0; j < x->size; j++) {
            float saved = x->data[j];
            x->data[j] = (float)(saved + opt.h);
            double up = weighted_output(fn, inputs, ctx, r);
            x->data[j] = (float)(saved - opt.h);
            double down = weighted_output(fn, inputs, ctx, r);
            x->data[j] = saved;
            /* Divide by the step actually taken after rounding x +- h to fp32. */
            double step = (double)(float)(saved + opt.h) - (double)(float)(saved - opt.h);
            double analytic = x->grad ? x->grad[j] : 0.0;
            compare(&res, k, j, analytic, (up - down) / step, &opt);
        }
    }
    free(r);
    res.ok = res.failed == 0 && res.checked > 0;
    return res;
}

void gradcheck_print(const char *label, const GradcheckResult *r)
{
    printf("gradcheck %-24s %s: %zu/%zu over tolerance, worst |err| %.3g at input %d [%zu] "
           "(analytic %.6g, numeric %.6g)\n",
           label, r->ok ? "ok" : "FAILED", r->failed, r->checked, r->max_abs_err, r->worst_input,
           r->worst_index, r->worst_analytic, r->worst_numeric);
}

#ifndef TAPEGRAD_GRADCHECK_H
#define TAPEGRAD_GRADCHECK_H
/* Checks a backward pass against central finite differences.
 *
 * The function under test maps the inputs to one output tensor y. The check reduces y to a
 * scalar L = sum_i r_i y_i with fixed random weights r (so every output element matters, and a
 * wrong sign or a swapped index shows), then compares, for every element x_j of every input that
 * requires a gradient:
 *     analytic  dL/dx_j   from tape_backward_seeded(y, r)
 *     numeric   (L(x_j + h) - L(x_j - h)) / 2h   with L summed in double precision
 * An element passes when |analytic - numeric| <= atol + rtol * |numeric|. The forward ops run in
 * fp32, so h trades truncation error (h^2) against fp32 rounding (eps/h): per-op tolerances. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "autograd/tape.h"

typedef Tensor *(*GradcheckFn)(Tape *tape, Tensor *const *inputs, void *ctx);

typedef struct {
    double   h;       /* step; 1e-2 suits fp32 ops with O(1) inputs */
    double   atol;
    double   rtol;
    uint64_t seed;    /* for the weights r */
} GradcheckOptions;

typedef struct {
    bool   ok;
    size_t checked;        /* elements compared */
    size_t failed;         /* elements over tolerance */
    double max_abs_err;    /* worst |analytic - numeric| */
    int    worst_input;    /* where it was */
    size_t worst_index;
    double worst_analytic, worst_numeric;
} GradcheckResult;

GradcheckOptions gradcheck_defaults(void);   /* h 1e-2, atol 1e-3, rtol 1e-2 */

/* Inputs must be fp32 tensors not owned by a tape; their gradients are zeroed, used and left
 * holding the analytic gradient. */
GradcheckResult gradcheck(GradcheckFn fn, Tensor *const *inputs, int n_inputs, void *ctx,
                          GradcheckOptions opt);

/* One line describing a result, for test failure messages. */
void gradcheck_print(const char *label, const GradcheckResult *r);

#endif

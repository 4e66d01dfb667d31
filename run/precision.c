/* A run's mixed precision in its header and its report (autograd/policy.h, optim/loss_scale.h;
 * docs/mixed_precision.md): the policy's dtypes and formats, fp8's scaling, the loss scaling and
 * the scale it starts from, then the steps an inf or NaN gradient skipped and the final scale. */
#include <stdio.h>

#include "run/run.h"

/* The policy's dtypes and formats, and the loss scaling with the scale it starts from (a
 * resumed run's, not the configured initial one). */
void run_precision_describe(const Trainer *tr)
{
    const PrecisionPolicy *p = &tr->cfg.policy;
    printf("precision: %s (parameters %s%s, activations %s, gradients %s, matmul inputs %s/%s%s)"
           "\n", p->name, tensor_dtype_name(p->param),
           p->param != DTYPE_F32 ? " with fp32 master weights" : "", tensor_dtype_name(p->act),
           tensor_dtype_name(p->grad), fmt_name(p->compute), fmt_name(p->grad_compute),
           p->accumulate_low ? ", low-precision accumulation" : "");
    if (policy_delays_fp8(p))
        printf("fp8 scaling: delayed: each activation's scale from the largest amax at its "
               "place in the last %d steps\n", p->fp8_window);
    else if (policy_is_scaled(tensor_dtype_format(p->act)))
        printf("fp8 scaling: current: each activation's scale from its own amax\n");
    const LossScaler *s = &tr->scaler;
    const LossScaleConfig *c = &s->cfg;
    char spec[64];
    loss_scale_format(c, spec, sizeof spec);
    if (c->mode == LOSS_SCALE_DYNAMIC)
        printf("loss scaling: %s: scale %g now, x%g after %ld clean steps, x%g and skip on an "
               "inf/NaN gradient\n", spec, (double)s->scale, c->growth_factor,
               c->growth_interval, c->backoff_factor);
    else
        printf("loss scaling: %s (a step with an inf/NaN gradient is skipped)\n", spec);
}

void run_precision_report(const Trainer *tr)
{
    const LossScaler *s = &tr->scaler;
    printf("skipped steps    %ld of %ld (an inf or NaN gradient); final loss scale %g\n",
           s->skipped, s->checks, (double)s->scale);
}

/* train_gpt's mixed precision (autograd/policy.h, optim/loss_scale.h; docs/mixed_precision.md):
 * the flags --precision and --loss-scale, the combinations not built, agreeing with a
 * snapshot, and the lines of the run header and the report.
 *
 *     train_gpt --precision fp16 --loss-scale dynamic --log fp16.tsv
 *
 * The log's loss_scale column is the scale each step's backward was seeded with, and skipped
 * is 1 when an inf or NaN gradient skipped the step's update. */
#include <stdio.h>
#include <string.h>

#include "examples/common/cli.h"
#include "examples/train_gpt/train_gpt.h"

void precision_set_option(Options *o, Flag f, const char *flag, const char *arg)
{
    char err[200];
    PrecisionPolicy p;
    if (f == FLAG_PRECISION) {
        if (!policy_preset(arg, &p))
            cli_usage_error("%s '%s': expected one of %s", flag, arg, policy_preset_names());
        o->precision = p.name;
    } else if (f == FLAG_LOSS_SCALE && !loss_scale_parse(arg, &o->loss_scale, err, sizeof err)) {
        cli_usage_error("%s: %s", flag, err);
    }
}

/* What the trainer refuses under a policy, said in flag names. */
void precision_check_options(const Options *o)
{
    if (strcmp(o->precision, "fp32") == 0)
        return;
    if (o->lora_rank > 0)
        cli_usage_error("--lora%s with --precision %s is not built: LoRA and QLoRA train in "
                        "fp32 (leave out --precision)", o->qlora ? " --qlora" : "",
                        o->precision);
    if (o->checkpoint.kind != CKPT_VANILLA)
        cli_usage_error("--checkpoint with --precision %s is not built: the recomputed blocks "
                        "run on tapes of their own, without the precision policy",
                        o->precision);
}

/* The policy and the loss scaling are the snapshot's (its scaler resumes where it stopped). */
void precision_merge_snapshot(Options *o, const TrainerConfig *saved)
{
    if (options_given(o, FLAG_PRECISION) && strcmp(o->precision, saved->policy.name) != 0)
        options_disagree(FLAG_PRECISION, o->precision, saved->policy.name);
    o->precision = saved->policy.name;
    char mine[64], theirs[64];
    loss_scale_format(&o->loss_scale, mine, sizeof mine);
    loss_scale_format(&saved->loss_scale, theirs, sizeof theirs);
    if (options_given(o, FLAG_LOSS_SCALE) && strcmp(mine, theirs) != 0)
        options_disagree(FLAG_LOSS_SCALE, mine, theirs);
    o->loss_scale = saved->loss_scale;
}

/* The policy's dtypes and formats, and the loss scaling with the scale it starts from (a
 * resumed run's, not the configured initial one). */
void precision_describe(const Trainer *tr)
{
    const PrecisionPolicy *p = &tr->cfg.policy;
    printf("precision: %s (parameters %s%s, activations %s, gradients %s, matmul inputs %s/%s%s)"
           "\n", p->name, tensor_dtype_name(p->param),
           p->param != DTYPE_F32 ? " with fp32 master weights" : "", tensor_dtype_name(p->act),
           tensor_dtype_name(p->grad), fmt_name(p->compute), fmt_name(p->grad_compute),
           p->accumulate_low ? ", low-precision accumulation" : "");
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

void precision_report(const Trainer *tr)
{
    const LossScaler *s = &tr->scaler;
    printf("skipped steps    %ld of %ld (an inf or NaN gradient); final loss scale %g\n",
           s->skipped, s->checks, (double)s->scale);
}

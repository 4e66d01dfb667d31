/* A run's mixed precision flags (autograd/policy.h, optim/loss_scale.h; docs/mixed_precision.md):
 * --precision, --fp8-scaling and --loss-scale, read and formatted for the settings table
 * (which merges them with a snapshot; the dynamic scaler's --scale-* factors, named after
 * GradScaler's arguments, are plain rows there) and the combination not built (the header's
 * and the report's lines are run/precision.c's).
 *
 *     train_gpt --precision fp16 --loss-scale dynamic --scale-growth-interval 200 --log fp16.tsv
 *     train_gpt --precision fp8 --fp8-scaling delayed:16
 *
 * The log's loss_scale column is the scale each step's backward was seeded with, and skipped
 * is 1 when an inf or NaN gradient skipped the step's update. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "run/options.h"

/* "current", "delayed" or "delayed:W"; a window of 0 stands for the preset's. */
static void set_fp8_scaling(RunOptions *o, const char *flag, const char *arg)
{
    o->fp8_window = 0;
    o->fp8_scaling = POLICY_FP8_CURRENT;
    if (strcmp(arg, "current") == 0)
        return;
    if (strncmp(arg, "delayed", 7) != 0 || (arg[7] != '\0' && arg[7] != ':'))
        cli_usage_error("%s '%s': expected current, delayed or delayed:W (W steps of amax "
                        "history)", flag, arg);
    o->fp8_scaling = POLICY_FP8_DELAYED;
    if (arg[7] == ':')
        o->fp8_window = (int)cli_long(flag, arg + 8, 1, POLICY_FP8_MAX_WINDOW);
}

void run_options_set_precision(void *opts, int f, const char *flag, const char *arg)
{
    RunOptions *o = opts;
    char err[200];
    PrecisionPolicy p;
    LossScaleConfig c;
    switch (f) {
    case RUN_FLAG_PRECISION:
        if (!policy_preset(arg, &p))
            cli_usage_error("%s '%s': expected one of %s", flag, arg, policy_preset_names());
        o->run.cfg.policy = p;      /* --fp8-scaling's settings follow (run_options_policy) */
        break;
    case RUN_FLAG_LOSS_SCALE:
        if (!loss_scale_parse(arg, &c, err, sizeof err))
            cli_usage_error("%s: %s", flag, err);
        /* The factors are the --scale-* flags', given before or after this one. */
        o->run.cfg.loss_scale.mode = c.mode;
        o->run.cfg.loss_scale.init_scale = c.init_scale;
        break;
    default:
        set_fp8_scaling(o, flag, arg);
    }
}

PrecisionPolicy run_options_policy(const RunOptions *o)
{
    PrecisionPolicy p = o->run.cfg.policy;      /* the --precision preset */
    /* Only activations stored in fp8 have delayed scales (a gradient's is always its own
     * amax's). */
    if (!policy_is_scaled(tensor_dtype_format(p.act)))
        return p;
    p.fp8_scaling = o->fp8_scaling;
    if (o->fp8_window > 0)
        p.fp8_window = o->fp8_window;
    return p;
}

static const char *fp8_scaling_format(const PrecisionPolicy *p, char *buf, size_t len)
{
    if (p->fp8_scaling == POLICY_FP8_CURRENT)
        snprintf(buf, len, "current");
    else
        snprintf(buf, len, "delayed:%d", p->fp8_window);
    return buf;
}

/* As the flag would be typed (from o->run.cfg, and the --fp8-scaling fields on its preset): how a
 * snapshot's value is compared with a flag's. */
void run_options_format_precision(const void *opts, int f, char *buf, size_t len)
{
    const RunOptions *o = opts;
    PrecisionPolicy p = run_options_policy(o);
    if (f == RUN_FLAG_PRECISION)
        snprintf(buf, len, "%s", o->run.cfg.policy.name);
    else if (f == RUN_FLAG_LOSS_SCALE)
        loss_scale_format(&o->run.cfg.loss_scale, buf, len);
    else
        fp8_scaling_format(&p, buf, len);
}

/* What the trainer refuses under a policy, said in flag names. */
void run_options_check_precision(const RunOptions *o)
{
    if (o->run.cfg.local.checkpoint.kind != CKPT_VANILLA && policy_delays_fp8(&o->run.cfg.policy))
        cli_usage_error("--checkpoint with --fp8-scaling delayed is not built: the amax history "
                        "belongs to one tape, and the recomputed blocks run on fresh tapes (use "
                        "--fp8-scaling current)");
}

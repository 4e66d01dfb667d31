/* The lecture's activation numbers for GPT-2 1.5B, and the optimizer state in words
 * (memcalc_lecture.h). */
#include "plan/memcalc_lecture.h"

#include <math.h>

#include "autograd/policy.h"

const GptConfig MC_GPT2_XL = { .vocab_size = 50257, .max_seq = 1024, .n_layer = 48,
                               .n_head = 25, .n_embd = 1600, .tied = true, .fused_qkv = true };

const char *const MC_LECTURE_STRATEGIES[MC_LECTURE_NSTRATEGIES] = { "vanilla", "every:1",
                                                                   "sqrt" };

/* Peak act of GPT-2 1.5B at its batch under a strategy, fp32 or bf16 (16-bit) activations. */
static double gpt2_act(const char *strategy, bool tiled, bool half)
{
    PrecisionPolicy bf16;
    policy_preset("bf16", &bf16);
    McRun r = { .B = MC_GPT2_XL_BATCH, .T = MC_GPT2_XL.max_seq, .threads = 1, .tiled = tiled,
                .policy = half ? &bf16 : NULL };
    char err[80];
    ckpt_parse(strategy, &r.strategy, err, sizeof err);
    return memcalc_act_peak(&MC_GPT2_XL, &r);
}

McLectureActs memcalc_lecture_acts(void)
{
    const GptConfig *g = &MC_GPT2_XL;
    int B = MC_GPT2_XL_BATCH, T = g->max_seq;
    McLectureActs a = {
        .slide = { memcalc_act_zero_paper(g, B, T, 4.0), memcalc_act_zero_paper(g, B, T, 2.0) },
        .sqrt_interval = ckpt_interval((CkptStrategy){ CKPT_SQRT, 0 }, g->n_layer),
    };
    for (int i = 0; i < MC_LECTURE_NSTRATEGIES; i++)
        for (int t = 0; t < 2; t++)
            for (int h = 0; h < 2; h++)
                a.ours[i][t][h] = gpt2_act(MC_LECTURE_STRATEGIES[i], t, h);
    a.slide_sqrt = a.slide[1] / sqrt((double)g->n_layer);
    double x = 2.0 * B * T * g->n_embd;
    a.slide_per_block = g->n_layer * x + 12.0 * x;
    a.probs_fp32 = 4.0 * (double)B * g->n_head * T * T;
    a.logits_fp32 = 4.0 * (double)B * T * g->vocab_size;
    return a;
}

const char *memcalc_optim_holds(McOptimizer o, bool masters)
{
    static const char *const with_masters[] = {
        [MC_SGD] = "fp32 master weights 4 Psi",
        [MC_MOMENTUM] = "fp32 master weights 4 Psi + momentum 4 Psi",
        [MC_ADAMW] = "fp32 master weights 4 Psi + AdamW's m 4 Psi + v 4 Psi",
        [MC_ADAM8BIT] = "fp32 master weights 4 Psi + 8-bit m and v with block constants",
        [MC_ADAFACTOR] = "fp32 master weights 4 Psi + factored second moments",
    };
    static const char *const plain[] = {
        [MC_SGD] = "nothing",
        [MC_MOMENTUM] = "momentum 4 Psi",
        [MC_ADAMW] = "AdamW's m 4 Psi + v 4 Psi",
        [MC_ADAM8BIT] = "8-bit m and v with block constants",
        [MC_ADAFACTOR] = "factored second moments",
    };
    return masters ? with_masters[o] : plain[o];
}

/* The lecture's numbers for GPT-2 1.5B (model states, ZeRO, activations) and their table, and
 * the optimizer state in words (memcalc_lecture.h). */
#include "plan/memcalc_lecture.h"

#include <math.h>
#include <stdio.h>

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

/* GPT-2 1.5B's model states and ZeRO for 7.5e9 parameters on 64 ranks, by the per-parameter
 * formulas (memcalc.h). */
static void print_states(FILE *out)
{
    McStates gpt2 = memcalc_states_flat(1.5e9, MC_MIXED, MC_ADAMW);
    fprintf(out, "GPT-2 1.5B, mixed-precision Adam (GB = 1e9 bytes):\n");
    fprintf(out, "  fp16 weights          %5.1f GB   (2 bytes x 1.5e9)\n", gpt2.param / 1e9);
    fprintf(out,
            "  model states          %5.1f GB   (16 bytes per parameter: weights 2, gradients 2,"
            " fp32 master 4, m 4, v 4)\n", memcalc_states_total(gpt2) / 1e9);
    McStates big = memcalc_states_flat(7.5e9, MC_MIXED, MC_ADAMW);
    fprintf(out,
            "\nZeRO, 7.5e9 parameters, 64 data-parallel ranks, mixed-precision Adam (K = 12):\n");
    for (int stage = 0; stage <= 3; stage++)
        fprintf(out, "  %-10s %6.1f GB per rank\n", MC_ZERO_STAGE_NAMES[stage],
               memcalc_states_total(memcalc_zero(big, stage, 64)) / 1e9);
    fprintf(out,
            "\nThe same 7.5e9 parameters with the other optimizers (mixed precision, no ZeRO):\n");
    for (int o = 0; o < MC_NOPTIMIZERS; o++)
        fprintf(out, "  %-10s %6.1f GB\n", MC_OPTIMIZER_NAMES[o],
               memcalc_states_total(memcalc_states_flat(7.5e9, MC_MIXED, (McOptimizer)o)) / 1e9);
}

/* The activations table (memcalc_lecture_acts) with what the slide and the ZeRO paper cite, its
 * notes, and the fused gradient buffer. */
static void print_activations(FILE *out)
{
    const GptConfig *g = &MC_GPT2_XL;
    McLectureActs a = memcalc_lecture_acts();
    char sq[32];
    snprintf(sq, sizeof sq, "sqrt (every:%d)", a.sqrt_interval);
    fprintf(out, "\nActivations, GPT-2 1.5B (L %d, C %d, H %d, T %d, V %d), B %d: peak act, GB:\n",
                g->n_layer, g->n_embd, g->n_head, g->max_seq, g->vocab_size, MC_GPT2_XL_BATCH);
    fprintf(out, "  %-42s %9s %9s   %s\n", "", "fp32", "16-bit", "cited");
    fprintf(out, "  %-42s %9.1f %9.1f   ~60 GB   (a)\n", "slide's formula, 12 x C B T L",
                a.slide[0] / 1e9, a.slide[1] / 1e9);
    const char *labels[3] = { "vanilla", "per-block (every:1)", sq };
    for (int i = 0; i < 3; i++)
        for (int t = 0; t < 2; t++) {
            char label[64];
            snprintf(label, sizeof label, "ours, %s, %s", labels[i], t ? "tiled" : "standard");
            const char *slide = t        ? ""
                                : i == 0 ? "   ~60 GB   (b)"
                                : i == 2 ? "   ~8 GB*   (c)"
                                         : "";
            fprintf(out, "  %-42s %9.1f %9.1f%s\n", label, a.ours[i][t][0] / 1e9,
                   a.ours[i][t][1] / 1e9, slide);
        }
    fprintf(out, "  %-42s %9s %9.1f   ~8 GB*   (d)\n", "slide's formula / sqrt(L)", "",
                a.slide_sqrt / 1e9);
    fprintf(out, "  %-42s %9s %9.1f   ~8 GB*   (e)\n", "slide's count, per-block checkpoints", "",
                a.slide_per_block / 1e9);
    fprintf(out,
            "  cited: ~60 GB is on the slide (the ZeRO paper's estimate, quoted); * ~8 GB is the\n"
            "      ZeRO paper's figure with activation checkpointing, not on the slides.\n");
    fprintf(out,
            "  (a) 12 values of C per token and layer (the block's outputs), half precision: no\n"
            "      attention probabilities, no layernorm statistics, no embedding, no head.\n"
            "  (b) every tensor our ops keep: 18 C + 4 values per token per block (memcalc.h), "
            "the\n"
            "      attention probabilities P [B, H, T, T] = %.1f GB per block in fp32, the\n"
            "      embedding (3 N C) and the head (ln_f and the N x V logits, %.1f GB in fp32).\n"
            "      16-bit: a bf16 policy, recorded tensors packed to 2 bytes; ids, layernorm\n"
            "      statistics and the logsumexp stay fp32. tiled: L [B, H, T] kept instead of P.\n"
            "  (c) the ZeRO paper's figure with activation checkpointing; ours keeps one block\n"
            "      output x_j per run of blocks, records a run again in backward, and keeps the "
            "head.\n"
            "  (d) the slide's count divided by sqrt(L), the saving the ZeRO paper quotes.\n"
            "  (e) the slide's values with one block input (B T C) kept per layer and one layer's\n"
            "      12 B T C recorded again at a time.\n",
            a.probs_fp32 / 1e9, a.logits_fp32 / 1e9);
    fprintf(out,
            "\nTemporary buffers: the gradient all-reduce's fused buffer, one fp32 buffer holding\n"
            "every gradient, 1.5e9 x 4 bytes = %.1f GB (slide: 6 GB; category temp). Measured\n"
            "on our model: scripts/mpirun -np 2 build/bin/train_gpt --parallel ddp prints the\n"
            "bucket buffers one rank holds at once: Psi x 4 bytes for every --bucket-kb\n"
            "(docs/memory.md).\n",
            1.5e9 * 4.0 / 1e9);
}

void memcalc_lecture_print(FILE *out)
{
    print_states(out);
    print_activations(out);
}

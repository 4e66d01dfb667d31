/* The GPT's activations, one row per tensor a forward pass keeps (gpt_acts.h explains the
 * columns). Rows are in the order nn/gpt.c, nn/block.c, nn/attention.c and nn/mlp.c allocate
 * them; "read by" names the backward that needs the row. An output no backward reads (a
 * residual add's inputs) is kept all the same: the tape owns every output until it is reset. */
#include "nn/gpt_acts.h"

#include <ctype.h>
#include <stdlib.h>

#include "precision/format.h"

const GptAct GPT_ACTS[] = {
    /* ---- gpt_embed: x_0 = wte[tokens] + wpe[0..T-1] ---- */
    { .name = "wpe.out", .part = GPT_ACT_EMBED, .shape = "[B, T, C]", .keep = GPT_ACT_OUTPUT,
      .op = "op_embedding", .what = "position embeddings, an addend of x_0 (read by no backward)" },
    { .name = "wpe.ids", .part = GPT_ACT_EMBED, .shape = "[B, T]", .keep = GPT_ACT_SAVED_I32,
      .op = "op_embedding", .what = "position ids, where embedding's backward scatters dx_0" },
    { .name = "wte.out", .part = GPT_ACT_EMBED, .shape = "[B, T, C]", .keep = GPT_ACT_OUTPUT,
      .op = "op_embedding", .what = "token embeddings, an addend of x_0 (read by no backward)" },
    { .name = "wte.ids", .part = GPT_ACT_EMBED, .shape = "[B, T]", .keep = GPT_ACT_SAVED_I32,
      .op = "op_embedding", .what = "token ids, where embedding's backward scatters dx_0" },
    { .name = "x0", .part = GPT_ACT_EMBED, .shape = "[B, T, C]", .keep = GPT_ACT_OUTPUT,
      .op = "op_add", .what = "x_0, block 0's input (read by ln1's backward)" },

    /* ---- gpt_block, per layer: x + attn(ln1(x)), then + mlp(ln2(.)) ---- */
    { .name = "ln1.stats", .part = GPT_ACT_BLOCK, .shape = "[B, T, 2]",
      .keep = GPT_ACT_SAVED_F32, .op = "op_layernorm",
      .what = "mean and 1/std of every row (read by ln1's backward)" },
    { .name = "ln1.out", .part = GPT_ACT_BLOCK, .shape = "[B, T, C]", .keep = GPT_ACT_OUTPUT,
      .op = "op_layernorm", .what = "normalised x (read by the q, k, v products' backward)" },
    { .name = "attn.qkv.out", .part = GPT_ACT_BLOCK, .shape = "[B, T, 3C]",
      .keep = GPT_ACT_OUTPUT, .only = GPT_ACT_IF_FUSED_QKV, .op = "op_linear",
      .what = "q | k | v of every head, bias added (read by attention's backward)" },
    { .name = "attn.q.out", .part = GPT_ACT_BLOCK, .shape = "[B, T, C]",
      .keep = GPT_ACT_OUTPUT, .only = GPT_ACT_IF_SEPARATE_QKV, .op = "op_linear",
      .what = "queries (read by attention's backward)" },
    { .name = "attn.k.out", .part = GPT_ACT_BLOCK, .shape = "[B, T, C]",
      .keep = GPT_ACT_OUTPUT, .only = GPT_ACT_IF_SEPARATE_QKV, .op = "op_linear",
      .what = "keys (read by attention's backward)" },
    { .name = "attn.v.out", .part = GPT_ACT_BLOCK, .shape = "[B, T, C]",
      .keep = GPT_ACT_OUTPUT, .only = GPT_ACT_IF_SEPARATE_QKV, .op = "op_linear",
      .what = "values (read by attention's backward)" },
    { .name = "attn.out", .part = GPT_ACT_BLOCK, .shape = "[B, T, C]", .keep = GPT_ACT_OUTPUT,
      .op = "op_attention(_qkv)", .what = "softmax(q k^T / sqrt(C/H)) v, heads side by side "
                                        "(read by proj's backward; tiled: by attention's too)" },
    { .name = "attn.P", .part = GPT_ACT_BLOCK, .shape = "[B, H, T, T]",
      .keep = GPT_ACT_SAVED_TENSOR, .only = GPT_ACT_IF_STANDARD_ATTN, .op = "op_attention(_qkv)",
      .what = "attention probabilities (read by attention's backward)" },
    { .name = "attn.lse", .part = GPT_ACT_BLOCK, .shape = "[B, H, T]",
      .keep = GPT_ACT_SAVED_F32, .only = GPT_ACT_IF_TILED_ATTN, .op = "op_attention(_qkv)_tiled",
      .what = "logsumexp of every query row, from which backward rebuilds P tile by tile" },
    { .name = "attn.proj.out", .part = GPT_ACT_BLOCK, .shape = "[B, T, C]",
      .keep = GPT_ACT_OUTPUT, .op = "op_linear",
      .what = "the attention's addend to the residual stream (read by no backward)" },
    { .name = "res1.out", .part = GPT_ACT_BLOCK, .shape = "[B, T, C]", .keep = GPT_ACT_OUTPUT,
      .op = "op_add", .what = "x + attention (read by ln2's backward)" },
    { .name = "ln2.stats", .part = GPT_ACT_BLOCK, .shape = "[B, T, 2]",
      .keep = GPT_ACT_SAVED_F32, .op = "op_layernorm",
      .what = "mean and 1/std of every row (read by ln2's backward)" },
    { .name = "ln2.out", .part = GPT_ACT_BLOCK, .shape = "[B, T, C]", .keep = GPT_ACT_OUTPUT,
      .op = "op_layernorm", .what = "normalised res1 (read by fc's backward)" },
    { .name = "mlp.fc.out", .part = GPT_ACT_BLOCK, .shape = "[B, T, 4C]",
      .keep = GPT_ACT_OUTPUT, .op = "op_linear",
      .what = "gelu's input (read by gelu's backward, which recomputes tanh from it)" },
    { .name = "mlp.gelu.out", .part = GPT_ACT_BLOCK, .shape = "[B, T, 4C]",
      .keep = GPT_ACT_OUTPUT, .op = "op_gelu", .what = "read by mlp.proj's backward" },
    { .name = "mlp.proj.out", .part = GPT_ACT_BLOCK, .shape = "[B, T, C]",
      .keep = GPT_ACT_OUTPUT, .op = "op_linear",
      .what = "the MLP's addend to the residual stream (read by no backward)" },
    { .name = "res2.out", .part = GPT_ACT_BLOCK, .shape = "[B, T, C]", .keep = GPT_ACT_OUTPUT,
      .op = "op_add", .what = "the block's output x_{l+1} (read by the next ln's backward)" },

    /* ---- the checkpoint runner, per kept block input ---- */
    { .name = "x_j", .part = GPT_ACT_CHECKPOINT, .shape = "[B, T, C]", .keep = GPT_ACT_OUTPUT,
      .op = "checkpoint_copy", .what = "a copy of a block input (packed as an output is), from "
                                       "which the runner records its segment again" },

    /* ---- gpt_head and gpt_loss: logits = ln_f(x) head^T, mean cross-entropy ---- */
    { .name = "ln_f.stats", .part = GPT_ACT_HEAD, .shape = "[B, T, 2]",
      .keep = GPT_ACT_SAVED_F32, .op = "op_layernorm",
      .what = "mean and 1/std of every row (read by ln_f's backward)" },
    { .name = "ln_f.out", .part = GPT_ACT_HEAD, .shape = "[B, T, C]", .keep = GPT_ACT_OUTPUT,
      .op = "op_layernorm", .what = "normalised x_L (read by the head product's backward)" },
    { .name = "logits", .part = GPT_ACT_HEAD, .shape = "[B, T, V]", .keep = GPT_ACT_OUTPUT,
      .op = "op_matmul", .what = "read by cross-entropy's backward, which recomputes the "
                                 "probabilities from them: no [B, T, V] softmax is kept" },
    { .name = "loss.lse", .part = GPT_ACT_HEAD, .shape = "[B, T]", .keep = GPT_ACT_SAVED_F32,
      .op = "op_cross_entropy", .what = "logsumexp of every row of logits" },
    { .name = "loss.targets", .part = GPT_ACT_HEAD, .shape = "[B, T]",
      .keep = GPT_ACT_SAVED_I32, .op = "op_cross_entropy",
      .what = "a copy of the targets (negative: ignored)" },
    { .name = "loss.record", .part = GPT_ACT_HEAD, .shape = "[24]",
      .keep = GPT_ACT_SAVED_BYTES, .op = "op_cross_entropy",
      .what = "CrossEntropySaved: the count of targets and pointers to lse and targets" },
    { .name = "loss", .part = GPT_ACT_HEAD, .shape = "[]", .keep = GPT_ACT_OUTPUT,
      .op = "op_cross_entropy", .what = "the mean cross-entropy, where backward starts" },
};
const int GPT_N_ACTS = (int)(sizeof GPT_ACTS / sizeof GPT_ACTS[0]);

bool gpt_act_applies(const GptAct *a, const GptConfig *cfg, const GptActRun *run)
{
    switch (a->only) {
    case GPT_ACT_ALWAYS: return true;
    case GPT_ACT_IF_FUSED_QKV: return cfg->fused_qkv;
    case GPT_ACT_IF_SEPARATE_QKV: return !cfg->fused_qkv;
    case GPT_ACT_IF_STANDARD_ATTN: return !run->tiled;
    case GPT_ACT_IF_TILED_ATTN: return run->tiled;
    }
    return false;
}

static size_t letter_value(char letter, const GptConfig *cfg, int B, int T)
{
    switch (letter) {
    case 'B': return (size_t)B;
    case 'T': return (size_t)T;
    case 'C': return (size_t)cfg->n_embd;
    case 'V': return (size_t)cfg->vocab_size;
    case 'H': return (size_t)cfg->n_head;
    default: return 0;
    }
}

/* "[B, T, 3C]": dimensions between brackets, separated by ", ", each a count, a letter or a
 * count then a letter. */
size_t gpt_act_numel(const GptAct *a, const GptConfig *cfg, int B, int T)
{
    const char *s = a->shape;
    if (*s++ != '[')
        tensor_fatal("gpt_acts: %s: shape \"%s\" does not start with [", a->name, a->shape);
    size_t n = 1;
    while (*s != ']') {
        size_t dim = 1;
        bool seen = false;
        if (isdigit((unsigned char)*s)) {
            char *end;
            dim = strtoul(s, &end, 10);
            s = end;
            seen = true;
        }
        if (isupper((unsigned char)*s)) {
            size_t v = letter_value(*s++, cfg, B, T);
            if (v == 0)
                tensor_fatal("gpt_acts: %s: shape \"%s\" has an unknown letter", a->name,
                             a->shape);
            dim *= v;
            seen = true;
        }
        if (!seen || (*s != ']' && (s[0] != ',' || s[1] != ' ')))
            tensor_fatal("gpt_acts: %s: shape \"%s\" is malformed", a->name, a->shape);
        n *= dim;
        if (*s == ',')
            s += 2;
    }
    return n;
}

/* A tape tensor (autograd/tape.c): fp32 act storage unless the policy packs activations; then
 * tape_tensor gives it temp storage and the tape packs it into act. A scalar (the loss) is
 * never packed: fp32 in act under every policy. */
static double stored_bytes(size_t n, const PrecisionPolicy *p)
{
    if (!p || p->act == DTYPE_F32 || n < 2)
        return (double)(n * sizeof(float));
    return (double)fmt_packed_bytes(tensor_dtype_format(p->act), n);
}

double gpt_act_bytes(const GptAct *a, const GptConfig *cfg, const GptActRun *run)
{
    if (!gpt_act_applies(a, cfg, run))
        return 0.0;
    size_t n = gpt_act_numel(a, cfg, run->B, run->T);
    switch (a->keep) {
    case GPT_ACT_OUTPUT:
    case GPT_ACT_SAVED_TENSOR: return stored_bytes(n, run->policy);
    case GPT_ACT_SAVED_F32: return (double)(n * sizeof(float));
    case GPT_ACT_SAVED_I32: return (double)(n * sizeof(int));
    case GPT_ACT_SAVED_BYTES: return (double)n;
    }
    return 0.0;
}

GptActBytes gpt_acts_bytes(const GptConfig *cfg, const GptActRun *run)
{
    GptActBytes s = { 0 };
    for (int i = 0; i < GPT_N_ACTS; i++) {
        const GptAct *a = &GPT_ACTS[i];
        double bytes = gpt_act_bytes(a, cfg, run);
        switch (a->part) {
        case GPT_ACT_EMBED: s.embed += bytes; break;
        case GPT_ACT_BLOCK:
            s.block += bytes;
            if (a->keep == GPT_ACT_OUTPUT)
                s.block_bare += bytes;
            break;
        case GPT_ACT_CHECKPOINT: s.copy += bytes; break;
        case GPT_ACT_HEAD: s.head += bytes; break;
        case GPT_ACT_NPARTS: break;
        }
    }
    return s;
}

double gpt_acts_forward_bytes(const GptConfig *cfg, const GptActRun *run)
{
    GptActBytes s = gpt_acts_bytes(cfg, run);
    return s.embed + cfg->n_layer * s.block + s.head;
}

void gpt_acts_write_tsv(FILE *out, const GptConfig *cfg, const GptActRun *run)
{
    static const char *const parts[] = { "embed", "block", "checkpoint", "head" };
    static const char *const keeps[] = { "output", "saved tensor", "saved f32", "saved i32",
                                         "saved bytes" };
    fprintf(out, "part\tname\tshape\telements\tbytes\tkeep\top\twhat\n");
    for (int i = 0; i < GPT_N_ACTS; i++) {
        const GptAct *a = &GPT_ACTS[i];
        if (!gpt_act_applies(a, cfg, run))
            continue;
        fprintf(out, "%s\t%s\t%s\t%zu\t%.0f\t%s\t%s\t%s\n", parts[a->part], a->name, a->shape,
                gpt_act_numel(a, cfg, run->B, run->T), gpt_act_bytes(a, cfg, run),
                keeps[a->keep], a->op, a->what);
    }
}

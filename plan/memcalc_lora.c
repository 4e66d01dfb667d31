/* LoRA and QLoRA in the memory calculator (memcalc.h, "LoRA and QLoRA"). Every count mirrors
 * an allocation of nn/gpt_lora.c, nn/lora.c, autograd/ops_qmatmul.c or optim/train_lora.c. */
#include <math.h>

#include "nn/gpt_lora.h"
#include "nn/lora.h"
#include "plan/memcalc.h"
#include "precision/quant.h"

enum { F32 = 4, MAX_SITES = 8 };

/* A Linear of a block as (in, out). */
typedef struct {
    long in, out;
} Site;

/* The Linears of one block that get adapters, in nn/gpt_lora.c's order (q, k, v, o, fc, proj). */
static int adapted_sites(const GptConfig *cfg, unsigned targets, Site *s)
{
    long C = cfg->n_embd;
    int n = 0;
    for (unsigned bit = LORA_TARGET_Q; bit <= LORA_TARGET_O; bit <<= 1)
        if (targets & bit)
            s[n++] = (Site){ C, C };
    if (targets & LORA_TARGET_MLP) {
        s[n++] = (Site){ C, 4 * C };
        s[n++] = (Site){ 4 * C, C };
    }
    return n;
}

/* Every Linear of one block: what QLoRA quantizes. */
static int block_linears(const GptConfig *cfg, Site *s)
{
    long C = cfg->n_embd;
    int n = 0;
    if (cfg->fused_qkv)
        s[n++] = (Site){ C, 3 * C };
    else
        for (int i = 0; i < 3; i++)
            s[n++] = (Site){ C, C };
    s[n++] = (Site){ C, C };
    s[n++] = (Site){ C, 4 * C };
    s[n++] = (Site){ 4 * C, C };
    return n;
}

size_t memcalc_lora_trainable(const GptConfig *cfg, const McLora *lora)
{
    if (lora->rank == 0)
        return memcalc_gpt_params(cfg);
    Site s[MAX_SITES];
    int n = adapted_sites(cfg, lora->targets, s);
    size_t per_block = 0;
    for (int i = 0; i < n; i++)
        per_block += (size_t)lora->rank * (size_t)(s[i].in + s[i].out);
    return (size_t)cfg->n_layer * per_block;
}

/* Bytes of one stored value of a parameter under the policy (NULL: fp32). */
static double param_value_bytes(const PrecisionPolicy *policy)
{
    if (!policy || policy->param == DTYPE_F32)
        return F32;
    return (double)fmt_packed_bytes(tensor_dtype_format(policy->param), 1);
}

/* Bytes of one stored value of a parameter's gradient under the policy (NULL: fp32). */
static double grad_value_bytes(const PrecisionPolicy *policy)
{
    if (!policy)
        return F32;
    return (double)fmt_packed_bytes(tensor_dtype_format(policy_param_grad_dtype(policy)), 1);
}

/* The frozen base: values kept as fp32 or packed, and QLoRA's NF4 weights. */
static double base_bytes(const GptConfig *cfg, const PrecisionPolicy *policy, bool qlora,
                         double *quantized_values)
{
    double all = (double)memcalc_gpt_params(cfg), nf4 = 0.0, values = 0.0;
    if (qlora) {
        Site s[MAX_SITES];
        int n = block_linears(cfg, s);
        for (int i = 0; i < n; i++) {
            size_t v = (size_t)(s[i].in * s[i].out);
            values += (double)v;
            nf4 += (double)quant_bytes(lora_quant_config(), v);
        }
        values *= cfg->n_layer;
        nf4 *= cfg->n_layer;
    }
    if (quantized_values)
        *quantized_values = values;
    return nf4 + (all - values) * param_value_bytes(policy);
}

/* memcalc_act_peak_parts when block 0 holds `saved` bytes less than the others. It matters
 * only where block 0 is recorded at the peak: vanilla (every block is), memory-poor with one
 * block, and every:K with two runs, whose backward re-records the first run of K blocks with
 * fewer copies held than any other; the other terms of memcalc.c's every_peak and
 * memory_poor_peak hold later blocks only. */
static double first_block_peak(const McActParts *a, int L, CkptStrategy strategy, double saved)
{
    double peak = memcalc_act_peak_parts(a, L, strategy);
    int K = 1, runs = 1;
    switch (strategy.kind) {
    case CKPT_VANILLA: return peak - saved;
    case CKPT_MEMORY_POOR: return L == 1 ? peak - saved : peak;
    case CKPT_SQRT:
    case CKPT_EVERY:
        K = ckpt_interval(strategy, L);         /* >= 1 for these two */
        runs = (L + K - 1) / K;
        if (runs == 1)
            return peak - saved;
        if (runs == 2) {
            /* forward: the last run and the head; advancing: a bare block and copies */
            double fwd = a->embed + a->copy + (L - K) * a->block + a->head;
            double adv = a->embed + (1 + (K > 1)) * a->copy + a->block_bare;
            double bwd = a->embed + K * a->block - saved;
            return fmax(fwd, fmax(adv, bwd));
        }
        return peak;
    case CKPT_BUDGET: break;
    }
    return -1.0;
}

McPeaks memcalc_predict_lora(const GptConfig *cfg, const McRun *run, McOptimizer o,
                             const McLora *lora)
{
    if (lora->rank == 0)
        return memcalc_predict(cfg, run, o);
    double r = lora->rank, M = (double)run->B * run->T, L = cfg->n_layer;
    Site s[MAX_SITES];
    int n = adapted_sites(cfg, lora->targets, s);
    double state = 0.0, scratch = 0.0, act_per_block = 0.0, widest = 0.0;
    for (int i = 0; i < n; i++) {
        state += L * (memcalc_tensor_state(s[i].in, lora->rank, o, &scratch) +
                      memcalc_tensor_state(lora->rank, s[i].out, o, &scratch));
        act_per_block += M * (r + (double)s[i].out);
        widest = fmax(widest, (double)s[i].out);
    }
    double trainable = (double)memcalc_lora_trainable(cfg, lora);
    bool masters = run->policy && run->policy->param != DTYPE_F32;
    McPeaks p = { .bytes = { 0 } };
    p.bytes[MEM_PARAM] = base_bytes(cfg, run->policy, lora->qlora, NULL) +
                         trainable * param_value_bytes(run->policy);
    /* The adapters' gradients are packed in policy_param_grad_dtype (autograd/tensor.h,
     * "packed gradients"): like their values, or 1 byte under fp8 (e5m2). */
    p.bytes[MEM_GRAD] = trainable * grad_value_bytes(run->policy);
    p.bytes[MEM_OPTIM] = state + (masters ? F32 * trainable : 0.0);

    /* The adapter op keeps s x A and its output beside the Linear's own, recorded or not. */
    McActParts a = memcalc_act_parts_run(cfg, run);
    McActParts one = memcalc_act_parts_policy(cfg, 1, 1, run->policy);
    double value = one.copy / cfg->n_embd;      /* bytes of one stored activation value */
    a.block += value * act_per_block;
    a.block_bare += value * act_per_block;
    /* A frozen embedding saves no ids (its node is not recorded). */
    a.embed -= F32 * 2.0 * M;
    /* The first block's ops before its first adapter see inputs that need no gradient, so
     * they record nothing and save nothing: ln1's statistics, the attention's P (or L) unless
     * q, k or v is adapted, ln2's statistics unless an attention Linear is. */
    unsigned attn = LORA_TARGET_Q | LORA_TARGET_K | LORA_TARGET_V;
    double P = run->tiled ? F32 * (double)run->B * cfg->n_head * run->T
                          : value * (double)run->B * cfg->n_head * run->T * run->T;
    double saved = F32 * 2.0 * M + (lora->targets & attn ? 0.0 : P) +
                   (lora->targets & (attn | LORA_TARGET_O) ? 0.0 : F32 * 2.0 * M);
    p.bytes[MEM_ACT] = first_block_peak(&a, cfg->n_layer, run->strategy, saved);

    /* Scratch, bounded: full fine-tuning's, plus at one product the largest of the adapter's
     * backward ([M, r] gradient and its compute copies: 3 M r floats, and the rounded dout,
     * M out) and QLoRA's dequantized weight with its bf16 copy and the rounded operand
     * (2 in out + M max(in, out) floats). */
    double extra = 3.0 * M * r + M * widest;
    if (lora->qlora) {
        Site q[MAX_SITES];
        int nq = block_linears(cfg, q);
        for (int i = 0; i < nq; i++)
            extra = fmax(extra, 2.0 * (double)(q[i].in * q[i].out) +
                                    M * (double)fmax(q[i].in, q[i].out));
    }
    double temp = memcalc_temp_peak(cfg, run, o) + F32 * extra;
    p.bytes[MEM_TEMP] = fmax(temp, scratch);
    for (int c = 0; c < MEM_NCAT; c++)
        p.bytes[MEM_ALL] += p.bytes[c];
    return p;
}

/* trainer_new_lora's set-up (optim/train_lora.c): the model made fp32 (less the block weights
 * under QLoRA), then packed tensor by tensor (a packed copy beside the fp32 one: at most the
 * largest tensor's), the adapters (fp32, then packed with fp32 masters), and under QLoRA one
 * block weight at a time in fp32 beside the NF4 ones done so far. */
double memcalc_lora_setup_peak(const GptConfig *cfg, const PrecisionPolicy *policy,
                               McOptimizer o, const McLora *lora)
{
    double all = (double)memcalc_gpt_params(cfg), quantized = 0.0;
    double base = base_bytes(cfg, policy, lora->qlora, &quantized);
    double trainable = (double)memcalc_lora_trainable(cfg, lora);
    long V = cfg->vocab_size, T = cfg->max_seq, C = cfg->n_embd;
    double largest = fmax((double)(V * C), fmax((double)(T * C), 4.0 * C * C));
    double fp32_model = F32 * (all - quantized);
    /* Packing holds the fp32 model and one packed tensor; QLoRA then holds the packed rest,
     * the NF4 weights and one fp32 weight; the adapters: fp32, their packed copy and masters. */
    double packing = fp32_model + (policy ? F32 * largest : 0.0);
    double quantizing = lora->qlora ? base + F32 * 4.0 * C * C : 0.0;
    double adapters = F32 * trainable * (policy ? 3.0 : 1.0);
    /* At the end: the run's model states, the optimizer's state made last. */
    McRun one = { .B = 1, .T = 1, .strategy = { CKPT_VANILLA, 0 }, .threads = 1,
                  .policy = policy };
    McPeaks states = memcalc_predict_lora(cfg, &one, o, lora);
    return fmax(fmax(packing, quantizing) + adapters + F32 * largest,
                states.bytes[MEM_PARAM] + states.bytes[MEM_OPTIM]);
}

/* The formulas of memcalc.h. Every count here mirrors an allocation in autograd/ops_ files,
 * autograd/checkpoint.c, nn/gpt.c, nn/gpt_pass.c or optim/; the comments say which. The
 * activations themselves come from nn/gpt_acts.c's table. */
#include "plan/memcalc.h"

#include <math.h>

const char *const MC_PRECISION_NAMES[] = { "fp32", "mixed", NULL };
const char *const MC_ZERO_STAGE_NAMES[4] = { "baseline", "P_os", "P_os+g", "P_os+g+p" };
const char *const MC_OPTIMIZER_NAMES[] = { "sgd", "momentum", "adamw", "adam8bit", "adafactor",
                                           NULL };

enum {
    F32 = 4,                /* bytes of a float and of an int id or target */
    ADAM8BIT_BLOCK = 2048,  /* adam8bit_defaults() */
    ADAM8BIT_MIN = 4096,
};

double memcalc_states_total(McStates s) { return s.param + s.grad + s.optim; }

McStates memcalc_peaks_states(const McPeaks *p)
{
    return (McStates){ p->bytes[MEM_PARAM], p->bytes[MEM_GRAD], p->bytes[MEM_OPTIM] };
}

/* Optimizer state per parameter, K, for a model of unknown shapes. */
static double state_per_param(McOptimizer o)
{
    switch (o) {
    case MC_SGD: return 0.0;
    case MC_MOMENTUM: return 4.0;
    case MC_ADAMW: return 8.0;
    case MC_ADAM8BIT: return 2.0 + 8.0 / ADAM8BIT_BLOCK;
    case MC_ADAFACTOR: return 0.0;
    case MC_NOPTIMIZERS: break;
    }
    return 0.0;
}

/* Weights and gradients in the precision; mixed adds the fp32 master weights to the state. */
static McStates with_precision(double n, double state, McPrecision p)
{
    if (p == MC_MIXED)
        return (McStates){ .param = 2.0 * n, .grad = 2.0 * n, .optim = 4.0 * n + state };
    return (McStates){ .param = 4.0 * n, .grad = 4.0 * n, .optim = state };
}

McStates memcalc_states_flat(double n, McPrecision p, McOptimizer o)
{
    return with_precision(n, n * state_per_param(o), p);
}

McStates memcalc_zero(McStates s, int stage, int ranks)
{
    double r = ranks;
    if (stage >= 1)
        s.optim /= r;
    if (stage >= 2)
        s.grad /= r;
    if (stage >= 3)
        s.param /= r;
    return s;
}

/* ---- our GPT's tensors ---------------------------------------------------------------------- */

/* The parameters of gpt.h as (rows, cols): a vector is one row. */
typedef void (*TensorFn)(long rows, long cols, void *acc);

static void each_tensor(const GptConfig *c, TensorFn fn, void *acc)
{
    long V = c->vocab_size, T = c->max_seq, C = c->n_embd;
    fn(V, C, acc);                               /* wte */
    fn(T, C, acc);                               /* wpe */
    for (int l = 0; l < c->n_layer; l++) {
        fn(1, C, acc);                           /* ln1.weight, .bias */
        fn(1, C, acc);
        for (int k = 0; k < (c->fused_qkv ? 1 : 3); k++) {
            long out = c->fused_qkv ? 3 * C : C;
            fn(C, out, acc);                     /* attn.qkv or q, k, v */
            fn(1, out, acc);
        }
        fn(C, C, acc);                           /* attn.proj */
        fn(1, C, acc);
        fn(1, C, acc);                           /* ln2 */
        fn(1, C, acc);
        fn(C, 4 * C, acc);                       /* mlp.fc */
        fn(1, 4 * C, acc);
        fn(4 * C, C, acc);                       /* mlp.proj */
        fn(1, C, acc);
    }
    fn(1, C, acc);                               /* ln_f */
    fn(1, C, acc);
    if (!c->tied)
        fn(V, C, acc);                           /* head */
}

typedef struct {
    McOptimizer o;
    double      params, state, adafactor_scratch;
    /* The update's scratch at one tensor, the largest: Adafactor's statistics (fp32 gradients,
     * read in place) and with a packed gradient its decoded copy too, alive together. */
    double      update_scratch, update_scratch_packed;
} Tally;

/* Exact state bytes of one tensor, as the optimizer's constructor allocates them. */
static void tally(long rows, long cols, void *acc)
{
    Tally *t = acc;
    double n = (double)rows * cols;
    t->params += n;
    double mine = t->o == MC_ADAFACTOR ? 8.0 * (3 * rows + cols) + 4.0 * (rows + cols) : 0.0;
    t->update_scratch = fmax(t->update_scratch, mine);
    t->update_scratch_packed = fmax(t->update_scratch_packed, mine + F32 * n);
    switch (t->o) {
    case MC_ADAM8BIT:
        t->state += n >= ADAM8BIT_MIN ? 2.0 * n + 8.0 * ceil(n / ADAM8BIT_BLOCK) : 8.0 * n;
        break;
    case MC_ADAFACTOR:
        t->state += rows > 1 ? F32 * (double)(rows + cols) : F32 * n;
        /* adafactor.c's scratch per tensor: 3 rows + cols doubles and rows + cols floats. */
        t->adafactor_scratch = fmax(t->adafactor_scratch,
                                    8.0 * (3 * rows + cols) + 4.0 * (rows + cols));
        break;
    default:
        t->state += n * state_per_param(t->o);
        break;
    }
}

static Tally gpt_tally(const GptConfig *cfg, McOptimizer o)
{
    Tally t = { .o = o };
    each_tensor(cfg, tally, &t);
    return t;
}

size_t memcalc_gpt_params(const GptConfig *cfg)
{
    return (size_t)gpt_tally(cfg, MC_SGD).params;
}

McStates memcalc_gpt_states(const GptConfig *cfg, McPrecision p, McOptimizer o)
{
    Tally t = gpt_tally(cfg, o);
    return with_precision(t.params, t.state, p);
}

/* ---- activations ---------------------------------------------------------------------------- */

/* The table of nn/gpt_acts.c summed by part: the embedding, one recorded block (every row:
 * outputs, attention's P or tiled L, the layernorm statistics), the same block run by the
 * checkpoint runner's ADVANCE pass (its outputs only: packed as a recording tape packs them,
 * but no saved extras), a checkpoint x_j, and the head with cross-entropy. */
static McActParts act_parts(const GptConfig *cfg, int B, int T, const PrecisionPolicy *policy,
                            bool tiled)
{
    GptActRun run = { .B = B, .T = T, .policy = policy, .tiled = tiled };
    return gpt_acts_bytes(cfg, &run);
}

McActParts memcalc_act_parts_policy(const GptConfig *cfg, int B, int T,
                                    const PrecisionPolicy *policy)
{
    return act_parts(cfg, B, T, policy, false);
}

McActParts memcalc_act_parts_run(const GptConfig *cfg, const McRun *run)
{
    return act_parts(cfg, run->B, run->T, run->policy, run->tiled);
}

double memcalc_act_zero_paper(const GptConfig *cfg, int B, int T, double bytes)
{
    return 12.0 * cfg->n_embd * (double)B * T * cfg->n_layer * bytes;
}

McActParts memcalc_act_parts(const GptConfig *cfg, int B, int T)
{
    return memcalc_act_parts_policy(cfg, B, T, NULL);
}

/* The runner's plan for every:K (autograd/checkpoint.c, plan_every), n = L blocks:
 *   forward: advance through blocks 0 .. last-1 storing x_K, x_2K, ..., x_last (copies), then
 *            record the last run; the head tape follows:
 *                embed + (runs - 1) copies + (L - last) blocks + head
 *   backward: the head tape is freed, the last run reversed and x_last released; every earlier
 *            run of K is recorded again from its checkpoint:
 *                embed + (runs - 2) copies + K blocks           (runs >= 2)
 *   advancing block j keeps the copies so far, x_j, the bare block and the new copy x_{j+1}:
 *                embed + (runs - 1 + [K > 1]) copies + bare block   (at j = last - 1)
 * with runs = ceil(L / K), last = K (runs - 1). K >= L is vanilla. */
static double every_peak(const McActParts *a, int L, int K)
{
    int runs = (L + K - 1) / K, last = K * (runs - 1);
    double peak = a->embed + (runs - 1) * a->copy + (L - last) * a->block + a->head;
    if (runs >= 2) {
        peak = fmax(peak, a->embed + (runs - 2) * a->copy + K * a->block);
        peak = fmax(peak, a->embed + (runs - 1 + (K > 1)) * a->copy + a->block_bare);
    }
    return peak;
}

/* memory-poor (plan_memory_poor): segment i's input is recomputed from x_0 before it is
 * reversed, so at most one copy x_i and one recorded block are held, plus the head tape in the
 * forward pass; advancing holds x_j (a copy from j = 1 on, so only when L >= 3), the bare block
 * and x_{j+1}. (Under fp32 a recorded block and the head always outweigh that; with packed
 * activations the fp32 bare block can win.) */
static double memory_poor_peak(const McActParts *a, int L)
{
    if (L == 1)
        return a->embed + a->block + a->head;
    double advancing = a->block_bare + (L >= 3 ? 2.0 : 1.0) * a->copy;
    return a->embed + fmax(a->copy + a->block + a->head, advancing);
}

double memcalc_act_peak(const GptConfig *cfg, const McRun *run)
{
    McActParts a = memcalc_act_parts_run(cfg, run);
    return memcalc_act_peak_parts(&a, cfg->n_layer, run->strategy);
}

double memcalc_act_peak_parts(const McActParts *a, int L, CkptStrategy strategy)
{
    switch (strategy.kind) {
    case CKPT_VANILLA: return a->embed + L * a->block + a->head;
    case CKPT_MEMORY_POOR: return memory_poor_peak(a, L);
    case CKPT_SQRT:
    case CKPT_EVERY: return every_peak(a, L, ckpt_interval(strategy, L));
    case CKPT_BUDGET: break;
    }
    return -1.0;
}

/* ---- scratch -------------------------------------------------------------------------------- */

/* What a policy adds to scratch, as 0/1 factors:
 *   decode   activations are packed: an op decodes each packed input (and saved tensor) into an
 *            fp32 temp copy for the length of its call, and its output is fp32 temp until
 *            tape_record packs it (tape_tensor); the loss, a scalar, is an fp32 activation
 *   params   parameters are packed: a weight or bias an op reads is decoded likewise, and
 *            so are their gradients (autograd/tensor.h): a backward node adds into an fp32
 *            working copy of each, freed when the node is done
 *   cx cw    a matmul rounds an operand into a temp copy (policy_compute_input) unless it is
 *            stored in its compute format already (policy_operand_format): the activation x,
 *            the weight w. The gradient dy, when it needs rounding (tf32: fp32 gradients, tf32
 *            compute), is rounded where it lies, never copied (ops_matmul.c, rounds_dy_in_place):
 *            the tape frees it after the node anyway. */
typedef struct {
    double decode, params, cx, cw;
} Packing;

static Packing packing_of(const PrecisionPolicy *p)
{
    Packing k = { 0 };
    if (!p || policy_is_fp32(p))
        return k;
    k.decode = p->act != DTYPE_F32;
    k.params = p->param != DTYPE_F32;
    k.cx = tensor_dtype_format(p->act) != p->compute;
    k.cw = tensor_dtype_format(p->param) != p->compute;
    return k;
}

/* A linear layer's backward, x [rows, a] -> y [rows, b], w [a, b] (weights of a b values for
 * the head: there m is V, the bias absent), in floats: `held` gradients kept meanwhile, dy and
 * w decoded throughout, and the largest of three moments (ops_matmul.c, matmul_backward):
 *   dW = X^T dY   x decoded, the weight's gradient working copy (packed), a compute copy of x
 *   dX = dY W^T   x's copy freed; dx, the working copy still, a compute copy of w
 *   the bias      dx, both working copies (when dy is rounded in place the bias goes first,
 *                 with less beside it: a moment below the other two). */
static double product_backward(const Packing *k, double rows, double held, double a, double b,
                              double w, double bias)
{
    double dw = rows * k->decode * a + k->cx * rows * a;
    double dx = rows * a + k->cw * w;
    double db = rows * a + k->params * bias;
    return held + rows * b + 2.0 * k->params * w + fmax(dw, fmax(dx, db));
}

/* The same layer's forward: x and w decoded, their compute copies, and the fp32 output, which
 * is scratch only until packed (unpacked, it is an activation from the start). */
static double product_forward(const Packing *k, double rows, double a, double b, double w,
                              double bias)
{
    return rows * (k->decode * (a + b) + k->cx * a) + k->params * (w + bias) + k->cw * w;
}

/* One block's backward pass (and the forward steps that can rival it under a policy), in
 * floats, with `held` floats of gradients kept outside the block (the residual stream's, and
 * the checkpoint runner's seed). */
static double block_temp(const GptConfig *cfg, const Packing *k, const McRun *run, double held)
{
    double N = (double)run->B * run->T, C = cfg->n_embd, NC = N * C;
    double P = (double)run->B * cfg->n_head * run->T * run->T;
    double scratch = (double)run->threads * run->T * run->T;
    double ln = NC * (2.0 + k->decode) + k->params * 4.0 * C;
    double f = product_backward(k, N, held, 4 * C, C, 4 * C * C, C);         /* mlp.proj */
    f = fmax(f, held + 8.0 * NC);               /* gelu (decodes x a chunk at a time) */
    f = fmax(f, product_backward(k, N, held, C, 4 * C, 4 * C * C, 4 * C));   /* mlp.fc */
    f = fmax(f, held + ln);                                                 /* ln2, ln1 */
    f = fmax(f, product_backward(k, N, held, C, C, C * C, C));               /* attn.proj */
    /* attention: dy, dq dk dv, the decoded q k v and P, a T x T scratch per thread */
    f = fmax(f, held + (4.0 + 3.0 * k->decode) * NC + k->decode * P + scratch);
    if (cfg->fused_qkv)
        f = fmax(f, product_backward(k, N, held, C, 3 * C, 3 * C * C, 3 * C));
    else            /* v's backward first, dq and dk held */
        f = fmax(f, product_backward(k, N, held + 2.0 * NC, C, C, C * C, C));
    /* Forward steps: the fc layer; gelu; attention (P is fp32 scratch until the next op
     * records, which is the attention's proj). */
    f = fmax(f, product_forward(k, N, C, 4 * C, 4 * C * C, 4 * C));
    f = fmax(f, product_forward(k, N, 4 * C, C, 4 * C * C, C));
    f = fmax(f, k->decode * 8.0 * NC);
    f = fmax(f, k->decode * (4.0 * NC + P));
    f = fmax(f, k->decode * P + product_forward(k, N, C, C, C * C, C));
    return f;
}

/* The backward pass frees each activation gradient as soon as its node has run (tape.c), so the
 * peak is at one node: its output's gradient, the gradients it allocates for its inputs, and
 * what is held meanwhile. In floats per token of C, for one block (vanilla, fp32):
 *     gelu: the residual's gradient 1 + its output's 4 + its input's 4 = 9
 *     attention: residual 1 + output 1 + the fused qkv's 3 = 5, plus a T x T scratch per thread
 * the head: cross-entropy's logits gradient N V (+ the loss's 1 float), then the head matmul's
 * N V + N C, ln_f's 2 N C; the embedding's add 3 N C; the forward's position ids N ints.
 * The checkpoint runner holds the block's seed dx_{j+1} beside its gradients (+1 C in a block)
 * and hands dx_0 to the embedding tape (4 N C there). A policy adds the decoded copies and
 * compute copies of Packing; gelu decodes its input a chunk at a time and a matmul frees its
 * decoded input before dX, so under every policy the default model's peak stays gelu's 9. */
double memcalc_temp_peak(const GptConfig *cfg, const McRun *run, McOptimizer o)
{
    if (run->strategy.kind == CKPT_BUDGET)
        return -1.0;
    Packing k = packing_of(run->policy);
    double N = (double)run->B * run->T, C = cfg->n_embd, V = cfg->vocab_size, NC = N * C;
    double seed = run->strategy.kind == CKPT_VANILLA ? 0.0 : 1.0;
    double floats = fmax(N * V * (1.0 + k.decode) + 1.0,                         /* loss */
                         product_backward(&k, N, 0.0, C, V, V * C, 0.0));         /* head */
    floats = fmax(floats, product_forward(&k, N, C, V, V * C, 0.0));
    floats = fmax(floats, NC * (2.0 + k.decode) + k.params * 4.0 * C);              /* ln_f */
    floats = fmax(floats, block_temp(cfg, &k, run, (1.0 + seed) * NC));
    floats = fmax(floats, (3.0 + seed) * NC);                                    /* embedding */
    /* the lookups' backward: both gradients, and a packed table's fp32 working copy */
    floats = fmax(floats, (2.0 + seed) * NC + k.params * fmax(V, run->T) * C);
    floats = fmax(floats, N);
    double bytes = F32 * floats;
    if (o == MC_ADAFACTOR && !run->offload)     /* the update's scratch, on the host with it */
        bytes = fmax(bytes, gpt_tally(cfg, o).adafactor_scratch);
    return bytes;
}

/* Under a policy: parameters packed in its param dtype, and their gradients in
 * policy_param_grad_dtype (the param dtype, or e5m2 under fp8: the tape rounds them to it;
 * autograd/tensor.h, "packed gradients"); fp32 master weights beside the optimizer's state
 * (optim.c's "master." buffers) when the parameters are packed. An fp8 gradient's per-tensor
 * scale is a field of its Tensor, as an fp8 activation's is, not an allocation: no bytes of
 * the grad category, which is 1 x Psi under fp8. */
static McStates policy_states(const GptConfig *cfg, const PrecisionPolicy *policy, McOptimizer o)
{
    McStates s = memcalc_gpt_states(cfg, MC_FP32, o);
    if (!policy)
        return s;
    double n = s.param / F32;
    s.grad = (double)fmt_packed_bytes(tensor_dtype_format(policy_param_grad_dtype(policy)), 1) *
             n;
    if (policy->param == DTYPE_F32)
        return s;
    s.param = (double)fmt_packed_bytes(tensor_dtype_format(policy->param), 1) * n;
    s.optim += F32 * n;
    return s;
}

McPeaks memcalc_predict(const GptConfig *cfg, const McRun *run, McOptimizer o)
{
    McStates s = policy_states(cfg, run->policy, o);
    McPeaks p = { .bytes = { 0 } };
    p.bytes[MEM_PARAM] = s.param;
    p.bytes[MEM_GRAD] = s.grad;
    p.bytes[MEM_OPTIM] = s.optim;
    p.bytes[MEM_ACT] = memcalc_act_peak(cfg, run);
    p.bytes[MEM_TEMP] = memcalc_temp_peak(cfg, run, o);
    if (run->offload) {
        /* optim/offload.h's host pool and traffic: per parameter, its gradient's and its own
         * bytes as stored (a GPT has no scalar parameter, whose gradient would stay fp32). */
        double psi = (double)memcalc_gpt_params(cfg), g = s.grad / psi, w = s.param / psi;
        bool packed = w < F32;
        p.host[MEM_PARAM] = packed ? s.param : 0.0;
        p.host[MEM_GRAD] = s.grad;
        p.host[MEM_OPTIM] = s.optim + (packed ? 0.0 : F32 * psi);
        Tally t = gpt_tally(cfg, o);
        p.host[MEM_TEMP] = g < F32 ? t.update_scratch_packed : t.update_scratch;
        for (int c = 0; c < MEM_NCAT; c++)
            p.host[MEM_ALL] += p.host[c];
        p.to_host = g * psi;
        p.to_device = w * psi;
        p.bytes[MEM_OPTIM] = 0.0;
    }
    for (int c = 0; c < MEM_NCAT; c++)
        p.bytes[MEM_ALL] += p.bytes[c];
    return p;
}

/* One tensor's optimizer state, as tally counts it (memcalc_lora.c's adapters). */
double memcalc_tensor_state(long rows, long cols, McOptimizer o, double *adafactor_scratch)
{
    Tally t = { .o = o };
    tally(rows, cols, &t);
    if (adafactor_scratch)
        *adafactor_scratch = fmax(*adafactor_scratch, t.adafactor_scratch);
    return t.state;
}

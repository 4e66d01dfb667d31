#include "nn/lora.h"

#include <math.h>

#include "autograd/parallel.h"

void lora_adapter_init(LoraAdapter *ad, NnParams *p, const char *name, int in, int out,
                       int rank, float alpha)
{
    if (rank < 1 || !(alpha > 0.0f))
        tensor_fatal("lora_adapter_init: rank %d and alpha %g (need rank >= 1, alpha > 0)", rank,
                     (double)alpha);
    /* U(-1/sqrt(in), 1/sqrt(in)) has standard deviation 1/sqrt(3 in). */
    float std = 1.0f / sqrtf(3.0f * (float)in);
    ad->a = nn_params_add(p, name, "lora_A", 2, (int[]){ in, rank },
                          (NnInit){ NN_INIT_UNIFORM, std });
    ad->b = nn_params_add(p, name, "lora_B", 2, (int[]){ rank, out }, (NnInit){ NN_INIT_ZEROS, 0 });
    ad->scale = alpha / (float)rank;
}

/* ---- the adapter's products under a precision policy -----------------------------------------
 * The same rules as op_matmul's (policy_operand_format, policy_grad_operand_format): an operand
 * is rounded to the compute format unless it is stored in it already (a bf16 A under the bf16
 * policy is not rounded again), a gradient to grad_compute unless gradients are stored in it;
 * the products accumulate in fp32. Without a policy every format is fp32 and the product is
 * par_sgemm on the operands themselves. (accumulate_low, a demonstration no preset sets, is not
 * honoured here.) */

/* C = alpha op(A) op(B) + beta C, A [M, K] and B [K, N] after op, on operands rounded to fa
 * and fb. */
static void adapter_product(Format fa, Format fb, bool ta, bool tb, int M, int N, int K,
                            float alpha, const float *A, const float *B, float beta, float *C)
{
    float *a_copy, *b_copy;
    const float *a = policy_compute_input(fa, A, (size_t)M * K, &a_copy);
    const float *b = policy_compute_input(fb, B, (size_t)K * N, &b_copy);
    par_sgemm(ta, tb, M, N, K, alpha, a, ta ? M : K, b, tb ? K : N, beta, C, N);
    mem_free(a_copy);
    mem_free(b_copy);
}

/* The adapter's term as one op, out = y + (s x A) B, with y [M, out] the Linear's output,
 * x [M, in], A [in, r], B [r, out]. The op keeps down = s x A [M, r] for backward and its
 * output; four separate ops (matmul, scale, matmul, add) would keep two [M, r] and two
 * [M, out] tensors. out starts as a copy of y and down B is accumulated onto it (sgemm with
 * beta 1), so with B = 0 it adds exact zeros: out is y bit for bit, under a policy too (y is
 * stored in the activation dtype already, and so is out).
 *   dy   += dout
 *   dB   += down^T dout                 [r, out]
 *   t     = dout B^T                    [M, r], a temp buffer: an activation gradient, so
 *                                       rounded to the policy's gradient format like any
 *   dA   += s x^T t                     [in, r]
 *   dx   += s t A^T                     [M, in]
 * FLOPs (matmul): forward 2M in r + 2M r out; backward 2M r out for each of dB and t, and
 * 2M in r for each of dA and dx, as computed (s rides on the products' alpha, uncounted). */
typedef struct {
    float scale;        /* s */
} AdapterState;

static void lora_adapter_backward(Node *n)
{
    const AdapterState *st = node_state(n, sizeof *st);
    Tensor *y = n->in[0], *x = n->in[1], *a = n->in[2], *b = n->in[3], *down = n->saved[0];
    const PrecisionPolicy *p = n->policy;
    const float *dout = n->out->grad;
    float s = st->scale;
    int M = (int)tensor_rows(x), in = a->shape[0], r = a->shape[1], out = b->shape[1];
    Format fg = policy_grad_operand_format(p), fdown = policy_operand_format(p, down);
    Format fa = policy_operand_format(p, a), fb = policy_operand_format(p, b);
    Format fx = policy_operand_format(p, x);
    bool need_t = a->requires_grad || x->requires_grad;
    node_count(n, 2 * (int64_t)M * r * (out * (b->requires_grad + need_t) +
                                        in * (a->requires_grad + x->requires_grad)), 0);
    /* BEGIN SOLUTION lora */
    if (y->requires_grad) {
        float *dy = tensor_grad(y);
        for (size_t i = 0; i < y->size; i++)
            dy[i] += dout[i];
    }
    if (b->requires_grad)
        adapter_product(fdown, fg, true, false, r, out, M, 1.0f, down->data, dout, 1.0f,
                        tensor_grad(b));
    if (!need_t)
        return;
    float *t = mem_alloc(MEM_TEMP, (size_t)M * r * sizeof *t);
    adapter_product(fg, fb, false, true, M, r, out, 1.0f, dout, b->data, 0.0f, t);
    if (p) {
        Format f = tensor_dtype_format(p->grad);
        tensor_round_values(t, t, (size_t)M * r, f, policy_current_scale(f, t, (size_t)M * r));
    }
    if (a->requires_grad)
        adapter_product(fx, fg, true, false, in, r, M, s, x->data, t, 1.0f, tensor_grad(a));
    if (x->requires_grad)
        adapter_product(fg, fa, false, true, M, in, r, s, t, a->data, 1.0f, tensor_grad(x));
    mem_free(t);
    /* STUDENT
    (void)down, (void)p, (void)dout, (void)s;
    (void)fg, (void)fdown, (void)fa, (void)fb, (void)fx;
    Tensor *const ins[] = { y, x, a, b };
    for (int i = 0; i < 4; i++)
        if (ins[i]->requires_grad)
            (void)tensor_grad(ins[i]);
    */
    /* END SOLUTION lora */
}

Tensor *lora_adapter_add(const LoraAdapter *ad, Tape *tape, Tensor *x, Tensor *y)
{
    Tensor *a = ad->a, *b = ad->b;
    tape_use(tape, 4, (Tensor *[]){ y, x, a, b });
    const PrecisionPolicy *p = tape->policy;
    int M = (int)tensor_rows(x), in = a->shape[0], r = a->shape[1], out = b->shape[1];
    if (tensor_last_dim(x) != in || tensor_last_dim(y) != out || tensor_rows(y) != (size_t)M)
        tensor_fatal("lora_adapter_add: x [.., %d] and y [.., %d] do not fit A [%d, %d], "
                     "B [%d, %d]", tensor_last_dim(x), tensor_last_dim(y), in, r, r, out);
    /* down is fp32 here and stored in the activation dtype once the node is recorded; the
     * second product rounds it to the compute format, which under every preset is what the
     * stored copy that backward reads holds too. */
    /* BEGIN SOLUTION lora */
    Tensor *down = tape_tensor(tape, 2, (int[]){ M, r });
    adapter_product(policy_operand_format(p, x), policy_operand_format(p, a), false, false, M, r,
                    in, ad->scale, x->data, a->data, 0.0f, down->data);
    Tensor *res = tape_tensor(tape, y->ndim, y->shape);
    tensor_copy_data(res, y);
    adapter_product(policy_operand_format(p, down), policy_operand_format(p, b), false, false, M,
                    out, r, 1.0f, down->data, b->data, 1.0f, res->data);
    /* STUDENT
    (void)p, (void)adapter_product;
    Tensor *down = tape_tensor(tape, 2, (int[]){ M, r });
    Tensor *res = tape_tensor(tape, y->ndim, y->shape);
    */
    /* END SOLUTION lora */
    tape_count(tape, 2 * (int64_t)M * r * (in + out), 0);
    Node *n = tape_record(tape, "lora", lora_adapter_backward, res, 4, (Tensor *[]){ y, x, a, b });
    if (n) {
        AdapterState *st = node_state(n, sizeof *st);
        st->scale = ad->scale;
        n->saved[0] = down;
    }
    return res;
}

void lora_adapter_merge(const LoraAdapter *ad, Tensor *weight, float sign)
{
    int in = ad->a->shape[0], r = ad->a->shape[1], out = ad->b->shape[1];
    if (!weight->data || weight->ndim != 2 || weight->shape[0] != in || weight->shape[1] != out)
        tensor_fatal("lora_adapter_merge: '%s' is not an fp32 [%d, %d] weight", weight->name, in,
                     out);
    par_sgemm(false, false, in, out, r, sign * ad->scale, ad->a->data, r, ad->b->data, out, 1.0f,
              weight->data, out);
}

/* QLoRA's frozen base ----------------------------------------------------------------------- */

QuantConfig lora_quant_config(void)
{
    return (QuantConfig){ .kind = QUANT_NF4, .block = 64, .double_quant = true, .dq_block = 256 };
}

void lora_quant_init(LoraQuant *lq, const Tensor *weight, Format compute)
{
    if (!weight->data || weight->ndim != 2)
        tensor_fatal("lora_quant_init: '%s' is not an fp32 matrix", weight->name);
    QuantConfig cfg = lora_quant_config();
    lq->in = weight->shape[0];
    lq->out = weight->shape[1];
    lq->compute = compute;
    lq->storage = mem_alloc(MEM_PARAM, quant_bytes(cfg, weight->size));
    quant_bind(&lq->q, cfg, weight->size, lq->storage);
    quant_quantize(&lq->q, weight->data);
}

void lora_quant_free(LoraQuant *lq)
{
    mem_free(lq->storage);
    lq->storage = NULL;
}

size_t lora_quant_bytes(const LoraQuant *lq) { return mem_size(lq->storage); }

void lora_quant_dequantize(const LoraQuant *lq, float *dst) { quant_dequantize(&lq->q, dst); }

Tensor *lora_quant_matmul(const LoraQuant *lq, Tape *tape, Tensor *x, Tensor *bias)
{
    return op_qmatmul(tape, x, &lq->q, bias, lq->in, lq->out, lq->compute);
}

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

/* The scale goes on x A, [.., r], the smallest tensor of the path: s (x A) B = (s x A) B. */
Tensor *lora_adapter_add(const LoraAdapter *ad, Tape *tape, Tensor *x, Tensor *y)
{
    Tensor *down = op_scale(tape, op_matmul(tape, x, ad->a, false), ad->scale);
    return op_add(tape, y, op_matmul(tape, down, ad->b, false));
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

Tensor *lora_quant_matmul(const LoraQuant *lq, Tape *tape, Tensor *x)
{
    return op_qmatmul(tape, x, &lq->q, lq->in, lq->out, lq->compute);
}

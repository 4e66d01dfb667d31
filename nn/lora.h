#ifndef TAPEGRAD_NN_LORA_H
#define TAPEGRAD_NN_LORA_H
/* LoRA (Hu et al. 2021) and QLoRA (Dettmers et al. 2023) on one Linear (nn/linear.h).
 *
 * LoRA leaves the trained weight W0 [in, out] frozen and learns a low-rank correction beside it:
 *
 *     h = x W0 + b + s (x A) B        A [in, r], B [r, out], s = alpha / r
 *
 * (the paper writes W0 x + (alpha/r) B A x with column vectors and PyTorch's [out, in] layout;
 * ours is the same map in the [in, out] layout of nn/linear.h: our A is the paper's A^T, our B
 * the paper's B^T). Only A and B are trained: r (in + out) numbers instead of in * out.
 *
 * Initialisation. B = 0, so s (x A) B is exactly zero and the adapted model computes exactly
 * what the base computes until the first update (x W0 + b + 0 is bit for bit x W0 + b). A must
 * then not be zero as well, or neither would get a gradient (dB = s (xA)^T dh is 0 when A is,
 * and dA = s x^T dh B^T is 0 when B is). A is drawn like the weight of PyTorch's nn.Linear,
 * which is what peft does: Kaiming-uniform with a = sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in)).
 * That scale, rather than GPT-2's N(0, 0.02^2), makes x A of the order of x whatever the width,
 * so the first updates of B move the output by an amount that does not depend on `in`.
 *
 * Why s = alpha / r: with Adam each element of B moves by about the learning rate per step, so
 * the change of (x A) B grows with r; dividing by r keeps the size of an update about the same
 * when r changes, and alpha fixed across a sweep over r means the learning rate need not be
 * retuned (the paper sets alpha to the first r tried and leaves it).
 *
 * The hook. A Linear holds two optional pointers, set here and NULL otherwise: `lora`, whose
 * term nn_linear_forward adds after the bias, and `quant`, a quantized W0 that nn_linear_forward
 * multiplies with op_qmatmul instead of op_matmul. The adapter does not wrap the Linear, so
 * attention, the MLP and the block need no change and parameter names stay those of the base.
 *
 * Freezing. The trainer passes only A and B to the optimizer; W0 and b have requires_grad
 * false, so no op ever allocates a gradient for them and no optimizer state exists for them.
 *
 * Merging (for inference): W0 <- W0 + s A B, after which the Linear is a plain Linear again and
 * costs nothing extra; unmerging subtracts the same product. Both are fp32 sums, so unmerge(
 * merge(W0)) equals W0 to fp32 rounding, not bit for bit.
 *
 * QLoRA. W0 is stored as NF4 (precision/quant.h): 4-bit codes in blocks of 64 values, each
 * block scaled by its absmax, the block scales themselves double-quantized (their mean
 * subtracted, then e4m3 in blocks of 256 with one fp32 constant each): 4 + 8/64 + 32/16384 =
 * 4.127 bits per weight. The bytes come from mem_alloc(MEM_PARAM) through quant_bind, so the
 * param category measures them, and the fp32 W0 is freed (its Tensor keeps name and shape, with
 * data NULL). Each product dequantizes W0 into a temp buffer, rounds both inputs to bf16 and
 * accumulates in fp32 (op_qmatmul), forward and backward alike; the adapter stays fp32.
 *
 * Under a precision policy (tape->policy) the adapter's op follows op_matmul's rules: its
 * products round x, A, B, s x A and the gradients to the compute formats and accumulate in fp32;
 * it stores s x A and its output in the activation dtype; the gradient t = dout B^T between
 * its products is rounded to the gradient format, as the tape rounds any activation gradient.
 * A and B may be packed (the optimizer then holds their fp32 masters). The NF4 product keeps
 * computing in bf16, whatever the policy. */
#include <stddef.h>

#include "autograd/ops.h"
#include "nn/linear.h"
#include "nn/params.h"
#include "precision/format.h"
#include "precision/quant.h"

typedef struct LoraAdapter {
    Tensor *a;          /* [in, r]: NAME.lora_A */
    Tensor *b;          /* [r, out]: NAME.lora_B, zero at the start */
    float   scale;      /* alpha / r */
} LoraAdapter;

typedef struct LoraQuant {
    QuantTensor q;      /* W0 [in, out], row-major, as NF4 codes and constants */
    void       *storage;    /* quant_bytes of it, from mem_alloc(MEM_PARAM) */
    int         in, out;
    Format      compute;    /* what the product rounds its inputs to: bf16 for QLoRA */
} LoraQuant;

/* Adds NAME.lora_A [in, rank] (uniform, see above; drawn by nn_params_init) and NAME.lora_B
 * [rank, out] (zeros) to p. rank >= 1, alpha > 0. */
void    lora_adapter_init(LoraAdapter *ad, NnParams *p, const char *name, int in, int out,
                          int rank, float alpha);
/* y + s (x A) B, where y is the Linear's output for x. */
Tensor *lora_adapter_add(const LoraAdapter *ad, Tape *tape, Tensor *x, Tensor *y);
/* weight <- weight + sign s A B (sign +1 merges, -1 unmerges). */
void    lora_adapter_merge(const LoraAdapter *ad, Tensor *weight, float sign);

/* QLoRA's storage: nf4, blocks of 64, double quantization in blocks of 256. */
QuantConfig lora_quant_config(void);
/* Quantizes weight [in, out] into new MEM_PARAM storage; weight is left as it was. */
void    lora_quant_init(LoraQuant *lq, const Tensor *weight, Format compute);
void    lora_quant_free(LoraQuant *lq);
/* Bytes of the storage, as allocated. */
size_t  lora_quant_bytes(const LoraQuant *lq);
/* W0 dequantized into dst [in * out] (fp32, not rounded to the compute format). */
void    lora_quant_dequantize(const LoraQuant *lq, float *dst);
/* x W0 + bias (bias may be NULL) by op_qmatmul. */
Tensor *lora_quant_matmul(const LoraQuant *lq, Tape *tape, Tensor *x, Tensor *bias);

#endif

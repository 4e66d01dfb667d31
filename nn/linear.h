#ifndef TAPEGRAD_NN_LINEAR_H
#define TAPEGRAD_NN_LINEAR_H
/* A fully connected layer: y = x W + b, x [..., in], W [in, out], b [out], y [..., out].
 *
 * W is stored [in, out], input-major, the layout of GPT-2's Conv1D (Hugging Face `transformers`
 * GPT-2 checkpoints hold c_attn, c_proj and c_fc weights exactly like this, so they copy over
 * unchanged). PyTorch's nn.Linear stores the transpose, weight_pt [out, in] with
 * y = x weight_pt^T + b, so
 *     ours.weight = torch_linear.weight.T        torch_linear.weight = ours.weight.T
 *     ours.bias   = torch_linear.bias
 * The [in, out] layout lets the forward be one plain product x W, row-major on both sides.
 *
 * A module holds pointers into a parameter list (nn/params.h), which owns the tensors. */
#include <stdbool.h>

#include "autograd/ops.h"
#include "nn/params.h"

struct LoraAdapter;
struct LoraQuant;

typedef struct {
    Tensor *weight;     /* [in, out] */
    Tensor *bias;       /* [out], or NULL for a layer without bias */
    /* Set by nn/lora.h only, NULL otherwise: a LoRA term added to the output, and a quantized
     * weight used instead of `weight` (QLoRA; weight->data is NULL then). */
    const struct LoraAdapter *lora;
    const struct LoraQuant   *quant;
} Linear;

/* Adds NAME.weight (normal, std) and, when bias, NAME.bias (zeros) to the list. */
void    nn_linear_init(Linear *l, NnParams *p, const char *name, int in, int out, bool bias,
                       float std);
Tensor *nn_linear_forward(const Linear *l, Tape *tape, Tensor *x);

#endif

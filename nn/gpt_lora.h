#ifndef TAPEGRAD_NN_GPT_LORA_H
#define TAPEGRAD_NN_GPT_LORA_H
/* LoRA and QLoRA on the tiny GPT: adapters (nn/lora.h) on chosen Linears of every block, the
 * rest of the model frozen.
 *
 *     Gpt *base = ...;                                    // trained, or loaded (lora_snapshot.h)
 *     LoraConfig lc = lora_config_default();              // r 8, alpha 16, targets q,v
 *     GptLora *lora = gpt_lora_new(base, &lc, seed);      // freezes base, adds A and B
 *     int n; Tensor *const *train = gpt_lora_params(lora, &n);
 *     AdamW *opt = adamw_new(train, n, ...);              // only A and B: no state for W0
 *     ... gpt_loss(base, ...) as before: the Linears add their adapters themselves ...
 *     gpt_lora_free(lora);                                // before gpt_free(base)
 *
 * Targets (per block; LORA_TARGET_* bits, "q,v" on a command line):
 *     q, k, v   attn.q, attn.k, attn.v   [C, C] each: needs separate q/k/v projections
 *                                        (GptConfig.fused_qkv false; a fused base is refused,
 *                                        since adapting a column block of qkv would need an op of
 *                                        its own and the two layouts compute the same function)
 *     o         attn.proj                [C, C]
 *     mlp       mlp.fc [C, 4C] and mlp.proj [4C, C]
 * Adapters are named after the Linear: blocks.0.attn.q.lora_A [C, r], blocks.0.attn.q.lora_B
 * [r, C]. Trainable parameters: L r (2C per attention target + 10C for mlp), e.g. r = 8 on q, v
 * of L = 2, C = 128: 8192.
 *
 * Freezing: every base parameter (embeddings, LayerNorms, biases, weights) gets requires_grad
 * false and loses any gradient buffer, so backward gives gradients to A and B only.
 *
 * QLoRA (cfg.qlora): every Linear weight of every block, adapted or not, is quantized to NF4 and
 * its fp32 storage freed (the Tensor stays, data NULL). What stays fp32: the token and position
 * embeddings (also the tied head), the LayerNorms and the biases. Those are about 2.5% of this
 * model's parameters; quantizing them too would save little and, for the embeddings and the
 * head, cost accuracy, which is why QLoRA leaves them alone as well.
 *
 * Under a precision policy (autograd/policy.h; docs/lora.md, "Precision") the base may come
 * packed, in the policy's parameter dtype: it is frozen, so it needs no fp32 master copy, and
 * the forward decodes it like any packed parameter. Its adapters start fp32; the trainer packs
 * them and keeps their fp32 masters in the optimizer (optim/train.h, trainer_use_lora). QLoRA
 * quantizes a packed weight from its packed values. Merging needs an fp32 base and fp32
 * adapters.
 *
 * Lifetime: the GptLora points into the model; free it before the model. gpt_lora_free detaches
 * the adapters and unfreezes the base; a merged adapter stays merged (the model is then the
 * fine-tuned model), and a quantized base is dequantized back into fp32 tensors (their values
 * are the NF4 ones from then on). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nn/gpt.h"
#include "nn/lora.h"

enum {
    LORA_TARGET_Q = 1 << 0,
    LORA_TARGET_K = 1 << 1,
    LORA_TARGET_V = 1 << 2,
    LORA_TARGET_O = 1 << 3,
    LORA_TARGET_MLP = 1 << 4,
    LORA_TARGET_ALL = (1 << 5) - 1,
};

typedef struct {
    int      rank;          /* r >= 1 */
    float    alpha;         /* the adapter's output is scaled by alpha / r */
    unsigned targets;       /* LORA_TARGET_* bits, at least one */
    bool     qlora;         /* store the frozen base's Linear weights as NF4 */
} LoraConfig;

typedef struct {
    LoraConfig   cfg;
    Gpt         *model;         /* the base, not owned */
    NnParams     params;        /* lora_A and lora_B of every adapter: the trainable tensors */
    LoraAdapter *adapters;      /* [n_adapters], in block order, then q, k, v, o, fc, proj */
    Linear     **sites;         /* the Linear each adapter is attached to */
    int          n_adapters;
    LoraQuant   *quant;         /* QLoRA: [n_quant], one per Linear of the blocks */
    Linear     **quant_sites;
    int          n_quant;
    bool         merged;
} GptLora;

/* Bytes of the frozen base, measured (mem_size of each block of storage). */
typedef struct {
    size_t quant_values, quant_bytes;   /* the NF4 weights: values, bytes of codes + constants */
    size_t fp32_values, fp32_bytes;     /* everything stored as fp32 tensors */
    size_t packed_values, packed_bytes; /* everything stored packed (bf16, fp16: a policy's) */
} LoraBaseBytes;

/* The alphas a user (train_gpt's --lora-alpha) or a file may give. */
#define LORA_ALPHA_MIN 1e-6
#define LORA_ALPHA_MAX 1e6

/* Every field of LoraConfig, each declared once (nn/lora_snapshot.c): key ("rank"), range,
 * default, help. A snapshot keeps them all as "lora.<key>" (an adapter file, and a training
 * snapshot of a LoRA run); they must agree with the base's shape (lora_config_check). */
extern const Schema LORA_SCHEMA;

/* r 8, alpha 16, targets q and v, no quantization. */
LoraConfig  lora_config_default(void);
/* "q,v", "q,k,v,o,mlp" or "all" into LORA_TARGET_* bits; false with a message in err for an
 * unknown or repeated name or an empty list. */
bool        lora_targets_parse(const char *list, unsigned *targets, char *err, size_t len);
/* The bits as a list "q,v" into buf. */
const char *lora_targets_str(unsigned targets, char *buf, size_t len);
/* True when cfg can adapt a base of shape base; otherwise false with one sentence in err. */
bool        lora_config_check(const LoraConfig *cfg, const GptConfig *base, char *err,
                              size_t len);

/* Freezes model and attaches adapters (A drawn from seed by nn_params_init, B zero; give it a
 * seed other than the base's, or A replays the base's first random numbers). An invalid cfg is
 * a programming error (check it with lora_config_check first). */
GptLora    *gpt_lora_new(Gpt *model, const LoraConfig *cfg, uint64_t seed);
void        gpt_lora_free(GptLora *lora);
/* gpt_lora_free for a model about to be freed too: a quantized base is not dequantized (its
 * weights stay without storage), so freeing allocates nothing, under a memory budget as well. */
void        gpt_lora_discard(GptLora *lora);
/* QLoRA after the fact: what gpt_lora_new does when cfg.qlora (sets it). Quantizing twice or
 * quantizing a merged model is a programming error. */
void        gpt_lora_quantize_base(GptLora *lora);
/* The same for a base made without storage for the weights QLoRA quantizes (gpt_new_partly
 * with gpt_lora_quantized_param): each such weight gets fp32 storage, fill(weight, ctx) writes
 * its values (and may pack it, as a policy would), and it is quantized and its storage freed
 * before the next, so the param category never holds more than one of them unquantized. fill
 * must succeed (end the program if it cannot). */
typedef void (*LoraFillFn)(Tensor *weight, void *ctx);
void        gpt_lora_quantize_base_from(GptLora *lora, LoraFillFn fill, void *ctx);
/* The parameters QLoRA quantizes: the Linear weights of the blocks (2-D, named "blocks."). */
bool        gpt_lora_quantized_param(const char *name, int ndim);

/* The trainable tensors (pass these, and only these, to the optimizer). */
Tensor     *const *gpt_lora_params(const GptLora *lora, int *n);
size_t      gpt_lora_n_trainable(const GptLora *lora);
void        gpt_lora_zero_grad(GptLora *lora);

/* W0 <- W0 + (alpha/r) A B in every adapted Linear, which then stops adding its adapter, and
 * back. Merging a merged adapter, unmerging an unmerged one, merging into a quantized base or
 * merging packed tensors is a programming error. */
void        gpt_lora_merge(GptLora *lora);
void        gpt_lora_unmerge(GptLora *lora);

LoraBaseBytes gpt_lora_base_bytes(const GptLora *lora);

#endif

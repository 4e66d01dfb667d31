#ifndef TAPEGRAD_NN_GPT_H
#define TAPEGRAD_NN_GPT_H
/* A GPT-2-style decoder-only transformer, small enough to train on a laptop.
 *
 *     x      = wte[tokens] + wpe[0..T-1]                    [B, T, C]   gpt_embed
 *     x      = block_l(x)   for l = 0 .. L-1                [B, T, C]   gpt_block (nn/block.h)
 *     logits = ln_f(x) head^T                               [B, T, V]   gpt_head
 *     loss   = mean cross-entropy of logits vs targets, targets < 0 ignored       gpt_loss
 *
 * The head is tied to the token embedding by default (head = wte, [V, C], as GPT-2); with
 * cfg.tied false it is its own parameter head.weight, also [V, C] (the nn.Linear(C, V,
 * bias=False) layout, not our Linear's [in, out]: the same product x head^T serves both cases,
 * and untying a trained model is a copy of wte).
 *
 * Parameters, in the fixed order of gpt_params (the order of the random draws, of optimizer
 * state and of snapshots), with [shape]:
 *     wte.weight [V, C], wpe.weight [T, C],
 *     for i in 0 .. L-1:
 *         blocks.{i}.ln1.weight [C], .bias [C]
 *         blocks.{i}.attn.qkv.weight [C, 3C], .bias [3C]   (fused_qkv, the default)
 *           or blocks.{i}.attn.{q,k,v}.weight [C, C], .bias [C]
 *         blocks.{i}.attn.proj.weight [C, C], .bias [C]
 *         blocks.{i}.ln2.weight [C], .bias [C]
 *         blocks.{i}.mlp.fc.weight [C, 4C], .bias [4C]
 *         blocks.{i}.mlp.proj.weight [4C, C], .bias [C]
 *     ln_f.weight [C], .bias [C],
 *     head.weight [V, C]   (untied only)
 *
 * Initialisation (GPT-2's, from one seed, see nn_params_init): every weight matrix and both
 * embeddings from N(0, 0.02^2); the two projections that write into the residual stream
 * (attn.proj and mlp.proj) from N(0, (0.02 / sqrt(2L))^2), so the variance of the residual
 * stream does not grow with depth; biases 0; LayerNorm weight 1, bias 0.
 *
 * Mapping to a standard PyTorch GPT (nanoGPT's model.py, or Hugging Face GPT2LMHeadModel):
 *     wte, wpe, ln_1, ln_2, ln_f      copy as they are (ln1 = ln_1, ln2 = ln_2)
 *     attn.qkv = attn.c_attn, attn.proj = attn.c_proj, mlp.fc = mlp.c_fc,
 *     mlp.proj = mlp.c_proj           nanoGPT (nn.Linear): transpose the weight;
 *                                     Hugging Face (Conv1D, [in, out]): copy as it is
 *     lm_head.weight                  = head.weight, or wte.weight when tied
 * tests/reference/gpt_reference.py builds such a module (nanoGPT's layout, nn.Linear and all)
 * and loads our weights into it through this table: the executable form of the mapping, checked
 * by tests/test_gpt_reference.c. There is no dropout (it would make that check random).
 *
 * What a forward pass keeps for backward, tensor by tensor with its shape (the memory plan, in
 * the spirit of llm.c's act_sizes): nn/gpt_acts.h. A recorded forward holds exactly its bytes
 * (tests/test_gpt_acts.c), and the memory calculator predicts from it. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "autograd/ops.h"
#include "autograd/schema.h"
#include "nn/block.h"
#include "nn/layernorm.h"
#include "nn/params.h"

typedef struct {
    int  vocab_size;    /* V: token ids are in [0, V) */
    int  max_seq;       /* T: longest sequence, the rows of wpe */
    int  n_layer;       /* L: transformer blocks */
    int  n_head;        /* H: attention heads; C must be a multiple of H */
    int  n_embd;        /* C: width of the residual stream */
    bool tied;          /* head shares wte (true by default) */
    bool fused_qkv;     /* one [C, 3C] input projection (true) or separate q, k, v */
} GptConfig;

typedef struct {
    GptConfig  cfg;
    NnParams   params;      /* owns every parameter tensor */
    Tensor    *wte, *wpe;
    Block     *blocks;      /* [n_layer] */
    LayerNorm  ln_f;
    Tensor    *head;        /* == wte when tied */
} Gpt;

/* Every field of GptConfig, each declared once (nn/gpt_snapshot.c): its key ("n_layer"), range,
 * default and help. A snapshot keeps them all, as "model.<key>" in a training snapshot and a
 * base, "base.<key>" in a LoRA adapter (nn/gpt_snapshot.h writes and reads them from it). */
extern const Schema GPT_SCHEMA;

/* The benchmark model: V=65 (characters) T=64 L=4 H=4 C=128, tied, fused q/k/v. */
GptConfig   gpt_config_default(void);
/* The largest model a file may describe (nn/gpt_snapshot.c checks every model config it reads)
 * and train_gpt's flags allow: a corrupt count cannot build a model for minutes or allocate
 * gigabytes before anything is read. gpt_new itself takes any valid config. */
enum { GPT_MAX_VOCAB = 1 << 20, GPT_MAX_SEQ = 1 << 16, GPT_MAX_LAYERS = 64,
       GPT_MAX_WIDTH = 1 << 14 };
/* True when cfg describes a model; otherwise false, with one sentence naming the offending
 * field and value in err (e.g. "n_embd (C) = 10 is not a multiple of n_head (H) = 4"). */
bool        gpt_config_check(const GptConfig *cfg, char *err, size_t len);

/* A new model with GPT-2 initialisation from seed. An invalid config is a programming error
 * (tensor_fatal with gpt_config_check's message): check user input first. */
Gpt        *gpt_new(const GptConfig *cfg, uint64_t seed);
/* The same with the parameters no_storage accepts made without storage (data NULL, drawing no
 * random numbers; nn/params.h): for a base whose weights are filled later, one at a time. */
Gpt        *gpt_new_partly(const GptConfig *cfg, uint64_t seed, NnNoStorageFn no_storage);
void        gpt_free(Gpt *model);

/* Every parameter tensor, in the fixed order above; *n receives the count. */
Tensor     *const *gpt_params(const Gpt *model, int *n);
/* The parameter of that name ("blocks.0.attn.qkv.weight"), or NULL. */
Tensor     *gpt_param(const Gpt *model, const char *name);
/* Number of trainable scalars (a tied head is counted once, as wte). */
size_t      gpt_n_params(const Gpt *model);
/* The same from a config, without building the model (to refuse one too large to build). */
size_t      gpt_config_n_params(const GptConfig *cfg);
/* The lecture's estimate of a training step's product FLOPs per token, 6N + 12LTC, with
 * N = 12LC^2 + VC the weights that enter a product (per block qkv 3C^2, proj C^2, fc 4C^2 and
 * proj 4C^2; the head V C, which a tied wte is; wpe, the lookup, biases and LayerNorm are no
 * products), 6 = 2 forward + 4 backward (dX and dW) FLOPs per weight, and 12LTC attention's
 * QK^T and PV, dense, forward and backward, over rows of T tokens. The tape counts the real
 * ones (autograd/tape.h); train_gpt prints the two side by side. */
double      gpt_product_weights(const GptConfig *cfg);
double      gpt_flops_per_token(const GptConfig *cfg, int T);
void        gpt_zero_grad(Gpt *model);
/* Standard (false, the default) or tiled attention in every block. A run-time choice, not part
 * of the model: it changes activation memory, not the function (within fp32 rounding). */
void        gpt_set_tiled_attention(Gpt *model, bool tiled);

/* The forward pass in parts, so that a caller can run each block on a tape of its own (gradient
 * checkpointing treats the blocks as segments). tokens are B*T ids in [0, V), row-major
 * [B, T]; the ops copy what they keep, so the caller may reuse the arrays at once.
 *     gpt_embed: tokens -> x [B, T, C], 1 <= T <= max_seq
 *     gpt_block: x -> x, layer in [0, L)
 *     gpt_head:  x -> logits [B, T, V] */
Tensor     *gpt_embed(const Gpt *model, Tape *tape, const int *tokens, int B, int T);
Tensor     *gpt_block(const Gpt *model, int layer, Tape *tape, Tensor *x);
Tensor     *gpt_head(const Gpt *model, Tape *tape, Tensor *x);
/* All of them: logits [B, T, V]. */
Tensor     *gpt_forward(const Gpt *model, Tape *tape, const int *tokens, int B, int T);
/* Mean cross-entropy of the next-token logits against targets (B*T ids; negative ones are
 * ignored and not counted in the mean): a scalar. */
Tensor     *gpt_loss(const Gpt *model, Tape *tape, const int *tokens, const int *targets, int B,
                     int T);

#endif

#include "nn/gpt.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* GPT-2's initial standard deviation for weights and embeddings. */
static const float INIT_STD = 0.02f;

GptConfig gpt_config_default(void)
{
    return (GptConfig){ .vocab_size = 65, .max_seq = 64, .n_layer = 4, .n_head = 4,
                        .n_embd = 128, .tied = true, .fused_qkv = true };
}

bool gpt_config_check(const GptConfig *cfg, char *err, size_t len)
{
    const struct { const char *name; int value; } dims[] = {
        { "vocab_size (V)", cfg->vocab_size }, { "max_seq (T)", cfg->max_seq },
        { "n_layer (L)", cfg->n_layer },       { "n_head (H)", cfg->n_head },
        { "n_embd (C)", cfg->n_embd },
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        if (dims[i].value < 1) {
            snprintf(err, len, "%s = %d must be at least 1", dims[i].name, dims[i].value);
            return false;
        }
    }
    if (cfg->n_embd % cfg->n_head != 0) {
        snprintf(err, len, "n_embd (C) = %d is not a multiple of n_head (H) = %d", cfg->n_embd,
                 cfg->n_head);
        return false;
    }
    /* The MLP's hidden width 4C is a tensor dimension, an int. */
    if (cfg->n_embd > INT_MAX / 4) {
        snprintf(err, len, "n_embd (C) = %d is too large (at most %d)", cfg->n_embd, INT_MAX / 4);
        return false;
    }
    return true;
}

Gpt *gpt_new(const GptConfig *cfg, uint64_t seed) { return gpt_new_partly(cfg, seed, NULL); }

Gpt *gpt_new_partly(const GptConfig *cfg, uint64_t seed, NnNoStorageFn no_storage)
{
    char err[160];
    if (!gpt_config_check(cfg, err, sizeof err))
        tensor_fatal("gpt_new: %s", err);
    Gpt *m = calloc(1, sizeof *m);
    if (m)
        m->blocks = calloc((size_t)cfg->n_layer, sizeof *m->blocks);
    if (!m || !m->blocks)
        tensor_fatal("out of memory for a model of %d layers", cfg->n_layer);
    m->cfg = *cfg;
    int V = cfg->vocab_size, C = cfg->n_embd;
    float proj_std = INIT_STD / sqrtf(2.0f * (float)cfg->n_layer);

    NnParams *p = &m->params;
    p->no_storage = no_storage;
    NnInit normal = { NN_INIT_NORMAL, INIT_STD };
    m->wte = nn_params_add(p, "wte", "weight", 2, (int[]){ V, C }, normal);
    m->wpe = nn_params_add(p, "wpe", "weight", 2, (int[]){ cfg->max_seq, C }, normal);
    for (int l = 0; l < cfg->n_layer; l++) {
        char name[TENSOR_NAME_LEN];
        snprintf(name, sizeof name, "blocks.%d", l);
        nn_block_init(&m->blocks[l], p, name, C, cfg->n_head, cfg->fused_qkv, INIT_STD, proj_std);
    }
    nn_layernorm_init(&m->ln_f, p, "ln_f", C);
    m->head = cfg->tied ? m->wte : nn_params_add(p, "head", "weight", 2, (int[]){ V, C }, normal);
    p->no_storage = NULL;
    nn_params_init(p, seed);
    return m;
}

void gpt_free(Gpt *model)
{
    if (!model)
        return;
    nn_params_free(&model->params);
    free(model->blocks);
    free(model);
}

Tensor *const *gpt_params(const Gpt *model, int *n)
{
    *n = model->params.n;
    return model->params.tensors;
}

Tensor *gpt_param(const Gpt *model, const char *name)
{
    return nn_params_find(&model->params, name);
}

size_t gpt_n_params(const Gpt *model) { return nn_params_numel(&model->params); }

/* wte V C, wpe T C, per block two LayerNorms (4C), q/k/v and proj (4C^2 + 4C), the MLP
 * (8C^2 + 5C); ln_f 2C; an untied head V C. */
size_t gpt_config_n_params(const GptConfig *cfg)
{
    size_t V = (size_t)cfg->vocab_size, T = (size_t)cfg->max_seq, L = (size_t)cfg->n_layer;
    size_t C = (size_t)cfg->n_embd;
    return V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C + (cfg->tied ? 0 : V * C);
}

double gpt_product_weights(const GptConfig *cfg)
{
    double L = cfg->n_layer, C = cfg->n_embd, V = cfg->vocab_size;
    return 12.0 * L * C * C + V * C;
}

double gpt_flops_per_token(const GptConfig *cfg, int T)
{
    return 6.0 * gpt_product_weights(cfg) + 12.0 * cfg->n_layer * T * cfg->n_embd;
}

void gpt_zero_grad(Gpt *model) { nn_params_zero_grad(&model->params); }

/* Keeps wpe.out, wpe.ids, wte.out, wte.ids and x0 (nn/gpt_acts.c's embed rows). */
Tensor *gpt_embed(const Gpt *model, Tape *tape, const int *tokens, int B, int T)
{
    if (B < 1 || T < 1 || T > model->cfg.max_seq)
        tensor_fatal("gpt_embed: batch %d x %d tokens (need B >= 1 and 1 <= T <= max_seq %d)", B,
                     T, model->cfg.max_seq);
    /* Position ids for every row (op_embedding keeps its own copy for backward). */
    int *pos = mem_alloc(MEM_TEMP, (size_t)B * T * sizeof *pos);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            pos[b * T + t] = t;
    Tensor *where = op_embedding(tape, model->wpe, pos, B, T);
    mem_free(pos);
    return op_add(tape, op_embedding(tape, model->wte, tokens, B, T), where);
}

Tensor *gpt_block(const Gpt *model, int layer, Tape *tape, Tensor *x)
{
    if (layer < 0 || layer >= model->cfg.n_layer)
        tensor_fatal("gpt_block: layer %d of a model with %d", layer, model->cfg.n_layer);
    return nn_block_forward(&model->blocks[layer], tape, x);
}

/* Keeps ln_f.stats, ln_f.out and the logits; gpt_loss's cross-entropy adds the loss.* rows. */
Tensor *gpt_head(const Gpt *model, Tape *tape, Tensor *x)
{
    return op_matmul(tape, nn_layernorm_forward(&model->ln_f, tape, x), model->head, true);
}

Tensor *gpt_forward(const Gpt *model, Tape *tape, const int *tokens, int B, int T)
{
    Tensor *x = gpt_embed(model, tape, tokens, B, T);
    for (int l = 0; l < model->cfg.n_layer; l++)
        x = gpt_block(model, l, tape, x);
    return gpt_head(model, tape, x);
}

Tensor *gpt_loss(const Gpt *model, Tape *tape, const int *tokens, const int *targets, int B,
                 int T)
{
    return op_cross_entropy(tape, gpt_forward(model, tape, tokens, B, T), targets);
}

void gpt_set_tiled_attention(Gpt *model, bool tiled)
{
    for (int l = 0; l < model->cfg.n_layer; l++)
        model->blocks[l].attn.tiled = tiled;
}

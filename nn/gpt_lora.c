#include "nn/gpt_lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const target_names[] = { "q", "k", "v", "o", "mlp" };
enum { N_TARGETS = 5, MAX_SITES_PER_BLOCK = 6 };

LoraConfig lora_config_default(void)
{
    return (LoraConfig){ .rank = 8, .alpha = 16.0f,
                         .targets = LORA_TARGET_Q | LORA_TARGET_V, .qlora = false };
}

static int target_index(const char *name, size_t len)
{
    for (int t = 0; t < N_TARGETS; t++)
        if (strlen(target_names[t]) == len && strncmp(name, target_names[t], len) == 0)
            return t;
    return -1;
}

bool lora_targets_parse(const char *list, unsigned *targets, char *err, size_t len)
{
    if (strcmp(list, "all") == 0) {
        *targets = LORA_TARGET_ALL;
        return true;
    }
    unsigned bits = 0;
    const char *p = list;
    for (;;) {
        size_t n = strcspn(p, ",");
        int t = target_index(p, n);
        if (t < 0 || bits & (1u << t)) {
            snprintf(err, len, "'%.*s' in the LoRA targets '%s' is %s (choose among q, k, v, o, "
                     "mlp, or all)", (int)n, p, list, t < 0 ? "not a target" : "repeated");
            return false;
        }
        bits |= 1u << t;
        if (p[n] == '\0')
            break;
        p += n + 1;
    }
    *targets = bits;
    return true;
}

const char *lora_targets_str(unsigned targets, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int t = 0; t < N_TARGETS; t++) {
        if (!(targets & (1u << t)))
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? "," : "", target_names[t]);
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
    }
    return buf;
}

bool lora_config_check(const LoraConfig *cfg, const GptConfig *base, char *err, size_t len)
{
    if (!gpt_config_check(base, err, len))
        return false;
    if (cfg->rank < 1 || cfg->rank > base->n_embd) {
        snprintf(err, len, "LoRA rank %d is not in 1..%d (the model width C)", cfg->rank,
                 base->n_embd);
        return false;
    }
    if (!(cfg->alpha > 0.0f) || !isfinite(cfg->alpha)) {
        snprintf(err, len, "LoRA alpha %g must be a positive number", (double)cfg->alpha);
        return false;
    }
    if (cfg->targets == 0 || cfg->targets & ~(unsigned)LORA_TARGET_ALL) {
        snprintf(err, len, "LoRA targets 0x%x: choose among q, k, v, o, mlp", cfg->targets);
        return false;
    }
    unsigned qkv = LORA_TARGET_Q | LORA_TARGET_K | LORA_TARGET_V;
    if (base->fused_qkv && (cfg->targets & qkv)) {
        char names[32];
        snprintf(err, len, "LoRA on %s needs separate q, k, v projections, and this base has "
                 "one fused qkv projection (train the base with separate q/k/v)",
                 lora_targets_str(cfg->targets & qkv, names, sizeof names));
        return false;
    }
    return true;
}

/* The Linears of one block that `targets` selects, in module order; their count. */
static int block_sites(Block *b, unsigned targets, Linear **out)
{
    int n = 0;
    Linear *attn[3] = { &b->attn.q, &b->attn.k, &b->attn.v };
    for (int t = 0; t < 3; t++)
        if (targets & (1u << t))
            out[n++] = attn[t];
    if (targets & LORA_TARGET_O)
        out[n++] = &b->attn.proj;
    if (targets & LORA_TARGET_MLP) {
        out[n++] = &b->mlp.fc;
        out[n++] = &b->mlp.proj;
    }
    return n;
}

/* Every Linear of one block, fused or not: the ones QLoRA quantizes. */
static int block_linears(Block *b, Linear **out)
{
    if (!b->attn.fused)
        return block_sites(b, LORA_TARGET_ALL, out);
    out[0] = &b->attn.qkv;
    return 1 + block_sites(b, LORA_TARGET_O | LORA_TARGET_MLP, out + 1);
}

/* The sites of the whole model into a new array; *n their count. */
static Linear **model_sites(Gpt *m, unsigned targets, bool all_linears, int *n)
{
    Linear **sites = malloc((size_t)m->cfg.n_layer * MAX_SITES_PER_BLOCK * sizeof *sites);
    if (!sites)
        tensor_fatal("out of memory for LoRA sites");
    *n = 0;
    for (int l = 0; l < m->cfg.n_layer; l++)
        *n += all_linears ? block_linears(&m->blocks[l], sites + *n)
                          : block_sites(&m->blocks[l], targets, sites + *n);
    return sites;
}

/* "blocks.0.attn.q" from the weight's name "blocks.0.attn.q.weight". */
static void site_name(const Linear *site, char name[TENSOR_NAME_LEN])
{
    snprintf(name, TENSOR_NAME_LEN, "%s", site->weight->name);
    char *dot = strrchr(name, '.');
    if (dot)
        *dot = '\0';
}

static void set_frozen(Gpt *m, bool frozen)
{
    int n;
    Tensor *const *params = gpt_params(m, &n);
    for (int i = 0; i < n; i++) {
        params[i]->requires_grad = !frozen;
        if (frozen)
            tensor_free_grad(params[i]);
    }
}

static void attach_adapters(GptLora *lora, uint64_t seed)
{
    lora->sites = model_sites(lora->model, lora->cfg.targets, false, &lora->n_adapters);
    lora->adapters = calloc((size_t)lora->n_adapters, sizeof *lora->adapters);
    if (!lora->adapters)
        tensor_fatal("out of memory for %d LoRA adapters", lora->n_adapters);
    for (int i = 0; i < lora->n_adapters; i++) {
        Linear *site = lora->sites[i];
        char name[TENSOR_NAME_LEN];
        site_name(site, name);
        lora_adapter_init(&lora->adapters[i], &lora->params, name, site->weight->shape[0],
                          site->weight->shape[1], lora->cfg.rank, lora->cfg.alpha);
        site->lora = &lora->adapters[i];
    }
    nn_params_init(&lora->params, seed);
}

/* A weight's storage, fp32 or packed, once its NF4 copy exists: the Tensor keeps its name and
 * shape, becomes fp32 again with data NULL, and comes back as fp32 from dequantize_base. */
static void drop_weight_storage(Tensor *w)
{
    if (w->dtype != DTYPE_F32) {
        tensor_release(w);
        mem_free(w->packed);
        w->packed = NULL;
        w->dtype = DTYPE_F32;
        w->scale = 1.0f;
    }
    mem_free(w->data);
    w->data = NULL;
}

/* The weights are freed only after their NF4 copy exists, so the param category shows the
 * saving as soon as this returns. A packed weight (a base under a precision policy) is
 * quantized from its packed values, decoded: what QLoRA does with a bf16 checkpoint. */
void gpt_lora_quantize_base(GptLora *lora) { gpt_lora_quantize_base_from(lora, NULL, NULL); }

/* Every 2-D parameter of a block is a Linear weight (LayerNorms and biases are vectors). */
bool gpt_lora_quantized_param(const char *name, int ndim)
{
    return ndim == 2 && strncmp(name, "blocks.", 7) == 0;
}

void gpt_lora_quantize_base_from(GptLora *lora, LoraFillFn fill, void *ctx)
{
    if (lora->n_quant > 0 || lora->merged)
        tensor_fatal("gpt_lora_quantize_base: the base is %s", lora->merged ? "merged"
                                                                            : "quantized already");
    lora->cfg.qlora = true;
    lora->quant_sites = model_sites(lora->model, 0, true, &lora->n_quant);
    lora->quant = calloc((size_t)lora->n_quant, sizeof *lora->quant);
    if (!lora->quant)
        tensor_fatal("out of memory for %d quantized weights", lora->n_quant);
    for (int i = 0; i < lora->n_quant; i++) {
        Linear *site = lora->quant_sites[i];
        if (!site->weight->data && site->weight->dtype == DTYPE_F32) {
            if (!fill)
                tensor_fatal("gpt_lora_quantize_base: %s has no storage and nothing fills it",
                             site->weight->name);
            site->weight->data = mem_alloc(MEM_PARAM, site->weight->size * sizeof(float));
            fill(site->weight, ctx);
        }
        tensor_unpack(site->weight);
        lora_quant_init(&lora->quant[i], site->weight, FMT_BF16);
        drop_weight_storage(site->weight);
        site->quant = &lora->quant[i];
    }
}

static void dequantize_base(GptLora *lora)
{
    for (int i = 0; i < lora->n_quant; i++) {
        Tensor *w = lora->quant_sites[i]->weight;
        w->data = mem_alloc(MEM_PARAM, w->size * sizeof *w->data);
        lora_quant_dequantize(&lora->quant[i], w->data);
        lora->quant_sites[i]->quant = NULL;
        lora_quant_free(&lora->quant[i]);
    }
}

GptLora *gpt_lora_new(Gpt *model, const LoraConfig *cfg, uint64_t seed)
{
    char err[256];
    if (!lora_config_check(cfg, &model->cfg, err, sizeof err))
        tensor_fatal("gpt_lora_new: %s", err);
    GptLora *lora = calloc(1, sizeof *lora);
    if (!lora)
        tensor_fatal("out of memory for LoRA");
    lora->cfg = *cfg;
    lora->model = model;
    set_frozen(model, true);
    attach_adapters(lora, seed);
    if (cfg->qlora)
        gpt_lora_quantize_base(lora);
    return lora;
}

void gpt_lora_discard(GptLora *lora)
{
    if (!lora)
        return;
    for (int i = 0; i < lora->n_quant; i++) {
        lora->quant_sites[i]->quant = NULL;
        lora_quant_free(&lora->quant[i]);
    }
    lora->n_quant = 0;          /* nothing left for gpt_lora_free to dequantize */
    gpt_lora_free(lora);
}

void gpt_lora_free(GptLora *lora)
{
    if (!lora)
        return;
    dequantize_base(lora);
    for (int i = 0; i < lora->n_adapters; i++)
        lora->sites[i]->lora = NULL;
    set_frozen(lora->model, false);
    nn_params_free(&lora->params);
    free(lora->adapters);
    free(lora->sites);
    free(lora->quant);
    free(lora->quant_sites);
    free(lora);
}

Tensor *const *gpt_lora_params(const GptLora *lora, int *n)
{
    *n = lora->params.n;
    return lora->params.tensors;
}

size_t gpt_lora_n_trainable(const GptLora *lora) { return nn_params_numel(&lora->params); }

void gpt_lora_zero_grad(GptLora *lora) { nn_params_zero_grad(&lora->params); }

static void merge_all(GptLora *lora, bool merge)
{
    if (lora->merged == merge)
        tensor_fatal("gpt_lora_%s: the adapters are %s merged", merge ? "merge" : "unmerge",
                     merge ? "already" : "not");
    if (lora->n_quant > 0)
        tensor_fatal("gpt_lora_%s: the base is quantized (QLoRA); merging would requantize it",
                     merge ? "merge" : "unmerge");
    for (int i = 0; i < lora->n_adapters; i++) {
        const LoraAdapter *ad = &lora->adapters[i];
        if (lora->sites[i]->weight->dtype != DTYPE_F32 || ad->a->dtype != DTYPE_F32 ||
            ad->b->dtype != DTYPE_F32)
            tensor_fatal("gpt_lora_%s: %s or its adapter is stored packed (a precision "
                         "policy); merging needs them fp32", merge ? "merge" : "unmerge",
                         lora->sites[i]->weight->name);
    }
    for (int i = 0; i < lora->n_adapters; i++) {
        lora_adapter_merge(&lora->adapters[i], lora->sites[i]->weight, merge ? 1.0f : -1.0f);
        lora->sites[i]->lora = merge ? NULL : &lora->adapters[i];
    }
    lora->merged = merge;
}

void gpt_lora_merge(GptLora *lora) { merge_all(lora, true); }

void gpt_lora_unmerge(GptLora *lora) { merge_all(lora, false); }

LoraBaseBytes gpt_lora_base_bytes(const GptLora *lora)
{
    LoraBaseBytes b = { 0 };
    int n;
    Tensor *const *params = gpt_params(lora->model, &n);
    for (int i = 0; i < n; i++) {
        const Tensor *t = params[i];
        if (t->dtype != DTYPE_F32) {
            b.packed_values += t->size;
            b.packed_bytes += mem_size(t->packed);
        } else if (t->data) {
            b.fp32_values += t->size;
            b.fp32_bytes += mem_size(t->data);
        }
    }
    for (int i = 0; i < lora->n_quant; i++) {
        b.quant_values += lora->quant_sites[i]->weight->size;
        b.quant_bytes += lora_quant_bytes(&lora->quant[i]);
    }
    return b;
}

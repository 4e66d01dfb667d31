/* The GPT's training forward and backward over its units (nn/gpt_pass.h). */
#include "nn/gpt_pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/mem.h"

/* A unit of the pass in backward order, for vanilla's walk: the head, blocks hi-1 .. lo, the
 * embedding. first is the unit's lowest node on the tape; its backward is done once the walk
 * has passed that node. */
typedef struct {
    int unit;                   /* a block, or GPT_UNIT_ENDS */
    int first;
    bool head;                  /* the head's part of the ends (else the embedding's) */
} Span;

struct GptPass {
    const Gpt    *model;
    GptPassConfig cfg;
    Tape         *tape;         /* the caller's */
    /* Vanilla: the spans of the last forward, and how far the walk has got. */
    Span         *spans;
    int           n_spans, next;
    /* Vanilla with on_param_final: each parameter read and the lowest node reading it, in
     * ascending node order, and how far the walk has got. */
    const Tensor **reads;
    int          *read_at;
    int           n_reads, cap_reads, next_read;
    /* Other strategies: the blocks as a chain, the ends on tapes of their own. */
    CkptRun      *run;
    Tape         *embed_tape, *head_tape;
    Tensor       *x, *y, *loss; /* the chain's input and output, the loss */
    TapeFlops     flops;        /* this micro-batch's, all ops */
    CkptStats     stats;
};

static void event(const GptPass *p, int unit, GptUnitEvent e)
{
    if (p->cfg.hooks.on_unit)
        p->cfg.hooks.on_unit(unit, e, p->cfg.hooks.ctx);
}

static void tick(const GptPass *p)
{
    if (p->cfg.hooks.tick)
        p->cfg.hooks.tick(p->cfg.hooks.ctx);
}

/* The ends' GATHER before their first use, RELEASE after their last read, GRADS_FINAL after
 * their last gradient term (gpt_pass.h). */
static void ends_gather(const GptPass *p) { event(p, GPT_UNIT_ENDS, GPT_UNIT_GATHER); }
static void ends_read_last(const GptPass *p) { event(p, GPT_UNIT_ENDS, GPT_UNIT_RELEASE); }
static void ends_final(const GptPass *p) { event(p, GPT_UNIT_ENDS, GPT_UNIT_GRADS_FINAL); }

static Tensor *block(const GptPass *p, Tape *tape, Tensor *x, int layer)
{
    event(p, layer, GPT_UNIT_GATHER);
    Tensor *y = gpt_block(p->model, layer, tape, x);
    event(p, layer, GPT_UNIT_RELEASE);
    return y;
}

/* ---- the chain (every strategy but vanilla) ------------------------------------------------ */

static Tensor *chain_segment(Tape *tape, Tensor *x, int index, void *ctx)
{
    GptPass *p = ctx;
    return block(p, tape, x, p->cfg.lo + index);
}

/* A block's backward reads its weights, and is the last to add to its gradients. */
static void chain_reverse(int index, bool done, void *ctx)
{
    GptPass *p = ctx;
    int layer = p->cfg.lo + index;
    if (!done) {
        event(p, layer, GPT_UNIT_GATHER);
        return;
    }
    event(p, layer, GPT_UNIT_RELEASE);
    event(p, layer, GPT_UNIT_GRADS_FINAL);
}

int gpt_unit_of(const Tensor *param)
{
    int layer;
    if (sscanf(param->name, "blocks.%d.", &layer) == 1)
        return layer;
    return GPT_UNIT_ENDS;
}

int gpt_final_unit_of(const Tensor *param)
{
    if (strncmp(param->name, "ln_f.", 5) == 0 || strncmp(param->name, "head.", 5) == 0)
        return GPT_UNIT_HEAD;
    return gpt_unit_of(param);
}

GptPassConfig gpt_pass_whole(const Gpt *model, CkptStrategy s)
{
    return (GptPassConfig){ .lo = 0, .hi = model->cfg.n_layer, .embed = true, .head = true,
                            .strategy = s };
}

GptPass *gpt_pass_new(const Gpt *model, const GptPassConfig *cfg, Tape *tape)
{
    if (cfg->lo < 0 || cfg->hi <= cfg->lo || cfg->hi > model->cfg.n_layer)
        tensor_fatal("gpt_pass_new: blocks [%d, %d) of %d", cfg->lo, cfg->hi,
                     model->cfg.n_layer);
    GptPass *p = calloc(1, sizeof *p);
    int n = cfg->hi - cfg->lo + 2;
    if (!p || !(p->spans = calloc((size_t)n, sizeof *p->spans)))
        tensor_fatal("out of memory for a GPT pass");
    p->model = model;
    p->cfg = *cfg;
    p->tape = tape;
    if (cfg->strategy.kind == CKPT_VANILLA)
        return p;
    CkptChain chain = { .fn = chain_segment, .ctx = p, .n = cfg->hi - cfg->lo,
                        .policy = tape->policy, .on_reverse = chain_reverse,
                        .on_reverse_ctx = p };
    p->run = ckpt_run_new(&chain, cfg->strategy);
    if (cfg->embed)
        p->embed_tape = tape_new_under(tape->policy);
    if (cfg->head)
        p->head_tape = tape_new_under(tape->policy);
    return p;
}

void gpt_pass_free(GptPass *p)
{
    if (!p)
        return;
    ckpt_run_free(p->run);
    if (p->embed_tape)
        tape_free(p->embed_tape);
    if (p->head_tape)
        tape_free(p->head_tape);
    free(p->reads);
    free(p->read_at);
    free(p->spans);
    free(p);
}

CkptStats gpt_pass_stats(const GptPass *p) { return p->stats; }

/* ---- vanilla: one tape, the events at unit boundaries --------------------------------------- */

static void span_add(GptPass *p, int unit, bool head)
{
    /* Filled in forward order; the walk reads them from the end. */
    p->spans[p->n_spans++] = (Span){ .unit = unit, .first = p->tape->n_nodes, .head = head };
}

static Tensor *vanilla_forward(GptPass *p, const int *tokens, const int *targets, Tensor *x,
                               int B, int T)
{
    Tape *tape = p->tape;
    p->n_spans = 0;
    if (p->cfg.embed) {
        ends_gather(p);
        span_add(p, GPT_UNIT_ENDS, false);
        x = gpt_embed(p->model, tape, tokens, B, T);
        if (!p->cfg.head)
            ends_read_last(p);
    }
    for (int l = p->cfg.lo; l < p->cfg.hi; l++) {
        span_add(p, l, false);
        x = block(p, tape, x, l);
        p->stats.forwards++;
    }
    if (!p->cfg.head)
        return x;
    if (!p->cfg.embed)
        ends_gather(p);
    span_add(p, GPT_UNIT_ENDS, true);
    return op_cross_entropy(tape, gpt_head(p->model, tape, x), targets);
}

/* Span s's backward has begun: a block's weights are read again. */
static void span_begins(const GptPass *p, const Span *s)
{
    if (s->unit != GPT_UNIT_ENDS)
        event(p, s->unit, GPT_UNIT_GATHER);
}

static void span_done(const GptPass *p, const Span *s)
{
    if (s->unit != GPT_UNIT_ENDS) {
        event(p, s->unit, GPT_UNIT_RELEASE);
        event(p, s->unit, GPT_UNIT_GRADS_FINAL);
        return;
    }
    if (s->head) {
        ends_read_last(p);
        event(p, GPT_UNIT_HEAD, GPT_UNIT_GRADS_FINAL);
    }
    if (!s->head || !p->cfg.embed)
        ends_final(p);
}

static bool read_already(const GptPass *p, const Tensor *t)
{
    for (int i = 0; i < p->n_reads; i++)
        if (p->reads[i] == t)
            return true;
    return false;
}

/* For on_param_final: the first node of the pass that reads each trained parameter, which is
 * the last to add to its gradient in the walk. */
static void find_last_reads(GptPass *p)
{
    Tape *tape = p->tape;
    p->n_reads = 0;
    for (int k = p->spans[0].first; k < tape->n_nodes; k++) {
        const Node *nd = &tape->nodes[k];
        for (int j = 0; j < nd->n_in; j++) {
            const Tensor *t = nd->in[j];
            if (!t || !t->is_param || !t->requires_grad || read_already(p, t))
                continue;
            if (p->n_reads == p->cap_reads) {
                p->cap_reads = p->cap_reads ? 2 * p->cap_reads : 64;
                p->reads = realloc(p->reads, (size_t)p->cap_reads * sizeof *p->reads);
                p->read_at = realloc(p->read_at, (size_t)p->cap_reads * sizeof *p->read_at);
                if (!p->reads || !p->read_at)
                    tensor_fatal("out of memory for a GPT pass");
            }
            p->reads[p->n_reads] = t;
            p->read_at[p->n_reads++] = k;
        }
    }
    p->next_read = p->n_reads - 1;
}

/* The walk has done node k and every node above it: each span whose first node that is has no
 * more backward to run, and the span below it starts. Empty spans (a frozen unit records no
 * node) end as soon as the one above them does. */
static void vanilla_after_node(Tape *tape, int k, void *ctx)
{
    (void)tape;
    GptPass *p = ctx;
    tick(p);
    for (; p->next_read >= 0 && k <= p->read_at[p->next_read]; p->next_read--)
        p->cfg.hooks.on_param_final(p->reads[p->next_read], p->cfg.hooks.ctx);
    while (p->next >= 0 && k <= p->spans[p->next].first) {
        span_done(p, &p->spans[p->next]);
        if (--p->next >= 0)
            span_begins(p, &p->spans[p->next]);
    }
}

static void vanilla_backward(GptPass *p, Tensor *out, const float *seed)
{
    Tape *tape = p->tape;
    p->next_read = -1;
    if (p->cfg.hooks.on_param_final)
        find_last_reads(p);
    p->next = p->n_spans - 1;
    span_begins(p, &p->spans[p->next]);
    tape->after_node = vanilla_after_node;
    tape->after_node_ctx = p;
    tape_backward_seeded(tape, out, seed);
    tape->after_node = NULL;
    tape->after_node_ctx = NULL;
    vanilla_after_node(tape, -1, p);    /* spans no node of which ran (a frozen embedding) */
}

/* ---- the pass ------------------------------------------------------------------------------ */

Tensor *gpt_pass_forward(GptPass *p, const int *tokens, const int *targets, Tensor *x, int B,
                         int T)
{
    Tape *tape = p->tape;
    TapeFlops *outer = tape->flops;
    p->flops = (TapeFlops){ 0 };
    p->stats = (CkptStats){ 0 };
    tape->flops = &p->flops;    /* each node keeps it for its backward's count */
    Tensor *out;
    if (p->cfg.strategy.kind == CKPT_VANILLA) {
        out = vanilla_forward(p, tokens, targets, x, B, T);
    } else {
        if (p->cfg.embed) {
            p->embed_tape->flops = &p->flops;
            ends_gather(p);
            x = gpt_embed(p->model, p->embed_tape, tokens, B, T);
            if (!p->cfg.head)
                ends_read_last(p);
        }
        p->x = x;
        p->y = ckpt_forward(p->run, x);
        out = p->y;
        if (p->cfg.head) {
            p->head_tape->flops = &p->flops;
            if (!p->cfg.embed)
                ends_gather(p);
            out = op_cross_entropy(p->head_tape, gpt_head(p->model, p->head_tape, p->y),
                                   targets);
        }
    }
    tape->flops = outer;
    p->loss = p->cfg.head ? out : NULL;
    if (!p->cfg.head)
        p->y = out;
    return out;
}

static void chain_backward(GptPass *p, const float *seed)
{
    if (p->cfg.head) {
        tape_backward_seeded(p->head_tape, p->loss, seed);
        tape_reset(p->head_tape);       /* dL/dy stays on y, which the run owns */
        ends_read_last(p);
        event(p, GPT_UNIT_HEAD, GPT_UNIT_GRADS_FINAL);
        if (!p->cfg.embed)
            ends_final(p);
        ckpt_backward(p->run);
    } else {
        ckpt_backward_seeded(p->run, seed);
    }
    CkptStats run = ckpt_stats(p->run);
    tape_flops_add(&p->flops, &run.flops);
    p->stats = run;
    if (!p->cfg.embed)
        return;
    /* dL/dx is on the embedding's output: hand it to the embedding tape as its seed (added to
     * a zero buffer, so exactly the same value). A frozen embedding (LoRA) gets none: no
     * gradient reached x, and there is nothing to run. */
    Tensor *x = p->x;
    float *dx = x->grad;
    x->grad = NULL;
    if (dx)
        tape_backward_seeded(p->embed_tape, x, dx);
    mem_free(dx);
    tape_reset(p->embed_tape);
    ends_final(p);
}

void gpt_pass_backward(GptPass *p, const float *seed)
{
    if (p->cfg.strategy.kind == CKPT_VANILLA) {
        vanilla_backward(p, p->cfg.head ? p->loss : p->y, seed);
        p->stats.recorded = p->stats.forwards;
        p->stats.max_recorded = (int)p->stats.forwards;
        p->stats.max_checkpoints = 1;
    } else {
        chain_backward(p, seed);
    }
    p->stats.flops = p->flops;
    if (p->tape->flops)
        tape_flops_add(p->tape->flops, &p->flops);
    p->x = p->y = p->loss = NULL;
}

float gpt_forward_backward(const Gpt *model, Tape *tape, CkptStrategy s, const int *tokens,
                           const int *targets, int B, int T, float seed,
                           const GptUnitHooks *hooks, CkptStats *stats)
{
    GptPassConfig cfg = gpt_pass_whole(model, s);
    if (hooks)
        cfg.hooks = *hooks;
    GptPass *p = gpt_pass_new(model, &cfg, tape);
    float loss = gpt_pass_forward(p, tokens, targets, NULL, B, T)->data[0];
    gpt_pass_backward(p, &seed);
    if (stats)
        *stats = gpt_pass_stats(p);
    gpt_pass_free(p);
    return loss;
}

#include "optim/optim.h"

#include "autograd/policy.h"
#include "optim/offload.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool optim_rule_decays(OptimDecayRule rule, const Tensor *p)
{
    switch (rule) {
    case OPTIM_DECAY_MATRICES: return p->ndim >= 2;
    case OPTIM_DECAY_ALL: return true;
    case OPTIM_DECAY_NONE: return false;
    }
    return false;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(Tensor *const *)a)->name, (*(Tensor *const *)b)->name);
}

/* A snapshot keys every parameter and its state by name, so two named alike would overwrite one
 * another. Sorted by name, a repeat sits beside its twin: n log n, where comparing every pair
 * took minutes for the tests' optimizers of 10^5 one-element tensors. Unnamed ones may repeat. */
static void check_unique_names(Tensor *const *params, int n)
{
    Tensor **sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted)
        tensor_fatal("out of memory for an optimizer of %d parameters", n);
    memcpy(sorted, params, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, by_name);
    for (int i = 1; i < n; i++)
        if (sorted[i]->name[0] && strcmp(sorted[i]->name, sorted[i - 1]->name) == 0)
            tensor_fatal("optimizer: two parameters are named '%s'", sorted[i]->name);
    free(sorted);
}

void optim_init(Optim *o, const char *kind, Tensor *const *params, int n, OptimDecayRule rule,
                int n_slots, const char *const *slot_names, OptimUpdateFn update)
{
    if (n < 1 || n_slots < 0 || n_slots > OPTIM_MAX_SLOTS)
        tensor_fatal("optimizer: %d parameters, %d state slots", n, n_slots);
    check_unique_names(params, n);
    o->kind = kind;
    o->n = n;
    o->n_slots = n_slots;
    o->update = update;
    o->params = malloc((size_t)n * sizeof *o->params);
    o->decay = malloc((size_t)n * sizeof *o->decay);
    o->state = calloc((size_t)(n * n_slots) + 1, sizeof *o->state);
    if (!o->params || !o->decay || !o->state)
        tensor_fatal("out of memory for an optimizer of %d parameters", n);
    for (int s = 0; s < n_slots; s++)
        o->slot_names[s] = slot_names[s];
    for (int i = 0; i < n; i++) {
        o->params[i] = params[i];
        o->decay[i] = optim_rule_decays(rule, params[i]);
        for (int s = 0; s < n_slots; s++) {
            Tensor *st = tensor_new(MEM_OPTIM, params[i]->ndim, params[i]->shape);
            tensor_fill(st, 0.0f);
            o->state[i * n_slots + s] = st;
        }
    }
}

void optim_free(Optim *o)
{
    if (!o)
        return;
    optim_offload_free(o);
    for (int i = 0; i < optim_state_count(o); i++)
        tensor_free(o->state[i]);
    for (int i = 0; i < o->n_bufs; i++)
        mem_free(o->bufs[i].data);
    free(o->bufs);
    free(o->masters);
    free(o->state);
    free(o->params);
    free(o->decay);
    free(o);
}

void optim_step(Optim *o, double lr)
{
    o->step++;
    if (o->offload) {
        optim_offload_step(o, lr);
        return;
    }
    optim_expose_masters(o);
    o->update(o, lr);
    optim_pack_masters(o);
}

/* ---- fp32 master weights ----------------------------------------------------------------------
 * A packed parameter's fp32 values live in an optimizer buffer "master.<name>" (so snapshots
 * and optim_state_bytes see them like any state). An update rule reads and writes p->data as
 * always: optim_step points it at the master for the length of the update, then encodes the
 * master into the parameter's packed storage: the working copy the next forward decodes. */
void optim_add_masters(Optim *o)
{
    if (o->masters)
        return;
    o->masters = calloc((size_t)o->n, sizeof *o->masters);
    if (!o->masters)
        tensor_fatal("out of memory for master weights");
    for (int i = 0; i < o->n; i++)
        o->masters[i] = optim_add_buffer(o, i, "master", OPTIM_BUF_F32, o->params[i]->size);
}

void optim_use_master_weights(Optim *o, Dtype param_dtype)
{
    if (param_dtype == DTYPE_F32 || o->masters)
        return;
    for (int i = 0; i < o->n; i++)
        if (o->params[i]->dtype != DTYPE_F32 || !o->params[i]->owns_data)
            tensor_fatal("optim_use_master_weights: %s is not an fp32 tensor of its own",
                         o->params[i]->name);
    optim_add_masters(o);
    for (int i = 0; i < o->n; i++) {
        Tensor *p = o->params[i];
        memcpy(o->masters[i], p->data, p->size * sizeof(float));
        Format f = tensor_dtype_format(param_dtype);
        tensor_pack(p, param_dtype, policy_current_scale(f, p->data, p->size));
        /* Its gradient is stored in its dtype too (the tape rounds it to that already); a
         * scalar's stays fp32, as the tape leaves it. */
        if (p->size >= 2 && !tensor_has_grad(p))
            tensor_set_grad_dtype(p, param_dtype);
    }
}

void optim_keep_fp32_grads(Optim *o)
{
    for (int i = 0; i < o->n; i++)
        if (!tensor_has_grad(o->params[i]))
            tensor_set_grad_dtype(o->params[i], DTYPE_F32);
}

void optim_use_policy(Optim *o, const PrecisionPolicy *p)
{
    optim_use_master_weights(o, p->param);
    Dtype d = policy_param_grad_dtype(p);
    for (int i = 0; i < o->n; i++) {
        Tensor *t = o->params[i];
        if (t->size >= 2 && t->grad_dtype != d)
            tensor_set_grad_dtype(t, d);    /* fatal if it has a gradient already */
    }
}

const float *optim_master(const Optim *o, int i) { return o->masters ? o->masters[i] : NULL; }

void optim_expose_masters(Optim *o)
{
    for (int i = 0; o->masters && i < o->n; i++)
        tensor_borrow_data(o->params[i], o->masters[i]);   /* never freed through the tensor */
}

/* An fp8 parameter gets the current scale of its new values (tensor_store keeps the old one,
 * with which weights that have grown since would saturate); other dtypes have scale 1. */
void optim_pack_masters(Optim *o)
{
    for (int i = 0; o->masters && i < o->n; i++) {
        Tensor *p = o->params[i];
        p->scale = policy_current_scale(tensor_dtype_format(p->dtype), o->masters[i], p->size);
        tensor_store(p, o->masters[i]);
        tensor_borrow_data(p, NULL);
    }
}

void optim_zero_grad(Optim *o)
{
    for (int i = 0; i < o->n; i++)
        tensor_zero_grad(o->params[i]);
}

int optim_state_count(const Optim *o) { return o->n * o->n_slots; }

Tensor *optim_state_tensor(const Optim *o, int i)
{
    if (i < 0 || i >= optim_state_count(o))
        tensor_fatal("optimizer state %d of %d", i, optim_state_count(o));
    return o->state[i];
}

/* "<kind>.<slot>.<parameter name>", or "<kind>.<slot>.#<index>" for an unnamed parameter. */
static const char *state_name(const Optim *o, int param, const char *slot, char *buf, size_t len)
{
    const char *pname = o->params[param]->name;
    if (pname[0])
        snprintf(buf, len, "%s.%s.%s", o->kind, slot, pname);
    else
        snprintf(buf, len, "%s.%s.#%d", o->kind, slot, param);
    return buf;
}

const char *optim_state_name(const Optim *o, int i, char *buf, size_t len)
{
    optim_state_tensor(o, i);   /* range check */
    return state_name(o, i / o->n_slots, o->slot_names[i % o->n_slots], buf, len);
}

Tensor *optim_find_state(const Optim *o, const char *name)
{
    char buf[OPTIM_NAME_LEN];
    for (int i = 0; i < optim_state_count(o); i++)
        if (strcmp(optim_state_name(o, i, buf, sizeof buf), name) == 0)
            return o->state[i];
    return NULL;
}

size_t optim_state_bytes(const Optim *o)
{
    size_t bytes = 0;
    for (int i = 0; i < optim_state_count(o); i++)
        bytes += mem_size(o->state[i]->data);
    for (int i = 0; i < o->n_bufs; i++)
        bytes += optim_buffer_bytes(&o->bufs[i]);
    return bytes;
}

/* Buffers ------------------------------------------------------------------------------------ */

size_t optim_buffer_bytes(const OptimBuffer *b)
{
    return b->count * (b->type == OPTIM_BUF_U8 ? sizeof(uint8_t) : sizeof(float));
}

void *optim_add_buffer(Optim *o, int param, const char *slot, OptimBufType type, size_t count)
{
    if (param < 0 || param >= o->n || count == 0)
        tensor_fatal("optimizer buffer '%s' for parameter %d of %d, %zu elements", slot, param,
                     o->n, count);
    if (o->n_bufs == o->cap_bufs) {
        int cap = o->cap_bufs ? 2 * o->cap_bufs : 16;
        OptimBuffer *grown = realloc(o->bufs, (size_t)cap * sizeof *grown);
        if (!grown)
            tensor_fatal("out of memory for %d optimizer buffers", cap);
        o->bufs = grown;
        o->cap_bufs = cap;
    }
    OptimBuffer *b = &o->bufs[o->n_bufs++];
    state_name(o, param, slot, b->name, sizeof b->name);
    b->type = type;
    b->count = count;
    b->data = mem_calloc(MEM_OPTIM, optim_buffer_bytes(b));
    return b->data;
}

int optim_buffer_count(const Optim *o) { return o->n_bufs; }

OptimBuffer *optim_buffer(const Optim *o, int i)
{
    if (i < 0 || i >= o->n_bufs)
        tensor_fatal("optimizer buffer %d of %d", i, o->n_bufs);
    return &o->bufs[i];
}

OptimBuffer *optim_find_buffer(const Optim *o, const char *name)
{
    for (int i = 0; i < o->n_bufs; i++)
        if (strcmp(o->bufs[i].name, name) == 0)
            return &o->bufs[i];
    return NULL;
}

const char *optim_decay_rule_name(int i)
{
    static const char *const names[] = { "matrices", "all", "none" };
    return i >= 0 && i <= OPTIM_DECAY_NONE ? names[i] : NULL;
}

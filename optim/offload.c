/* Optimizer offload (optim/offload.h): the update on the host, the bytes that cross counted. */
#include "optim/offload.h"

#include <stdlib.h>

#include "autograd/policy.h"

struct OptimOffload {
    void  **grad;           /* per parameter: the host's gradient buffer, in its stored format */
    void  **packed;         /* per packed parameter: its encoded values on the host, else NULL */
    float **values;         /* per fp32 parameter: its host copy (under a packed format the
                             * master is the host's values), else NULL */
    bool    stale;          /* the fp32 copies are to be taken from the device before an update */
    OptimOffloadTraffic traffic;
};

/* Bytes of p's gradient as stored: fp32, or its packed format (autograd/tensor.h). */
static size_t grad_bytes(const Tensor *p)
{
    return fmt_packed_bytes(tensor_dtype_format(p->grad_dtype), p->size);
}

static void *host_block(MemCategory cat, size_t bytes)
{
    unsigned old = mem_host_categories(1u << cat);
    void *b = mem_alloc(cat, bytes);
    mem_host_categories(old);
    return b;
}

/* A copy on the host of a block of the device (the set-up's traffic, counted in sync); the
 * caller frees the block. A block on the host already is its own copy. */
static void *host_copy(OptimOffload *h, void *block)
{
    if (!block || mem_is_host(block))
        return block;
    size_t bytes = mem_size(block);
    void *moved = host_block(mem_category(block), bytes);
    mem_transfer(moved, block, bytes);
    h->traffic.sync += bytes;
    return moved;
}

void optim_offload(Optim *o)
{
    if (o->offload)
        return;
    OptimOffload *h = calloc(1, sizeof *h);
    if (h) {
        h->grad = calloc((size_t)o->n, sizeof *h->grad);
        h->packed = calloc((size_t)o->n, sizeof *h->packed);
        h->values = calloc((size_t)o->n, sizeof *h->values);
    }
    if (!h || !h->grad || !h->packed || !h->values)
        tensor_fatal("out of memory for offloading %d parameters", o->n);
    /* State made on the device moves (a resumed run's); made on the host, it stays. A
     * master is a buffer, its pointer follows: optim_add_masters adds them in parameter
     * order, so they come in that order among the buffers. */
    for (int i = 0; i < optim_state_count(o); i++) {
        void *old = o->state[i]->data;
        o->state[i]->data = host_copy(h, old);
        if (o->state[i]->data != old)
            mem_free(old);
    }
    int next_master = 0;
    for (int b = 0; b < o->n_bufs; b++) {
        void *old = o->bufs[b].data;
        o->bufs[b].data = host_copy(h, old);
        if (o->masters && next_master < o->n && o->masters[next_master] == old)
            o->masters[next_master++] = o->bufs[b].data;
        if (o->bufs[b].data != old)
            mem_free(old);
    }
    if (o->masters && next_master != o->n)
        tensor_fatal("optim_offload: %d of %d masters found among the buffers", next_master,
                     o->n);
    for (int i = 0; i < o->n; i++) {
        Tensor *p = o->params[i];
        h->grad[i] = host_block(MEM_GRAD, grad_bytes(p));
        if (p->dtype != DTYPE_F32) {
            if (!optim_master(o, i))
                tensor_fatal("optim_offload: %s is packed without a master", p->name);
            h->packed[i] = host_block(MEM_PARAM, tensor_bytes(p));
        } else {
            h->values[i] = host_block(MEM_OPTIM, p->size * sizeof(float));
        }
    }
    h->stale = true;
    o->offload = h;
}

bool optim_is_offloaded(const Optim *o) { return o->offload != NULL; }

OptimOffloadTraffic optim_offload_traffic(const Optim *o)
{
    return o->offload ? o->offload->traffic : (OptimOffloadTraffic){ 0 };
}

void optim_offload_resync(Optim *o)
{
    if (o->offload)
        o->offload->stale = true;
}

void optim_offload_free(Optim *o)
{
    OptimOffload *h = o->offload;
    if (!h)
        return;
    for (int i = 0; i < o->n; i++) {
        mem_free(h->grad[i]);
        mem_free(h->packed[i]);
        mem_free(h->values[i]);
    }
    free(h->grad);
    free(h->packed);
    free(h->values);
    free(h);
    o->offload = NULL;
}

/* The fp32 parameters' values copied to the host, where the updates keep them from then on. */
static void sync(Optim *o)
{
    OptimOffload *h = o->offload;
    for (int i = 0; i < o->n; i++)
        if (h->values[i]) {
            size_t bytes = o->params[i]->size * sizeof(float);
            mem_transfer(h->values[i], o->params[i]->data, bytes);
            h->traffic.sync += bytes;
        }
    h->stale = false;
}

/* Down: each gradient's stored bytes into the host's buffer, and the parameter pointed at that
 * copy for the update (the device's pointer returned in dev[i]). A packed gradient at rest
 * holds no fp32 working copy (the tape packs after every node). */
static size_t down(Optim *o, void **dev)
{
    OptimOffload *h = o->offload;
    size_t moved = 0;
    for (int i = 0; i < o->n; i++) {
        Tensor *p = o->params[i];
        dev[i] = NULL;
        if (!tensor_has_grad(p))
            continue;
        size_t bytes = grad_bytes(p);
        /* Gradients kept fp32 after the set-up (optim_keep_fp32_grads, for DDP's buckets). */
        if (mem_size(h->grad[i]) != bytes) {
            mem_free(h->grad[i]);
            h->grad[i] = host_block(MEM_GRAD, bytes);
        }
        if (p->grad_dtype == DTYPE_F32) {
            dev[i] = p->grad;
            mem_transfer(h->grad[i], p->grad, bytes);
            p->grad = h->grad[i];
        } else {
            if (p->grad)
                tensor_fatal("optim_offload: %s's packed gradient has a working copy at the "
                             "update", p->name);
            dev[i] = p->grad_packed;
            mem_transfer(h->grad[i], p->grad_packed, bytes);
            p->grad_packed = h->grad[i];
        }
        moved += bytes;
    }
    return moved;
}

/* Up: the new values in the parameter's format, encoded on the host, into the parameter. Only
 * the parameters that had a gradient changed (the rules skip the others). */
static size_t up(Optim *o, void *const *dev)
{
    OptimOffload *h = o->offload;
    size_t moved = 0;
    for (int i = 0; i < o->n; i++) {
        Tensor *p = o->params[i];
        if (!dev[i])
            continue;
        size_t bytes = tensor_bytes(p);
        if (p->dtype == DTYPE_F32) {
            mem_transfer(p->data, h->values[i], bytes);
        } else {
            /* optim_pack_masters' encoding, into the host's buffer. */
            const float *m = optim_master(o, i);
            p->scale = policy_current_scale(tensor_dtype_format(p->dtype), m, p->size);
            void *device = p->packed;
            p->packed = h->packed[i];
            tensor_store(p, m);
            p->packed = device;
            mem_transfer(p->packed, h->packed[i], bytes);
        }
        moved += bytes;
    }
    return moved;
}

/* The update on the host: every allocation of the rule (a decoded gradient, Adafactor's
 * statistics) in the host pool; the parameters' values are the host's (the masters, or the
 * fp32 copies) for its length. */
static void update(Optim *o, double lr)
{
    OptimOffload *h = o->offload;
    float **dev = malloc((size_t)o->n * sizeof *dev);
    if (!dev)
        tensor_fatal("out of memory for offloading %d parameters", o->n);
    for (int i = 0; i < o->n; i++) {
        Tensor *p = o->params[i];
        if (p->dtype == DTYPE_F32) {
            dev[i] = p->data;
            p->data = h->values[i];
        } else {
            tensor_borrow_data(p, o->masters[i]);
        }
    }
    unsigned old = mem_host_categories(MEM_HOST_EVERY);
    o->update(o, lr);
    mem_host_categories(old);
    for (int i = 0; i < o->n; i++) {
        Tensor *p = o->params[i];
        if (p->dtype == DTYPE_F32)
            p->data = dev[i];
        else
            tensor_borrow_data(p, NULL);
    }
    free(dev);
}

void optim_offload_step(Optim *o, double lr)
{
    OptimOffload *h = o->offload;
    if (h->stale)
        sync(o);
    void **dev = malloc((size_t)o->n * sizeof *dev);
    if (!dev)
        tensor_fatal("out of memory for offloading %d parameters", o->n);
    h->traffic.to_host = down(o, dev);
    update(o, lr);
    /* The device's gradients back in place (optim_zero_grad clears them next). */
    for (int i = 0; i < o->n; i++) {
        Tensor *p = o->params[i];
        if (!dev[i])
            continue;
        if (p->grad_dtype == DTYPE_F32)
            p->grad = dev[i];
        else
            p->grad_packed = dev[i];
    }
    h->traffic.to_device = up(o, dev);
    free(dev);
    h->traffic.to_host_total += h->traffic.to_host;
    h->traffic.to_device_total += h->traffic.to_device;
    h->traffic.updates++;
}

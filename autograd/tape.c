#include "autograd/tape.h"

#include <stdlib.h>
#include <string.h>

enum { OWNED_TENSOR = 0, OWNED_BUFFER = 1 };

static void *grow(void *array, int *cap, size_t elem)
{
    int new_cap = *cap ? *cap * 2 : 64;
    void *p = realloc(array, (size_t)new_cap * elem);
    if (!p)
        tensor_fatal("out of memory growing the tape");
    *cap = new_cap;
    return p;
}

Tape *tape_new(void)
{
    Tape *tape = calloc(1, sizeof *tape);
    if (!tape)
        tensor_fatal("out of memory for a tape");
    tape->recording = true;
    return tape;
}

static void own(Tape *tape, void *p, char kind)
{
    if (tape->n_owned == tape->cap_owned) {
        int cap = tape->cap_owned;
        tape->owned = grow(tape->owned, &cap, sizeof *tape->owned);
        tape->owned_kind = realloc(tape->owned_kind, (size_t)cap);
        if (!tape->owned_kind)
            tensor_fatal("out of memory growing the tape");
        tape->cap_owned = cap;
    }
    tape->owned[tape->n_owned] = p;
    tape->owned_kind[tape->n_owned] = kind;
    tape->n_owned++;
}

void tape_reset(Tape *tape)
{
    /* Newest first, so views (created after what they view) are released before their base. */
    for (int k = tape->n_owned - 1; k >= 0; k--) {
        if (tape->owned_kind[k] == OWNED_TENSOR)
            tensor_free(tape->owned[k]);
        else
            mem_free(tape->owned[k]);
    }
    tape->n_owned = 0;
    tape->n_nodes = 0;
    /* A pass that wrote the history (a recorded forward under delayed scaling) was one step of
     * it; an inference pass never touches the history, so it does not count. */
    if (tape->n_stored > 0)
        tape->history_steps++;
    tape->n_stored = 0;
}

void tape_free(Tape *tape)
{
    if (!tape)
        return;
    tape_reset(tape);
    free(tape->nodes);
    free(tape->amax_history);
    free(tape->owned);
    free(tape->owned_kind);
    free(tape);
}

Tensor *tape_own(Tape *tape, Tensor *t)
{
    own(tape, t, OWNED_TENSOR);
    return t;
}

/* Whether outputs are packed when stored (else only rounded in place). */
static bool packs(const Tape *tape)
{
    return tape->recording || tape->packs_unrecorded;
}

Tensor *tape_tensor(Tape *tape, int ndim, const int *shape)
{
    /* Under a policy that stores activations packed, the fp32 result is only where the op
     * computes (a real kernel's registers): scratch until tape_record packs it into act. */
    if (tape->policy && tape->policy->act != DTYPE_F32 && packs(tape)) {
        Tensor *t = tensor_new(MEM_TEMP, ndim, shape);
        /* A scalar (a loss) is never packed (store()): an fp32 activation from the start, as
         * without a policy, not 4 bytes of scratch for the whole backward pass. */
        if (t->size < 2) {
            tensor_free(t);
            return tape_own(tape, tensor_new(MEM_ACT, ndim, shape));
        }
        t->cat = MEM_ACT;
        return tape_own(tape, t);
    }
    return tape_own(tape, tensor_new(MEM_ACT, ndim, shape));
}

void *tape_buffer(Tape *tape, MemCategory cat, size_t bytes)
{
    void *p = mem_alloc(cat, bytes);
    own(tape, p, OWNED_BUFFER);
    return p;
}

/* ---- mixed precision: how tensors are stored between ops -------------------------------------
 * Every op computes in fp32 on decoded inputs; what the tape keeps is in the policy's dtypes. */

void tape_use(Tape *tape, int n_in, Tensor *const *in)
{
    (void)tape;
    for (int k = 0; k < n_in; k++)
        if (in[k])
            tensor_unpack(in[k]);
}

static void release_all(int n, Tensor *const *t)
{
    for (int k = 0; k < n; k++)
        if (t[k])
            tensor_release(t[k]);
}

/* fp8's scale for the next stored activation: from its own amax (current scaling) or from the
 * largest amax seen at its place in the last fp8_window steps (delayed scaling), whose first
 * step has no history and uses its own. The places are counted in a recorded forward's order:
 * a pass that does not record stores fewer tensors (no saved extras), so its k-th tensor is
 * another one; it uses current scaling and leaves the history as it is, so an evaluation
 * between training steps changes none of their scales. */
static float stored_scale(Tape *tape, Format f, const float *x, size_t n)
{
    if (!policy_is_scaled(f))
        return 1.0f;
    if (tape->policy->fp8_scaling == POLICY_FP8_CURRENT || !tape->recording)
        return policy_current_scale(f, x, n);
    float amax = policy_amax(x, n);
    int w = policy_fp8_window(tape->policy);
    int slot = tape->n_stored++;
    if (slot >= tape->history_slots) {
        int slots = slot + 64;
        tape->amax_history = realloc(tape->amax_history, (size_t)slots * w * sizeof(float));
        if (!tape->amax_history)
            tensor_fatal("out of memory for the fp8 amax history");
        memset(tape->amax_history + (size_t)tape->history_slots * w, 0,
               (size_t)(slots - tape->history_slots) * w * sizeof(float));
        tape->history_slots = slots;
    }
    float *h = tape->amax_history + (size_t)slot * w, past = 0.0f;
    for (int i = 0; i < w; i++)
        past = h[i] > past ? h[i] : past;
    h[tape->history_steps % w] = amax;
    return policy_fp8_scale(f, past > 0.0f ? past : amax);
}

static void store(Tape *tape, Tensor *t)
{
    const PrecisionPolicy *p = tape->policy;
    if (!t || !p || p->act == DTYPE_F32 || t->dtype != DTYPE_F32 || !t->owns_data ||
        t->cat != MEM_ACT || t->size < 2)
        return;
    Format f = tensor_dtype_format(p->act);
    float scale = stored_scale(tape, f, t->data, t->size);
    if (packs(tape)) {
        tensor_pack(t, p->act, scale);
    } else {
        /* Kept so that a copy packed with the same scale holds the same codes: gradient
         * checkpointing keeps such copies of what a pass that did not record computed. */
        tensor_round_values(t->data, t->data, t->size, f, scale);
        t->scale = scale;
    }
}

/* The newest node's saved tensors: filled by its op after tape_record, so stored at the next
 * record or when backward starts. */
static void store_last_saved(Tape *tape)
{
    if (!tape->policy || tape->n_nodes == 0)
        return;
    for (int k = 0; k < NODE_MAX_SAVED; k++)
        store(tape, tape->nodes[tape->n_nodes - 1].saved[k]);
}

/* A gradient has its parameter's dtype (PyTorch's rule); an activation's has the policy's
 * gradient dtype, with fp8's current per-tensor scale. A scalar's (the loss's, seeded with the
 * loss scale) stays fp32, as the scalar itself does. A parameter whose gradient is stored packed
 * (tensor.h, "packed gradients") had this node's term added in an fp32 working copy: the
 * rounded sum is encoded into its 2 (or 1) bytes and the copy freed, with or without a policy. */
static void round_grads(const PrecisionPolicy *p, Node *node)
{
    for (int k = 0; k < node->n_in; k++) {
        Tensor *x = node->in[k];
        if (!x || !x->grad)
            continue;
        Format f = p && x->size >= 2 ? tensor_dtype_format(x->is_param ? p->param : p->grad)
                                     : FMT_FP32;
        float scale = policy_current_scale(f, x->grad, x->size);
        if (f != FMT_FP32)
            tensor_round_values(x->grad, x->grad, x->size, f, scale);
        tensor_grad_store(x, scale);
    }
}

bool tape_wants_grad(const Tape *tape, int n_in, Tensor *const *in)
{
    if (!tape->recording)
        return false;
    for (int k = 0; k < n_in; k++)
        if (in[k] && in[k]->requires_grad)
            return true;
    return false;
}

Node *tape_record(Tape *tape, const char *op, NodeBackward backward, Tensor *out,
                  int n_in, Tensor *const *in)
{
    if (n_in > NODE_MAX_INPUTS)
        tensor_fatal("%s: %d inputs (at most %d)", op, n_in, NODE_MAX_INPUTS);
    release_all(n_in, in);
    store_last_saved(tape);
    store(tape, out);
    /* Without recording no gradient can reach the inputs, so the output needs none. */
    out->requires_grad = tape_wants_grad(tape, n_in, in);
    if (!out->requires_grad)
        return NULL;

    if (tape->n_nodes == tape->cap_nodes)
        tape->nodes = grow(tape->nodes, &tape->cap_nodes, sizeof *tape->nodes);
    Node *node = &tape->nodes[tape->n_nodes++];
    memset(node, 0, sizeof *node);
    node->op = op;
    node->backward = backward;
    node->out = out;
    node->n_in = n_in;
    for (int k = 0; k < n_in; k++)
        node->in[k] = in[k];
    node->policy = tape->policy;
    node->flops = tape->flops;
    return node;
}

/* ---- counting FLOPs ------------------------------------------------------------------------ */

int64_t flop_total(FlopCount c) { return c.matmul + c.other; }

static void add_count(FlopCount *c, int64_t matmul, int64_t other)
{
    c->matmul += matmul;
    c->other += other;
}

void tape_flops_add(TapeFlops *into, const TapeFlops *from)
{
    add_count(&into->forward, from->forward.matmul, from->forward.other);
    add_count(&into->backward, from->backward.matmul, from->backward.other);
    add_count(&into->recompute, from->recompute.matmul, from->recompute.other);
}

void tape_count(Tape *tape, int64_t matmul, int64_t other)
{
    if (tape->flops)
        add_count(tape->recomputing ? &tape->flops->recompute : &tape->flops->forward, matmul,
                  other);
}

void node_count(Node *node, int64_t matmul, int64_t other)
{
    if (node->flops)
        add_count(&node->flops->backward, matmul, other);
}

void node_count_recompute(Node *node, int64_t matmul, int64_t other)
{
    if (node->flops)
        add_count(&node->flops->recompute, matmul, other);
}

/* Reverse order is a valid order: a node was appended after every node that produced one of
 * its inputs, so when we reach it, every consumer of its output has already added its term to
 * out->grad. A plain loop, no recursion, however deep the network. */
static void walk_backward(Tape *tape)
{
    store_last_saved(tape);
    for (int k = tape->n_nodes - 1; k >= 0; k--) {
        Node *node = &tape->nodes[k];
        if (!node->out->grad) {
            if (tape->after_node)
                tape->after_node(tape, k, tape->after_node_ctx);
            continue;       /* no gradient reached this node's output */
        }
        if (!node->backward_ignores_inputs)
            tape_use(tape, node->n_in, node->in);
        tape_use(tape, NODE_MAX_SAVED, node->saved);
        if (node->backward_reads_out)
            tape_use(tape, 1, &node->out);
        node->backward(node);
        release_all(node->n_in, node->in);
        release_all(NODE_MAX_SAVED, node->saved);
        release_all(1, &node->out);
        round_grads(node->policy, node);
        /* The b node has been consumed: its inputs' gradients now hold its contribution. */
        if (!node->out->is_param && !tape->keep_grads)
            tensor_free_grad(node->out);
        if (tape->after_node)
            tape->after_node(tape, k, tape->after_node_ctx);
    }
}

void tape_backward(Tape *tape, Tensor *loss)
{
    if (loss->size != 1)
        tensor_fatal("tape_backward: the loss has %zu elements; use tape_backward_seeded",
                     loss->size);
    float one = 1.0f;
    tape_backward_seeded(tape, loss, &one);
}

void tape_backward_seeded(Tape *tape, Tensor *out, const float *seed)
{
    float *g = tensor_grad(out);
    for (size_t i = 0; i < out->size; i++)
        g[i] += seed[i];
    walk_backward(tape);
}

static void print_tensor_ref(const Tensor *t, FILE *out)
{
    char shape[64];
    fprintf(out, "%s%s%s", t->name[0] ? t->name : "", t->name[0] ? " " : "",
            tensor_shape_str(t, shape, sizeof shape));
}

void tape_print(const Tape *tape, FILE *out)
{
    for (int k = 0; k < tape->n_nodes; k++) {
        const Node *node = &tape->nodes[k];
        fprintf(out, "node %d: %-12s (", k, node->op);
        for (int j = 0; j < node->n_in; j++) {
            fprintf(out, j ? ", " : "");
            print_tensor_ref(node->in[j], out);
        }
        fprintf(out, ") -> ");
        print_tensor_ref(node->out, out);
        fputc('\n', out);
    }
}

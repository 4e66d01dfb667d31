/* The tape: record, reverse walk, accumulate (autograd/tape.h). How what it keeps is stored
 * under a precision policy is autograd/tape_precision.c's business, called at five moments. */
#include "autograd/tape.h"

#include <stdlib.h>

#include "autograd/tape_precision.h"

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

Tape *tape_new_under(const PrecisionPolicy *policy)
{
    Tape *tape = tape_new();
    tape->policy = policy;
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
    tape_precision(tape, TAPE_RESETS, NULL);
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

Tensor *tape_tensor(Tape *tape, int ndim, const int *shape)
{
    /* An output that will be packed is scratch (temp) until tape_record packs it into act.
     * A scalar (a loss) is never packed: an fp32 activation from the start, not 4 bytes of
     * scratch for the whole backward pass. */
    size_t size = 1;
    for (int d = 0; d < ndim; d++)
        size *= (size_t)shape[d];
    bool scratch = tape_packs_outputs(tape) && size >= 2;
    Tensor *t = tensor_new(scratch ? MEM_TEMP : MEM_ACT, ndim, shape);
    t->cat = MEM_ACT;
    return tape_own(tape, t);
}

void *tape_buffer(Tape *tape, MemCategory cat, size_t bytes)
{
    void *p = mem_alloc(cat, bytes);
    own(tape, p, OWNED_BUFFER);
    return p;
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
    /* The call as a node: the precision hook sees it; the tape keeps it if it records. */
    Node node = { .op = op, .backward = backward, .out = out, .n_in = n_in,
                  .policy = tape->policy, .flops = tape->flops };
    for (int k = 0; k < n_in; k++)
        node.in[k] = in[k];
    tape_precision(tape, TAPE_OP_COMPUTED, &node);
    /* Without recording no gradient can reach the inputs, so the output needs none. */
    out->requires_grad = tape_wants_grad(tape, n_in, in);
    if (!out->requires_grad)
        return NULL;
    if (tape->n_nodes == tape->cap_nodes)
        tape->nodes = grow(tape->nodes, &tape->cap_nodes, sizeof *tape->nodes);
    tape->nodes[tape->n_nodes] = node;
    return &tape->nodes[tape->n_nodes++];
}

void *node_state(Node *node, size_t bytes)
{
    if (bytes > NODE_STATE_BYTES)
        tensor_fatal("%s: %zu bytes of state (a node holds %d)", node->op, bytes,
                     NODE_STATE_BYTES);
    return node->state;
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

void tape_flops_sub(TapeFlops *into, const TapeFlops *from)
{
    add_count(&into->forward, -from->forward.matmul, -from->forward.other);
    add_count(&into->backward, -from->backward.matmul, -from->backward.other);
    add_count(&into->recompute, -from->recompute.matmul, -from->recompute.other);
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
    tape_precision(tape, TAPE_BACKWARD_STARTS, NULL);
    for (int k = tape->n_nodes - 1; k >= 0; k--) {
        Node *node = &tape->nodes[k];
        if (node->out->grad) {      /* else no gradient reached this node's output */
            bool consumed = !node->out->is_param && !tape->keep_grads;
            tape_precision(tape, TAPE_NODE_STARTS, node);
            node->out_grad_is_scratch = consumed;
            node->backward(node);
            node->out_grad_is_scratch = false;
            tape_precision(tape, TAPE_NODE_DONE, node);
            /* The node has been consumed: its inputs' gradients now hold its contribution. */
            if (consumed)
                tensor_free_grad(node->out);
        }
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

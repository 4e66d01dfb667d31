#ifndef TAPEGRAD_TAPE_H
#define TAPEGRAD_TAPE_H
/* The tape: the list of nodes recorded during the forward pass, replayed in reverse by backward.
 *
 * An op is a function `Tensor *op_x(Tape *tape, ...)`: it computes its output into a tensor the
 * tape owns (category act) and, when the tape is recording and some input requires a gradient,
 * appends a node holding its inputs, its output, what it saved and its backward function.
 *
 * The tape owns every tensor and buffer its ops created, recorded or not: tape_reset frees them
 * all (the act category returns to where it was), so a training step is
 *     forward (records) -> tape_backward -> optimizer step -> tape_reset.
 * A tape with recording switched off is inference: outputs are still owned and freed on reset,
 * but nothing is saved for backward. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "autograd/policy.h"
#include "autograd/tensor.h"

enum { NODE_MAX_INPUTS = 4, NODE_MAX_SAVED = 4, NODE_STATE_BYTES = 32 };

/* Floating-point operations the ops performed (docs/autograd.md, "Counting FLOPs"): matrix
 * products, 2MNK each (the FLOPs the 6N + 12LTC estimate counts), apart from all the rest
 * (elementwise ops, norms, softmax, losses). Each op states its count beside its math. */
typedef struct {
    int64_t matmul, other;
} FlopCount;

/* By phase: forward passes; backward passes; and forwards run again to recompute what was not
 * kept (gradient checkpointing's segments, tiled attention's scores). Read it, and reset it
 * with `flops = (TapeFlops){ 0 }`. Model FLOPs are forward + backward. */
typedef struct {
    FlopCount forward, backward, recompute;
} TapeFlops;

int64_t flop_total(FlopCount c);                        /* matmul + other */
void    tape_flops_add(TapeFlops *into, const TapeFlops *from);
void    tape_flops_sub(TapeFlops *into, const TapeFlops *from);    /* counted since `from` */

typedef struct Node Node;
/* Reads node->out->grad and adds each input's contribution to tensor_grad(input), for the
 * inputs whose requires_grad is set. Never overwrites: a tensor used twice gets both terms. */
typedef void (*NodeBackward)(Node *node);

struct Node {
    const char  *op;                      /* "matmul", "layernorm", ... */
    NodeBackward backward;
    Tensor      *in[NODE_MAX_INPUTS];
    int          n_in;
    Tensor      *out;
    Tensor      *saved[NODE_MAX_SAVED];   /* extra tensors kept for backward (attention's P, ...) */
    /* Everything else the op keeps for backward, as a small struct its file declares (a flag,
     * the number of heads, pointers to buffers the tape owns such as token ids): node_state. */
    _Alignas(max_align_t) unsigned char state[NODE_STATE_BYTES];
    const PrecisionPolicy *policy;        /* the tape's, when the node was recorded */
    /* What backward decodes first when tensors are packed: inputs (unless the op's backward
     * reads none of their values: add, scale, reshape, ...), saved tensors, and the output only
     * if the backward reads it (softmax). Ops set these after tape_record. */
    bool         backward_ignores_inputs;
    bool         backward_reads_out;
    /* Set by the tape for the length of backward: out->grad is freed as soon as backward
     * returns (not a parameter's, and keep_grads off), so backward may overwrite it, as the
     * matmul does to round dY to its compute format where it lies instead of in a copy. */
    bool         out_grad_is_scratch;
    TapeFlops   *flops;                   /* the tape's, when the node was recorded */
};

typedef struct Tape Tape;
struct Tape {
    Node    *nodes;
    int      n_nodes, cap_nodes;
    void   **owned;        /* tensors (kind 0) and raw buffers (kind 1) the tape frees */
    char    *owned_kind;
    int      n_owned, cap_owned;
    bool     recording;
    /* Store outputs packed in the act dtype even when not recording, as a recording tape does
     * (the checkpoint runner's ADVANCE tape: what it recomputes is kept until the next reset,
     * so fp32 outputs there would outweigh the recorded blocks they are meant to save). Other
     * inference tapes leave it off: their callers read outputs' data directly. */
    bool     packs_unrecorded;
    bool     keep_grads;   /* keep activation gradients after backward (for tests, debugging) */
    /* Mixed precision (autograd/policy.h); NULL is fp32. Set it before the forward pass.
     * autograd/tape_precision.c applies it and keeps the history below. */
    const PrecisionPolicy *policy;
    /* fp8 delayed scaling: the amax of the k-th activation packed, over the last fp8_window
     * steps (a step is a recorded forward, up to the next tape_reset; inference passes use
     * current scaling and are not steps). history_steps % fp8_window is the column written;
     * optim/train_snapshot.c saves and restores these three. */
    float   *amax_history;
    int      history_slots, n_packed;
    long     history_steps;
    /* Where the ops count their FLOPs (NULL: nowhere), and whether this forward re-runs one
     * already counted (the ops then count as recompute): set by the caller. */
    TapeFlops *flops;
    bool     recomputing;
    /* Optional, NULL by default: called by backward after node k (index into nodes) has added
     * its inputs' gradients (rounded under a policy), for every k from the last node down to 0,
     * nodes no gradient reached included. A parameter's gradient is final once the node of
     * lowest index that has it as an input is done: data parallel training (dist/ddp.h) starts
     * sending a group of gradients then, while the rest of backward runs. */
    void   (*after_node)(Tape *tape, int k, void *ctx);
    void    *after_node_ctx;
};

Tape   *tape_new(void);          /* recording is on */
/* The same under a precision policy (NULL: fp32), which must outlive the tape. */
Tape   *tape_new_under(const PrecisionPolicy *policy);
/* Frees every node and every tensor and buffer the tape owns; the tape can be reused. */
void    tape_reset(Tape *tape);
void    tape_free(Tape *tape);

/* For ops: a new tensor in category act, owned by the tape. */
Tensor *tape_tensor(Tape *tape, int ndim, const int *shape);
/* For ops: the tape takes ownership of a tensor (freed on reset). */
Tensor *tape_own(Tape *tape, Tensor *t);
/* For ops: raw storage of `bytes` in category cat, owned by the tape. */
void   *tape_buffer(Tape *tape, MemCategory cat, size_t bytes);

/* For ops, first thing in a forward: the fp32 values of every input (packed ones are decoded
 * into scratch copies, which tape_record releases). NULL entries are skipped. Defined with the
 * rest of the tape's mixed precision in autograd/tape_precision.c. */
void    tape_use(Tape *tape, int n_in, Tensor *const *in);

/* True when an op with these inputs must record a node: the tape is recording and some input
 * requires a gradient. Ops call it before deciding whether to keep extra state for backward. */
bool    tape_wants_grad(const Tape *tape, int n_in, Tensor *const *in);
/* Sets out->requires_grad to tape_wants_grad(...) and, if set, appends a node and returns
 * it (the op then fills saved and state); returns NULL otherwise. The last call of an op's
 * forward: it releases the inputs' scratch copies and, under a policy, puts the output in
 * the activation dtype (packed when recording or packs_unrecorded; rounded in place
 * otherwise, with the scale it was rounded with left in out->scale; a scalar stays fp32), and
 * the previous node's saved tensors likewise (autograd/tape_precision.h). */
Node   *tape_record(Tape *tape, const char *op, NodeBackward backward, Tensor *out,
                    int n_in, Tensor *const *in);
/* For ops: the node's state, the op's own struct of at most NODE_STATE_BYTES, all zero when the
 * node is recorded. Forward fills it, backward reads it:
 *     typedef struct { int heads; } AttentionState;
 *     AttentionState *s = node_state(n, sizeof *s);
 *     s->heads = n_head;                                                                     */
void   *node_state(Node *node, size_t bytes);

/* For ops: count the FLOPs of a forward (into tape->flops' forward, or its recompute when the
 * tape is recomputing), of a backward (node_count), or of a forward a backward runs again
 * (node_count_recompute). Nothing happens when no counter is set. */
void    tape_count(Tape *tape, int64_t matmul, int64_t other);
void    node_count(Node *node, int64_t matmul, int64_t other);
void    node_count_recompute(Node *node, int64_t matmul, int64_t other);

/* Backward from a scalar (size 1) loss: seeds dloss = 1 and walks the nodes in reverse. */
void    tape_backward(Tape *tape, Tensor *loss);
/* Backward from any output with a given seed gradient (same size as out), added to out->grad. */
void    tape_backward_seeded(Tape *tape, Tensor *out, const float *seed);

/* One line per node: index, op, input and output shapes (and names, where tensors have them). */
void    tape_print(const Tape *tape, FILE *out);

#endif

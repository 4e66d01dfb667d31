/* Mixed precision on the tape: the hook autograd/tape.c calls (autograd/tape_precision.h).
 * Every op computes in fp32 on decoded inputs; what the tape keeps is in the policy's dtypes. */
#include "autograd/tape_precision.h"

#include <stdlib.h>
#include <string.h>

/* Whether outputs are packed (else only rounded in place, as packing would round them). */
static bool packs(const Tape *tape)
{
    return tape->recording || tape->packs_unrecorded;
}

bool tape_packs_outputs(const Tape *tape)
{
    return tape->policy && tape->policy->act != DTYPE_F32 && packs(tape);
}

/* ---- decoding: the fp32 values an op reads, for the length of one forward or backward -------- */

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

/* ---- storing: what the tape keeps, in the act dtype ------------------------------------------ */

/* fp8's scale for the next packed activation: from its own amax (current scaling) or from the
 * largest amax seen at its place in the last fp8_window steps (delayed scaling), whose first
 * step has no history and uses its own. The places are counted in a recorded forward's order:
 * a pass that does not record packs fewer tensors (no saved extras), so its k-th tensor is
 * another one; it uses current scaling and leaves the history as it is, so an evaluation
 * between training steps changes none of their scales. */
static float pack_scale(Tape *tape, Format f, const float *x, size_t n)
{
    if (!policy_is_scaled(f))
        return 1.0f;
    if (tape->policy->fp8_scaling == POLICY_FP8_CURRENT || !tape->recording)
        return policy_current_scale(f, x, n);
    float amax = policy_amax(x, n);
    int w = policy_fp8_window(tape->policy);
    int slot = tape->n_packed++;
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

/* Where an activation is rounded: under the bf16 policy, t's fp32 values become bf16 codes of
 * 2 bytes, rounded to nearest even (fp16 and fp8 likewise), by tensor_pack -> fmt_encode_array
 * -> fmt_kernel_encode (precision/format_kernel.h, the one rounding algorithm). */
static void pack(Tape *tape, Tensor *t)
{
    const PrecisionPolicy *p = tape->policy;
    if (!t || !p || p->act == DTYPE_F32 || t->dtype != DTYPE_F32 || !t->owns_data ||
        t->cat != MEM_ACT || t->size < 2)
        return;
    Format f = tensor_dtype_format(p->act);
    float scale = pack_scale(tape, f, t->data, t->size);
    if (packs(tape)) {
        tensor_pack(t, p->act, scale);
    } else {
        /* Kept so that a copy packed with the same scale holds the same codes: gradient
         * checkpointing keeps such copies of what a pass that did not record computed. */
        tensor_round_values(t->data, t->data, t->size, f, scale);
        t->scale = scale;
    }
}

/* The newest node's saved tensors: filled by its op after tape_record, so packed at the next
 * record or when backward starts. */
static void pack_last_saved(Tape *tape)
{
    if (!tape->policy || tape->n_nodes == 0)
        return;
    for (int k = 0; k < NODE_MAX_SAVED; k++)
        pack(tape, tape->nodes[tape->n_nodes - 1].saved[k]);
}

/* ---- gradients ----------------------------------------------------------------------------------
 * An activation's gradient has the policy's gradient dtype; a parameter's has its parameter's
 * dtype (PyTorch's rule), or e5m2 when the policy's gradients are fp8 (policy_param_grad_dtype).
 * fp8 gets the current per-tensor scale from the amax of the fp32 values being rounded, the
 * same policy_current_scale an activation packed with current scaling gets. A scalar's
 * gradient (the loss's, seeded with the loss scale) stays fp32, as the scalar itself does.
 *
 * A parameter whose gradient is stored packed (tensor.h, "packed gradients") had this node's
 * term added into an fp32 working copy: the rounded sum is encoded into its 2 (or 1) bytes with
 * the scale it was rounded with, and the copy freed, with or without a policy. Accumulation is
 * in fp32 where it needs to be: inside a node (a weight gradient's sum over the batch rows is
 * sgemm's fp32 accumulation, rounded once, not row by row) and across nodes: for a weight used
 * by several nodes (the tied embedding) and for every micro-batch of gradient accumulation,
 * the stored sum is decoded to fp32, the term added, and the sum rounded again with a new scale
 * from its own amax: a stored e5m2 scale fits the values it was made for, and a sum that has
 * grown past them would saturate under it. What is kept between nodes is 1 byte a value. */
static void round_grads(const PrecisionPolicy *p, Node *node)
{
    for (int k = 0; k < node->n_in; k++) {
        Tensor *x = node->in[k];
        if (!x || !x->grad)
            continue;
        Format f = FMT_FP32;
        if (p && x->size >= 2)
            f = tensor_dtype_format(x->is_param ? policy_param_grad_dtype(p) : p->grad);
        float scale = policy_current_scale(f, x->grad, x->size);
        if (f != FMT_FP32)
            tensor_round_values(x->grad, x->grad, x->size, f, scale);
        tensor_grad_pack(x, scale);
    }
}

/* ---- the hook -------------------------------------------------------------------------------- */

void tape_precision(Tape *tape, TapeMoment moment, Node *node)
{
    switch (moment) {
    case TAPE_OP_COMPUTED:
        release_all(node->n_in, node->in);
        pack_last_saved(tape);
        pack(tape, node->out);
        break;
    case TAPE_BACKWARD_STARTS:
        pack_last_saved(tape);
        break;
    case TAPE_NODE_STARTS:
        /* Inputs unless the backward reads none of their values (add, scale, reshape, ...),
         * saved tensors, and the output only if the backward reads it (softmax). */
        if (!node->backward_ignores_inputs)
            tape_use(tape, node->n_in, node->in);
        tape_use(tape, NODE_MAX_SAVED, node->saved);
        if (node->backward_reads_out)
            tape_use(tape, 1, &node->out);
        break;
    case TAPE_NODE_DONE:
        release_all(node->n_in, node->in);
        release_all(NODE_MAX_SAVED, node->saved);
        release_all(1, &node->out);
        round_grads(node->policy, node);
        break;
    case TAPE_RESETS:
        /* A pass that wrote the history (a recorded forward under delayed scaling) was one step
         * of it; an inference pass never touches the history, so it does not count. */
        if (tape->n_packed > 0)
            tape->history_steps++;
        tape->n_packed = 0;
        break;
    }
}

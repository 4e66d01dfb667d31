#ifndef TAPEGRAD_TAPE_PRECISION_H
#define TAPEGRAD_TAPE_PRECISION_H
/* Mixed precision on the tape: how the tensors the tape keeps are packed between ops, in the
 * dtypes of tape->policy (autograd/policy.h). Every op computes in fp32 on decoded inputs; what
 * the tape keeps is packed. autograd/tape.c knows nothing of this: it calls tape_precision at
 * five moments, and everything the tape does about precision happens there.
 *
 *   TAPE_OP_COMPUTED      an op has computed its output (node: the op's call, put on the tape
 *                         after the hook if it is recorded). Its inputs' decoded copies are
 *                         released; the previous node's saved tensors (which its op filled after
 *                         recording it) and this output are packed in the act dtype.
 *   TAPE_BACKWARD_STARTS  the newest node's saved tensors are packed likewise (node: NULL).
 *   TAPE_NODE_STARTS      before a node's backward: what it reads is decoded.
 *   TAPE_NODE_DONE        after it: those copies are released, and the gradients it produced
 *                         are rounded to their dtypes (round_grads).
 *   TAPE_RESETS           the tape frees its tensors (node: NULL): a pass that wrote the fp8
 *                         amax history was one step of it.
 *
 * Without a policy nothing is packed, rounded or scaled: the hook only decodes and releases
 * tensors that are packed already (a parameter whose optimizer keeps master weights), which
 * for fp32 tensors is nothing at all. */
#include <stdbool.h>

#include "autograd/tape.h"

typedef enum {
    TAPE_OP_COMPUTED,
    TAPE_BACKWARD_STARTS,
    TAPE_NODE_STARTS,
    TAPE_NODE_DONE,
    TAPE_RESETS,
} TapeMoment;

void tape_precision(Tape *tape, TapeMoment moment, Node *node);

/* Whether ops' outputs will be packed: the fp32 result is then scratch (category
 * temp) until TAPE_OP_COMPUTED packs it into act, as it would live in a real kernel's
 * registers. */
bool tape_packs_outputs(const Tape *tape);

#endif

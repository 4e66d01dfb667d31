#ifndef TAPEGRAD_TESTS_GPT_PASS_TEST_H
#define TAPEGRAD_TESTS_GPT_PASS_TEST_H
/* For the tests of nn/gpt_pass.h: one forward + backward through the GPT pass on a tape of its
 * own (vanilla records there) under policy, freed after, so the activations go with it. */
#include "nn/gpt_pass.h"

static inline float pass_on_new_tape(const Gpt *m, CkptStrategy s, const PrecisionPolicy *policy,
                                     const int *tokens, const int *targets, int B, int T,
                                     float seed, CkptStats *st)
{
    Tape *tape = tape_new_under(policy);
    float loss = gpt_forward_backward(m, tape, s, tokens, targets, B, T, seed, NULL, st);
    tape_free(tape);
    return loss;
}

#endif

#ifndef TAPEGRAD_SAMPLE_H
#define TAPEGRAD_SAMPLE_H
/* Drawing the next token from a language model's logits, with a temperature.
 *
 * At temperature tau > 0 the token is drawn from softmax(logits / tau): tau = 1 is the model's
 * own distribution, tau < 1 sharpens it toward the likeliest tokens, tau > 1 flattens it
 * toward uniform. tau = 0 is the limit: the argmax (greedy decoding; the first of equal
 * maxima), drawn without touching the generator.
 *
 * The draw is the inverse of the cumulative distribution at one uniform number u in [0, 1):
 * the first token v whose cumulative probability p_0 + ... + p_v exceeds u. One draw uses
 * exactly one rng_uniform, so a seed fixes the whole text. */
#include "autograd/rng.h"

/* The distribution sample_token draws from, into p[V] (one-hot at the argmax for tau = 0).
 * temperature >= 0. */
void sample_probs(const float *logits, int V, double temperature, double *p);

/* One token id in [0, V). */
int  sample_token(const float *logits, int V, double temperature, Rng *rng);

#endif

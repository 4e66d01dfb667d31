#ifndef TAPEGRAD_RNG_H
#define TAPEGRAD_RNG_H
/* A small seeded random number generator with independent streams (PCG32, O'Neill 2014).
 *
 * One seed, many streams: `rng_new(seed, RNG_STREAM_INIT)` and `rng_new(seed, RNG_STREAM_DATA)`
 * give unrelated sequences, so drawing one more data sample never shifts the initial weights.
 * The state is two integers, so it can be saved in a snapshot and restored exactly. */
#include <stdint.h>

typedef struct {
    uint64_t state;
    uint64_t inc;      /* stream selector; always odd */
} Rng;

/* RNG_STREAM_OPTIM: the seed of an optimizer's own randomness (8-bit Adam's stochastic
 * rounding, optim/train.c), derived from the run's seed. */
enum { RNG_STREAM_INIT = 1, RNG_STREAM_DATA = 2, RNG_STREAM_DROPOUT = 3, RNG_STREAM_ROUNDING = 4,
       RNG_STREAM_OPTIM = 5 };

Rng      rng_new(uint64_t seed, uint64_t stream);
uint32_t rng_u32(Rng *r);
/* Uniform integer in [0, n), without modulo bias. n > 0. */
uint32_t rng_below(Rng *r, uint32_t n);
/* Uniform float in [0, 1) with 24 random bits. */
float    rng_uniform(Rng *r);
/* Standard normal (Box-Muller, one value per call; no cached second value, so the state alone
 * determines the sequence). */
float    rng_normal(Rng *r);

#endif

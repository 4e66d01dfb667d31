#include "autograd/rng.h"

#include <math.h>

/* PCG32 (XSH RR): a 64-bit LCG whose output is a permuted 32-bit word. The increment selects one
 * of 2^63 independent streams. */
static const uint64_t PCG_MULT = 6364136223846793005ULL;

uint32_t rng_u32(Rng *r)
{
    uint64_t old = r->state;
    r->state = old * PCG_MULT + r->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31u));
}

Rng rng_new(uint64_t seed, uint64_t stream)
{
    Rng r = { 0u, (stream << 1u) | 1u };
    rng_u32(&r);
    r.state += seed;
    rng_u32(&r);
    return r;
}

uint32_t rng_below(Rng *r, uint32_t n)
{
    /* Reject the top partial copy of [0, n) in [0, 2^32) so every value is equally likely. */
    uint32_t threshold = (uint32_t)(-n) % n;
    for (;;) {
        uint32_t x = rng_u32(r);
        if (x >= threshold)
            return x % n;
    }
}

float rng_uniform(Rng *r)
{
    return (float)(rng_u32(r) >> 8) * (1.0f / 16777216.0f);
}

float rng_normal(Rng *r)
{
    /* u1 in (0, 1] keeps log() finite. */
    float u1 = ((float)(rng_u32(r) >> 8) + 1.0f) * (1.0f / 16777216.0f);
    float u2 = rng_uniform(r);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
}

/* The NF4 codebook of QLoRA (Dettmers et al. 2023): where its 16 numbers come from, and the
 * nearest-level search that quantization uses. */
#include "precision/quant.h"

#include <math.h>

/* The levels as published (bitsandbytes' NF4 table), rounded to fp32. quant_nf4_construct()
 * rebuilds them from the definition; tests/test_quant.c checks the two agree within 1e-7. */
static const float nf4_levels[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
};

const float *quant_nf4_codebook(void) { return nf4_levels; }

/* Inverse of the standard normal CDF by bisection on erfc: slow and plainly correct, and it
 * runs 15 times per construction. */
static double normal_quantile(double p)
{
    double lo = -40.0, hi = 40.0;
    for (int i = 0; i < 100; i++) {
        double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(-mid / sqrt(2.0)) < p)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* Point idx of `steps` evenly spaced points from a to b, computed in fp32 the way
 * torch.linspace does it (from both ends towards the middle): the published table was made
 * from these fp32 probabilities, and computing them in double instead moves some levels by
 * about 1e-7. */
static float linspace_f32(float a, float b, int steps, int idx)
{
    float step = (b - a) / (float)(steps - 1);
    return idx < steps / 2 ? a + step * (float)idx : b - step * (float)(steps - 1 - idx);
}

/* 8 positive levels at the normal quantiles of probabilities evenly spaced from `offset` down
 * to 0.5 (excluded), 7 negative ones likewise, and an exact 0: an asymmetric split that gives
 * zero its own code. offset = (1 - 1/32 + 1 - 1/30) / 2 keeps the extreme quantile finite.
 * Everything is divided by the largest level, so the range is [-1, 1]. */
void quant_nf4_construct(double levels[16])
{
    /* BEGIN SOLUTION nf4 */
    const float offset = 0.9677083f;
    double top = normal_quantile(offset);
    for (int i = 0; i < 7; i++)
        levels[i] = -normal_quantile(linspace_f32(offset, 0.5f, 8, i)) / top;
    levels[7] = 0.0;
    for (int i = 0; i < 8; i++)
        levels[8 + i] = normal_quantile(linspace_f32(offset, 0.5f, 9, 7 - i)) / top;
    /* STUDENT
    (void)normal_quantile, (void)linspace_f32;
    for (int i = 0; i < 16; i++)
        levels[i] = 0.0;
    */
    /* END SOLUTION nf4 */
}

int quant_nf4_nearest(float v)
{
    /* Count the midpoints below v: branch-free, so callers' loops can vectorize. */
    /* BEGIN SOLUTION nf4 */
    int code = 0;
    for (int i = 0; i < 15; i++)
        code += v > 0.5f * (nf4_levels[i] + nf4_levels[i + 1]);
    return code;
    /* STUDENT
    (void)v;
    return 0;
    */
    /* END SOLUTION nf4 */
}

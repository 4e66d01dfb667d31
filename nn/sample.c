/* Drawing the next token (sample.h). */
#include <math.h>

#include "nn/sample.h"

static int argmax(const float *x, int V)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (x[v] > x[best])
            best = v;
    return best;
}

/* exp((x_v - max) / tau): the softmax's numerators, the largest exactly 1 so that nothing
 * overflows whatever the logits' scale and tau. */
static double weight(const float *x, int v, float max, double temperature)
{
    return exp(((double)x[v] - (double)max) / temperature);
}

void sample_probs(const float *logits, int V, double temperature, double *p)
{
    int best = argmax(logits, V);
    if (temperature == 0.0) {
        for (int v = 0; v < V; v++)
            p[v] = v == best;
        return;
    }
    double sum = 0.0;
    for (int v = 0; v < V; v++)
        sum += p[v] = weight(logits, v, logits[best], temperature);
    for (int v = 0; v < V; v++)
        p[v] /= sum;
}

int sample_token(const float *logits, int V, double temperature, Rng *rng)
{
    int best = argmax(logits, V);
    if (temperature == 0.0)
        return best;
    float max = logits[best];
    double sum = 0.0;
    for (int v = 0; v < V; v++)
        sum += weight(logits, v, max, temperature);
    /* u scaled by the sum, rather than every weight divided by it: the same comparison */
    double u = rng_uniform(rng) * sum;
    for (int v = 0; v < V; v++) {
        u -= weight(logits, v, max, temperature);
        if (u < 0.0)
            return v;
    }
    /* u's rounding can leave it just above 0 after the last token: the last one with any
     * weight */
    for (int v = V - 1; v > 0; v--)
        if (weight(logits, v, max, temperature) > 0.0)
            return v;
    return 0;
}

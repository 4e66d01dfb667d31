#include "optim/clip.h"

#include <math.h>

#include "optim/optim.h"

enum { LANES = 8 };

double clip_sum_squares(const float *g, size_t n)
{
    double acc[LANES] = { 0 };
    size_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++)
            acc[k] += (double)g[j + k] * (double)g[j + k];
    for (int k = 0; j < n; j++, k++)
        acc[k] += (double)g[j] * (double)g[j];
    double sum = 0.0;
    for (int k = 0; k < LANES; k++)
        sum += acc[k];
    return sum;
}

double clip_grad_sum_squares(Tensor *p)
{
    float *scratch;
    const float *g = tensor_grad_read(p, &scratch);
    double sum = g ? clip_sum_squares(g, p->size) : 0.0;
    mem_free(scratch);
    return sum;
}

double clip_grad_norm(Tensor *const *params, int n)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += clip_grad_sum_squares(params[i]);
    return sqrt(sum);
}

void clip_grads_for_norm(Tensor *const *params, int n, double norm, double max_norm)
{
    double coef = max_norm / (norm + 1e-6);
    if (!isfinite(norm) || coef >= 1.0)
        return;
    for (int i = 0; i < n; i++)
        tensor_grad_scale(params[i], (float)coef);    /* pending on a packed gradient */
}

double clip_grad_norm_to(Tensor *const *params, int n, double max_norm)
{
    double norm = clip_grad_norm(params, n);
    clip_grads_for_norm(params, n, norm, max_norm);
    return norm;
}

#include "optim/clip.h"

#include <math.h>

#include "optim/optim.h"

double clip_grad_norm(Tensor *const *params, int n)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        const float *g = params[i]->grad;
        for (size_t j = 0; g && j < params[i]->size; j++)
            sum += (double)g[j] * (double)g[j];
    }
    return sqrt(sum);
}

static void scale_grad(Tensor *p, float factor)
{
    float *g = p->grad;
    long n = (long)p->size;
#pragma omp parallel for schedule(static) if (n >= OPTIM_PARALLEL_MIN)
    for (long j = 0; j < n; j++)
        g[j] *= factor;
}

void clip_grads_for_norm(Tensor *const *params, int n, double norm, double max_norm)
{
    double coef = max_norm / (norm + 1e-6);
    if (!isfinite(norm) || coef >= 1.0)
        return;
    for (int i = 0; i < n; i++)
        if (params[i]->grad)
            scale_grad(params[i], (float)coef);
}

double clip_grad_norm_to(Tensor *const *params, int n, double max_norm)
{
    double norm = clip_grad_norm(params, n);
    clip_grads_for_norm(params, n, norm, max_norm);
    return norm;
}

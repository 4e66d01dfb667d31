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

double clip_grad_norm_to(Tensor *const *params, int n, double max_norm)
{
    double norm = clip_grad_norm(params, n);
    double coef = max_norm / (norm + 1e-6);
    if (!isfinite(norm) || coef >= 1.0)
        return norm;
    for (int i = 0; i < n; i++)
        if (params[i]->grad)
            scale_grad(params[i], (float)coef);
    return norm;
}

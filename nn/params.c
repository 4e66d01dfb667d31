#include "nn/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/rng.h"

static void grow(NnParams *p)
{
    int cap = p->cap ? 2 * p->cap : 32;
    Tensor **t = realloc(p->tensors, (size_t)cap * sizeof *t);
    if (!t)
        tensor_fatal("out of memory growing a parameter list");
    p->tensors = t;
    NnInit *init = realloc(p->init, (size_t)cap * sizeof *init);
    if (!init)
        tensor_fatal("out of memory growing a parameter list");
    p->init = init;
    p->cap = cap;
}

void nn_params_name(char name[TENSOR_NAME_LEN], const char *prefix, const char *suffix)
{
    int len = prefix[0] ? snprintf(name, TENSOR_NAME_LEN, "%s.%s", prefix, suffix)
                        : snprintf(name, TENSOR_NAME_LEN, "%s", suffix);
    if (len < 0 || len >= TENSOR_NAME_LEN)
        tensor_fatal("parameter name '%s.%s' is longer than %d characters", prefix, suffix,
                     TENSOR_NAME_LEN - 1);
}

Tensor *nn_params_add(NnParams *p, const char *prefix, const char *suffix, int ndim,
                      const int *shape, NnInit init)
{
    char name[TENSOR_NAME_LEN];
    nn_params_name(name, prefix, suffix);
    if (nn_params_find(p, name))
        tensor_fatal("two parameters are named '%s'", name);
    if (p->n == p->cap)
        grow(p);
    Tensor *t = tensor_param(name, ndim, shape);
    if (p->no_storage && p->no_storage(name, ndim)) {
        mem_free(t->data);      /* one tensor's bytes for a moment, never all of them */
        t->data = NULL;
    }
    p->tensors[p->n] = t;
    p->init[p->n] = init;
    p->n++;
    return t;
}

Tensor *nn_params_find(const NnParams *p, const char *name)
{
    for (int k = 0; k < p->n; k++)
        if (strcmp(p->tensors[k]->name, name) == 0)
            return p->tensors[k];
    return NULL;
}

size_t nn_params_numel(const NnParams *p)
{
    size_t total = 0;
    for (int k = 0; k < p->n; k++)
        total += p->tensors[k]->size;
    return total;
}

void nn_params_init(NnParams *p, uint64_t seed)
{
    Rng rng = rng_new(seed, RNG_STREAM_INIT);
    for (int k = 0; k < p->n; k++) {
        Tensor *t = p->tensors[k];
        if (!t->data)
            continue;
        switch (p->init[k].kind) {
        case NN_INIT_NORMAL:
            for (size_t i = 0; i < t->size; i++)
                t->data[i] = p->init[k].std * rng_normal(&rng);
            break;
        case NN_INIT_UNIFORM: {
            float a = sqrtf(3.0f) * p->init[k].std;
            for (size_t i = 0; i < t->size; i++)
                t->data[i] = a * (2.0f * rng_uniform(&rng) - 1.0f);
            break;
        }
        case NN_INIT_ZEROS:
            tensor_fill(t, 0.0f);
            break;
        case NN_INIT_ONES:
            tensor_fill(t, 1.0f);
            break;
        }
    }
}

void nn_params_zero_grad(NnParams *p)
{
    for (int k = 0; k < p->n; k++)
        tensor_zero_grad(p->tensors[k]);
}

void nn_params_free(NnParams *p)
{
    for (int k = 0; k < p->n; k++)
        tensor_free(p->tensors[k]);
    free(p->tensors);
    free(p->init);
    *p = (NnParams){ 0 };
}

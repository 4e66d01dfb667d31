#ifndef TAPEGRAD_NN_PARAMS_H
#define TAPEGRAD_NN_PARAMS_H
/* The parameters of a model: every tensor_param its modules created, in creation order, each
 * with the rule that initialises it.
 *
 * The list owns the tensors. Its order is the model's fixed parameter order: the optimizer keeps
 * its state in it, a snapshot lists tensors in it, and nn_params_init draws the random initial
 * values in it. Names are unique (adding a second tensor of the same name is a programming
 * error), so a parameter can be found by name, for instance to load it from a file. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "autograd/tensor.h"

typedef enum {
    NN_INIT_NORMAL,     /* N(0, std^2) */
    NN_INIT_ZEROS,
    NN_INIT_ONES,
    NN_INIT_UNIFORM,    /* U(-a, a) with a = sqrt(3) std: the uniform of standard deviation std */
} NnInitKind;

typedef struct {
    NnInitKind kind;
    float      std;     /* NN_INIT_NORMAL and NN_INIT_UNIFORM only */
} NnInit;

/* Says which parameters are made without storage (see NnParams.no_storage). */
typedef bool (*NnNoStorageFn)(const char *name, int ndim);

typedef struct {
    Tensor **tensors;
    NnInit  *init;
    int      n, cap;
    /* NULL, or the parameters to make without storage: their Tensor (name, shape) exists with
     * data NULL, and nn_params_init leaves them alone. For a model whose weights will be
     * filled one at a time and quantized (QLoRA, optim/train.h's trainer_new_lora), so that
     * every fp32 weight never exists at once. */
    NnNoStorageFn no_storage;
} NnParams;

/* "prefix.suffix" (just suffix when prefix is empty) into name; a name that does not fit in
 * TENSOR_NAME_LEN is a programming error rather than a silent truncation. */
void    nn_params_name(char name[TENSOR_NAME_LEN], const char *prefix, const char *suffix);
/* A new parameter named "prefix.suffix" (or just suffix when prefix is empty), appended to the
 * list. Its data is uninitialised until nn_params_init. */
Tensor *nn_params_add(NnParams *p, const char *prefix, const char *suffix, int ndim,
                      const int *shape, NnInit init);
/* The parameter of that name, or NULL. */
Tensor *nn_params_find(const NnParams *p, const char *name);
/* Total number of elements over all parameters. */
size_t  nn_params_numel(const NnParams *p);
/* Fills every parameter by its rule (one without storage is skipped, drawing nothing). One generator, rng_new(seed, RNG_STREAM_INIT), serves the
 * whole list: the normal and uniform parameters draw their elements in list order, row-major,
 * so a seed fixes every initial value and adding a zero-initialised parameter shifts nothing. */
void    nn_params_init(NnParams *p, uint64_t seed);
/* Zeroes every parameter gradient that exists. */
void    nn_params_zero_grad(NnParams *p);
/* Frees every tensor and the list itself; the list is empty afterwards. */
void    nn_params_free(NnParams *p);

#endif

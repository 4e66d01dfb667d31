#ifndef TAPEGRAD_KERNELS_H
#define TAPEGRAD_KERNELS_H
/* Which kernels run the matrix products: a choice between speed and the same bits everywhere.
 *
 *   fast      the best library for this CPU (autograd/gemm.h: OpenBLAS or oneDNN). Its sums
 *             run in an order chosen by the library's kernels, so the last bits of a product
 *             depend on the CPU, the library's version and which kernel it picked.
 *   portable  tapegrad's own product (autograd/gemm_portable.c): every output element is one
 *             chain of fused multiply-adds in ascending k, so neither the vector width (AVX2 or
 *             AVX-512), nor the thread count, nor the blocking changes a bit. Every x86-64 CPU
 *             with FMA gives the same results, at some cost in speed (docs/performance.md).
 *
 * Everything else (layernorm, softmax, the loss, clipping, the optimizers) sums in one fixed
 * order in both modes (autograd/reduce.h), so the products are the only difference.
 *
 * The mode comes from the environment, TAPEGRAD_KERNELS=portable or fast (fast when unset),
 * read once at the first product; the programs that train also take --kernels, which calls
 * kernels_set before any work. */
#include <stdbool.h>

typedef enum { KERNELS_FAST, KERNELS_PORTABLE } KernelsMode;

/* The mode in force: what kernels_set chose, else TAPEGRAD_KERNELS. An unknown value of
 * TAPEGRAD_KERNELS is a fatal error naming it. */
KernelsMode kernels_mode(void);

/* Chooses the mode for the rest of the process. Call before the first product. */
void kernels_set(KernelsMode mode);

/* "fast" or "portable". */
const char *kernels_name(KernelsMode mode);

/* Parses "fast" or "portable"; false for anything else (out untouched). */
bool kernels_parse(const char *text, KernelsMode *out);

#endif

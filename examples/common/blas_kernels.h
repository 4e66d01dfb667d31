#ifndef TAPEGRAD_BLAS_KERNELS_H
#define TAPEGRAD_BLAS_KERNELS_H
/* Which sgemm kernels OpenBLAS runs. Debian's OpenBLAS carries kernels for many CPUs and picks
 * one set when it loads, from the CPU model; on a model its table does not know it falls back
 * to its SSE3 "Prescott" kernels, whatever the CPU can do. Seen here: an unnamed Xeon with
 * AVX-512 ("Intel(R) Xeon(R) Processor"), where a large-case training step took 1409 ms on the
 * fallback, 515 ms with the Haswell (AVX2) kernels and 356 ms with SkylakeX (AVX-512)
 * (bench/ddp.sh measures the three). The choice can only be changed before the library loads,
 * through OPENBLAS_CORETYPE. So a program that finds the fallback on a CPU with AVX-512 or AVX2
 * runs itself again (rerun.h), same arguments, with OPENBLAS_CORETYPE=SkylakeX or Haswell. A
 * choice already in the environment is left alone, as is every CPU OpenBLAS recognised.
 *
 * cli_init does it, so every example program starts with the kernels its CPU can run. */
#include <stdbool.h>
#include <stddef.h>

/* Sets OPENBLAS_CORETYPE when OpenBLAS fell back to Prescott on a CPU that can do better;
 * true when it did, and the program must then be run again for the choice to take effect.
 * blas_kernels_undo takes the setting back (for when the rerun failed). */
bool        blas_kernels_choose(void);
void        blas_kernels_undo(void);
/* blas_kernels_choose, then the rerun: for the benchmarks, which leave the wait policy alone. */
void        blas_kernels_check(void);
/* One line for a program's description: the kernels running and who chose them. */
const char *blas_kernels_note(char *buf, size_t len);

#endif

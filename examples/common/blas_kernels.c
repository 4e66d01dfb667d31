/* OpenBLAS's kernel choice (examples/common/blas_kernels.h). */
#include "examples/common/blas_kernels.h"

#include "autograd/gemm.h"
#include "autograd/kernels.h"
#include "examples/common/rerun.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* OpenBLAS's own (cblas.h declares it, but without const on some versions). */
char *openblas_get_corename(void);

/* Set in the re-executed program: the core OpenBLAS had picked, so that a failed choice cannot
 * loop and the description can say what happened. */
static const char *const MARK = "TAPEGRAD_BLAS_FALLBACK";

bool blas_kernels_choose(void)
{
    if (getenv("OPENBLAS_CORETYPE") || getenv(MARK))
        return false;
    const char *core = openblas_get_corename();
    if (!core || strcasecmp(core, "prescott") != 0)
        return false;
    __builtin_cpu_init();
    const char *better = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                         : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                           : NULL;
    if (!better)
        return false;
    setenv("OPENBLAS_CORETYPE", better, 1);
    setenv(MARK, core, 1);
    return true;
}

void blas_kernels_undo(void)
{
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(MARK);
}

void blas_kernels_check(void)
{
    if (!blas_kernels_choose())
        return;
    rerun_self();
    blas_kernels_undo();        /* the rerun failed: carry on as we were */
}

const char *blas_kernels_note(char *buf, size_t len)
{
    if (gemm_library() != GEMM_OPENBLAS || kernels_mode() == KERNELS_PORTABLE)
        return gemm_describe(buf, len);     /* OpenBLAS is linked but runs no product */
    const char *fallback = getenv(MARK);
    if (fallback)
        snprintf(buf, len, "OpenBLAS %s kernels (OPENBLAS_CORETYPE set by tapegrad: OpenBLAS "
                 "picked %s, its SSE3 fallback, on this CPU)", openblas_get_corename(), fallback);
    else
        snprintf(buf, len, "OpenBLAS %s kernels%s", openblas_get_corename(),
                 getenv("OPENBLAS_CORETYPE") ? " (OPENBLAS_CORETYPE from the environment)" : "");
    return buf;
}

/* OpenBLAS's kernel choice (examples/common/blas_kernels.h). */
#include "examples/common/blas_kernels.h"

#include "autograd/gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* OpenBLAS's own (cblas.h declares it, but without const on some versions). */
char *openblas_get_corename(void);

/* Set in the re-executed program: the core OpenBLAS had picked, so that a failed choice cannot
 * loop and the description can say what happened. */
static const char *const MARK = "TAPEGRAD_BLAS_FALLBACK";

/* argv from /proc/self/cmdline: NUL-separated arguments. */
static char **own_arguments(void)
{
    static char text[1 << 16];
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f)
        return NULL;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    if (n == 0 || n == sizeof text - 1)
        return NULL;            /* unreadable, or too long to trust */
    text[n] = '\0';
    static char *argv[4096];
    int argc = 0;
    for (size_t i = 0; i < n && argc < 4095; i += strlen(text + i) + 1)
        argv[argc++] = text + i;
    argv[argc] = NULL;
    return argv;
}

void blas_kernels_check(void)
{
    if (getenv("OPENBLAS_CORETYPE") || getenv(MARK))
        return;
    const char *core = openblas_get_corename();
    if (!core || strcasecmp(core, "prescott") != 0)
        return;
    __builtin_cpu_init();
    const char *better = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                         : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                           : NULL;
    char **argv = better ? own_arguments() : NULL;
    if (!argv)
        return;
    setenv("OPENBLAS_CORETYPE", better, 1);
    setenv(MARK, core, 1);
    fflush(NULL);
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE");  /* the exec failed: carry on as we were */
}

const char *blas_kernels_note(char *buf, size_t len)
{
    if (strcmp(gemm_backend(), "openblas") != 0)
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

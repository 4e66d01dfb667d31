#ifndef TAPEGRAD_RERUN_H
#define TAPEGRAD_RERUN_H
/* Running the program again from the start, same arguments, with a changed environment.
 * Some settings are read by a library once, when it loads, before main: OpenBLAS's kernel
 * choice (blas_kernels.h) and OpenMP's wait policy (wait_policy.h). A program that wants to
 * change them sets the variables with setenv and calls rerun_self, once for all of them. */

/* Replaces this process with /proc/self/exe and the arguments read from /proc/self/cmdline.
 * Returns only when that cannot be done (unreadable or over-long arguments, a failed exec);
 * the caller then carries on as it was and should undo its setenv calls. */
void rerun_self(void);
/* The value name had when this process started (NULL: unset), which is what a library read
 * when it loaded: setenv since then changes getenv's answer, not the library's. */
const char *rerun_start_env(const char *name);

#endif

/* The kernel mode (autograd/kernels.h). */
#include "autograd/kernels.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static KernelsMode mode = KERNELS_FAST;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* Products run on several threads at once: the environment is read by exactly one of them. */
static void read_env(void)
{
    const char *text = getenv("TAPEGRAD_KERNELS");
    if (!text || !*text)
        return;
    if (!kernels_parse(text, &mode)) {
        fprintf(stderr, "tapegrad: TAPEGRAD_KERNELS=%s: choose portable or fast\n", text);
        exit(2);
    }
}

KernelsMode kernels_mode(void)
{
    pthread_once(&env_once, read_env);
    return mode;
}

void kernels_set(KernelsMode m)
{
    /* Read the environment first, so that a later kernels_mode cannot overwrite the choice. */
    pthread_once(&env_once, read_env);
    mode = m;
}

const char *kernels_name(KernelsMode m) { return m == KERNELS_PORTABLE ? "portable" : "fast"; }

bool kernels_parse(const char *text, KernelsMode *out)
{
    if (strcmp(text, "portable") == 0)
        *out = KERNELS_PORTABLE;
    else if (strcmp(text, "fast") == 0)
        *out = KERNELS_FAST;
    else
        return false;
    return true;
}

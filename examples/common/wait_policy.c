/* OpenMP's wait policy for the programs (examples/common/wait_policy.h). */
#include "examples/common/wait_policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Set in the rerun program, so that the note can say who chose the policy. */
static const char *const MARK = "TAPEGRAD_WAIT_POLICY";

bool wait_policy_choose(void)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
        return false;
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    setenv(MARK, "1", 1);
    return true;
}

void wait_policy_undo(void)
{
    unsetenv("OMP_WAIT_POLICY");
    unsetenv(MARK);
}

/* The value name had when this process started, which is what libgomp read when it loaded
 * (setenv changes getenv's answer, not libgomp's): the note reports what runs, not what was
 * asked for. NULL when it was not set. */
static const char *start_env(const char *name)
{
    static char text[1 << 16];
    FILE *f = fopen("/proc/self/environ", "rb");
    if (!f)
        return getenv(name);
    size_t n = fread(text, 1, sizeof text - 1, f), k = strlen(name);
    fclose(f);
    text[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(text + i) + 1)
        if (strncmp(text + i, name, k) == 0 && text[i + k] == '=')
            return text + i + k + 1;
    return NULL;
}

const char *wait_policy_note(char *buf, size_t len)
{
    const char *policy = start_env("OMP_WAIT_POLICY"), *spin = start_env("GOMP_SPINCOUNT");
    if (policy && !spin && start_env(MARK))
        snprintf(buf, len, "OMP_WAIT_POLICY=%s, tapegrad's default for a shared machine (set "
                 "OMP_WAIT_POLICY=ACTIVE on one that runs nothing else)", policy);
    else if (policy && spin)
        snprintf(buf, len, "OMP_WAIT_POLICY=%s GOMP_SPINCOUNT=%s (from the environment)",
                 policy, spin);
    else if (policy)
        snprintf(buf, len, "OMP_WAIT_POLICY=%s (from the environment)", policy);
    else if (spin)
        snprintf(buf, len, "GOMP_SPINCOUNT=%s (from the environment)", spin);
    else
        snprintf(buf, len, "libgomp's default (a thread spins about 300 000 times after a "
                 "region before it sleeps)");
    return buf;
}

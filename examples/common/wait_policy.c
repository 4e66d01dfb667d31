/* OpenMP's wait policy for the programs (examples/common/wait_policy.h). */
#include "examples/common/wait_policy.h"

#include "examples/common/rerun.h"

#include <stdio.h>
#include <stdlib.h>

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

const char *wait_policy_note(char *buf, size_t len)
{
    /* What libgomp read, not what was asked for. */
    const char *policy = rerun_start_env("OMP_WAIT_POLICY");
    const char *spin = rerun_start_env("GOMP_SPINCOUNT");
    if (policy && !spin && rerun_start_env(MARK))
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

#include "examples/common/cli.h"

#include <string.h>

#include "analysis/seed_stats.h"
#include "autograd/tensor.h"
#include "examples/common/blas_kernels.h"
#include "examples/common/rerun.h"
#include "examples/common/wait_policy.h"

void cli_init(const char *argv0)
{
    /* Both settings are read by their library when it loads: one rerun applies the two. */
    bool blas = blas_kernels_choose(), wait = wait_policy_choose();
    if (blas || wait) {
        rerun_self();
        if (blas)               /* the rerun failed: carry on as we were */
            blas_kernels_undo();
        if (wait)
            wait_policy_undo();
    }
    /* the library's messages (out of memory) and cli/'s name it */
    const char *slash = argv0 ? strrchr(argv0, '/') : NULL;
    tensor_set_program(slash ? slash + 1 : argv0);
}

int cli_seed_list(const char *flag, const char *arg, long *seeds, int max)
{
    int n = seed_list_parse(arg, seeds, max);
    if (n < 0)
        cli_usage_error("%s '%s': not a list of distinct seeds like 1-3 or 1,2,5 (at most %d)",
                        flag, arg, max);
    return n;
}

#ifndef TAPEGRAD_EXAMPLES_CLI_H
#define TAPEGRAD_EXAMPLES_CLI_H
/* An example program's start, and the command line's values and failures (cli/cli.h). */
#include "cli/cli.h"

/* Set once from main, first: cli_init(argv[0]). Messages start with the program's base name.
 * It also makes sure OpenBLAS runs kernels this CPU can use (examples/common/blas_kernels.h)
 * and sets OpenMP's wait policy for a shared machine (wait_policy.h), which can mean running
 * the program again from the start (rerun.h). */
void cli_init(const char *argv0);

/* A list of seeds given to flag ("1-3", "1,2,5"; distinct, at most max) into seeds[]: how many.
 * Anything else is a usage error naming the flag (analysis/seed_stats.h, seed_list_parse). */
int cli_seed_list(const char *flag, const char *arg, long *seeds, int max);

#endif

#ifndef TAPEGRAD_DIST_TEST_H
#define TAPEGRAD_DIST_TEST_H
/* What the tests of dist/ share. They run as several ranks under scripts/mpirun (tests/run.sh
 * starts every test_dist_* binary that way), each rank running every test. Two rules keep the
 * ranks in step and the report honest:
 *   - a test does all its communication first and asserts last, so a failed assertion (which
 *     leaves the test at once) never leaves another rank waiting for a message;
 *   - what a test asserts is agreed over the ranks first (dist_test_all), so every rank passes
 *     or fails it together and rank 0, the only one that prints, reports every rank's verdict.
 * A test that needs fewer ranks than the world has uses a sub-communicator (dist_test_comm). */
#include <stdio.h>

#include "autograd/rng.h"
#include "dist/comm.h"

/* True when ok holds on every rank of the world. */
static inline bool dist_test_all(bool ok)
{
    return dist_all_ok(dist_world(), ok);
}

/* The first n ranks of the world as a communicator (NULL on the other ranks); skip a test
 * with cmocka's skip() when the world has fewer than n ranks. */
static inline DistComm *dist_test_comm(int n)
{
    DistComm *w = dist_world();
    return dist_split(w, w->rank < n ? 0 : -1, w->rank);
}

/* Call first in main: MPI up, and only rank 0's cmocka report on stdout. */
static inline void dist_test_init(int *argc, char ***argv)
{
    dist_init(argc, argv);
    if (dist_world()->rank != 0 && !freopen("/dev/null", "w", stdout))
        perror("freopen");
}

/* rows of T tokens below V drawn from rng, and their targets: (3 x + 1) mod V, the first two
 * positions of each row not counted (-1), so that some targets are ignored. */
static inline void dist_test_rows(Rng *rng, int rows, int T, int V, int *tokens, int *targets)
{
    for (int i = 0; i < rows * T; i++)
        tokens[i] = (int)rng_below(rng, V);
    for (int i = 0; i < rows * T; i++)
        targets[i] = i % T < 2 ? -1 : (3 * tokens[i] + 1) % V;
}

#endif

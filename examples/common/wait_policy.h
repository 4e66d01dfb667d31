#ifndef TAPEGRAD_WAIT_POLICY_H
#define TAPEGRAD_WAIT_POLICY_H
/* What an OpenMP thread does after a parallel region: the programs' default is to sleep
 * (OMP_WAIT_POLICY=PASSIVE), docs/performance.md "Who owns the cores" has the measurements.
 *
 * libgomp's own default, with OMP_WAIT_POLICY unset, spins about 300 000 times (a few
 * milliseconds) before it sleeps. On an idle machine the next region then starts at once; on a
 * machine where anything else wants a core (a laptop with a browser open, a second training
 * run, a build) the spinning thread holds the core its working partner needs, and a training
 * step measured up to fifteen times as long as with PASSIVE. A short spin (GOMP_SPINCOUNT 1000
 * or 10000) beat PASSIVE under light load and took up to 3.4 times its step under heavy load.
 * PASSIVE costs a futex
 * wake-up per region instead: about a quarter of the small model's step on an idle machine,
 * a few percent of the large one's. A bounded loss was chosen over an unbounded one.
 *
 * libgomp reads the policy when it loads, so choosing it means running the program again
 * (rerun.h); cli_init does that, together with the OpenBLAS kernel choice. Whoever sets
 * OMP_WAIT_POLICY or GOMP_SPINCOUNT keeps their choice: OMP_WAIT_POLICY=ACTIVE for a machine
 * that runs nothing else. */
#include <stdbool.h>
#include <stddef.h>

/* Sets OMP_WAIT_POLICY=PASSIVE when neither variable is set; true when it did (the program
 * must then be run again). wait_policy_undo takes it back, for when the rerun failed. */
bool        wait_policy_choose(void);
void        wait_policy_undo(void);
/* One line for a program's description: the policy running and who chose it. */
const char *wait_policy_note(char *buf, size_t len);

#endif

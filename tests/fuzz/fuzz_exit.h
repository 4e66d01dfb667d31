#ifndef TAPEGRAD_FUZZ_EXIT_H
#define TAPEGRAD_FUZZ_EXIT_H
/* exit() as a jump back to the harness, for the harnesses that run train_gpt's own code (which
 * ends a refused run with exit): linked with -Wl,--wrap=exit, an armed exit longjmps to
 * fuzz_exit_jump with its status in fuzz_exit_status; an unarmed one is the real exit. One copy
 * for every harness that includes it, also when several are built into tests/test_fuzz_replay. */
#include <setjmp.h>

static jmp_buf fuzz_exit_jump;
static volatile int fuzz_exit_armed, fuzz_exit_status;

void __real_exit(int code);
void __wrap_exit(int code);
void __wrap_exit(int code)
{
    if (fuzz_exit_armed) {
        fuzz_exit_armed = 0;
        fuzz_exit_status = code;
        longjmp(fuzz_exit_jump, 1);
    }
    __real_exit(code);
}

/* The jump leaves what a refused run allocated, as exit() would: not a leak to report, in the
 * fuzzer or in the replay under SANITIZE=1. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }

#endif

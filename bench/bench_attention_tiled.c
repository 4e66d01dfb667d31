/* Tiled against standard attention at B=1 T=1024 H=4 D=64 (and T=256 for the small end): peak
 * activation bytes of one forward + backward and milliseconds per pass. The target of the
 * "attention memory" issue: the tiled op keeps at most 1/4 of the standard op's activation
 * bytes at T=1024; the time ratio is printed beside it (no target: recomputing P costs one
 * more product in the backward).
 *
 * Prints one TSV row per run, then the ratios with PASS or FAIL; exits 1 on FAIL. */
#include <stdio.h>

#include "autograd/parallel.h"
#include "examples/attention_memory/attention_measure.h"

enum { REPS = 11 };

int main(void)
{
    par_set_threads(0);
    const int B = 1, H = 4, D = 64, TS[] = { 256, 1024 };
    printf("attention\tB\tT\tH\tD\tthreads\tpeak_act_bytes\tpeak_temp_bytes\tms_fwd_bwd\n");
    AttnMeasure m[2];
    for (size_t i = 0; i < sizeof TS / sizeof TS[0]; i++)
        for (int kind = ATTN_STANDARD; kind <= ATTN_TILED; kind++) {
            m[kind] = attn_measure((AttnKind)kind, B, TS[i], H, D, REPS, 42);
            printf("%s\t%d\t%d\t%d\t%d\t%d\t%zu\t%zu\t%.3f\n", ATTN_NAME[kind], B, TS[i], H, D,
                   par_threads(), m[kind].peak_act, m[kind].peak_temp, m[kind].ms);
        }
    /* m holds the last T, 1024. */
    double act_ratio = (double)m[ATTN_TILED].peak_act / (double)m[ATTN_STANDARD].peak_act;
    double time_ratio = m[ATTN_TILED].ms / m[ATTN_STANDARD].ms;
    bool pass = act_ratio <= 0.25;
    printf("T=1024 act bytes tiled / standard: %.4f (target <= 0.25) %s\n", act_ratio,
           pass ? "PASS" : "FAIL");
    printf("T=1024 time tiled / standard: %.3f (%.2f ms / %.2f ms)\n", time_ratio,
           m[ATTN_TILED].ms, m[ATTN_STANDARD].ms);
    return pass ? 0 : 1;
}

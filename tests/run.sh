#!/bin/sh
# Runs every test binary given, prints each one's cmocka report, and ends with one summary line
# "N passed, N failed" that counts individual tests. Exits non-zero if any test failed or a
# binary crashed.
#
# OpenMP threads wait for each other passively here (unless the caller chose a policy): the tests
# time nothing, and on a machine where another process holds a core, spinning threads wait for a
# descheduled partner at every barrier (the suite took 7 min with two training runs beside it,
# 31 s passive; docs/performance.md measures the policies).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
passed=0; failed=0; crashed=""
# Tests of the distributed layer (test_dist_*) run as DIST_RANKS ranks under scripts/mpirun,
# with a time limit so that a rank left waiting for a message fails the test instead of hanging
# the suite; only rank 0 prints the cmocka report (the tests make it collect every rank's
# verdict). LeakSanitizer ignores what OpenMPI itself keeps until exit (tests/lsan_mpi.supp);
# for those suppressions to match, the allocations' stacks must reach OpenMPI's libraries,
# which have no frame pointers: the slow unwinder (fast_unwind_on_malloc=0) follows them, the
# fast one stops after one frame and the leaks were reported (test_dist_comm failed under
# SANITIZE=1). Only the dist tests pay for it.
here=$(cd "$(dirname "$0")" && pwd)   # absolute: some tests run programs from another folder
DIST_RANKS="${DIST_RANKS:-4}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$here/lsan_mpi.supp:print_suppressions=0}"
run_one() {
    case "$(basename "$1")" in
        test_dist_*) ASAN_OPTIONS="${ASAN_OPTIONS:-fast_unwind_on_malloc=0}" timeout 600 sh "$here/../scripts/mpirun" -np "$DIST_RANKS" "$1" ;;
        *.sh) sh "$1" ;;
        *) "$1" ;;
    esac
}
for t in "$@"; do
    out=$(CMOCKA_MESSAGE_OUTPUT=stdout run_one "$t" 2>&1); rc=$?
    printf '%s\n' "$out"
    p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -n 1)
    f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -n 1)
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
    if [ $rc -ne 0 ] && [ -z "$f" ]; then crashed="$crashed $(basename "$t")"; failed=$((failed + 1)); fi
    # Coursework: the failed tests that tests/parts.tsv assigns to a part (docs/coursework.md).
    if [ "${f:-0}" -gt 0 ] || [ $rc -ne 0 ]; then
        parts_failed="${parts_failed:-}$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_]*\)$/\1/p' |
            sort -u | awk -F'\t' -v b="$(basename "$t")" -v crashed=$((rc != 0 && ${f:-0} == 0)) '
            FILENAME != "-" { if ($1 == b) part[$2] = $3; next }
            $0 in part { printf "\n  part %s: %s %s failed", part[$0], b, $0 }
            END { if (crashed && ("*" in part)) printf "\n  part %s: %s crashed or ran out of time", part["*"], b }
            ' "$here/parts.tsv" - 2>/dev/null)"
    fi
done
[ -n "$crashed" ] && echo "crashed or exited non-zero:$crashed"
[ -n "${parts_failed:-}" ] && echo "graded tests that failed (tests/parts.tsv):$parts_failed"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/bin/sh
# Runs every benchmark binary in BUILD/bench in name order. Benchmarks print their own tables
# and ratios; the speed and memory targets of the issues are checked here, never in tests.
build=${1:-build}
status=0
for b in "$build"/bench/*; do
    [ -x "$b" ] || continue
    echo "== $(basename "$b")"
    "$b" || status=1
done
echo "== ddp.sh (data parallel against PyTorch DDP, scripts/mpirun)"
sh "$(dirname "$0")/ddp.sh" "$build" || status=1
exit $status

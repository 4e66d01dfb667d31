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
echo "== bench_gpt large in the portable kernel mode (its share of the step outside the products)"
TAPEGRAD_KERNELS=portable "$build/bench/bench_gpt" large --no-torch || status=1
echo "== gpt_avx2.sh (bench_gpt built and run as on an AVX2-only CPU)"
sh "$(dirname "$0")/gpt_avx2.sh" || status=1
echo "== kernels.sh (the portable kernel mode against fast)"
sh "$(dirname "$0")/kernels.sh" "$build" || status=1
echo "== thread_cliff.sh (the default threads against the better of 1 and 2, widths 16-768)"
sh "$(dirname "$0")/thread_cliff.sh" "$build" || status=1
echo "== ddp.sh (data parallel against PyTorch DDP, scripts/mpirun)"
sh "$(dirname "$0")/ddp.sh" "$build" || status=1
exit $status

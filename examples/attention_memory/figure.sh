#!/bin/sh
# Draws docs/figures/attention_memory.png (and keeps the TSV it is drawn from beside it): peak
# activation bytes and time of standard and tiled attention for T = 64 .. 2048, B=1 H=4 D=64,
# on one thread: the times of two threads are at the mercy of anything else running on a small
# machine (a parallel loop waits for its slowest thread), and memory does not depend on it.
# Usage: sh examples/attention_memory/figure.sh BUILD_DIR   (run from the repository root)
set -eu
build=${1:-build}
out=docs/figures
mkdir -p "$out"
# No stale figure passes for a new one: a failed plot leaves none (git has the old one).
rm -f "$out/attention_memory.png"
"$build/bin/attention_memory" --tmin 64 --tmax 2048 --batch 1 --heads 4 --head-dim 64 \
    --threads 1 --reps 9 --log "$out/attention_memory.tsv" \
    --plot "$out/attention_memory.png" > /dev/null
test -f "$out/attention_memory.png"
echo "wrote $out/attention_memory.png"

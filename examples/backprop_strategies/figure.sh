#!/bin/sh
# Draws docs/figures/backprop_memory.png, backprop_forwards.png and backprop_frontier.png (and
# keeps the TSVs they are drawn from beside them): a chain of n = 4 .. 64 MLP layers at width
# 256, batch 32, with every strategy; the frontier at n = 64.
# Usage: sh examples/backprop_strategies/figure.sh BUILD_DIR   (run from the repository root)
set -eu
build=${1:-build}
out=docs/figures
mkdir -p "$out"
"$build/bin/backprop_strategies" --log "$out/backprop_strategies.tsv" \
    --frontier-log "$out/backprop_frontier.tsv" --plot-memory "$out/backprop_memory.png" \
    --plot-forwards "$out/backprop_forwards.png" --plot-frontier "$out/backprop_frontier.png" \
    > /dev/null
for f in memory forwards frontier; do
    test -f "$out/backprop_$f.png"
    echo "wrote $out/backprop_$f.png"
done

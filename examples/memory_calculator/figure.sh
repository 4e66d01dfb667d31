#!/bin/sh
# Draws docs/figures/memory_strategies.png (and keeps the TSV it is drawn from beside it): peak
# activation bytes of one training step of train_gpt's default model (V 40, T 12, H 4, C 128,
# B 64) for 1..12 layers, vanilla / sqrt / memory-poor, predicted by formula (lines) and
# measured by autograd/mem in a real step (points).
# Usage: sh examples/memory_calculator/figure.sh BUILD_DIR   (run from the repository root)
set -eu
build=${1:-build}
here=$(dirname "$0")
out=docs/figures
mkdir -p "$out"
rm -f "$out/memory_strategies.png"
"$build/bin/memory_calculator" --sweep 12 --threads 1 > "$out/memory_strategies.tsv.tmp"
mv "$out/memory_strategies.tsv.tmp" "$out/memory_strategies.tsv"
term=pngcairo
gnuplot -e "set terminal" 2>&1 | grep -q pngcairo || term=png
gnuplot -e "input='$out/memory_strategies.tsv'; output='$out/memory_strategies.png'; term='$term'" \
    "$here/memory_strategies.gp"
test -f "$out/memory_strategies.png"
echo "wrote $out/memory_strategies.png"

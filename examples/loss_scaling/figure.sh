#!/bin/sh
# Draws docs/figures/loss_scaling_hist.png (the gradient histogram against fp16's range) and
# docs/figures/loss_scaling_curves.png (the training runs), and keeps the TSV files they are
# drawn from beside them. Six train_gpt runs of 2000 steps, two at a time on one thread each:
# 14 minutes on a busy two-core machine (docs/mixed_precision.md).
# Usage: sh examples/loss_scaling/figure.sh BUILD_DIR   (run from the repository root)
set -eu
build=${1:-build}
here=$(dirname "$0")
out=docs/figures
work=${TMPDIR:-/tmp}/loss_scaling_figure.$$
mkdir -p "$out" "$work"
rm -f "$out/loss_scaling_hist.png" "$out/loss_scaling_curves.png"
"$build/bin/loss_scaling" --out "$work" --jobs 2 > "$work/summary.md"
for f in hist underflow curves table; do
    cp "$work/loss_scaling_$f.tsv" "$out/"
done
term=pngcairo
gnuplot -e "set terminal" 2>&1 | grep -q pngcairo || term=png
gnuplot -e "input='$out/loss_scaling_hist.tsv'; underflow='$out/loss_scaling_underflow.tsv'" \
    -e "output='$out/loss_scaling_hist.png'; term='$term'" "$here/histogram.gp"
gnuplot -e "input='$out/loss_scaling_curves.tsv'; output='$out/loss_scaling_curves.png'" \
    -e "term='$term'" "$here/curves.gp"
test -f "$out/loss_scaling_hist.png" && test -f "$out/loss_scaling_curves.png"
cat "$work/summary.md"
rm -rf "$work"
echo "wrote $out/loss_scaling_hist.png and $out/loss_scaling_curves.png"

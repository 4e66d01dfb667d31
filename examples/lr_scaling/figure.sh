#!/bin/sh
# Draws docs/figures/lr_scaling_curves.png and docs/figures/lr_schedules.png (and keeps the TSV
# files they are drawn from beside them). The curves come from the default (short) run of
# lr_scaling, a few minutes on one core (the same seed-1 runs as in `lr_scaling --full`, so the
# same curves); its small table is printed, not kept: docs/figures/lr_scaling_table_full.tsv is
# the whole table, from `lr_scaling --full` (see docs/batch_and_lr.md).
# Usage: sh examples/lr_scaling/figure.sh BUILD_DIR   (run from the repository root)
set -eu
build=${1:-build}
here=$(dirname "$0")
out=docs/figures
work=${TMPDIR:-/tmp}/lr_scaling_figure.$$
mkdir -p "$out" "$work"
rm -f "$out/lr_scaling_curves.png" "$out/lr_schedules.png"
"$build/bin/lr_scaling" --out "$work" > "$work/table.md"
cp "$work/lr_scaling_curves.tsv" "$out/"
"$build/bin/lr_scaling" --schedules > "$out/lr_schedules.tsv"
term=pngcairo
gnuplot -e "set terminal" 2>&1 | grep -q pngcairo || term=png
gnuplot -e "input='$out/lr_scaling_curves.tsv'; output='$out/lr_scaling_curves.png'; term='$term'" \
    "$here/curves.gp"
gnuplot -e "input='$out/lr_schedules.tsv'; output='$out/lr_schedules.png'; term='$term'" \
    "$here/schedules.gp"
test -f "$out/lr_scaling_curves.png" && test -f "$out/lr_schedules.png"
cat "$work/table.md"
rm -rf "$work"
echo "wrote $out/lr_scaling_curves.png and $out/lr_schedules.png"

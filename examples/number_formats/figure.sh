#!/bin/sh
# Draws docs/figures/number_formats.png: run the program for the spacing TSV, then gnuplot.
# Usage: sh examples/number_formats/figure.sh BUILD_DIR   (run from the repository root)
set -eu
build=${1:-build}
here=$(dirname "$0")
out=docs/figures
mkdir -p "$out"
"$build/bin/number_formats" --spacing > "$out/number_formats.tsv"
term=pngcairo
gnuplot -e "set terminal" 2>&1 | grep -q pngcairo || term=png
gnuplot -e "data='$out/number_formats.tsv'; out='$out/number_formats.png'; term='$term'" \
    "$here/number_formats.gp"
echo "wrote $out/number_formats.png"

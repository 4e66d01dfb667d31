#!/bin/sh
# Draws docs/figures/memory_savers_curves.png and keeps the TSV files behind it and the table
# (memory_savers_table.tsv, memory_savers_curves.tsv) beside it.
#
# The full sweep is 27 train_gpt runs of 2000 steps (9 configurations x seeds 1-3), 7 to 18
# minutes each on one thread of the busy two-core machine, two at a time: two and a half hours
# or more, too long for `make figures`. So:
#   sh examples/memory_savers/figure.sh BUILD_DIR            redraws the PNG from the committed
#                                                           docs/figures/memory_savers_curves.tsv
#                                                           (what `make figures` does)
#   sh examples/memory_savers/figure.sh BUILD_DIR LOGS_DIR   rebuilds both TSV files and the PNG
#                                                           from the logs in LOGS_DIR
#                                                           (memory_savers --from-logs)
# and the runs themselves, once (finished runs in the folder are kept if interrupted):
#   BUILD_DIR/bin/memory_savers --out out/memory_savers --jobs 2
#   sh examples/memory_savers/figure.sh BUILD_DIR out/memory_savers
# Run from the repository root.
set -eu
build=${1:-build}
logs=${2:-}
here=$(dirname "$0")
out=docs/figures
mkdir -p "$out"
if [ -n "$logs" ]; then
    work=${TMPDIR:-/tmp}/memory_savers_figure.$$
    mkdir -p "$work"
    "$build/bin/memory_savers" --from-logs "$logs" --out "$work" > "$work/table.md"
    cp "$work/memory_savers_table.tsv" "$work/memory_savers_curves.tsv" "$out/"
    cat "$work/table.md"
    rm -rf "$work"
else
    echo "memory_savers: redrawing from the committed $out/memory_savers_curves.tsv" \
         "(give a folder of logs to rebuild it; see $0)"
fi
term=pngcairo
gnuplot -e "set terminal" 2>&1 | grep -q pngcairo || term=png
rm -f "$out/memory_savers_curves.png"
gnuplot -e "input='$out/memory_savers_curves.tsv'; output='$out/memory_savers_curves.png'" \
    -e "term='$term'" "$here/curves.gp"
test -f "$out/memory_savers_curves.png"
echo "wrote $out/memory_savers_curves.png"

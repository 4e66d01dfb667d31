#!/bin/sh
# Draws docs/figures/scaling_laws.png from the FULL study of scaling_laws (11 sizes x 7 budgets x
# 2 seeds with cooldown branches: see docs/scaling_laws.md for how long it took) and keeps the
# TSV files it is drawn from, every point (scaling_study.tsv) and every fitted number
# (scaling_fit.tsv) beside it. The printed report goes to docs/measured/scaling_full.txt, which
# docs/scaling_laws.md marks its numbers against.
# To refit or restyle without training again:
#   build/bin/scaling_laws --from-results docs/figures/scaling_study.tsv --out DIR
# Usage: sh examples/scaling_laws/figure.sh BUILD_DIR   (run from the repository root)
set -eu
build=${1:-build}
out=docs/figures
work=${TMPDIR:-/tmp}/scaling_laws_figure.$$
mkdir -p "$out" "$work"
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} "$build/bin/scaling_laws" --out "$work" \
    | grep -v '^step ' > "$work/report.txt"
for f in scaling_study.tsv scaling_fit.tsv scaling_points.tsv scaling_isoflop.tsv \
         scaling_optimal.tsv scaling_optimal_kaplan.tsv scaling_lines.tsv scaling_laws.png; do
    cp "$work/$f" "$out/"
done
cp "$work/report.txt" docs/measured/scaling_full.txt
cat "$work/report.txt"
rm -rf "$work"
echo "wrote $out/scaling_laws.png"

#!/bin/sh
# Regenerates docs/figures/: every examples/NAME/figure.sh is run with the build folder, and
# writes its PNG (and the TSV it was drawn from) into docs/figures/.
build=${1:-build}
status=0
mkdir -p docs/figures
for f in examples/*/figure.sh; do
    [ -f "$f" ] || continue
    echo "== $f"
    sh "$f" "$build" || status=1
done
exit $status

#!/bin/sh
# The data_parallel example: one launch of build/bin/data_parallel on 4 ranks (scripts/mpirun,
# one thread per rank) sweeps DDP and ZeRO 1-3 over 1, 2 and 4 ranks of the default model, and
# draws from the TSV it writes (docs/distributed.md):
#     docs/figures/data_parallel.png   model states per rank (measured bars, the ZeRO formulas
#                                      as points), bytes sent per step per rank (measured bars,
#                                      the paper's volumes as points), and the step time
#     docs/figures/data_parallel.tsv   the numbers
# Ranks oversubscribe the cores here, so the step times show the cost of the messages on a
# busy machine, not a cluster's. About two minutes on 2 cores.
# Usage: sh examples/data_parallel/figure.sh BUILD_DIR [STEPS] [PRECISION]  (from the repo root)
set -eu
build=${1:-build}
steps=${2:-6}
precision=${3:-fp32}
here=$(dirname "$0")
out=docs/figures
mkdir -p "$out"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
sh scripts/mpirun -np 4 "$build/bin/data_parallel" --steps "$steps" --precision "$precision" \
    --out "$out"
term=pngcairo
gnuplot -e "set terminal" 2>&1 | grep -q pngcairo || term=png
gnuplot -e "input='$out/data_parallel.tsv'; output='$out/data_parallel.png'; term='$term'" \
    "$here/data_parallel.gp"
echo "wrote $out/data_parallel.png"

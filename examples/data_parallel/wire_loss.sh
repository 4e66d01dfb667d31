#!/bin/sh
# What bf16 gradients on the wire cost in accuracy (issue 33, item 1; docs/distributed.md): DDP
# on 2 ranks of one thread, --precision bf16, the tiny config (L4 H4 C128, 8 rows per rank, a
# global batch of 16) on Tiny Shakespeare for 2000 steps, its gradients on an fp32 and on a
# bf16 wire, for each seed. Prints a TSV: seed, then the final validation loss of each wire and
# their ratio. One run at a time (two ranks fill the two cores): about 12 minutes a run on an
# idle 2-core machine, 25 at load 10.
# Usage: sh examples/data_parallel/wire_loss.sh BUILD_DIR [SEEDS]   (from the repository root)
set -eu
build=${1:-build}
seeds=${2:-"1 2 3"}
out=$build/wire_loss
mkdir -p "$out"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
final_val() {   # the last val_loss of a train_gpt log
    awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "val_loss") c = i }
                NR > 1 && $c != "" { v = $c } END { print v }' "$1"
}
printf 'seed\tfp32\tbf16\tratio\n'
for seed in $seeds; do
    for wire in fp32 bf16; do
        sh scripts/mpirun -np 2 "$build/bin/train_gpt" --parallel ddp --grad-wire "$wire" \
            --precision bf16 --data data/tinyshakespeare.txt --steps 2000 --layers 4 \
            --heads 4 --embd 128 --seq 64 --batch 8 --threads 1 --eval-every 250 \
            --eval-examples 1000 --seed "$seed" --log "$out/$wire.s$seed.tsv" > /dev/null
    done
    a=$(final_val "$out/fp32.s$seed.tsv")
    b=$(final_val "$out/bf16.s$seed.tsv")
    awk -v s="$seed" -v a="$a" -v b="$b" 'BEGIN { printf "%s\t%.4f\t%.4f\t%.5f\n", s, a, b, b / a }'
done

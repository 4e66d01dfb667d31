#!/bin/sh
# PipeDream against synchronous 1F1B (docs/pipeline.md): the same model, the same micro-batches in
# the same order (each run draws its batches from the same data RNG), on tinyshakespeare, 4
# stages, m = 8 micro-batches of 4 x 64 characters a step. 1F1B makes one update a step on the
# mean gradient of the 8; PipeDream makes 8, each on one micro-batch's gradient computed on
# weights p-1-s updates old, at the same learning rate. And one process making the same 8
# updates a step on fresh weights (--batch 4, 8 times the steps, the same warmup in tokens):
# what PipeDream would give without staleness. Writes
#     docs/measured/pipedream_loss.tsv   step, train loss (one process: the mean of its 8
#                                        updates' losses) and validation loss (every 50 steps)
#                                        of each
#     docs/figures/pipedream_loss.png    the three curves
# About 15 minutes on 2 cores (the ranks oversubscribe them).
# Usage: sh examples/pipeline_parallel/pipedream_loss.sh BUILD_DIR [STEPS]  (from the repo root)
set -eu
build=${1:-build}
steps=${2:-150}
here=$(dirname "$0")
work=${TMPDIR:-/tmp}/pipedream_loss.$$
mkdir -p "$work" docs/measured docs/figures
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
for s in 1f1b pipedream; do
    sh scripts/mpirun -np 4 "$build/bin/train_gpt" --parallel "pipeline:$s" --micro-batches 8 \
        --data data/tinyshakespeare.txt --layers 4 --heads 4 --embd 128 --batch 4 --seq 64 \
        --untied --steps "$steps" --eval-every 50 --threads 1 --log "$work/$s.tsv" \
        > "$work/$s.out" 2>&1 || { cat "$work/$s.out"; exit 1; }
    grep -E '^(final train loss|validation loss|bubble over|  stage)' "$work/$s.out" | sed "s/^/$s: /"
done
warm=$((steps / 10 < 100 ? steps / 10 : 100))
"$build/bin/train_gpt" --data data/tinyshakespeare.txt --layers 4 --heads 4 --embd 128 --batch 4 \
    --seq 64 --untied --steps $((8 * steps)) --warmup $((8 * warm)) --eval-every 400 --threads 1 \
    --log "$work/single.tsv" > "$work/single.out" 2>&1 || { cat "$work/single.out"; exit 1; }
grep -E '^(final train loss|validation loss)' "$work/single.out" | sed "s/^/one process: /"
# One row per step: the two logs side by side (columns found by name).
awk -F '\t' '
    FNR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; f++; next }
    f == 1 { a[$1] = $col["loss"]; va[$1] = $col["val_loss"]; n = $1 }
    f == 2 { b[$1] = $col["loss"]; vb[$1] = $col["val_loss"] }
    f == 3 { k = int(($1 + 7) / 8); c[k] += $col["loss"] / 8; if ($1 % 8 == 0) vc[k] = $col["val_loss"] }
    END {
        print "step\tloss_1f1b\tloss_pipedream\tloss_one_process\tval_loss_1f1b\tval_loss_pipedream\tval_loss_one_process"
        for (s = 1; s <= n; s++)
            printf "%d\t%s\t%s\t%.7g\t%s\t%s\t%s\n", s, a[s], b[s], c[s], va[s], vb[s], vc[s]
    }' "$work/1f1b.tsv" "$work/pipedream.tsv" "$work/single.tsv" > docs/measured/pipedream_loss.tsv
term=pngcairo
gnuplot -e "set terminal" 2>&1 | grep -q pngcairo || term=png
gnuplot -e "input='docs/measured/pipedream_loss.tsv'; output='docs/figures/pipedream_loss.png'; term='$term'" \
    "$here/loss.gp"
rm -rf "$work"
echo "wrote docs/measured/pipedream_loss.tsv and docs/figures/pipedream_loss.png"

#!/bin/sh
# The pipeline_parallel example: runs `train_gpt --parallel pipeline:...` under scripts/mpirun
# for the three schedules and a sweep of micro-batch counts, and draws from the measured logs
# (docs/pipeline.md):
#     docs/figures/pipeline_gantt.png    one step of naive, GPipe, 1F1B and PipeDream at p = 4,
#                                        m = 8: a row per stage, F and B boxes labelled by
#                                        micro-batch (pipeline_gantt_{naive,gpipe,1f1b,
#                                        pipedream}.tsv, the events; PipeDream's numbered over
#                                        the run, its model untied)
#     docs/figures/pipeline_bubble.png   bubble against m for p = 2 and 4: measured (wall clock),
#                                        replayed from CPU times, over (p-1)/(m+p-1)
#                                        (pipeline_bubble.tsv)
#     docs/figures/pipeline_memory.png   peak act bytes of each stage against m, GPipe vs 1F1B,
#                                        p = 4 (pipeline_memory.tsv)
# Each run: the add task, 4 blocks, micro-batches of --batch rows, one thread per rank, ranks
# oversubscribing the cores (scripts/mpirun). The first step warms the allocator's cache and is
# left out of the means. A few minutes on 2 cores.
# Usage: sh examples/pipeline_parallel/figure.sh BUILD_DIR [STEPS] [BATCH]  (from the repo root)
set -eu
build=${1:-build}
steps=${2:-4}
batch=${3:-16}
here=$(dirname "$0")
out=docs/figures
work=${TMPDIR:-/tmp}/pipeline_figure.$$
mkdir -p "$out" "$work"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE

# run P SCHED M [FLAGS]: leaves $work/P_SCHED_M.{log,ev}.tsv
run() {
    p=$1 s=$2 m=$3
    shift 3
    set -- "$p" "$s" "$m" "$@"
    sh scripts/mpirun -np "$p" "$build/bin/train_gpt" --parallel "pipeline:$s" \
        --micro-batches "$m" --layers 4 --batch "$batch" --steps "$steps" --threads 1 "$@" \
        --eval-every 0 --log "$work/${p}_${s}_$m.log.tsv" --pipe-events "$work/${p}_${s}_$m.ev.tsv" \
        > "$work/${p}_${s}_$m.out" 2>&1 || { cat "$work/${p}_${s}_$m.out"; exit 1; }
}

# The means over steps 2.. of a log's columns bubble, bubble_replayed, bubble_schedule,
# bubble_formula, and its last row's peak act bytes per stage.
summarise() {
    awk -F '\t' -v p="$1" -v s="$2" -v m="$3" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $1 > 1 { n++; b += $col["bubble"]; r += $col["bubble_replayed"] }
        { sc = $col["bubble_schedule"]; f = $col["bubble_formula"]; peaks = ""
          for (i = 0; i < p; i++) peaks = peaks "\t" $col["peak_act_s" i] }
        END { printf "%d\t%s\t%d\t%.4f\t%.4f\t%.4f\t%.4f%s\n", p, s, m, b / n, r / n, sc, f, peaks }
    ' "$work/$1_$2_$3.log.tsv"
}

# The events of the step with the shortest span among steps 2.. (the machine is shared: the
# quietest step shows the schedule, the others also other jobs' time).
quietest() {
    awk -F '\t' 'NR == FNR { if (FNR > 1 && $1 > 1 && $7 > end[$1]) end[$1] = $7; next }
        FNR == 1 { for (s in end) if (best == "" || end[s] < end[best]) best = s; print; next }
        $1 == best' "$1" "$1"
}

printf 'p\tschedule\tm\tbubble\tbubble_replayed\tbubble_schedule\tbubble_formula\n' \
    > "$out/pipeline_bubble.tsv"
printf 'p\tschedule\tm\tbubble\tbubble_replayed\tbubble_schedule\tbubble_formula\tpeak_act_s0\tpeak_act_s1\tpeak_act_s2\tpeak_act_s3\n' \
    > "$out/pipeline_memory.tsv"
for p in 2 4; do
    for s in gpipe 1f1b; do
        for m in 1 2 4 8 16; do
            echo "p = $p, $s, m = $m"
            run "$p" "$s" "$m"
            summarise "$p" "$s" "$m" | cut -f 1-7 >> "$out/pipeline_bubble.tsv"
            [ "$p" = 4 ] && summarise "$p" "$s" "$m" >> "$out/pipeline_memory.tsv"
        done
    done
done
run 4 naive 8
summarise 4 naive 8 | cut -f 1-7 >> "$out/pipeline_bubble.tsv"
run 4 pipedream 8 --untied
summarise 4 pipedream 8 | cut -f 1-7 >> "$out/pipeline_bubble.tsv"
for s in naive gpipe 1f1b pipedream; do
    quietest "$work/4_${s}_8.ev.tsv" > "$out/pipeline_gantt_$s.tsv"
    grep -E '^(bubble|peak)' "$work/4_${s}_8.out" | sed "s/^/$s: /"
done

term=pngcairo
gnuplot -e "set terminal" 2>&1 | grep -q pngcairo || term=png
gnuplot -e "dir='$out'; output='$out/pipeline_gantt.png'; term='$term'" "$here/gantt.gp"
gnuplot -e "input='$out/pipeline_bubble.tsv'; output='$out/pipeline_bubble.png'; term='$term'" \
    "$here/bubble.gp"
gnuplot -e "input='$out/pipeline_memory.tsv'; output='$out/pipeline_memory.png'; term='$term'" \
    "$here/memory.gp"
column -t "$out/pipeline_bubble.tsv"
rm -rf "$work"
echo "wrote $out/pipeline_gantt.png, $out/pipeline_bubble.png and $out/pipeline_memory.png"

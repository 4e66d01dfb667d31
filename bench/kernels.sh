#!/bin/sh
# What the portable kernel mode costs (autograd/kernels.h): train_gpt's step time with
# --kernels fast and --kernels portable, measured in turn (fast, portable, fast, portable, ...)
# so that both see the same load, on three models:
#   tiny   the demo's model: the add task, V=40 T=12 L=2 H=4 C=128, batch 64
#   small  bench_gpt's small case on text: V=65 T=64 L=4 H=4 C=128, batch 16
#   large  bench_gpt's large case on text: V=65 T=128 L=6 H=6 C=384, batch 8
# Per case and thread count: the median over the rounds of each run's median step time (steps
# after the first five) and portable / fast; and the same for the CPU seconds of the whole run
# (every thread's, start-up included), which other jobs on the machine disturb much less than
# the clock: on a loaded machine, read the CPU ratio. Also checks that every portable run, on 1 thread
# and on 2, printed the same losses (the mode's promise, on this machine) and says so.
#
#   sh bench/kernels.sh [BUILD] [ROUNDS]        (default build, 3 rounds)
#   CASES="large" THREADS="2" sh bench/kernels.sh     (some of the cases and thread counts)
build=${1:-build}
rounds=${2:-3}
bin="$build/bin/train_gpt"
[ -x "$bin" ] || { echo "bench/kernels.sh: $bin not built (make)" >&2; exit 1; }
data="$(dirname "$0")/../data/tinyshakespeare.txt"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

case_args() {
    case $1 in
    tiny)  echo "--task add --steps 60" ;;
    small) echo "--data $data --layers 4 --heads 4 --embd 128 --seq 64 --batch 16 --steps 40" ;;
    large) echo "--data $data --layers 6 --heads 6 --embd 384 --seq 128 --batch 8 --steps 15" ;;
    esac
}

# The median of the numbers on standard input, one per line.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# The median step time (ms column) of a log, steps after the fifth.
log_ms() {
    awk -F '\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "ms") c = i; next }
                 $1 > 5 && $c != "" { print $c }' "$1" | median
}

# User + system seconds of the children, from the second line of `times` ("0m1.23s 0m0.10s").
cpu_seconds() {
    sed -n 2p "$1" | tr 'ms' '  ' | awk '{ print $1 * 60 + $2 + $3 * 60 + $4 }'
}

# The losses of a log (step and loss columns), for comparing rounds.
log_losses() { cut -f 1,2 "$1"; }

# yes when every portable run of case $1 (each round, each thread count) printed the losses of
# the first.
portable_identical() {
    rm -f "$work/ref"
    for f in "$work/$1".*.portable.*.tsv; do
        [ -f "$work/ref" ] || log_losses "$f" > "$work/ref"
        log_losses "$f" | cmp -s - "$work/ref" || { echo no; return; }
    done
    echo yes
}

printf 'case\tthreads\tfast_ms\tportable_ms\tratio\tfast_cpu_s\tportable_cpu_s\tcpu_ratio\n'
for c in ${CASES:-tiny small large}; do
    for t in ${THREADS:-1 2}; do
        for r in $(seq "$rounds"); do
            for k in fast portable; do
                # The run in a subshell whose `times` gives its children's CPU seconds.
                # shellcheck disable=SC2046
                ( "$bin" $(case_args $c) --eval-every 0 --threads "$t" --kernels $k \
                    --log "$work/$c.$t.$k.$r.tsv" > /dev/null 2>&1 || exit 1; times ) \
                    > "$work/times" ||
                    { echo "bench/kernels.sh: train_gpt $c --kernels $k failed" >&2; exit 1; }
                log_ms "$work/$c.$t.$k.$r.tsv" > "$work/$c.$t.$k.$r.ms"
                cpu_seconds "$work/times" > "$work/$c.$t.$k.$r.cpu"
            done
        done
        fast=$(cat "$work/$c.$t.fast".*.ms | median)
        port=$(cat "$work/$c.$t.portable".*.ms | median)
        fast_cpu=$(cat "$work/$c.$t.fast".*.cpu | median)
        port_cpu=$(cat "$work/$c.$t.portable".*.cpu | median)
        printf '%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\n' "$c" "$t" "$fast" "$port" \
            "$(echo "$port $fast" | awk '{ print $1 / $2 }')" "$fast_cpu" "$port_cpu" \
            "$(echo "$port_cpu $fast_cpu" | awk '{ print $1 / $2 }')"
    done
    echo "# $c: every portable run (rounds x 1 and 2 threads) printed the same losses: $(portable_identical $c)"
done

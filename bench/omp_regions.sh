#!/bin/sh
# Parallel regions a training step of train_gpt opens, counted: docs/performance.md, "Fewer
# regions for the sleeping threads". Under OMP_WAIT_POLICY=PASSIVE (the programs' default)
# each region wakes the other thread, so this count is what the policy costs a step.
#
# gdb counts the calls of libgomp's GOMP_parallel that start more than one thread (its third
# argument, the thread count, in register rdx on x86-64, is 1 when a loop's `if` clause keeps
# it on the calling thread),
# in two runs of A and B steps; the difference over B - A steps leaves out the set-up and the
# final evaluation. Flags after the step counts go to train_gpt (the default: its add task).
# Usage: sh bench/omp_regions.sh [BUILD] [A B] [train_gpt flags...]
#        sh bench/omp_regions.sh build 100 200 --data data/tinyshakespeare.txt --layers 4 \
#            --heads 4 --embd 128 --seq 64 --batch 16        # bench_gpt's small case
set -eu
build=${1:-build}
a=${2:-100}
b=${3:-200}
[ $# -ge 3 ] && shift 3 || shift $#
command -v gdb > /dev/null || { echo "omp_regions: needs gdb (apt-get install gdb)"; exit 1; }
[ "$(uname -m)" = x86_64 ] || { echo "omp_regions: reads an x86-64 register"; exit 1; }

regions() {
    steps=$1
    shift
    OMP_WAIT_POLICY=PASSIVE gdb -batch -nx -ex 'set breakpoint pending on' \
        -ex 'break GOMP_parallel if $rdx != 1' -ex 'ignore 1 1000000000' -ex run \
        -ex 'info breakpoints' --args "$build/bin/train_gpt" --threads 2 --steps "$steps" \
        --eval-every 0 --eval-examples 16 "$@" 2> /dev/null |
        awk '/already hit/ { print $4 }'
}
ra=$(regions "$a" "$@")
rb=$(regions "$b" "$@")
awk -v ra="$ra" -v rb="$rb" -v a="$a" -v b="$b" 'BEGIN {
    printf "parallel regions of 2 threads: %d in %d steps, %d in %d: %.1f a step\n",
           ra, a, rb, b, (rb - ra) / (b - a) }'

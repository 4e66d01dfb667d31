#!/bin/sh
# Data-parallel speed (issue 13's targets), measured in one run: tapegrad's DDP and ZeRO-3 on
# 2 ranks of one thread (build/bin/data_parallel under scripts/mpirun) against PyTorch's
# DistributedDataParallel on gloo, 2 processes of one thread (bench/ddp_torch_bench.py), same
# model, same global batch, OMP_WAIT_POLICY=PASSIVE. For each case of docs/performance.md:
#     tokens/s, tapegrad DDP / PyTorch DDP                target >= 1.5
#     scaling: 1 rank's step / 2 ranks' step, the same rows per rank (efficiency)
#                                                         target >= 0.90 at the large case
#     ZeRO-3's step / DDP's step on 2 ranks               target <= 1.3
# The medians come from steps 2.. of each run; timings on a shared machine are noisy, so only the
# ratios of this run mean anything. PyTorch is skipped when Debian's python3-torch is missing.
#
# PyTorch's products run on OpenBLAS, whose kernels are chosen when it loads: on a CPU model it
# does not know it falls back to its SSE3 "Prescott" kernels (seen here: an unnamed Xeon with
# AVX-512, 3.6x slower at the large case). Unless OPENBLAS_CORETYPE is set already, the kernels
# are chosen by measurement: one short run of one rank at the large case with each candidate
# the CPU supports (the default, SkylakeX with AVX-512, Haswell with AVX2), the fastest exported
# for both sides. PyTorch's own step decides; without PyTorch, tapegrad's (whose products run
# on oneDNN instead where it has AVX-512 kernels: autograd/gemm.h).
# Usage: sh bench/ddp.sh BUILD_DIR [STEPS]
set -eu
build=${1:-build}
steps=${2:-8}
work=${TMPDIR:-/tmp}/ddp_bench.$$
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
torch=no
/usr/bin/python3 -c 'import torch' 2>/dev/null && torch=yes

# column NAME of the row MODE/RANKS of data_parallel.tsv
cell() {
    awk -F '\t' -v m="$1" -v n="$2" -v c="$3" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $1 == m && $3 == n { print $col[c] }' "$work/data_parallel.tsv"
}

# The median step ms of one rank at the large case under OPENBLAS_CORETYPE=$1 (empty: unset).
probe() {
    if [ -n "$1" ]; then set -- env OPENBLAS_CORETYPE="$1"; else set -- env -u OPENBLAS_CORETYPE; fi
    if [ "$torch" = yes ]; then
        "$@" /usr/bin/python3 bench/ddp_torch_bench.py 1 65 128 6 6 384 4 1 3 2> /dev/null |
            awk '/ms_per_step/ { print $2; found = 1 } END { if (!found) print 1e30 }'
        return
    fi
    "$@" "$build/bin/data_parallel" --modes ddp --layers 6 --heads 6 --embd 384 --seq 128 \
        --batch 4 --steps 3 --out "$work/probe" > /dev/null 2>&1 || { echo 1e30; return; }
    awk -F '\t' 'NR == 2 { print $17 }' "$work/probe/data_parallel.tsv"
}
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    best="" best_ms=$(probe "")
    who=tapegrad
    [ "$torch" = yes ] && who=PyTorch
    echo "OpenBLAS kernels, large case, 1 rank of $who: default $best_ms ms"
    for core in SkylakeX Haswell; do
        case $core in
            SkylakeX) grep -qw avx512f /proc/cpuinfo || continue ;;
            Haswell) grep -qw avx2 /proc/cpuinfo || continue ;;
        esac
        ms=$(probe "$core")
        echo "OpenBLAS kernels, large case, 1 rank of $who: $core $ms ms"
        if awk -v a="$ms" -v b="$best_ms" 'BEGIN { exit !(a < b) }'; then best=$core best_ms=$ms; fi
    done
    [ -n "$best" ] && export OPENBLAS_CORETYPE="$best"
fi
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset: OpenBLAS's own choice)} for both sides"

printf '%-6s %12s %12s %12s %10s %10s %10s %12s\n' case "ddp tok/s" "torch tok/s" ratio \
    scaling "zero3/ddp" "ddp 1 ms" "ddp 2 ms"
for case in "small 65 64 4 4 128 16" "large 65 128 6 6 384 8"; do
    set -- $case
    name=$1 V=$2 T=$3 L=$4 H=$5 C=$6 B=$7
    sh scripts/mpirun -np 2 "$build/bin/data_parallel" --modes ddp,zero3 --layers "$L" \
        --heads "$H" --embd "$C" --seq "$T" --batch $((B / 2)) --steps "$steps" \
        --out "$work" > "$work/out" 2>&1 || { cat "$work/out"; exit 1; }
    ddp1=$(cell ddp 1 step_ms) ddp2=$(cell ddp 2 step_ms) z3=$(cell zero3 2 step_ms)
    tok=$(cell ddp 2 tokens_per_s)
    ttok=-
    if [ "$torch" = yes ]; then
        ms=$(/usr/bin/python3 bench/ddp_torch_bench.py 2 "$V" "$T" "$L" "$H" "$C" "$B" 2 \
             $((steps - 1)) | awk '/ms_per_step/ { print $2 }')
        ttok=$(awk -v b="$B" -v t="$T" -v ms="$ms" 'BEGIN { printf "%.0f", b * t / ms * 1000 }')
    fi
    awk -v n="$name" -v tok="$tok" -v ttok="$ttok" -v d1="$ddp1" -v d2="$ddp2" -v z="$z3" '
        BEGIN { r = ttok == "-" ? "-" : sprintf("%.2fx", tok / ttok)
                printf "%-6s %12.0f %12s %12s %10.3f %10.2f %10.1f %12.1f\n", n, tok, ttok, r,
                       d1 / d2, z / d2, d1, d2 }'
done
echo "targets: ratio >= 1.5x, scaling >= 0.90 (large), zero3/ddp <= 1.3"

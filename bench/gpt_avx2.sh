#!/bin/sh
# bench_gpt under the conditions of an AVX2-only CPU (issue 16: Zen 3 has no AVX-512), on any
# x86-64 machine that has AVX2: tapegrad built with ARCH=-march=x86-64-v3 (AVX2 and FMA, no
# AVX-512) into its own build folder, OpenBLAS held to its Haswell (AVX2) kernels for both sides
# and oneDNN to AVX2 (DNNL_MAX_CPU_ISA, for a GEMM=onednn build),
# PyTorch held to AVX2 (bench_gpt --isa avx2 sets ATEN_CPU_CAPABILITY=avx2 and
# DNNL_MAX_CPU_ISA=AVX2 for it), and the model FLOP utilisation taken against the AVX2 peak.
# Usage: sh bench/gpt_avx2.sh [CASE]   (small, large or gpt2; all three by default)
set -eu
cd "$(dirname "$0")/.."
if ! grep -qw avx2 /proc/cpuinfo; then
    echo "gpt_avx2: this CPU has no AVX2; nothing to hold it to"
    exit 0
fi
build=build-avx2
make -s BUILD=$build ARCH=-march=x86-64-v3 $build/bench/bench_gpt
OPENBLAS_CORETYPE=Haswell DNNL_MAX_CPU_ISA=AVX2 exec $build/bench/bench_gpt --isa avx2 "$@"

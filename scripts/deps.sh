#!/bin/sh
# Installs the Debian packages tapegrad needs, only those missing: with apt-get when root, with
# sudo when it works without a password prompt, otherwise prints the exact command and fails.
set -u
need=""
have_pc() { pkg-config --exists "$1" 2>/dev/null; }
command -v cc >/dev/null 2>&1 && command -v make >/dev/null 2>&1 || need="$need build-essential"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
have_pc openblas || need="$need libopenblas-dev"
have_pc cmocka   || need="$need libcmocka-dev"
have_pc libcjson || need="$need libcjson-dev"
# oneDNN's headers and library (autograd/gemm.h), unless make GEMM=openblas; no .pc in Debian.
if [ "${GEMM:-auto}" != openblas ] && [ ! -f /usr/include/dnnl.h ]; then
    need="$need libdnnl-dev"
fi
command -v gnuplot >/dev/null 2>&1 || need="$need gnuplot-nox"
# Training on many ranks (dist/): OpenMPI's library and headers, and its mpirun.
have_pc ompi-c   || need="$need libopenmpi-dev"
command -v mpirun >/dev/null 2>&1 || need="$need openmpi-bin"
# `make fuzz` only (scripts/fuzz.sh passes "fuzz"): clang, its libFuzzer and its OpenMP.
if [ "${1:-}" = fuzz ]; then
    command -v clang >/dev/null 2>&1 || need="$need clang"
    [ -n "$(find /usr/lib/llvm-* -name 'libclang_rt.fuzzer-x86_64.a' 2>/dev/null | head -n 1)" ] ||
        need="$need libclang-rt-dev"
    [ -n "$(find /usr/lib/llvm-* -name 'libomp.so' 2>/dev/null | head -n 1)" ] ||
        need="$need libomp-dev"
fi
# `make grade` only (it passes "grade"): bubblewrap, the sandbox scripts/grade.sh runs
# submissions in.
if [ "${1:-}" = grade ]; then
    command -v bwrap >/dev/null 2>&1 || need="$need bubblewrap"
fi
[ -z "$need" ] && exit 0

cmd="apt-get install -y --no-install-recommends$need"
echo "tapegrad: installing missing packages:$need"
if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive $cmd) || {
        echo "tapegrad: '$cmd' failed; install those packages and run make again" >&2; exit 1; }
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    (sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive $cmd) || {
        echo "tapegrad: 'sudo $cmd' failed; install those packages and run make again" >&2; exit 1; }
else
    echo "tapegrad: missing packages:$need" >&2
    echo "tapegrad: as root, run:  apt-get update && $cmd" >&2
    exit 1
fi

#!/bin/sh
# make fuzz: the snapshot readers under libFuzzer (tests/fuzz/, docs/gpt.md "Fuzzing").
#
# Builds the library and the harnesses with clang, -fsanitize=fuzzer + AddressSanitizer + UBSan,
# into build-fuzz/, and runs each harness for FUZZ_SECONDS (default 300) on its corpus:
#     snapshot        the safetensors reader on any bytes
#     train_load      train_gpt's whole --load on any bytes
#     lora_adapter    a LoRA adapter file (--save-adapter's) loaded onto a base
#     settings_agree  two ranks' train_gpt command lines: parsed, their agreed settings compared
# New inputs that reach new code go to build-fuzz/corpus/NAME (merge the useful ones into
# tests/fuzz/corpus/NAME with -merge=1, keeping it small); an input that crashes, aborts, hangs
# (FUZZ_TIMEOUT seconds, default 20) or trips a sanitizer is written to tests/fuzz/crashes/NAME/,
# where `make test` replays it from then on (tests/test_fuzz_replay.c). Fix the bug, keep the
# input. FUZZ_ONLY=NAME runs one harness.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh fuzz
seconds=${FUZZ_SECONDS:-300}
timeout=${FUZZ_TIMEOUT:-20}
build=build-fuzz
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# -Wno-pass-failed: at -O1 clang does not vectorize, and warns at every `omp simd` loop (34
# in all); the loops are right, only slower, which a fuzzer does not care about.
# OpenBLAS's kernel choice re-runs a program (examples/common/blas_kernels.h): not here.
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Haswell}" OMP_NUM_THREADS=1
for name in ${FUZZ_ONLY:-snapshot train_load lora_adapter settings_agree}; do
    # GEMM=openblas: oneDNN is built on GCC's OpenMP, these harnesses on clang's.
    make -s BUILD=$build CC=clang GEMM=openblas OPT="-O1 -g -Wno-pass-failed -fsanitize=fuzzer-no-link $san" \
        $build/fuzz/fuzz_$name
    mkdir -p $build/corpus/$name tests/fuzz/crashes/$name
    # Leaks are not bugs here: a refused load ends in exit(), which the harness turns into a
    # jump back, leaving what the run had allocated (tests/fuzz/fuzz_train_load.c).
    echo "== fuzz_$name for ${seconds}s"
    $build/fuzz/fuzz_$name -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=4096 \
        -detect_leaks=0 -print_final_stats=1 -artifact_prefix=tests/fuzz/crashes/$name/ \
        $build/corpus/$name tests/fuzz/corpus/$name tests/fuzz/crashes/$name 2>&1 |
        grep -v '^tapegrad: \|^train_gpt: \|^Try ' || true
done

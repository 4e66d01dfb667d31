#!/bin/sh
# make demo: the main job. A small GPT learns 3-digit addition with train_gpt's defaults (2000
# steps with a cosine decay: about 25 s on two idle cores, several times longer on a busy
# machine; docs/gpt.md has the measured accuracy and time), then the quick train_mlp run. Logs,
# figures and the snapshot go into BUILD/demo/.
set -e
# The portable kernel mode (autograd/kernels.h) unless the caller chose: the demo then prints,
# on any CPU and thread count, the numbers docs/gpt.md shows (seed 1 solves the task), where
# the fast mode's last bits, and with them the run, depend on the CPU.
TAPEGRAD_KERNELS=${TAPEGRAD_KERNELS:-portable}
export TAPEGRAD_KERNELS
build=${1:-build}
out="$build/demo"
mkdir -p "$out"
start=$(date +%s)
"$build/bin/train_gpt" --log "$out/train_gpt.tsv" --plot "$out/train_gpt.png" \
    --save "$out/train_gpt.safetensors" --sample 8
echo
"$build/bin/train_mlp" --log "$out/train_mlp.tsv" --plot "$out/train_mlp.png"
echo "demo finished in $(( $(date +%s) - start )) s; logs and figures in $out/"

#!/bin/sh
# Draws docs/figures/lora_finetune.png (and keeps the TSV it is drawn from beside it): full
# fine-tuning, LoRA at ranks 1, 2, 4, 8, 16 and QLoRA at rank 8, from a base pretrained on add to
# sub, with the default settings of lora_finetune, on one thread: the step times of two threads
# are at the mercy of anything else running on a small machine. The base is pretrained once and
# kept in BUILD_DIR/lora_finetune, so later runs only fine-tune.
# Time: the base's 4000 pretraining steps the first time only (12 minutes on a shared 2-core
# machine at a load average of 10 to 15), then 11 minutes of one core (10 min 50 s with the
# other idle, about the same with it busy) for the seven fine-tuning runs (2000 steps each:
# full fine-tuning 44 ms a step, the adapters on q, v and the MLP 36 to 38 ms) and their
# evaluations.
# Usage: sh examples/lora_finetune/figure.sh BUILD_DIR   (run from the repository root)
set -eu
build=${1:-build}
out=docs/figures
mkdir -p "$out"
# No stale figure passes for a new one: a failed plot leaves none (git has the old one).
rm -f "$out/lora_finetune.png"
"$build/bin/lora_finetune" --cache-dir "$build/lora_finetune" --threads 1 \
    --log "$out/lora_finetune.tsv" --plot "$out/lora_finetune.png" > /dev/null
test -f "$out/lora_finetune.png"
echo "wrote $out/lora_finetune.png"

#!/usr/bin/python3
"""PyTorch's side of bench/bench_gpt.c: the same training step on the reference model.

One step is what bench_gpt times for tapegrad: the forward pass to the mean cross-entropy, the
backward pass, one AdamW update (weight decay on matrices and embedding tables only, as
optim/optim.h's OPTIM_DECAY_MATRICES) and clearing the gradients. The model is the nanoGPT-style
module of tests/reference/gpt_reference.py (tied head, fused q/k/v, tanh GELU, no dropout), with
random tokens and the next tokens as targets, all counted.

PyTorch gets its best setting: torch.set_num_threads(THREADS) here, and OMP_WAIT_POLICY=PASSIVE
in the environment, which bench_gpt sets when it starts this script (OpenMP reads it when the
runtime starts, too early for this script to set it itself; bench_gpt runs it with PASSIVE and
with the default). The script tries oneDNN (torch.backends.mkldnn) on and off, each on a fresh
model, and reports the faster. Gradients are cleared with set_to_none, which skips a memset per
parameter.

    OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/gpt_torch_bench.py V T L H C B WARMUP STEPS [bf16]

prints "ms_per_step <median over STEPS>" (after WARMUP untimed steps) of the faster setting and
"setting onednn" or "setting no-onednn". With bf16 (bench/bench_mixed_precision.c), the forward
pass and the loss run under torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's CPU mixed
precision: its products take bf16 operands, the parameters, their gradients and AdamW's state
stay fp32 (the masters).
"""
import importlib.util
import os
import statistics
import sys
import time

import torch

THREADS = 2


def reference_module():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "tests", "reference", "gpt_reference.py")
    spec = importlib.util.spec_from_file_location("gpt_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def median_ms(module, bf16, V, T, L, H, C, B, warmup, steps):
    torch.manual_seed(1)
    model = module.GPT(vocab_size=V, max_seq=T, n_layer=L, n_head=H, n_embd=C)
    params = list(model.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.01},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=1e-4)
    seq = torch.randint(0, V, (B, T + 1))
    tokens, targets = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            _, loss = model(tokens, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    bf16 = len(sys.argv) == 10 and sys.argv[9] == "bf16"
    if len(sys.argv) != 9 and not bf16:
        sys.exit("usage: gpt_torch_bench.py V T L H C B WARMUP STEPS [bf16]")
    args = [int(a) for a in sys.argv[1:9]]
    torch.set_num_threads(THREADS)
    module = reference_module()
    best = None
    for onednn in (True, False):
        torch.backends.mkldnn.enabled = onednn
        ms = median_ms(module, bf16, *args)
        if best is None or ms < best[0]:
            best = (ms, "onednn" if onednn else "no-onednn")
    print("ms_per_step %.3f" % best[0])
    print("setting %s" % best[1])


if __name__ == "__main__":
    main()

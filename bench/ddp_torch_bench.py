#!/usr/bin/python3
"""PyTorch's side of the data-parallel benchmark: DistributedDataParallel on the gloo backend.

The same training step as bench/gpt_torch_bench.py (the reference module of
tests/reference/gpt_reference.py, AdamW, random tokens with the next tokens as targets), run by
RANKS processes of one thread each, every process taking GLOBAL_B / RANKS rows of each global
batch; DDP all-reduces the gradients in buckets during backward (its default 25 MB buckets,
which at these model sizes is one bucket). Rank 0 prints one line, "ms_per_step <median over
STEPS>", after WARMUP untimed steps; each step is timed between two barriers so the slowest
rank sets it. The step clips the global gradient norm to 1.0, as tapegrad's trainer does by
default (optim/train.h: cfg.clip), so both sides do the same work.

    OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/ddp_torch_bench.py RANKS V T L H C GLOBAL_B WARMUP STEPS

The processes talk over loopback TCP (MASTER_ADDR 127.0.0.1, a free port chosen here).
"""
import importlib.util
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel


def reference_module():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "tests", "reference", "gpt_reference.py")
    spec = importlib.util.spec_from_file_location("gpt_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def worker(rank, ranks, port, V, T, L, H, C, B, warmup, steps):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    torch.manual_seed(1)
    model = DistributedDataParallel(
        reference_module().GPT(vocab_size=V, max_seq=T, n_layer=L, n_head=H, n_embd=C))
    params = list(model.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.01},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=1e-4)
    torch.manual_seed(2 + rank)
    seq = torch.randint(0, V, (B // ranks, T + 1))
    tokens, targets = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
    times = []
    for i in range(warmup + steps):
        dist.barrier()
        t0 = time.perf_counter()
        _, loss = model(tokens, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        dist.barrier()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    if rank == 0:
        print("ms_per_step %.3f" % statistics.median(times), flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    if len(sys.argv) != 10:
        sys.exit("usage: ddp_torch_bench.py RANKS V T L H C GLOBAL_B WARMUP STEPS")
    ranks, V, T, L, H, C, B, warmup, steps = (int(a) for a in sys.argv[1:])
    if ranks < 1 or B % ranks:
        sys.exit("ddp_torch_bench.py: GLOBAL_B must be a multiple of RANKS")
    mp.spawn(worker, args=(ranks, free_port(), V, T, L, H, C, B, warmup, steps), nprocs=ranks)


if __name__ == "__main__":
    main()

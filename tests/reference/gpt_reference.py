#!/usr/bin/python3
"""Reference numbers for tapegrad's tiny GPT (nn/gpt.h), computed by PyTorch.

Builds the same model as a standard PyTorch GPT module (nn.Embedding, nn.LayerNorm, nn.Linear,
written like nanoGPT's model.py), loads weights drawn here into it through the mapping that
nn/gpt.h documents, and writes tests/fixtures/gpt_reference.safetensors with

    param.<name>        the weights, in tapegrad's names and layouts (Linear weights [in, out])
    tokens, targets     I32 [B, T]; some targets are -1, which the loss ignores
    logits, loss        the forward pass
    grad.<name>         d loss / d every parameter, in tapegrad's layouts
    adamw.losses        the loss before each of 10 AdamW steps on the same batch
    adamw.param.<name>  the weights after those 10 steps

all in float32, computed by torch in float32. The same run in float64 measures how far float32
itself is from the exact numbers; those distances go into the file's metadata (and are printed),
so the C test can show its own error next to torch's.

tests/test_gpt_reference.c loads the weights by name, so no random generator is shared. Run
from the repository root with Debian's python3-torch (1.13) and python3-numpy:

    /usr/bin/python3 tests/reference/gpt_reference.py
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG = dict(vocab_size=11, max_seq=8, n_layer=2, n_head=2, n_embd=16)
BATCH = 3
SEED = 20240607
ADAMW = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
ADAMW_STEPS = 10
OUT = os.path.join("tests", "fixtures", "gpt_reference.safetensors")


class Block(nn.Module):
    """Pre-LayerNorm block, nanoGPT's names: ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
    mlp.c_proj. No dropout."""

    def __init__(self, C, H):
        super().__init__()
        self.n_head = H
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.attn_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def attention(self, x):
        B, T, C = x.shape
        H, D = self.n_head, C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        probs = F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        return self.attn_proj((probs @ v).transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab_size, max_seq, n_layer, n_head, n_embd):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(max_seq, n_embd)
        self.h = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight          # tied

    def forward(self, tokens, targets):
        B, T = tokens.shape
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = F.cross_entropy(logits.view(B * T, -1), targets.view(-1), ignore_index=-1)
        return logits, loss


def mapping(model):
    """tapegrad name -> (torch parameter, transpose?): the table of nn/gpt.h, executable."""
    table = {"wte.weight": (model.wte.weight, False), "wpe.weight": (model.wpe.weight, False)}
    for i, b in enumerate(model.h):
        pre = f"blocks.{i}."
        table.update({
            pre + "ln1.weight": (b.ln_1.weight, False), pre + "ln1.bias": (b.ln_1.bias, False),
            pre + "attn.qkv.weight": (b.c_attn.weight, True),
            pre + "attn.qkv.bias": (b.c_attn.bias, False),
            pre + "attn.proj.weight": (b.attn_proj.weight, True),
            pre + "attn.proj.bias": (b.attn_proj.bias, False),
            pre + "ln2.weight": (b.ln_2.weight, False), pre + "ln2.bias": (b.ln_2.bias, False),
            pre + "mlp.fc.weight": (b.c_fc.weight, True), pre + "mlp.fc.bias": (b.c_fc.bias, False),
            pre + "mlp.proj.weight": (b.mlp_proj.weight, True),
            pre + "mlp.proj.bias": (b.mlp_proj.bias, False),
        })
    table.update({"ln_f.weight": (model.ln_f.weight, False), "ln_f.bias": (model.ln_f.bias, False)})
    return table


def ours(t, transpose):
    """A copy in our layout: numpy() alone would share the storage that the optimizer's later
    steps overwrite."""
    t = t.detach()
    return (t.t() if transpose else t).contiguous().numpy().copy()


def draw_weights(model, rng):
    """GPT-2-like scales, then moved off the symmetric start (biases and LayerNorm shifts
    nonzero, gains not 1), so every term of the forward and backward is exercised."""
    weights = {}
    for name, (p, transpose) in mapping(model).items():
        shape = tuple(p.shape[::-1]) if transpose else tuple(p.shape)
        if name.endswith("ln1.weight") or name.endswith("ln2.weight") or name == "ln_f.weight":
            w = 1.0 + 0.1 * rng.standard_normal(shape)
        elif len(shape) == 1:
            w = 0.1 * rng.standard_normal(shape)
        else:
            w = 0.2 * rng.standard_normal(shape)
        weights[name] = w.astype(np.float32)
    return weights


def build(weights, dtype):
    model = GPT(**CONFIG).to(dtype)
    with torch.no_grad():
        for name, (p, transpose) in mapping(model).items():
            w = torch.from_numpy(weights[name]).to(dtype)
            p.copy_(w.t() if transpose else w)
    return model


def run(weights, tokens, targets, dtype):
    """Forward, backward and ADAMW_STEPS AdamW steps in dtype; everything in our layouts."""
    model = build(weights, dtype)
    logits, loss = model(tokens, targets)
    loss.backward()
    out = {"logits": logits.detach().numpy().copy(), "loss": loss.detach().numpy().reshape(1)}
    grads = {n: ours(p.grad, tr) for n, (p, tr) in mapping(model).items()}

    # Decay on tensors of two or more dimensions (matrices and embedding tables), as
    # optim/optim.h's OPTIM_DECAY_MATRICES; parameters() lists the tied table once.
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": ADAMW["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"])
    losses = [loss.item()]
    opt.step()
    for _ in range(ADAMW_STEPS - 1):
        opt.zero_grad()
        _, loss = model(tokens, targets)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    out["adamw.losses"] = np.array(losses)
    final = {n: ours(p, tr) for n, (p, tr) in mapping(model).items()}
    return out, grads, final


def key_bias_free(weights):
    """The weights without the key part [C, 2C) of each qkv bias: its gradient is exactly 0 (a
    constant added to every key shifts a row of scores by one constant, which the softmax
    ignores), so in float32 it is rounding noise that Adam, dividing by its own magnitude,
    turns into steps of about lr in random directions. Compared on its own."""
    C = CONFIG["n_embd"]
    return {n: (np.concatenate([w[:C], w[2 * C:]]) if n.endswith("attn.qkv.bias") else w)
            for n, w in weights.items()}


def max_rel(a, b):
    """max |a - b| / max |b|: the error measure the C test uses."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def write_safetensors(path, tensors, metadata):
    """8-byte little-endian header length, JSON header padded with spaces to a multiple of 8,
    then the raw little-endian bytes of each tensor in order."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    codes = {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        blob = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": codes[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rng = np.random.default_rng(SEED)
    weights = draw_weights(GPT(**CONFIG), rng)
    B, T, V = BATCH, CONFIG["max_seq"], CONFIG["vocab_size"]
    tokens = rng.integers(0, V, size=(B, T)).astype(np.int32)
    targets = rng.integers(0, V, size=(B, T)).astype(np.int32)
    targets[0, 2] = targets[1, 7] = targets[2, 0] = -1           # ignored rows
    tok, tgt = torch.from_numpy(tokens).long(), torch.from_numpy(targets).long()

    out32, grads32, final32 = run(weights, tok, tgt, torch.float32)
    out64, grads64, final64 = run(weights, tok, tgt, torch.float64)

    fp32_vs_fp64 = {
        "logits": max_rel(out32["logits"], out64["logits"]),
        "loss": max_rel(out32["loss"], out64["loss"]),
        "grad": max(max_rel(grads32[n], grads64[n]) for n in grads32),
        "adamw.losses": max_rel(out32["adamw.losses"], out64["adamw.losses"]),
        "adamw.param": max(max_rel(a, b) for a, b in
                           zip(key_bias_free(final32).values(), key_bias_free(final64).values())),
    }
    print("torch float32 vs float64 (max |diff| / max |value|, worst tensor):")
    for key, value in fp32_vs_fp64.items():
        print(f"  {key:14s} {value:.3g}")
    print("loss", out32["loss"][0], "after", ADAMW_STEPS, "AdamW steps",
          out32["adamw.losses"][-1])

    tensors = {f"param.{n}": w for n, w in weights.items()}
    tensors["tokens"], tensors["targets"] = tokens, targets
    tensors["logits"] = out32["logits"].astype(np.float32)
    tensors["loss"] = out32["loss"].astype(np.float32)
    tensors.update({f"grad.{n}": g for n, g in grads32.items()})
    tensors["adamw.losses"] = out32["adamw.losses"].astype(np.float32)
    tensors.update({f"adamw.param.{n}": w for n, w in final32.items()})
    metadata = {k: str(v) for k, v in CONFIG.items()}
    metadata.update(batch=str(B), tied="1", fused_qkv="1", seed=str(SEED),
                    lr="%.17g" % ADAMW["lr"], beta1="%.17g" % ADAMW["betas"][0],
                    beta2="%.17g" % ADAMW["betas"][1], eps="%.17g" % ADAMW["eps"],
                    weight_decay="%.17g" % ADAMW["weight_decay"], adamw_steps=str(ADAMW_STEPS),
                    torch_version=torch.__version__)
    metadata.update({f"fp32_vs_fp64.{k}": "%.3g" % v for k, v in fp32_vs_fp64.items()})
    write_safetensors(OUT, tensors, metadata)
    print("wrote", OUT, os.path.getsize(OUT), "bytes")


if __name__ == "__main__":
    main()

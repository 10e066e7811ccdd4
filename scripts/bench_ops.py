"""Transformer ops at SwinIR's shapes: srgrad vs torch, forward and forward+backward, float32.

SwinIR (embed_dim 60..180, 8x8 windows of 64 tokens, 6 heads of dim 30) on 64x64 training patches:
4096 tokens per image, 64 windows per image, so B*nW = 64 (batch 1) .. 256 (batch 4). Cases: the qkv
and MLP linears, layer_norm over the channels, the attention products q k^T and attn v, and the
attention softmax. The note column gives the load average (1 min) when the row was measured.
Run through the harness: `python scripts/benchmark.py --only ops --threads 2`.
"""
from __future__ import annotations

import os

import numpy as np

from benchmark import Row, time_pair

import framework as sg
import framework.functional as F

TITLE = "Transformer ops at SwinIR's shapes (F.linear, F.layer_norm, matmul, F.softmax), float32"

# (label, op, input shapes, option); linear shapes are (x, weight, bias), matmul (a, b^T)
CASES = [
    ("linear qkv 180->540 (4,4096,180)", "linear", [(4, 4096, 180), (540, 180), (540,)], None),
    ("linear fc1 180->360 (4,4096,180)", "linear", [(4, 4096, 180), (360, 180), (360,)], None),
    ("layer_norm (4,4096,180)", "layer_norm", [(4, 4096, 180), (180,), (180,)], None),
    ("layer_norm (4,4096,60)", "layer_norm", [(4, 4096, 60), (60,), (60,)], None),
    ("matmul q k^T (64,6,64,30)", "qk", [(64, 6, 64, 30), (64, 6, 64, 30)], None),
    ("matmul q k^T (256,6,64,30)", "qk", [(256, 6, 64, 30), (256, 6, 64, 30)], None),
    ("matmul attn v (64,6,64,64)", "av", [(64, 6, 64, 64), (64, 6, 64, 30)], None),
    ("matmul attn v (256,6,64,64)", "av", [(256, 6, 64, 64), (256, 6, 64, 30)], None),
    ("softmax (64,6,64,64) dim -1", "softmax", [(64, 6, 64, 64)], -1),
    ("softmax (256,6,64,64) dim -1", "softmax", [(256, 6, 64, 64)], -1),
]


def _ours(op, ts, option):
    if op == "linear":
        return F.linear(*ts)
    if op == "layer_norm":
        return F.layer_norm(ts[0], ts[0].shape[-1:], ts[1], ts[2])
    if op == "qk":
        return ts[0] @ ts[1].transpose(-2, -1)
    if op == "av":
        return ts[0] @ ts[1]
    return F.softmax(ts[0], option)


def _theirs(torch, op, ts, option):
    TF = torch.nn.functional
    if op == "linear":
        return TF.linear(*ts)
    if op == "layer_norm":
        return TF.layer_norm(ts[0], ts[0].shape[-1:], ts[1], ts[2])
    if op == "qk":
        return ts[0] @ ts[1].transpose(-2, -1)
    if op == "av":
        return ts[0] @ ts[1]
    return torch.softmax(ts[0], option)


def _load():
    return f"load {os.getloadavg()[0]:.2f}"


def run(args) -> list[Row]:
    try:
        import torch
    except ImportError:
        torch = None
    rows = []
    rng = np.random.default_rng(0)
    for label, op, shapes, option in CASES:
        arrays = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
        ours_in = [sg.Tensor(a, requires_grad=True) for a in arrays]
        with sg.no_grad():
            g = rng.standard_normal(_ours(op, ours_in, option).shape, dtype=np.float32)

        def ours_fwd():
            with sg.no_grad():
                _ours(op, ours_in, option)

        def ours_both():
            for t in ours_in:
                t.grad = None
            _ours(op, ours_in, option).backward(g)

        theirs_fwd = theirs_both = None
        if torch is not None:
            theirs_in = [torch.from_numpy(a).requires_grad_(True) for a in arrays]
            tg = torch.from_numpy(g)

            def theirs_fwd():
                with torch.no_grad():
                    _theirs(torch, op, theirs_in, option)

            def theirs_both():
                for t in theirs_in:
                    t.grad = None
                _theirs(torch, op, theirs_in, option).backward(tg)

        ours_ms, torch_ms = time_pair(ours_fwd, theirs_fwd, args.repeat, warmup=2)
        rows.append(Row(f"{label} fwd", ours_ms, torch_ms, note=_load()))
        ours_ms, torch_ms = time_pair(ours_both, theirs_both, args.repeat, warmup=2)
        rows.append(Row(f"{label} fwd+bwd", ours_ms, torch_ms, note=_load()))
    return rows

"""Whole models, srgrad vs the PyTorch twins of scripts/torch_models.py (same architecture, same
weights, parameter counts checked): one training step (forward, L1 loss, backward, Adam step) on a
batch of 16 LR patches, and inference (no_grad) on one image. float32.

Run through the harness: `python scripts/benchmark.py --only models --threads 2`; section options
after the harness's own: `--models ESPCN FSRCNN` (default: all six), `--infer-size 512` (the LR side
of the inference image; 0 skips inference), `--batch 16`.
"""
from __future__ import annotations

import argparse

import numpy as np

from benchmark import Row, time_pair

import framework as sg
import framework.functional as F
import models  # noqa: F401  registers the architectures
from framework.nn import init
from framework.optim import Adam
from framework.registry import MODELS

TITLE = "Models: training step (16 patches, L1 + Adam) and inference, float32"

# name -> (spec, LR patch side); the patch sizes of issue 6 (BasicSR's gt_size / scale for EDSR).
CASES = {
    "SRCNN": ({"type": "SRCNN", "scale": 2}, 48),
    "FSRCNN": ({"type": "FSRCNN", "scale": 2}, 48),
    "ESPCN": ({"type": "ESPCN", "scale": 3}, 32),
    "VDSR": ({"type": "VDSR", "scale": 2}, 24),
    "EDSR": ({"type": "EDSR", "scale": 2}, 48),
    "UpsampleNet": ({"type": "UpsampleNet", "scale": 2}, 48),
}
TARGETS = {"step": 1.25, "step UpsampleNet": 0.8, "infer": 1.25}


def _options(rest):
    ap = argparse.ArgumentParser(prog="bench_models")
    ap.add_argument("--models", nargs="*", default=list(CASES), choices=list(CASES))
    ap.add_argument("--infer-size", type=int, default=512)
    ap.add_argument("--batch", type=int, default=16)
    return ap.parse_known_args(rest)[0]


def _pair(spec):
    """Our model and its torch twin with the same weights."""
    import torch
    from torch_models import twin_of
    init.manual_seed(0)
    ours = MODELS.build(spec)
    twin = twin_of(ours, spec, dtype=torch.float32)
    n_ours, n_twin = ours.num_parameters(), sum(p.numel() for p in twin.parameters())
    if n_ours != n_twin:
        raise RuntimeError(f"{spec['type']}: {n_ours} parameters here, {n_twin} in the torch twin")
    return ours, twin, n_ours


def _step_row(name, spec, side, batch, repeat):
    import torch
    ours, twin, n = _pair(spec)
    s, rng = spec["scale"], np.random.default_rng(0)
    lq = rng.uniform(0, 1, (batch, 3, side, side)).astype(np.float32)
    gt = rng.uniform(0, 1, (batch, 3, side * s, side * s)).astype(np.float32)
    x, y = sg.tensor(lq), sg.tensor(gt)
    tx, ty = torch.from_numpy(lq), torch.from_numpy(gt)
    opt = Adam(ours.parameters(), lr=1e-4)
    topt = torch.optim.Adam(twin.parameters(), lr=1e-4)

    def step_ours():
        opt.zero_grad()
        F.l1_loss(ours(x), y).backward()
        opt.step()

    def step_torch():
        topt.zero_grad()
        torch.nn.functional.l1_loss(twin(tx), ty).backward()
        topt.step()

    a, b = time_pair(step_ours, step_torch, repeat)
    target = TARGETS["step UpsampleNet"] if name == "UpsampleNet" else TARGETS["step"]
    return Row(f"{name} x{s} step ({batch},3,{side},{side})", a, b, target, note=f"{n:,} params")


def _infer_row(name, spec, side, repeat):
    import torch
    ours, twin, _ = _pair(spec)
    lq = np.random.default_rng(1).uniform(0, 1, (1, 3, side, side)).astype(np.float32)
    x, tx = sg.tensor(lq), torch.from_numpy(lq)

    def infer_ours():
        with sg.no_grad():
            ours(x)

    def infer_torch():
        with torch.no_grad():
            twin(tx)

    a, b = time_pair(infer_ours, infer_torch, repeat)
    return Row(f"{name} x{spec['scale']} inference (1,3,{side},{side})", a, b, TARGETS["infer"])


def run(args) -> list[Row]:
    opts = _options(getattr(args, "rest", []))
    rows = []
    for name in opts.models:
        spec, side = CASES[name]
        rows.append(_step_row(name, spec, side, opts.batch, args.repeat))
        if opts.infer_size:
            rows.append(_infer_row(name, spec, opts.infer_size, args.repeat))
    return rows

"""Resampling: srgrad's interpolate vs torch.nn.functional.interpolate, forward and forward+backward.

(16, 64, 48, 48) x2 up for every mode, and (16, 3, 96, 96) x0.5 down with antialias, float32.
Run through the harness: `python scripts/benchmark.py --only resample --threads 2`.
"""
from __future__ import annotations

import numpy as np

from benchmark import Row, time_pair

import framework as sg
import framework.functional as F

TITLE = "Resampling (F.interpolate), float32"

# (label, mode, options, input shape, scale factor, target for fwd+bwd)
CASES = [
    ("nearest x2", "nearest", {}, (16, 64, 48, 48), 2.0, 0.5),
    ("nearest-exact x2", "nearest-exact", {}, (16, 64, 48, 48), 2.0, 0.5),
    ("bilinear x2", "bilinear", {"align_corners": False}, (16, 64, 48, 48), 2.0, 0.5),
    ("bilinear x2 align_corners", "bilinear", {"align_corners": True}, (16, 64, 48, 48), 2.0, 0.5),
    ("bicubic x2", "bicubic", {"align_corners": False}, (16, 64, 48, 48), 2.0, 0.25),
    ("area x2", "area", {}, (16, 64, 48, 48), 2.0, 0.5),
    ("lanczos x2 (antialias)", "lanczos", {"antialias": True}, (16, 64, 48, 48), 2.0, 0.25),
    ("bilinear x0.5 antialias", "bilinear", {"antialias": True}, (16, 3, 96, 96), 0.5, 0.5),
    ("bicubic x0.5 antialias", "bicubic", {"antialias": True}, (16, 3, 96, 96), 0.5, 0.25),
    ("lanczos x0.5 antialias", "lanczos", {"antialias": True}, (16, 3, 96, 96), 0.5, 0.25),
]


def run(args) -> list[Row]:
    try:
        import torch
        import torch.nn.functional as TF
    except ImportError:
        torch = None
    rows = []
    rng = np.random.default_rng(0)
    for label, mode, opts, shape, sf, target in CASES:
        x = rng.standard_normal(shape, dtype=np.float32)
        ours_x = sg.Tensor(x, requires_grad=True)
        g = rng.standard_normal(F.interpolate(ours_x, scale_factor=sf, mode=mode, **opts).shape,
                                dtype=np.float32)

        def ours_fwd():
            with sg.no_grad():
                F.interpolate(ours_x, scale_factor=sf, mode=mode, **opts)

        def ours_both():
            ours_x.grad = None
            F.interpolate(ours_x, scale_factor=sf, mode=mode, **opts).backward(g)

        theirs_fwd = theirs_both = None
        if torch is not None:
            tx = torch.from_numpy(x).requires_grad_(True)
            tg = torch.from_numpy(g)

            def theirs_fwd():
                with torch.no_grad():
                    TF.interpolate(tx, scale_factor=sf, mode=mode, **opts)

            def theirs_both():
                tx.grad = None
                TF.interpolate(tx, scale_factor=sf, mode=mode, **opts).backward(tg)

        ours_ms, torch_ms = time_pair(ours_fwd, theirs_fwd, args.repeat, warmup=3)
        rows.append(Row(f"{label} fwd {shape}", ours_ms, torch_ms))
        ours_ms, torch_ms = time_pair(ours_both, theirs_both, args.repeat, warmup=3)
        rows.append(Row(f"{label} fwd+bwd", ours_ms, torch_ms, target))
    return rows

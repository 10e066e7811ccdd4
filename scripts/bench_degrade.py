"""Real-ESRGAN's degradation on the CPU: ms to make one batch of 16 (LR, HR) pairs with
RealESRGANDataset, and where the time goes (kernels, filter, resize, noise, jpeg; "other" is the
flip / crop / pad, the final crop, USM and copies), at a CPU-sized setting and at BasicSR's, with
DiffJPEG (the default) and with Pillow's JPEG (A/B, interleaved).

Torch has no such pipeline: those rows are srgrad-only. Three op rows compare DiffJPEG with the
torch twin of BasicSR's (tests/twins/diffjpeg.py), and filter2d and USM with the same sums done by
torch's reflect pad + conv2d (BasicSR's filter2D / USMSharp on the CPU).
Run through the harness: `python scripts/benchmark.py --only degrade --threads 1`.
"""
from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from benchmark import Row, time_pair

from framework.data import RealESRGANDataset
from framework.data.degradations import (add_diffjpeg_compression, bivariate_Gaussian, filter2d,
                                         gaussian_kernel1d, usm_sharp)

TITLE = "Real-ESRGAN degradation (RealESRGANDataset), x4, float32, one batch of 16"

# (label, gt_size, crop_pad_size, gt_usm)
SETTINGS = [
    ("CPU-sized: gt 128, crop_pad 160", 128, 160, False),
    ("BasicSR's: gt 256, crop_pad 400", 256, 400, False),
    ("BasicSR's + gt_usm", 256, 400, True),
]
STAGES = ("kernels", "filter", "resize", "noise", "jpeg")
JPEGS = ("diffjpeg", "pillow")
BATCH = 16


def _hr_folder(root: Path) -> Path:
    """Four 520 x 480 photo-like images: smooth shapes plus fine texture (JPEG and noise costs
    depend on content, so not flat colour)."""
    rng = np.random.default_rng(0)
    for i in range(4):
        coarse = Image.fromarray((rng.random((12, 13, 3)) * 255).astype(np.uint8))
        smooth = np.asarray(coarse.resize((520, 480), Image.BICUBIC), np.float32)
        img = np.clip(smooth + rng.normal(0, 12, smooth.shape), 0, 255).astype(np.uint8)
        Image.fromarray(img).save(root / f"{i:04d}.png")
    return root


def _pipeline_rows(root: Path, label: str, gt_size: int, pad: int, usm: bool, repeat: int):
    """The batch time and its stages, with DiffJPEG (the default) and with Pillow's JPEG, the two
    interleaved batch by batch so that machine noise hits both."""
    sets = {jpeg: RealESRGANDataset(root, scale=4, gt_size=gt_size, crop_pad_size=pad,
                                    gt_usm=usm, jpeg=jpeg) for jpeg in JPEGS}

    def batch(ds, iteration, times=None):
        # what BatchLoader.get_batch does (the same generators), with the stage clock on
        samples = [ds.get(j % len(ds), np.random.default_rng([0, iteration, j]), times)
                   for j in range(BATCH)]
        return np.stack([s["lq"] for s in samples]), np.stack([s["gt"] for s in samples])

    for ds in sets.values():
        batch(ds, 0)  # warm-up: decode cache, numba, Poisson tables
    totals, times = {jpeg: [] for jpeg in JPEGS}, {jpeg: {} for jpeg in JPEGS}
    for it in range(1, repeat + 1):
        for jpeg, ds in sets.items():
            start = time.perf_counter()
            batch(ds, it, times[jpeg])
            totals[jpeg].append(time.perf_counter() - start)
    rows = []
    for jpeg in JPEGS:
        mean = statistics.fmean(totals[jpeg])
        rows.append(Row(f"{label}, jpeg: {jpeg}: batch (mean of {repeat})", 1e3 * mean, None,
                        note=f"min {1e3 * min(totals[jpeg]):.0f}, max "
                             f"{1e3 * max(totals[jpeg]):.0f}"))
        for stage in STAGES:
            share = times[jpeg].get(stage, 0.0) / repeat
            rows.append(Row(f"  {stage}", 1e3 * share, None, note=f"{100 * share / mean:.0f}%"))
        other = mean - sum(times[jpeg].values()) / repeat
        rows.append(Row("  other (crop/pad, USM, copies)", 1e3 * other, None,
                        note=f"{100 * other / mean:.0f}%"))
    return rows


def _op_rows(repeat: int):
    try:
        import torch
        import torch.nn.functional as TF
    except ImportError:
        torch = None
    x = np.random.default_rng(1).random((3, 400, 400), dtype=np.float32)
    aniso = bivariate_Gaussian(21, 3.0, 1.0, 0.5, isotropic=False)
    g = gaussian_kernel1d(51)
    usm_kernel = np.outer(g, g).astype(np.float32)
    theirs_filter = theirs_usm = None
    if torch is not None:
        tx = torch.from_numpy(x)[:, None]

        def conv(img, kern):  # BasicSR's filter2D on the CPU
            k = kern.shape[-1] // 2
            w = torch.from_numpy(np.ascontiguousarray(kern, np.float32))[None, None]
            return TF.conv2d(TF.pad(img, (k, k, k, k), mode="reflect"), w)

        def theirs_filter():
            with torch.no_grad():
                conv(tx, aniso)

        def theirs_usm():  # BasicSR's USMSharp.forward
            with torch.no_grad():
                residual = tx - conv(tx, usm_kernel)
                soft = conv((residual.abs() * 255 > 10).float(), usm_kernel)
                sharp = torch.clip(tx + 0.5 * residual, 0, 1)
                soft * sharp + (1 - soft) * tx

    theirs_jpeg = None
    if torch is not None:
        from tests.twins.diffjpeg import DiffJPEG
        jpeger, tq = DiffJPEG(differentiable=False), torch.tensor([60.0])

        def theirs_jpeg():  # BasicSR's DiffJPEG (the twin) as Real-ESRGAN's models call it
            with torch.no_grad():
                jpeger(tx.permute(1, 0, 2, 3), quality=tq)

    rows = []
    ours_ms, torch_ms = time_pair(lambda: add_diffjpeg_compression(x, 60.0), theirs_jpeg, repeat,
                                  warmup=2)
    rows.append(Row("DiffJPEG (3, 400, 400), quality 60", ours_ms, torch_ms))
    ours_ms, torch_ms = time_pair(lambda: filter2d(x, aniso), theirs_filter, repeat, warmup=2)
    rows.append(Row("filter2d (3, 400, 400), 21x21 anisotropic", ours_ms, torch_ms))
    ours_ms, torch_ms = time_pair(lambda: usm_sharp(x), theirs_usm, repeat, warmup=2)
    rows.append(Row("usm_sharp (3, 400, 400), 51x51", ours_ms, torch_ms))
    return rows


def run(args) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = _hr_folder(Path(tmp))
        for label, gt_size, pad, usm in SETTINGS:
            rows += _pipeline_rows(root, label, gt_size, pad, usm, args.repeat)
    return rows + _op_rows(args.repeat)

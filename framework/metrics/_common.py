"""What PSNR and SSIM share: argument checks and BasicSR's measuring convention (quantise to 8 bits
like `tensor2img`, crop the border, optionally keep only the BT.601 Y channel)."""
from __future__ import annotations

import numpy as np

from .._check import int_arg
from ..color import rgb_to_y


def _as_image(img, name: str) -> np.ndarray:
    data = getattr(img, "data", img) if hasattr(img, "requires_grad") else img  # Tensor -> array
    arr = np.asarray(data)
    if arr.dtype.kind != "f":
        raise TypeError(f"{name} must be a float image in [0, 1], got dtype {arr.dtype}")
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3:
        raise ValueError(f"{name} must be (C, H, W) or (H, W), got shape {arr.shape}")
    return arr


def quantise_8bit(img: np.ndarray) -> np.ndarray:
    """BasicSR's tensor2img in float32 (clip to [0, 1], * 255, round half to even), returned as
    float64 on [0, 255] so the metric itself is computed in float64."""
    q = np.round(np.clip(img.astype(np.float32), 0, 1) * np.float32(255))
    return q.astype(np.float64)


def prepare(sr, hr, crop_border: int, y_channel: bool, metric: str):
    """Checked, quantised, cropped (and Y-converted) float64 (C, H, W) pair on [0, 255].

    `y_channel` converts 3-channel images to Y; 1-channel images are taken as Y already (BasicSR's
    rule); any other channel count with y_channel=True is an error, never a silent RGB measurement.
    """
    a = _as_image(sr, f"{metric}: sr")
    b = _as_image(hr, f"{metric}: hr")
    if a.shape != b.shape:
        raise ValueError(f"{metric}: sr and hr shapes differ: sr {a.shape} vs hr {b.shape}")
    crop_border = int_arg(metric, "crop_border", crop_border, 0)
    _, h, w = a.shape
    if 2 * crop_border >= min(h, w):
        raise ValueError(f"{metric}: crop_border={crop_border} leaves nothing of a {h}x{w} image")
    if y_channel and a.shape[0] not in (1, 3):
        raise ValueError(f"{metric}: y_channel=True needs 1 or 3 channels, got {a.shape[0]} "
                         f"(shape {a.shape}); pass y_channel=False to measure every channel")
    a, b = quantise_8bit(a), quantise_8bit(b)
    if crop_border:
        a = a[:, crop_border:-crop_border, crop_border:-crop_border]
        b = b[:, crop_border:-crop_border, crop_border:-crop_border]
    if y_channel and a.shape[0] == 3:
        a = rgb_to_y(a / 255.0) * 255.0
        b = rgb_to_y(b / 255.0) * 255.0
    return a, b

"""PSNR with BasicSR's conventions (`calculate_psnr`): 8-bit quantised input, border cropped,
Y channel by default, float64 arithmetic on [0, 255]."""
from __future__ import annotations

import numpy as np

from ..registry import METRICS
from ._common import prepare

__all__ = ["psnr"]


@METRICS.register("psnr")
def psnr(sr, hr, crop_border: int, y_channel: bool = True) -> float:
    """Peak signal-to-noise ratio in dB between float images (C, H, W) (or (H, W)) in [0, 1].

    Both are quantised like BasicSR's tensor2img, `crop_border` pixels are removed from each side,
    and with `y_channel=True` (default) 3-channel images are measured on BT.601 Y; 1-channel images
    are taken as Y. PSNR = 10 log10(255^2 / MSE); identical images give inf; NaN input gives NaN.
    """
    a, b = prepare(sr, hr, crop_border, y_channel, "psnr")
    mse = np.mean((a - b) ** 2)
    if mse == 0:
        return float("inf")
    return float(10.0 * np.log10(255.0 * 255.0 / mse))

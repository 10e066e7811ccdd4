"""SSIM with BasicSR's conventions (`calculate_ssim` / `_ssim`, which match Wang et al.'s MATLAB
code): 11x11 Gaussian window with sigma 1.5, valid-mode filtering, C1 = (0.01 L)^2, C2 = (0.03 L)^2
with L = 255, per-channel SSIM averaged over channels."""
from __future__ import annotations

import numpy as np

from ..registry import METRICS
from ._common import prepare

__all__ = ["ssim", "gaussian_window"]

_C1 = (0.01 * 255) ** 2
_C2 = (0.03 * 255) ** 2


def gaussian_window(size: int = 11, sigma: float = 1.5) -> np.ndarray:
    """1-D normalised Gaussian, float64 (size,): cv2.getGaussianKernel(size, sigma). The 2-D
    window is its outer product, so filtering is done separably."""
    x = np.arange(size, dtype=np.float64) - (size - 1) / 2
    k = np.exp(-(x ** 2) / (2 * sigma ** 2))
    return k / k.sum()


def _filter_valid(img: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Valid-mode correlation of (C, H, W) with outer(k, k): (C, H - n + 1, W - n + 1).
    Separable: rows then columns, n shifted slices each (cheap, no huge temporaries)."""
    n = k.size
    h, w = img.shape[1] - n + 1, img.shape[2] - n + 1
    rows = sum(k[i] * img[:, i:i + h, :] for i in range(n))
    return sum(k[i] * rows[:, :, i:i + w] for i in range(n))


@METRICS.register("ssim")
def ssim(sr, hr, crop_border: int, y_channel: bool = True) -> float:
    """Structural similarity between float images (C, H, W) (or (H, W)) in [0, 1], in [-1, 1].

    Same preparation as `psnr` (8-bit quantisation, border crop, Y channel by default). The cropped
    image must be at least 11x11 (the window). Identical images give 1.0.
    """
    a, b = prepare(sr, hr, crop_border, y_channel, "ssim")
    if min(a.shape[1:]) < 11:
        raise ValueError(f"ssim: needs at least 11x11 pixels after cropping {crop_border} border "
                         f"pixels, got {a.shape[1]}x{a.shape[2]}")
    k = gaussian_window()
    mu1, mu2 = _filter_valid(a, k), _filter_valid(b, k)
    mu1_sq, mu2_sq, mu1_mu2 = mu1 * mu1, mu2 * mu2, mu1 * mu2
    sigma1_sq = _filter_valid(a * a, k) - mu1_sq
    sigma2_sq = _filter_valid(b * b, k) - mu2_sq
    sigma12 = _filter_valid(a * b, k) - mu1_mu2
    ssim_map = ((2 * mu1_mu2 + _C1) * (2 * sigma12 + _C2)) / (
        (mu1_sq + mu2_sq + _C1) * (sigma1_sq + sigma2_sq + _C2))
    # Mean per channel, then over channels (BasicSR); equal sizes make it the global mean.
    return float(ssim_map.mean(axis=(1, 2)).mean())

"""measure(): every requested metric of one SR image against its HR reference, through the METRICS
registry (a user's registered metric works like psnr and ssim). Used by validation and srgrad-eval."""
from __future__ import annotations

from ..registry import METRICS

__all__ = ["measure", "higher_is_better"]


def measure(sr, hr, metrics, crop_border: int, y_channel: bool = True) -> dict:
    """{name: value} of each registered metric in `metrics` (names), each called as
    `fn(sr, hr, crop_border=..., y_channel=...)` on (C, H, W) float images in [0, 1]."""
    return {m: float(METRICS.get(m)(sr, hr, crop_border=crop_border, y_channel=y_channel))
            for m in metrics}


def higher_is_better(name: str) -> bool:
    """A metric function may set `higher_is_better = False` (a distance such as LPIPS); PSNR and
    SSIM are higher-is-better, the default."""
    return getattr(METRICS.get(name), "higher_is_better", True)

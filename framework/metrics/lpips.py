"""LPIPS as a metric (registered "lpips" (AlexNet, the lpips package's default) and "lpips_vgg"): the
distance of framework/nn/lpips.py between an SR image and its reference, lower is better. RGB on
[0, 1], 8-bit quantised first as every srgrad metric, border cropped; never on Y (the networks take
colour: `y_channel` is accepted for the common signature and ignored, a 1-channel image is repeated
to 3 as the lpips package's users do for grayscale). The weight files are found as LPIPS finds them
(its docstring: SRGRAD_LPIPS_ALEX_BACKBONE / SRGRAD_LPIPS_ALEX_WEIGHTS, ..._VGG_...)."""
from __future__ import annotations

import functools
import os

import numpy as np

from .._check import int_arg
from ..registry import METRICS
from ._common import _as_image, quantise_8bit

__all__ = ["lpips", "lpips_vgg"]


@functools.lru_cache(maxsize=4)
def _model(net: str, backbone: str | None, weights: str | None):
    from ..nn.lpips import LPIPS
    return LPIPS(net=net, weights=weights, backbone_weights=backbone)


def _distance(sr, hr, crop_border: int, net: str) -> float:
    from ..nn.lpips import lpips_distance
    a, b = _as_image(sr, "lpips: sr"), _as_image(hr, "lpips: hr")
    if a.shape != b.shape:
        raise ValueError(f"lpips: sr and hr shapes differ: sr {a.shape} vs hr {b.shape}")
    if a.shape[0] not in (1, 3):
        raise ValueError(f"lpips: needs RGB (or 1-channel) images, got {a.shape[0]} channels")
    crop_border = int_arg("lpips", "crop_border", crop_border, 0)
    a, b = (np.repeat(x, 3 // x.shape[0], axis=0) for x in (a, b))
    a, b = ((quantise_8bit(x) / 255.0).astype(np.float32) for x in (a, b))
    if crop_border:
        a = a[:, crop_border:-crop_border, crop_border:-crop_border]
        b = b[:, crop_border:-crop_border, crop_border:-crop_border]
    key = net.upper()
    model = _model(net, os.environ.get(f"SRGRAD_LPIPS_{key}_BACKBONE"),
                   os.environ.get(f"SRGRAD_LPIPS_{key}_WEIGHTS"))
    return lpips_distance(model, np.ascontiguousarray(a), np.ascontiguousarray(b))


@METRICS.register("lpips")
def lpips(sr, hr, crop_border: int = 0, y_channel: bool = True) -> float:
    """LPIPS v0.1 with AlexNet of (C, H, W) float images in [0, 1]; lower is better."""
    return _distance(sr, hr, crop_border, "alex")


@METRICS.register("lpips_vgg")
def lpips_vgg(sr, hr, crop_border: int = 0, y_channel: bool = True) -> float:
    """LPIPS v0.1 with VGG16 of (C, H, W) float images in [0, 1]; lower is better."""
    return _distance(sr, hr, crop_border, "vgg")


lpips.higher_is_better = lpips_vgg.higher_is_better = False

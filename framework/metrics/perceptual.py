"""The learned perceptual distances as metrics, lower is better: "lpips" (LPIPS v0.1 with AlexNet,
the lpips package's default), "lpips_vgg" (with VGG16) and "dists" (framework/nn/lpips.py, dists.py).
RGB on [0, 1], 8-bit quantised first as every srgrad metric, border cropped; never on Y (the networks
take colour: `y_channel` is accepted for the common signature and ignored; a 1-channel image is
repeated to 3, as the packages' users do for grayscale). The weight files are found as the networks
find them (SRGRAD_LPIPS_ALEX_BACKBONE / _WEIGHTS, SRGRAD_LPIPS_VGG_..., SRGRAD_DISTS_...; without them
the error says where to download each)."""
from __future__ import annotations

import functools

import numpy as np

from .._check import int_arg
from ..autograd import no_grad
from ..registry import METRICS
from ..tensor import Tensor
from ._common import _as_image, quantise_8bit

__all__ = ["lpips", "lpips_vgg", "dists"]


@functools.lru_cache(maxsize=4)
def _network(kind: str):
    """The network of a metric, built once per process (from the environment's files)."""
    if kind == "dists":
        from ..nn.dists import DISTS
        return DISTS()
    from ..nn.lpips import LPIPS
    return LPIPS(net=kind)


def _images(sr, hr, crop_border: int, metric: str):
    a, b = _as_image(sr, f"{metric}: sr"), _as_image(hr, f"{metric}: hr")
    if a.shape != b.shape:
        raise ValueError(f"{metric}: sr and hr shapes differ: sr {a.shape} vs hr {b.shape}")
    if a.shape[0] not in (1, 3):
        raise ValueError(f"{metric}: needs RGB (or 1-channel) images, got {a.shape[0]} channels")
    crop_border = int_arg(metric, "crop_border", crop_border, 0)
    out = []
    for x in (a, b):
        x = (quantise_8bit(np.repeat(x, 3 // x.shape[0], axis=0)) / 255.0).astype(np.float32)
        if crop_border:
            x = x[:, crop_border:-crop_border, crop_border:-crop_border]
        out.append(Tensor(np.ascontiguousarray(x)[None]))
    return out


def _distance(sr, hr, crop_border: int, metric: str, kind: str) -> float:
    from ..nn.lpips import NETS
    a, b = _images(sr, hr, crop_border, metric)
    side = NETS["vgg" if kind == "dists" else kind]["min_side"]
    if min(a.shape[2:]) < side:
        raise ValueError(f"{metric}: the image must be at least {side}x{side} after the border crop "
                         f"(the network's pools), got {a.shape[2]}x{a.shape[3]}")
    net = _network(kind)
    with no_grad():
        d = net(a, b) if kind == "dists" else net(a, b, normalize=True)
    return float(d.data.reshape(-1)[0])


@METRICS.register("lpips")
def lpips(sr, hr, crop_border: int = 0, y_channel: bool = True) -> float:
    """LPIPS v0.1 with AlexNet of (C, H, W) float images in [0, 1]; lower is better."""
    return _distance(sr, hr, crop_border, "lpips", "alex")


@METRICS.register("lpips_vgg")
def lpips_vgg(sr, hr, crop_border: int = 0, y_channel: bool = True) -> float:
    """LPIPS v0.1 with VGG16 of (C, H, W) float images in [0, 1]; lower is better."""
    return _distance(sr, hr, crop_border, "lpips_vgg", "vgg")


@METRICS.register("dists")
def dists(sr, hr, crop_border: int = 0, y_channel: bool = True) -> float:
    """DISTS of (C, H, W) float images in [0, 1]; lower is better."""
    return _distance(sr, hr, crop_border, "dists", "dists")


lpips.higher_is_better = lpips_vgg.higher_is_better = dists.higher_is_better = False
lpips.channels = lpips_vgg.channels = dists.channels = "rgb"  # metrics.csv: lpips_rgb, whatever --rgb
# the files each needs in srgrad's model cache (engine/hub/models.py's AUXILIARY: the commands fetch them)
lpips.weight_files = ("alexnet-owt-7be5be79.pth", "lpips_v0.1_alex.pth")
lpips_vgg.weight_files = ("vgg16-397923af.pth", "lpips_v0.1_vgg.pth")
dists.weight_files = ("vgg16-397923af.pth", "DISTS_weights.pt")

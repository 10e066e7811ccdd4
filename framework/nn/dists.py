"""DISTS, deep image structure and texture similarity (Ding, Ma, Wang and Simoncelli, TPAMI 2020), as
its authors' package (`DISTS_pytorch` 0.1, DISTS_pt.py) computes it, and DISTSLoss.

VGG16's features up to relu5_3 with each max pool replaced by an L2 pool (a 3x3 Hann window, stride 2,
per channel: sqrt(conv(x^2) + 1e-12)); on the input and the five stages, per channel, a structure term
(the feature maps' normalised covariance) and a texture term (their means' similarity):

    S1 = (2 mx my + c) / (mx^2 + my^2 + c),  S2 = (2 cov_xy + c) / (vx + vy + c),  c = 1e-6
    DISTS = 1 - sum_k sum_channels (alpha S1 + beta S2) / sum(alpha + beta)

Inputs (N, 3, H, W) in [0, 1] (ImageNet mean and std subtracted inside). Lower is closer (0 for
identical images). Keys are the package's (`stage1.0.weight`, ..., `stage2.4.filter`, `mean`, `std`,
`alpha`, `beta`). Weights: torchvision's `vgg16-397923af.pth` (`backbone_weights=` or
SRGRAD_DISTS_BACKBONE) and the package's `weights.pt` with alpha and beta (`weights=` or
SRGRAD_DISTS_WEIGHTS), read without running code.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .. import functional as F
from .._check import choice, number
from ..registry import LOSSES
from ..tensor import Tensor
from ..weights import load_weights
from ._util import weight_file
from .lpips import NETS, _copy, _layer, copy_checked
from .module import Module, Parameter, Sequential

__all__ = ["DISTS", "DISTSLoss", "FILES"]

_BACKBONE = "https://download.pytorch.org/models/vgg16-397923af.pth"
_ALPHA_BETA = "https://github.com/dingkeyan93/DISTS/raw/master/DISTS_pytorch/weights.pt"
_STAGES = [(0, 4), (4, 9), (9, 16), (16, 23), (23, 30)]  # features indices; the first of 2-5 a pool
_CHANNELS = [3, 64, 128, 256, 512, 512]
_MEAN, _STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


FILES = ("vgg16-397923af.pth", "DISTS_weights.pt")  # their names in srgrad's model cache


def _path(owner: str, given, kind: str) -> str:
    """The backbone or alpha-beta ("weights") file (module docstring)."""
    if kind == "backbone":
        return weight_file(owner, given, "SRGRAD_DISTS_BACKBONE", _BACKBONE, "backbone_weights", kind,
                           FILES[0])
    return weight_file(owner, given, "SRGRAD_DISTS_WEIGHTS", _ALPHA_BETA, "weights", kind, FILES[1])


class L2Pool(Module):
    """sqrt(depthwise 3x3 Hann-window conv of x^2, stride 2, padding 1 + 1e-12): (N, C, H, W) ->
    (N, C, ceil(H / 2), ceil(W / 2)). Buffer `filter` (C, 1, 3, 3), the package's."""

    def __init__(self, channels: int):
        super().__init__()
        a = np.hanning(5)[1:-1]
        g = a[:, None] * a[None, :]
        g = (g / g.sum()).astype(np.float32)
        self.register_buffer("filter", Tensor(np.ascontiguousarray(np.repeat(g[None, None], channels, axis=0))))
        self.channels = channels

    def forward(self, x):
        out = F.conv2d(x * x, self.filter, stride=2, padding=1, groups=self.channels)
        return F.sqrt(out + 1e-12)


class DISTS(Module):
    """The package's DISTS, frozen. forward(x, y) -> (N,) distances of (N, 3, H, W) images in [0, 1]."""

    def __init__(self, weights=None, backbone_weights=None):
        super().__init__()
        owner = "DISTS"
        features = NETS["vgg"]["features"]
        for s, (a, b) in enumerate(_STAGES, 1):
            layers = OrderedDict()
            for i in range(a, b):
                spec = features[i]
                layers[str(i)] = L2Pool(spec_channels(features, i)) if spec[0] == "pool" else _layer(spec)
            setattr(self, f"stage{s}", Sequential(layers))
        self.register_buffer("mean", Tensor(np.array(_MEAN, np.float32).reshape(1, 3, 1, 1)))
        self.register_buffer("std", Tensor(np.array(_STD, np.float32).reshape(1, 3, 1, 1)))
        self.alpha = Parameter(np.zeros((1, sum(_CHANNELS), 1, 1), np.float32))
        self.beta = Parameter(np.zeros((1, sum(_CHANNELS), 1, 1), np.float32))
        path = _path(owner, weights, "weights")  # the small file first: its errors come at once
        state, _ = load_weights(path)
        for name in ("alpha", "beta"):
            copy_checked(getattr(self, name), state, name, path, owner)
        backbone = _path(owner, backbone_weights, "backbone")
        state, _ = load_weights(backbone)
        for s in range(1, 6):
            _copy(getattr(self, f"stage{s}"), state, lambda key: "features." + key, backbone, owner)
        self.requires_grad_(False)
        self.eval()

    def _features(self, x):
        h = (x - self.mean) / self.std
        feats = [x]
        for s in range(1, 6):
            h = getattr(self, f"stage{s}")(h)
            feats.append(h)
        return feats

    def forward(self, x, y):
        fx, fy = self._features(x), self._features(y)
        total = F.sum(self.alpha) + F.sum(self.beta)
        dist1 = dist2 = 0
        start, c = 0, 1e-6
        for k, n in enumerate(_CHANNELS):
            alpha = self.alpha[:, start:start + n] / total
            beta = self.beta[:, start:start + n] / total
            start += n
            xm = F.mean(fx[k], dim=(2, 3), keepdim=True)
            ym = F.mean(fy[k], dim=(2, 3), keepdim=True)
            s1 = (2 * xm * ym + c) / (xm ** 2 + ym ** 2 + c)
            dist1 = dist1 + F.sum(alpha * s1, dim=1, keepdim=True)
            xv = F.mean((fx[k] - xm) ** 2, dim=(2, 3), keepdim=True)
            yv = F.mean((fy[k] - ym) ** 2, dim=(2, 3), keepdim=True)
            cov = F.mean(fx[k] * fy[k], dim=(2, 3), keepdim=True) - xm * ym
            s2 = (2 * cov + c) / (xv + yv + c)
            dist2 = dist2 + F.sum(beta * s2, dim=1, keepdim=True)
        return F.reshape(1 - (dist1 + dist2), (x.shape[0],))


def spec_channels(features, i: int) -> int:
    """The channels entering features[i]: the output of the last convolution before it."""
    return next(spec[2] for spec in reversed(features[:i]) if spec[0] == "conv")


@LOSSES.register()
class DISTSLoss(Module):
    """DISTS as a training loss (traiNNer-redux's `distsloss`): loss_weight x the batch mean (or sum)
    of DISTS(x, gt), images in [0, 1]. The DISTS network is frozen and belongs to the loss."""

    def __init__(self, loss_weight: float = 1.0, weights=None, backbone_weights=None, reduction: str = "mean"):
        super().__init__()
        self.loss_weight = number("DISTSLoss", "loss_weight", loss_weight)
        self.reduction = choice("DISTSLoss", "reduction", reduction, ("mean", "sum"))
        self.dists = DISTS(weights=weights, backbone_weights=backbone_weights)

    @staticmethod
    def weight_files(kwargs: dict) -> tuple:
        """The files srgrad's model cache must hold unless the spec names them (engine/hub/models.py)."""
        return tuple(f for f, key in zip(FILES, ("backbone_weights", "weights")) if kwargs.get(key) is None)

    @classmethod
    def check_files(cls, kwargs: dict) -> None:
        _path("DISTSLoss", kwargs.get("backbone_weights"), "backbone")
        _path("DISTSLoss", kwargs.get("weights"), "weights")

    def forward(self, x, gt):
        d = self.dists(x, gt)
        return (F.mean(d) if self.reduction == "mean" else F.sum(d)) * self.loss_weight

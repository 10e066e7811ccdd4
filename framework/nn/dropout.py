"""Dropout layers: Dropout and Dropout2d (torch's) and DropPath (stochastic depth, timm's / BasicSR's), identity in
eval(); masks from framework.random's global generator (reseed it with framework.manual_seed)."""
from __future__ import annotations

from .. import functional as F
from .._check import flag, number
from ..registry import LAYERS
from .module import Module

__all__ = ["Dropout", "Dropout2d", "DropPath"]


@LAYERS.register()
class Dropout(Module):
    """Zero each element with probability p (default 0.5) in train(), scaling the rest by 1 / (1 - p);
    the identity in eval(). Any shape. inplace is accepted for torch compatibility (srgrad computes
    out of place)."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        number("Dropout", "p", p, 0.0, 1.0)
        self.p = p
        self.inplace = flag("Dropout", "inplace", inplace)

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


@LAYERS.register()
class Dropout2d(Dropout):
    """Zero each whole channel of each sample of x (N, C, H, W) with probability p (default 0.5) in
    train(), scaling the rest by 1 / (1 - p); the identity in eval()."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__(p, inplace)

    def forward(self, x):
        return F.dropout2d(x, self.p, self.training)


@LAYERS.register()
class DropPath(Module):
    """Stochastic depth on a residual branch: in train(), zero each whole sample of x (N, ...) with
    probability drop_prob (default 0) and scale the kept ones by 1 / (1 - drop_prob) (unless
    scale_by_keep=False); the identity in eval()."""

    def __init__(self, drop_prob: float = 0.0, scale_by_keep: bool = True):
        super().__init__()
        self.drop_prob = number("DropPath", "drop_prob", drop_prob, 0.0, 1.0)
        self.scale_by_keep = flag("DropPath", "scale_by_keep", scale_by_keep)

    def forward(self, x):
        return F.drop_path(x, self.drop_prob, self.training, self.scale_by_keep)

    def extra_repr(self):
        return f"drop_prob={round(self.drop_prob, 3):0.3f}"  # timm's repr

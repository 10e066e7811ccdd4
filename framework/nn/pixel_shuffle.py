"""PixelShuffle and PixelUnshuffle: the Module faces of F.pixel_shuffle / F.pixel_unshuffle."""
from __future__ import annotations

from .. import functional as F
from ..registry import LAYERS
from ._util import call
from .module import Module

__all__ = ["PixelShuffle", "PixelUnshuffle"]


@LAYERS.register()
class PixelShuffle(Module):
    """(N, C r^2, H, W) -> (N, C, H r, W r) with r = upscale_factor (torch's channel order)."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x):
        return call(f"PixelShuffle({self.extra_repr()})", F.pixel_shuffle, x, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


@LAYERS.register()
class PixelUnshuffle(Module):
    """(N, C, H r, W r) -> (N, C r^2, H, W) with r = downscale_factor; PixelShuffle's inverse."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x):
        return call(f"PixelUnshuffle({self.extra_repr()})", F.pixel_unshuffle, x, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"

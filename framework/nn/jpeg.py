"""DiffJPEG: the Module face of F.diff_jpeg (BasicSR's basicsr/utils/diffjpeg.py DiffJPEG)."""
from __future__ import annotations

from .. import functional as F
from .._check import flag, number
from ..registry import LAYERS
from ._util import call
from .module import Module

__all__ = ["DiffJPEG"]


@LAYERS.register()
class DiffJPEG(Module):
    """JPEG compression and decoding of (N, 3, H, W) (or (N, 1, H, W)) images in [0, 1], as
    BasicSR's DiffJPEG: `DiffJPEG(differentiable=True)(x, quality)`, quality a number in [1, 100]
    or one per image (a sequence, array or Tensor of N). differentiable (default True): DiffJPEG's
    cubic rounding, so a loss can train through the compression; False: plain rounding (gradient
    0), as Real-ESRGAN's models use. `quality` in the constructor (default None) is the quality
    when forward gets none: what a layer inside a YAML model needs. No parameters."""

    def __init__(self, differentiable: bool = True, quality=None):
        super().__init__()
        self.differentiable = flag("DiffJPEG", "differentiable", differentiable)
        self.quality = None if quality is None else number("DiffJPEG", "quality", quality, 1, 100)

    def forward(self, x, quality=None):
        quality = self.quality if quality is None else quality
        if quality is None:
            raise ValueError("DiffJPEG: no quality: call it as jpeg(x, quality) or build it with "
                             "DiffJPEG(quality=...)")
        return call(f"DiffJPEG({self.extra_repr()})", F.diff_jpeg, x, quality,
                    self.differentiable)

    def extra_repr(self):
        extra = "" if self.quality is None else f", quality={self.quality:g}"
        return f"differentiable={self.differentiable}{extra}"

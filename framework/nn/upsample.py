"""Upsample: the Module face of F.interpolate (no math here)."""
from __future__ import annotations

from .. import functional as F
from ..functional.resample import MODES, names_where
from ..registry import LAYERS
from .module import Module

__all__ = ["Upsample"]


@LAYERS.register()
class Upsample(Module):
    """Resize (N, C, H, W) with F.interpolate: exactly one of `size` (int or (H, W)) or
    `scale_factor` (float or (sh, sw)); mode "nearest" (default), "nearest-exact", "bilinear",
    "bicubic", "area", "lanczos"; align_corners=None; antialias=False; recompute_scale_factor=None.
    Every option is differentiable (see F.interpolate)."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 antialias=False, *, recompute_scale_factor=None):
        super().__init__()
        # Fail at construction (e.g. a YAML typo), not at the first forward, with interpolate's rules.
        if mode not in MODES:
            raise ValueError(f"Upsample: unknown mode {mode!r}; known modes: {', '.join(MODES)}")
        if align_corners is not None and not MODES[mode].alignable:
            raise ValueError(f"Upsample: align_corners can only be set with the modes "
                             f"{', '.join(names_where('alignable'))}; got mode {mode!r}")
        if antialias and MODES[mode].antialias is None:
            raise ValueError(f"Upsample: antialias=True is only for the modes "
                             f"{', '.join(names_where('antialias'))}; got mode {mode!r}")
        if (size is None) == (scale_factor is None):
            raise ValueError("Upsample: give exactly one of size or scale_factor, got "
                             f"size={size!r}, scale_factor={scale_factor!r}")
        self.size = tuple(size) if isinstance(size, list) else size
        if isinstance(scale_factor, (tuple, list)):
            self.scale_factor = tuple(float(s) for s in scale_factor)
        else:
            self.scale_factor = None if scale_factor is None else float(scale_factor)
        self.mode = mode
        self.align_corners = align_corners
        self.antialias = antialias
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x):
        return F.interpolate(x, size=self.size, scale_factor=self.scale_factor, mode=self.mode,
                             align_corners=self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor,
                             antialias=self.antialias)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        info += f", mode={self.mode!r}"
        if self.align_corners is not None:
            info += f", align_corners={self.align_corners!r}"
        if self.antialias:
            info += ", antialias=True"
        return info

"""Linear layers: Identity."""
from __future__ import annotations

from ..registry import LAYERS
from .module import Module

__all__ = ["Identity"]


@LAYERS.register()
class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments, as torch."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x

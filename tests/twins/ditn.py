"""PyTorch twin of DITN: spandrel 0.4.2's own DITN_Real (spandrel/architectures/DITN/__arch/
DITN_Real.py, yongliuy/DITN's), its keys, init and forward (the reflect padding to a multiple of 8
and the crop back), built from srgrad's keywords (`scale` for its `upscale`)."""
from __future__ import annotations

from . import register
from ._spandrel import spandrel_twin

_build = spandrel_twin("DITN", "DITN", {"scale": "upscale"})


@register
class DITN:
    def __new__(cls, **kwargs):
        return _build(**kwargs)

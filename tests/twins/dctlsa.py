"""PyTorch twin of DCTLSA: spandrel 0.4.2's own DCTLSA (spandrel/architectures/DCTLSA/__arch/
dctlsa.py, zengkun301/DCTLSA's), its keys, init and forward (each BasicLayer's reflect padding to
16), built from srgrad's keywords (`scale` for its `upscale`)."""
from __future__ import annotations

from . import register
from ._spandrel import spandrel_twin

_build = spandrel_twin("DCTLSA", "DCTLSA", {"scale": "upscale"})


@register
class DCTLSA:
    def __new__(cls, **kwargs):
        return _build(**kwargs)

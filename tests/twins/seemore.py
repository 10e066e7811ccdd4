"""PyTorch twin of SeemoRe: spandrel 0.4.2's own SeemoRe (spandrel/architectures/SeemoRe/__arch/
seemore_arch.py, eduardzamfir/seemoredetails'), its keys, init and forward. Its eval() routing
indexes the experts of the first image only: compare eval() at batch 1."""
from __future__ import annotations

from . import register
from ._spandrel import spandrel_twin

_build = spandrel_twin("SeemoRe", "SeemoRe", {})


@register
class SeemoRe:
    def __new__(cls, **kwargs):
        return _build(**kwargs)

"""pixel_shuffle -> DepthToSpace (mode CRD: torch's order); pixel_unshuffle -> SpaceToDepth, whose
only order is DCR (channel (a r + b) C + c), then a Gather that puts torch's c r^2 + a r + b order back
(a fixed channel permutation: valid at any image size)."""
from __future__ import annotations

import numpy as np

from ...functional.pixel_shuffle import PixelShuffleFunction, PixelUnshuffleFunction
from ..graph import register_converter


@register_converter(PixelShuffleFunction)
def pixel_shuffle(g, call):  # (N, C r^2, H, W) -> (N, C, H r, W r)
    return g.node("DepthToSpace", [g.input(0)], blocksize=int(call.options["r"]), mode="CRD")


@register_converter(PixelUnshuffleFunction)
def pixel_unshuffle(g, call):  # (N, C, H r, W r) -> (N, C r^2, H, W)
    r, c = int(call.options["r"]), g.shape(0)[1]
    g.size_rule(r)
    y = g.node("SpaceToDepth", [g.input(0)], blocksize=r)
    if c == 1:
        return y  # one channel: DCR and CRD agree
    k = np.arange(c * r * r)
    order = (k % (r * r)) * c + k // (r * r)  # torch channel k = c r^2 + q reads DCR channel q C + c
    return g.node("Gather", [y, g.const(order.astype(np.int64))], axis=1)

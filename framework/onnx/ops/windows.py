"""windows (framework/functional/windows.py) -> elementary nodes. overlap_windows: a zero Pad that
holds every neighbourhood, then one Gather of the (window, token) pixels from the flattened padded
grid; the indices hold for the traced size (a fixed-size graph, as the window partition's)."""
from __future__ import annotations

import numpy as np

from ...functional.windows import OverlapWindowsFunction
from ..graph import register_converter


@register_converter(OverlapWindowsFunction)
def overlap_windows(g, call):
    g.require_static("the overlapping windows are gathered for the input size")
    ws, ow = call.options["window"], call.options["overlap"]
    _, h, w, c = g.shape(0)
    pad = (ow - ws) // 2
    hi_h, hi_w = ((n // ws - 1) * ws - pad + ow - n for n in (h, w))  # past the last window's end
    hp, wp = pad + h + hi_h, pad + w + hi_w
    pads = g.const(np.asarray([0, pad, pad, 0, 0, hi_h, hi_w, 0], np.int64))
    x = g.node("Pad", [g.input(0), pads, g.const(np.zeros((), call.args[0].array.dtype))], mode="constant")
    x = g.node("Reshape", [x, g.const(np.asarray([-1, hp * wp, c], np.int64))])
    i0, j0 = np.meshgrid(np.arange(h // ws) * ws, np.arange(w // ws) * ws, indexing="ij")
    r, s = np.meshgrid(np.arange(ow), np.arange(ow), indexing="ij")
    index = (i0.reshape(-1, 1) + r.reshape(1, -1)) * wp + (j0.reshape(-1, 1) + s.reshape(1, -1))
    x = g.node("Gather", [x, g.const(index.reshape(-1).astype(np.int64))], axis=1)
    return g.node("Reshape", [x, g.const(np.asarray([-1, ow * ow, c], np.int64))])

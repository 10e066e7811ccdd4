"""windows (framework/functional/windows.py) -> elementary nodes. overlap_windows: a zero Pad that
holds every neighbourhood, then one Gather of the (window, token) pixels from the flattened padded
grid, the indices computed from the input's Shape (Range per axis, broadcast sums): valid at every
size that is a multiple of the window."""
from __future__ import annotations

import numpy as np

from ...functional.windows import OverlapWindowsFunction
from ..graph import register_converter


@register_converter(OverlapWindowsFunction)
def overlap_windows(g, call):
    ws, ow = call.options["window"], call.options["overlap"]
    g.size_rule(ws)
    c = g.shape(0)[-1]
    pad = (ow - ws) // 2
    hi = ow - ws - pad  # past the last window's end: H is a multiple of ws
    pads = g.const(np.asarray([0, pad, pad, 0, 0, hi, hi, 0], np.int64))
    x = g.node("Pad", [g.input(0), pads, g.const(np.zeros((), call.args[0].array.dtype))],
               mode="constant")
    zero, step = (g.const(np.asarray(v, np.int64)) for v in (0, ws))
    h, w = g.dim(g.input(0), 1), g.dim(g.input(0), 2)
    wp = g.node("Add", [w, g.const(np.asarray(pad + hi, np.int64))])  # the padded row length
    starts = [g.node("Range", [zero, n, step]) for n in (h, w)]  # i ws, j ws
    r = g.const(np.arange(ow, dtype=np.int64))
    rows = g.node("Add", [g.unsqueeze(starts[0], [1, 2, 3]), g.const(
        np.arange(ow, dtype=np.int64).reshape(1, 1, ow, 1))])  # (nh, 1, o, 1)
    cols = g.node("Add", [g.unsqueeze(starts[1], [0, 2, 3]), g.unsqueeze(r, [0, 1, 2])])  # (1, nw, 1, o)
    index = g.node("Add", [g.node("Mul", [rows, wp]), cols])  # (nh, nw, o, o) in the padded grid
    index = g.node("Reshape", [index, g.const(np.asarray([-1], np.int64))])
    x = g.node("Reshape", [x, g.const(np.asarray([0, -1, c], np.int64))])
    x = g.node("Gather", [x, index], axis=1)
    return g.node("Reshape", [x, g.const(np.asarray([-1, ow * ow, c], np.int64))])

"""keep_topk -> TopK (largest, the lower index first on ties: the forward's rule) and
ScatterElements of the kept values into zeros along the last axis: any batch size."""
from __future__ import annotations

import numpy as np

from ...functional.routing import KeepTopKFunction
from ..graph import register_converter


@register_converter(KeepTopKFunction)
def keep_topk(g, call):
    x, axis = g.input(0), len(g.shape(0)) - 1
    k = g.const(np.asarray([int(call.options["k"])], np.int64))
    values, index = g.node("TopK", [x, k], axis=axis, largest=1, sorted=1, outputs=2)
    zeros = g.node("Expand", [g.const(np.zeros(1, g.dtype)), g.node("Shape", [x])])
    return g.node("ScatterElements", [zeros, index, values], axis=axis)

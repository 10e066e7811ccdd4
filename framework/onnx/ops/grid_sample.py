"""grid_sample -> GridSample (opset 16; its bilinear mode is named "linear" from opset 20), the grid
as srgrad's (N, Ho, Wo, 2) of normalised (x, y): the same layout and conventions as torch's."""
from __future__ import annotations

from ...functional.grid_sample import PADDING_MODES, GridSampleFunction
from ..graph import register_converter


@register_converter(GridSampleFunction)
def grid_sample(g, call):
    o = call.options
    return g.node("GridSample", [g.input(0), g.input(1)], align_corners=int(o["align_corners"]),
                  mode="linear" if g.opset >= 20 else "bilinear",
                  padding_mode=PADDING_MODES[o["padding"]])

"""einsum: ONNX's Einsum (opset 12), with the explicit equation srgrad computed."""
from __future__ import annotations

from ...functional.einsum import Einsum
from ..graph import register_converter


@register_converter(Einsum)
def einsum(g, call):
    eq = ",".join(call.options["subscripts"]) + "->" + call.options["output"]
    return g.node("Einsum", [g.input(i) for i in range(len(call.args))], equation=eq)

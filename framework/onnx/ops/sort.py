"""argsort (framework/functional/sort.py) -> TopK over the whole axis (K from the input's Shape:
dynamic), indices output. TopK puts equal keys in input order (the ONNX spec's tie rule), which is
argsort's stable=True; stable=False is torch's CPU introsort order among equal keys, which no ONNX
node computes: refused with the way out."""
from __future__ import annotations

from ...functional.sort import ArgSort
from ..graph import ConversionError, register_converter


@register_converter(ArgSort)
def argsort(g, call):
    if not call.options["stable"]:
        raise ConversionError(
            f"{call.describe()}: argsort(stable=False) orders equal keys as torch's CPU introsort "
            f"does, which no ONNX node computes (TopK keeps them in input order: stable=True). "
            f"ATD: export a model built with category_order='stable' (--model-arg "
            f"category_order=stable): tokens of one category keep their image order, which "
            f"changes the image slightly where a category spans two attention groups")
    axis = call.options["axis"]
    k = g.node("Shape", [g.input(0)], start=axis, end=axis + 1)
    _, index = g.node("TopK", [g.input(0), k], outputs=2, axis=axis,
                      largest=int(call.options["descending"]), sorted=1)
    return index

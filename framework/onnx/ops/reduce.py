"""Reductions: ReduceSum, ReduceMean, ReduceMax over the recorded axes."""
from __future__ import annotations

from ...functional.reduce import Max, Mean, Sum
from ..graph import register_converter


def _reduction(op):
    def convert(g, call):
        return g.reduce(op, g.input(0), call.options["axis"], call.options["keepdims"])
    return convert


register_converter(Sum, _reduction("ReduceSum"))
register_converter(Mean, _reduction("ReduceMean"))
register_converter(Max, _reduction("ReduceMax"))

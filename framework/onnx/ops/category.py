"""category_group / category_ungroup (framework/functional/category.py) -> GatherElements /
ScatterElements by the permutation, the mirrored padding a Slice with step -1, the group size
min(N, group_size), the group count and the padding computed from the input's Shape: one graph for
every size."""
from __future__ import annotations

import numpy as np

from ...functional.category import CategoryGroup, CategoryUngroup
from ..graph import register_converter

_INT64_MIN = np.iinfo(np.int64).min


def _ints(g, *values):
    return [g.const(np.asarray([v], np.int64)) for v in values]


def _index(g, order, like):
    """order (B, N) -> (B, N, C) along the channels of `like`, for the *Elements nodes."""
    return g.node("Expand", [g.unsqueeze(order, [2]), g.node("Shape", [like])])


@register_converter(CategoryGroup)
def category_group(g, call):
    x, order = g.input(0), g.input(1)
    one, minus_one, group = _ints(g, 1, -1, call.options["group_size"])
    n = g.node("Shape", [x], start=1, end=2)  # (1,) int64
    c = g.node("Shape", [x], start=2, end=3)
    gs = g.node("Min", [n, group])
    ng = g.node("Div", [g.node("Sub", [g.node("Add", [n, gs]), one]), gs])
    pad = g.node("Sub", [g.node("Mul", [ng, gs]), n])
    rows = g.node("GatherElements", [x, _index(g, order, x)], axis=1)
    tail = g.node("Slice", [rows, g.node("Sub", [n, pad]), n, one])  # the last pad rows
    mirrored = g.node("Slice", [tail, minus_one, g.const(np.asarray([_INT64_MIN], np.int64)),
                                one, minus_one])
    rows = g.node("Concat", [rows, mirrored], axis=1)
    return g.node("Reshape", [rows, g.node("Concat", [minus_one, gs, c], axis=0)])


@register_converter(CategoryUngroup)
def category_ungroup(g, call):
    y, order = g.input(0), g.input(1)
    zero, one = _ints(g, 0, 1)
    b = g.node("Shape", [order], start=0, end=1)
    n = g.node("Shape", [order], start=1, end=2)
    c = g.node("Shape", [y], start=2, end=3)
    rows = g.node("Reshape", [y, g.node("Concat", [b, g.const(np.asarray([-1], np.int64)), c],
                                         axis=0)])
    rows = g.node("Slice", [rows, zero, n, one])  # the first N rows of each item
    return g.node("ScatterElements", [rows, _index(g, order, rows), rows], axis=1)

"""Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin over the recorded axes; var/std as the mean
of squared deviations scaled by count / (count - correction), the count read from the input's shape
(so the graph stays dynamic); argmax/argmin as ArgMax/ArgMin."""
from __future__ import annotations

import numpy as np

from ...functional.reduce import ArgExtreme, Max, Mean, Min, Sum, Var
from ..graph import register_converter


def _reduction(op):
    def convert(g, call):
        return g.reduce(op, g.input(0), call.options["axis"], call.options["keepdims"])
    return convert


register_converter(Sum, _reduction("ReduceSum"))
register_converter(Mean, _reduction("ReduceMean"))
register_converter(Max, _reduction("ReduceMax"))
register_converter(Min, _reduction("ReduceMin"))


def _axes(axis, ndim):
    axes = range(ndim) if axis is None else (axis if isinstance(axis, (tuple, list)) else (axis,))
    return [int(a) % ndim for a in axes]


@register_converter(Var)
def var(g, call):
    x, axis, keepdims = g.input(0), call.options["axis"], call.options["keepdims"]
    correction = call.options["correction"]
    axes = _axes(axis, len(g.shape(0)))
    d = g.node("Sub", [x, g.reduce("ReduceMean", x, axes, True)])
    out = g.reduce("ReduceMean", g.node("Mul", [d, d]), axes, keepdims)
    if correction == 0:
        return out
    count = g.node("Cast", [g.reduce("ReduceProd", g.node("Gather", [
        g.node("Shape", [x]), g.const(np.asarray(axes, np.int64))]), [0], False)],
        to=1 if g.dtype == np.float32 else 11)  # TensorProto FLOAT / DOUBLE
    factor = g.node("Div", [count, g.node("Sub", [count, g.const(float(correction))])])
    return g.node("Mul", [out, factor])


@register_converter(ArgExtreme)
def arg_extreme(g, call):
    op = {"argmax": "ArgMax", "argmin": "ArgMin"}[call.options["op"]]
    axis, keepdims = call.options["axis"], call.options["keepdims"]
    if axis is not None:
        return g.node(op, [g.input(0)], axis=int(axis) % len(g.shape(0)), keepdims=int(keepdims))
    flat = g.node("Reshape", [g.input(0), g.const(np.asarray([-1], np.int64))])
    index = g.node(op, [flat], axis=0, keepdims=0)
    if not keepdims:
        return index
    return g.node("Reshape", [index, g.const(np.ones(len(g.shape(0)), np.int64))])

"""batch_norm: BatchNormalization with the running statistics (eval), named by their state_dict keys;
with batch statistics (a BatchNorm2d without running statistics) the formula in elementary nodes.
layer_norm: LayerNormalization (opset 17) over the trailing normalized_shape. group_norm: Reshape to
(N, groups, -1), InstanceNormalization (per-group statistics, unit scale), Reshape back, then the
per-channel scale and shift: valid at any image size (GroupNormalization's scale changed meaning in
opset 21)."""
from __future__ import annotations

import numpy as np

from ...functional.normalization import BatchNormFunction, GroupNormFunction, LayerNormFunction
from ..graph import register_converter


@register_converter(BatchNormFunction)
def batch_norm(g, call):  # x (N, C, ...), weight/bias (C,) or None
    o, shape = call.options, g.shape(0)
    c, rank = shape[1], len(shape)
    w = g.input(1) if call.args[1] is not None else g.const(np.ones(c))
    b = g.input(2) if call.args[2] is not None else g.const(np.zeros(c))
    x = g.input(0)
    if not o["training"]:
        mean, var = (g.array(a) for a in o["running"])
        return g.node("BatchNormalization", [x, w, b, mean, var], epsilon=float(o["eps"]))
    axes = [0] + list(range(2, rank))
    d = g.node("Sub", [x, g.reduce("ReduceMean", x, axes, True)])
    var = g.reduce("ReduceMean", g.node("Mul", [d, d]), axes, True)
    y = g.node("Div", [d, g.node("Sqrt", [g.node("Add", [var, g.const(float(o["eps"]))])])])
    per_channel = g.const(np.asarray([c] + [1] * (rank - 2), np.int64))
    y = g.node("Mul", [y, g.node("Reshape", [w, per_channel])])
    return g.node("Add", [y, g.node("Reshape", [b, per_channel])])


@register_converter(LayerNormFunction)
def layer_norm(g, call):  # x (..., *normalized_shape), weight/bias normalized_shape or None
    o, rank = call.options, len(g.shape(0))
    shape = tuple(o["normalized_shape"])
    w = g.input(1) if call.args[1] is not None else g.const(np.ones(shape))
    ins = [g.input(0), w] + ([g.input(2)] if call.args[2] is not None else [])
    return g.node("LayerNormalization", ins, axis=rank - len(shape), epsilon=float(o["eps"]))


@register_converter(GroupNormFunction)
def group_norm(g, call):  # x (N, C, ...), weight/bias (C,) or None
    o, shape = call.options, g.shape(0)
    groups, rank = int(o["groups"]), len(shape)
    x = g.input(0)
    rows = g.node("Reshape", [x, g.const(np.asarray([0, groups, -1], np.int64))])
    y = g.node("InstanceNormalization", [rows, g.const(np.ones(groups)), g.const(np.zeros(groups))],
               epsilon=float(o["eps"]))
    y = g.node("Reshape", [y, g.node("Shape", [x])])
    per_channel = g.const(np.asarray([shape[1]] + [1] * (rank - 2), np.int64))
    if call.args[1] is not None:
        y = g.node("Mul", [y, g.node("Reshape", [g.input(1), per_channel])])
    if call.args[2] is not None:
        y = g.node("Add", [y, g.node("Reshape", [g.input(2), per_channel])])
    return y

"""Pooling: MaxPool; adaptive_max_pool2d -> GlobalMaxPool / MaxPool (equal windows) or, for
overlapping windows, a Gather of each window's rows (a shorter window repeats its last row, which
leaves its max alone) and a ReduceMax per axis; the average pools (recorded as resampling window
tables with their call) -> AveragePool / GlobalAveragePool, through resample.py's converter
(ops/resample.py calls `average_pool`)."""
from __future__ import annotations

import numpy as np

from ...functional.pool import AdaptiveMaxPool2dFunction, MaxPool2dFunction
from ..graph import ConversionError, register_converter


def average_pool(g, op, args, in_hw):
    """(op_type, attrs) of the ONNX pool computing avg_pool2d / adaptive_avg_pool2d / area
    interpolation with these arguments, or None (then the caller exports the window tables). The
    caller checks the node in ONNX Runtime before using it."""
    if op == "avg_pool2d":
        if args["divisor_override"] is not None:
            return None  # ONNX's AveragePool has no divisor override
        (ph, pw) = args["padding"]
        return "AveragePool", dict(kernel_shape=list(args["kernel"]), strides=list(args["stride"]),
                                   pads=[ph, pw, ph, pw], ceil_mode=int(args["ceil_mode"]),
                                   count_include_pad=int(args["count_include_pad"]))
    out = args["output_size"]
    if tuple(out) == (1, 1):
        return "GlobalAveragePool", {}
    if all(n % m == 0 for n, m in zip(in_hw, out)):  # equal windows: a plain pool at this size
        kernel = [n // m for n, m in zip(in_hw, out)]
        return "AveragePool", dict(kernel_shape=kernel, strides=kernel)
    return None


@register_converter(MaxPool2dFunction)
def max_pool2d(g, call):  # -> (y, indices as torch's flat h W + w per plane)
    o, shape = call.options, g.shape(0)
    g.size_rule(*o["stride"])
    floor = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in
             zip(shape[2:], o["kernel"], o["stride"], o["padding"], o["dilation"])]
    attrs = dict(kernel_shape=list(o["kernel"]), strides=list(o["stride"]),
                 pads=list(o["padding"]) * 2, dilations=list(o["dilation"]),
                 ceil_mode=int(tuple(floor) != tuple(o["out_size"])))
    if not g.used(1):
        return g.node("MaxPool", [g.input(0)], **attrs), None
    y, idx = g.node("MaxPool", [g.input(0)], outputs=2, **attrs)
    g.require_static("max_pool2d's indices: ONNX numbers them over the whole tensor; the plane size "
                     "that turns them into torch's per-plane index is fixed")
    return y, g.node("Mod", [idx, g.const(np.int64(shape[2] * shape[3]))])


@register_converter(AdaptiveMaxPool2dFunction)
def adaptive_max_pool2d(g, call):
    windows, shape = call.options["windows"], g.shape(0)
    if g.used(1):
        raise ConversionError(f"{call.describe()}: adaptive_max_pool2d's indices are not exported")
    if all(len(lo) == 1 for lo, _ in windows):
        return g.node("GlobalMaxPool", [g.input(0)]), None
    sizes = [hi - lo for lo, hi in windows]
    if all(n % len(k) == 0 and (k == n // len(k)).all() for n, k in zip(shape[2:], sizes)):
        kernel = [n // len(k) for n, k in zip(shape[2:], sizes)]  # equal, adjacent windows
        return g.node("MaxPool", [g.input(0)], kernel_shape=kernel, strides=kernel), None
    g.require_static("adaptive_max_pool2d: its overlapping windows are gathered for the traced size")
    y = g.input(0)
    for axis, (lo, hi) in ((2, windows[0]), (3, windows[1])):
        k = int((hi - lo).max())
        rows = np.minimum(lo[:, None] + np.arange(k)[None, :], hi[:, None] - 1).ravel()
        y = g.node("Gather", [y, g.const(rows.astype(np.int64))], axis=axis)
        split = [0, 0, len(lo), k, -1] if axis == 2 else [0, 0, 0, len(lo), k]
        y = g.node("Reshape", [y, g.const(np.asarray(split, np.int64))])
        y = g.reduce("ReduceMax", y, [axis + 1], keepdims=False)
    return y, None

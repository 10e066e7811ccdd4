"""Pooling: MaxPool; the average pools -> GlobalAveragePool (a 1x1 adaptive pool) or AveragePool.

The recorded average pool keeps only its windows and divisors (pool.py computes them from
avg_pool2d's or adaptive_avg_pool2d's arguments), so the converter finds the AveragePool
(kernel, stride, pad, ceil_mode, count_include_pad) that yields exactly those windows and divisors.
Where none does (an adaptive pool to another size, a divisor_override), the pool is exported as its
window tables: y = (T_h x T_w^T) / div, two MatMuls at the traced size."""
from __future__ import annotations

import numpy as np

from ...functional.pool import MaxPool2dFunction, WindowMean, _avg_windows
from ..graph import register_converter


def _out_size(n, k, s, p, ceil):
    """avg_pool2d's output size (pool.py's rule, dilation 1)."""
    o = (n + 2 * p - k + (s - 1 if ceil else 0)) // s + 1
    return o - 1 if ceil and (o - 1) * s >= n + p else o


def _axis_candidates(n, lo, hi):
    """Every (k, s, p, ceil, padded sizes, in-bounds counts) giving windows [lo, hi) along an axis."""
    o, widest = len(lo), int((hi - lo).max())
    found = []
    for k in range(max(widest, 1), 2 * widest + 2):
        for p in range(k // 2 + 1):
            if o == 1:
                strides = [k]
            else:  # the last window starts at (o - 1) s - p unless that is clipped to 0
                s = (int(lo[-1]) + p) / (o - 1)
                strides = ([int(s)] if s == int(s) and s >= 1 else []) + (
                    list(range(1, p + 1)) if lo[-1] == 0 else [])
            for s in strides:
                for ceil in (False, True):
                    if _out_size(n, k, s, p, ceil) != o:
                        continue
                    a, b, padded, inside = _avg_windows(n, k, s, p, o)
                    if np.array_equal(a, lo) and np.array_equal(b, hi):
                        found.append((k, s, p, ceil, padded, inside))
    return found


def _average_pool(shape, windows, div):
    """AveragePool attributes reproducing the windows and divisors, or None."""
    hs, he, ws, we = windows
    for kh, sh, ph, ch, hpad, hin in _axis_candidates(shape[2], hs, he):
        for kw, sw, pw, cw, wpad, win in _axis_candidates(shape[3], ws, we):
            if ch != cw:
                continue
            for include, (a, b) in ((1, (hpad, wpad)), (0, (hin, win))):
                if np.array_equal(np.outer(a, b).astype(div.dtype), div):
                    return dict(kernel_shape=[kh, kw], strides=[sh, sw], pads=[ph, pw, ph, pw],
                                ceil_mode=int(ch), count_include_pad=include)
    return None


def _window_table(lo, hi, n):
    t = np.zeros((len(lo), n))
    for i, (a, b) in enumerate(zip(lo, hi)):
        t[i, a:b] = 1.0
    return t


@register_converter(WindowMean)
def window_mean(g, call):  # x (N, C, H, W) -> (N, C, OH, OW)
    shape, (hs, he, ws, we), div = g.shape(0), call.options["windows"], call.options["div"]
    x = g.input(0)
    whole = (len(hs) == len(ws) == 1 and hs[0] == ws[0] == 0 and he[0] == shape[2]
             and we[0] == shape[3])
    if whole and div[0, 0] == shape[2] * shape[3]:
        return g.node("GlobalAveragePool", [x])
    attrs = _average_pool(shape, call.options["windows"], div)
    if attrs is not None:
        return g.node("AveragePool", [x], **attrs)
    g.require_static("no AveragePool reproduces these windows and divisors (an adaptive pool to a "
                     "size other than 1, or divisor_override): exported as window tables (MatMul) "
                     "for this input size")
    g.note("average pool exported as window tables (MatMul, fixed size)")
    y = g.node("MatMul", [g.const(_window_table(hs, he, shape[2])), x])
    y = g.node("MatMul", [y, g.const(_window_table(ws, we, shape[3]).T)])
    return g.node("Div", [y, g.const(div)])


@register_converter(MaxPool2dFunction)
def max_pool2d(g, call):  # -> (y, indices as torch's flat h W + w per plane)
    o, shape = call.options, g.shape(0)
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

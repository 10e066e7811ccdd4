"""attention (framework/functional/attention.py) -> elementary nodes: the heads split by Reshape +
Transpose, MatMul, Mul by the scale, Add of the bias and the per-window mask, Softmax, MatMul.
window_partition / window_reverse -> Reshape, Transpose, Reshape, with the window counts computed
from the input's Shape. A shifted-window mask (functional.attention.shift_mask) is recognised
(window, shift) and built in the graph from the partitioned grid's Shape: region ids from Range and
comparisons, partitioned like the tokens, Equal, Where; so these graphs hold at every size
(verified by the export's size check). A mask that is not a shift mask keeps the graph fixed-size."""
from __future__ import annotations

import numpy as np

from ...functional.attention import (AttentionFunction, AttentionSoftmaxFunction,
                                     WindowAttentionFunction, WindowPartitionFunction, shift_mask)
from ..graph import register_converter

FIXED_SIZE = ("window partition and shifted-window attention mask are computed for the input size")


def _ints(values):
    return np.asarray(values, np.int64)


def _sizes(g, hw, peer_hw):
    """1-element int64 tensors holding h and w: numbers when they do not follow the input size,
    else read from a value's Shape (g.dim_source); None where no value has them."""
    out = []
    for n, pn in zip(hw, peer_hw):
        out.append(g.const(_ints([n])) if n == pn else g.dim_source(n, pn))
    return out


@register_converter(WindowPartitionFunction)
def window_partition(g, call):
    o = call.options
    (wh, ww), reverse, (h, w) = o["window"], o["reverse"], o["hw"]
    g.size_rule(wh, ww)
    c = g.shape(0)[-1]
    if reverse:
        peer = g.peer_call()
        hs, ws = _sizes(g, (h, w), peer.options["hw"] if peer is not None else (h, w))
        if hs is None or ws is None:
            g.require_static("window_reverse's (h, w) follow the input size but no computed value "
                             "has them")
            hs, ws = g.const(_ints([h])), g.const(_ints([w]))
    else:
        hs, ws = (g.node("Shape", [g.input(0)], start=a, end=a + 1) for a in (1, 2))
    nh, nw = (g.node("Div", [n, g.const(_ints([k]))]) for n, k in ((hs, wh), (ws, ww)))
    one, last = g.const(_ints([-1])), g.const(_ints([c]))
    split = [one, nh, nw, g.const(_ints([wh])), g.const(_ints([ww])), last] if reverse else \
        [one, nh, g.const(_ints([wh])), nw, g.const(_ints([ww])), last]
    y = g.node("Reshape", [g.input(0), g.node("Concat", split, axis=0)])
    y = g.node("Transpose", [y], perm=[0, 1, 3, 2, 4, 5])
    if reverse:
        return g.node("Reshape", [y, g.node("Concat", [one, hs, ws, last], axis=0)])
    return g.node("Reshape", [y, g.const(_ints((-1, wh * ww, c)))])


def _mask_source(g, mask, peer_mask):
    """(the partition call whose grid the mask is for, (sh, sw)) when `mask` is shift_mask of that
    grid (and the peer's mask of the peer's grid), else None."""
    nw, n, _ = mask.shape
    for call in reversed(g.trace.calls[:g.call.index]):
        o = call.options
        if call.fn is not WindowPartitionFunction or o["reverse"]:
            continue
        (wh, ww), (h, w) = o["window"], o["hw"]
        if wh * ww != n or (h // wh) * (w // ww) != nw:
            continue
        shifts = [(wh // 2, ww // 2)] + [(a, b) for a in range(1, wh) for b in range(1, ww)]
        for shift in shifts:
            if not np.array_equal(shift_mask(h, w, (wh, ww), shift, mask.dtype), mask):
                continue
            other = g.peer.calls[call.index] if g.peer is not None else None
            if peer_mask is not None and other is not None and not np.array_equal(
                    shift_mask(*other.options["hw"], (wh, ww), shift, mask.dtype), peer_mask):
                return None
            return call, shift
        return None
    return None


def _shift_mask_nodes(g, part, shift):
    """The (nW, N, N) mask of shift_mask for the grid that `part` partitions, in the graph."""
    (wh, ww), (sh, sw) = part.options["window"], shift
    grid = g.ref(part.args[0])
    key = ("shift_mask", grid, wh, ww, sh, sw)
    if key in g.memo:
        return g.memo[key]
    zero, one = g.const(np.asarray(0, np.int64)), g.const(np.asarray(1, np.int64))
    ids = []
    for axis, k, t in ((1, wh, sh), (2, ww, sw)):
        n = g.dim(grid, axis)
        pos = g.node("Range", [zero, n, one])
        region = [g.node("Cast", [g.node("GreaterOrEqual", [pos, g.node("Sub", [n, g.const(
            np.asarray(v, np.int64))])])], to=7) for v in (k, t)]  # 7: int64
        ids.append(g.node("Add", region))  # 0, 1, 2: BasicSR's three slices
    region = g.node("Add", [g.node("Mul", [g.unsqueeze(ids[0], [1]), g.const(np.asarray(3, np.int64))]),
                            g.unsqueeze(ids[1], [0])])  # (H, W)
    nh, nw = (g.node("Div", [g.node("Shape", [grid], start=a, end=a + 1), g.const(_ints([k]))])
              for a, k in ((1, wh), (2, ww)))
    win = g.node("Reshape", [region, g.node("Concat", [nh, g.const(_ints([wh])), nw,
                                                       g.const(_ints([ww]))], axis=0)])
    win = g.node("Reshape", [g.node("Transpose", [win], perm=[0, 2, 1, 3]),
                             g.const(_ints([-1, wh * ww]))])  # (nW, N) region of each token
    same = g.node("Equal", [g.unsqueeze(win, [1]), g.unsqueeze(win, [2])])
    mask = g.node("Where", [same, g.const(np.asarray(0.0)), g.const(np.asarray(-100.0))])
    g.memo[key] = mask
    return mask


def _mask(g, mask):
    """The mask as a graph value: built from the Shape when it is a shift mask and the export is
    dynamic, else the constant (a fixed-size graph)."""
    peer = g.peer_call()
    if g.peer is not None:
        found = _mask_source(g, mask, peer.options.get("mask") if peer is not None else None)
        if found is not None:
            return _shift_mask_nodes(g, *found)
    g.require_static("the " + FIXED_SIZE)
    return g.array(mask) if g.trace is not None else g.const(mask)


def _scores(g, s, bias, scale, mask, b_, heads, n, m):
    """scale s + bias (+ mask per window) as nodes; s (B, nH, N, M), bias a graph value or None."""
    x = g.node("Mul", [s, g.const(np.asarray(scale))])
    if bias is not None:
        x = g.node("Add", [x, bias])
    if mask is not None:
        value = _mask(g, mask)
        nw = g.node("Shape", [value], start=0, end=1)
        x = g.node("Reshape", [x, g.node("Concat", [g.const(_ints([-1])), nw,
                                                    g.const(_ints([heads, n, m]))], axis=0)])
        x = g.node("Add", [x, g.unsqueeze(value, [1])])
        x = g.node("Reshape", [x, g.const(_ints([-1, heads, n, m]))])
    return x


@register_converter(AttentionSoftmaxFunction)
def attention_softmax(g, call):
    b_, heads, n, m = g.shape(0)
    bias = g.input(1) if call.args[1] is not None else None
    x = _scores(g, g.input(0), bias, call.options["scale"], call.options["mask"], b_, heads, n, m)
    return g.node("Softmax", [x], axis=-1)


def _heads_attention(g, call, q, k, v, bias_index, b_, n, m, cv):
    """q (B, nH, N, d), k (B, nH, M, d), v (B, nH, M, dv) -> the output (B, N, Cv)."""
    o = call.options
    bias = g.input(bias_index) if call.args[bias_index] is not None else None
    s = g.node("MatMul", [q, g.node("Transpose", [k], perm=[0, 1, 3, 2])])
    s = _scores(g, s, bias, o["scale"], o["mask"], b_, o["heads"], n, m)
    y = g.node("MatMul", [g.node("Softmax", [s], axis=-1), v])
    y = g.node("Transpose", [y], perm=[0, 2, 1, 3])
    return g.node("Reshape", [y, g.const(_ints([0, 0, -1]))])  # (B, N, nH dv): copies B and N


@register_converter(AttentionFunction)
def attention(g, call):
    heads = call.options["heads"]
    (b_, n, c), (_, m, _), (_, _, cv) = g.shape(0), g.shape(1), g.shape(2)

    def split(i, tokens, channels):  # (B, T, nH d) -> (B, nH, T, d); d inferred (it may be
        # the image's pixels: DAT's channel attention attends over channels)
        x = g.node("Reshape", [g.input(i), g.const(_ints([0, 0, heads, -1]))])
        return g.node("Transpose", [x], perm=[0, 2, 1, 3])
    return _heads_attention(g, call, split(0, n, c), split(1, m, c), split(2, m, cv), 3, b_, n, m, cv)


@register_converter(WindowAttentionFunction)
def window_attention(g, call):
    b_, n, c3 = g.shape(0)
    heads, c = call.options["heads"], c3 // 3
    x = g.node("Reshape", [g.input(0), g.const(_ints([-1, n, 3, heads, c // heads]))])
    x = g.node("Transpose", [x], perm=[2, 0, 3, 1, 4])  # (3, B, nH, N, d)
    each = g.const(_ints([-1, heads, n, c // heads]))  # drops Gather's kept axis
    q, k, v = (g.node("Reshape", [g.node("Gather", [x, g.const(_ints([i]))], axis=0), each])
               for i in range(3))
    return _heads_attention(g, call, q, k, v, 1, b_, n, n, c)

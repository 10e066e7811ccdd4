"""attention (framework/functional/attention.py) -> elementary nodes: the heads split by Reshape +
Transpose, MatMul, Mul by the scale, Add of the bias and the per-window mask, Softmax, MatMul.
window_partition / window_reverse -> Reshape, Transpose, Reshape. The partition's window counts and
the mask's windows hold for the traced size: those graphs are fixed-size."""
from __future__ import annotations

import numpy as np

from ...functional.attention import (AttentionFunction, AttentionSoftmaxFunction,
                                     WindowAttentionFunction, WindowPartitionFunction)
from ..graph import register_converter

FIXED_SIZE = ("window partition and shifted-window attention mask are computed for the input size")


def _ints(values):
    return np.asarray(values, np.int64)


@register_converter(WindowPartitionFunction)
def window_partition(g, call):
    g.require_static("the " + FIXED_SIZE)  # the reshapes below hold this size's window counts
    o = call.options
    (wh, ww), reverse, (h, w) = o["window"], o["reverse"], o["hw"]
    c = g.shape(0)[-1]
    split = (-1, h // wh, w // ww, wh, ww, c) if reverse else (-1, h // wh, wh, w // ww, ww, c)
    y = g.node("Reshape", [g.input(0), g.const(_ints(split))])
    y = g.node("Transpose", [y], perm=[0, 1, 3, 2, 4, 5])
    return g.node("Reshape", [y, g.const(_ints((-1, h, w, c) if reverse else (-1, wh * ww, c)))])


def _scores(g, s, bias, scale, mask, b_, heads, n, m):
    """scale s + bias (+ mask per window) as nodes; s (B, nH, N, M), bias a graph value or None."""
    x = g.node("Mul", [s, g.const(np.asarray(scale))])
    if bias is not None:
        x = g.node("Add", [x, bias])
    if mask is not None:
        g.require_static("the " + FIXED_SIZE)
        nw = mask.shape[0]
        x = g.node("Reshape", [x, g.const(_ints([b_ // nw, nw, heads, n, m]))])
        x = g.node("Add", [x, g.const(mask[:, None])])
        x = g.node("Reshape", [x, g.const(_ints([b_, heads, n, m]))])
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
    return g.node("Reshape", [y, g.const(_ints([-1, n, cv]))])


@register_converter(AttentionFunction)
def attention(g, call):
    heads = call.options["heads"]
    (b_, n, c), (_, m, _), (_, _, cv) = g.shape(0), g.shape(1), g.shape(2)

    def split(i, tokens, channels):  # (B, T, nH d) -> (B, nH, T, d)
        x = g.node("Reshape", [g.input(i), g.const(_ints([-1, tokens, heads, channels // heads]))])
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

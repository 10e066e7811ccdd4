"""Mixture-of-experts routing: keep_topk(x, k) keeps the k largest entries of each row of x (the
last axis) and zeroes the rest, the gate weights of a top-k router (SeemoRe's MoELayer:
zeros.scatter(1, topk(w, k).indices, w.gather(1, topk(w, k).indices))).

    (..., E) -> (..., E); gradient: the upstream gradient where an entry was kept, 0 elsewhere (the
    selection itself is piecewise constant, as torch's topk indices)

Ties are decided by a documented rule, the lower index first (a stable sort of -x; ONNX's TopK rule
too), so a row with equal weights routes the same way every run. NaN sorts as the largest (numpy's
order) and is kept. The ONNX converter (framework/onnx/ops/routing.py) is a TopK and a
ScatterElements into zeros: one graph for every batch size.
"""
from __future__ import annotations

import numpy as np

from .._check import float_array, int_arg
from ..autograd import Function

__all__ = ["keep_topk", "KeepTopKFunction"]


class KeepTopKFunction(Function):
    """y = x where x is among the k largest of its row (last axis), else 0."""

    @staticmethod
    def forward(ctx, x, *, k):
        order = np.argsort(-x, axis=-1, kind="stable")[..., :k]
        mask = np.zeros(x.shape, bool)
        np.put_along_axis(mask, order, True, axis=-1)
        ctx.save_for_backward(mask)
        return np.where(mask, x, x.dtype.type(0))

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return np.where(mask, g, g.dtype.type(0))


def keep_topk(x, k: int):
    """The k largest entries of each row of x (..., E) (the last axis), the others 0 (module
    docstring). k: 1 to E."""
    a = float_array("keep_topk", "x", x)
    k = int_arg("keep_topk", "k", k)
    if a.ndim == 0 or k > a.shape[-1]:
        raise ValueError(f"keep_topk: k must be at most the last axis' size, got k={k} for shape "
                         f"{tuple(a.shape)}")
    return KeepTopKFunction.apply(x, k=k)

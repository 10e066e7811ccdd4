"""Reductions: sum, mean, max over an axis (int, tuple or None), with keepdims."""
from __future__ import annotations

import numpy as np

from ..autograd import Function
from ._util import expand_to, normalize_axis


class Sum(Function):
    @staticmethod
    def forward(ctx, a, *, axis, keepdims):
        ctx.meta = (a.shape, axis, keepdims)
        return np.asarray(a.sum(axis=axis, keepdims=keepdims))

    @staticmethod
    def backward(ctx, g):  # every summed element gets g
        shape, axis, keepdims = ctx.meta
        return np.ascontiguousarray(expand_to(g, shape, axis, keepdims))


class Mean(Function):
    @staticmethod
    def forward(ctx, a, *, axis, keepdims):
        ctx.meta = (a.shape, axis, keepdims)
        return np.asarray(a.mean(axis=axis, keepdims=keepdims), dtype=a.dtype)

    @staticmethod
    def backward(ctx, g):  # every element gets g / count
        shape, axis, keepdims = ctx.meta
        count = int(np.prod([shape[i] for i in axis])) if axis else 1
        return expand_to(g, shape, axis, keepdims) / np.asarray(count, g.dtype)


class Max(Function):
    @staticmethod
    def forward(ctx, a, *, axis, keepdims):
        out = np.asarray(a.max(axis=axis, keepdims=keepdims))
        ctx.save_for_backward(a, out)
        ctx.meta = (axis, keepdims)
        return out

    @staticmethod
    def backward(ctx, g):  # g goes to the maxima; ties share it evenly (torch's amax rule)
        a, out = ctx.saved_tensors
        axis, keepdims = ctx.meta
        mask = a == expand_to(out, a.shape, axis, keepdims)
        count = mask.sum(axis=axis, keepdims=True)
        return mask * (expand_to(g, a.shape, axis, keepdims) / count).astype(g.dtype)


def sum(x, axis=None, keepdims=False):
    """Sum over `axis` (None: all); (…) -> reduced shape."""
    return Sum.apply(x, axis=normalize_axis(axis, x.ndim, "sum"), keepdims=keepdims)


def mean(x, axis=None, keepdims=False):
    """Mean over `axis` (None: all)."""
    if x.size == 0:
        raise ValueError("mean: the tensor is empty")
    return Mean.apply(x, axis=normalize_axis(axis, x.ndim, "mean"), keepdims=keepdims)


def max(x, axis=None, keepdims=False):
    """Maximum over `axis` (None: all)."""
    if x.size == 0:
        raise ValueError("max: the tensor is empty")
    return Max.apply(x, axis=normalize_axis(axis, x.ndim, "max"), keepdims=keepdims)

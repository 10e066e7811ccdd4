"""Reductions: sum, mean, max/min, var/std over an axis (int, tuple or None) with keepdims, and
argmax/argmin. Each takes numpy's axis=/keepdims= or torch's dim=/keepdim= (`_util.dims`)."""
from __future__ import annotations

import numpy as np

from .._check import ArgumentTypeError, flag, float_array, number
from ..autograd import Function
from ._util import data_of, dims, expand_to, normalize_axis
from ..tensor import Tensor
from .elementwise import maximum, minimum, sqrt


class Sum(Function):
    @staticmethod
    def forward(ctx, a, *, axis, keepdims):
        ctx.meta = (a.shape, axis, keepdims)
        return np.asarray(a.sum(axis=axis, keepdims=keepdims))

    @staticmethod
    def backward(ctx, g):  # every summed element gets g
        shape, axis, keepdims = ctx.meta
        return np.require(expand_to(g, shape, axis, keepdims), requirements="C")  # 0-d stays 0-d


class Mean(Function):
    @staticmethod
    def forward(ctx, a, *, axis, keepdims):
        ctx.meta = (a.shape, axis, keepdims)
        return np.asarray(a.mean(axis=axis, keepdims=keepdims), dtype=a.dtype)

    @staticmethod
    def backward(ctx, g):  # every element gets g / count
        shape, axis, keepdims = ctx.meta
        return expand_to(g, shape, axis, keepdims) / np.asarray(_count(shape, axis), g.dtype)


def _extreme_forward(ctx, a, axis, keepdims, reduce):
    out = np.asarray(reduce(a, axis=axis, keepdims=keepdims))
    ctx.save_for_backward(a, out)
    ctx.meta = (axis, keepdims)
    return out


def _extreme_backward(ctx, g):  # g goes to the extrema; ties share it evenly (torch's amax rule)
    a, out = ctx.saved_tensors
    axis, keepdims = ctx.meta
    mask = a == expand_to(out, a.shape, axis, keepdims)
    count = mask.sum(axis=axis, keepdims=True)
    return mask * (expand_to(g, a.shape, axis, keepdims) / count).astype(g.dtype)


class Max(Function):
    @staticmethod
    def forward(ctx, a, *, axis, keepdims):
        return _extreme_forward(ctx, a, axis, keepdims, np.max)

    backward = staticmethod(_extreme_backward)


class Min(Function):
    @staticmethod
    def forward(ctx, a, *, axis, keepdims):
        return _extreme_forward(ctx, a, axis, keepdims, np.min)

    backward = staticmethod(_extreme_backward)


class Var(Function):
    """sum((x - mean)^2) / (count - correction) over `axis` (inf or nan when count <= correction,
    as torch)."""

    @staticmethod
    def forward(ctx, a, *, axis, keepdims, correction):
        d = a - a.mean(axis=axis, keepdims=True)
        denom = a.dtype.type(np.maximum(_count(a.shape, axis) - correction, 0))
        ctx.save_for_backward(d)
        ctx.meta = (axis, keepdims, denom)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray((d * d).sum(axis=axis, keepdims=keepdims) / denom)

    @staticmethod
    def backward(ctx, g):  # dL/dx = g 2 (x - mean) / (count - correction)
        (d,) = ctx.saved_tensors
        axis, keepdims, denom = ctx.meta
        with np.errstate(divide="ignore", invalid="ignore"):
            return expand_to(g, d.shape, axis, keepdims) * (d * (d.dtype.type(2) / denom))


class ArgExtreme(Function):
    """Index of the maximum (op="argmax") or minimum along one axis, or of the flattened tensor
    (axis None); int64, no gradient. A Function so that traced graphs see it."""

    @staticmethod
    def forward(ctx, a, *, op, axis, keepdims):
        return np.asarray(getattr(np, op)(a, axis=axis, keepdims=keepdims), np.int64)

    @staticmethod
    def backward(ctx, g):
        return None


def _count(shape, axes) -> int:
    return int(np.prod([shape[i] for i in axes])) if axes else 1


def _check_extent(op, x, axes):
    """An extremum (or mean) over nothing is undefined: refuse an empty reduced extent."""
    shape = np.shape(data_of(x))
    if 0 in shape and (len(axes) == len(shape) or not axes):
        raise ValueError(f"{op}: the tensor is empty (shape {shape})")
    if any(shape[i] == 0 for i in axes):
        raise ValueError(f"{op}: the reduced axes {axes} of shape {shape} are empty")


@dims
def sum(x, axis=None, keepdims=False):
    """Sum over `axis` (int, tuple or None for all; alias dim); keepdims keeps the reduced axes
    as size 1. (…) -> reduced shape."""
    return Sum.apply(x, axis=normalize_axis(axis, x.ndim, "sum"), keepdims=bool(keepdims))


@dims
def mean(x, axis=None, keepdims=False):
    """Mean over `axis` (None: all; alias dim), in x's dtype (a float one: an int tensor is
    refused as in torch; .float() it)."""
    float_array("mean", "input", x)
    axes = normalize_axis(axis, x.ndim, "mean")
    _check_extent("mean", x, axes)
    return Mean.apply(x, axis=axes, keepdims=bool(keepdims))


@dims
def max(x, axis=None, keepdims=False):
    """Maximum over `axis` (None: all; alias dim): the values only, as torch.amax (torch's
    x.max(dim) pair of values and indices is (x.max(dim), x.argmax(dim)) here). Tied maxima share
    the gradient evenly. max(a, b) of two tensors is maximum(a, b), as torch's."""
    if isinstance(axis, Tensor):
        return _pairwise(maximum, "max", x, axis, keepdims)
    axes = normalize_axis(axis, x.ndim, "max")
    _check_extent("max", x, axes)
    return Max.apply(x, axis=axes, keepdims=bool(keepdims))


@dims
def min(x, axis=None, keepdims=False):
    """Minimum over `axis` (None: all; alias dim): the values only, as torch.amin; min(a, b)
    of two tensors is minimum(a, b)."""
    if isinstance(axis, Tensor):
        return _pairwise(minimum, "min", x, axis, keepdims)
    axes = normalize_axis(axis, x.ndim, "min")
    _check_extent("min", x, axes)
    return Min.apply(x, axis=axes, keepdims=bool(keepdims))


def _pairwise(fn, op, x, other, keepdims):
    if keepdims:
        raise ArgumentTypeError(f"{op}: keepdim is for a reduction over a dim, not for {op} of two "
                                f"tensors")
    return fn(x, other)


def _arg(op, x, axis, keepdims):
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, (int, np.integer))):
        raise ArgumentTypeError(f"{op}: dim must be an int or None, got {axis!r}")
    axes = normalize_axis(axis, x.ndim, op)
    _check_extent(op, x, axes)
    return ArgExtreme.apply(x, op=op, axis=None if axis is None else axes[0],
                            keepdims=bool(keepdims))


@dims
def argmax(x, axis=None, keepdims=False):
    """int64 index of the maximum along `axis` (alias dim; None: into the flattened tensor, a
    scalar, shape (1, ..., 1) with keepdims); the first one among ties. No gradient."""
    return _arg("argmax", x, axis, keepdims)


@dims
def argmin(x, axis=None, keepdims=False):
    """int64 index of the minimum along `axis` (as argmax)."""
    return _arg("argmin", x, axis, keepdims)


def _correction(op, unbiased, correction) -> float:
    """torch's two spellings of the divisor: unbiased (bool) or correction (a number >= 0, numpy's
    ddof); default 1, count - 1, as torch."""
    if unbiased is not None and correction is not None:
        raise ArgumentTypeError(f"{op}: give unbiased or correction, not both")
    if unbiased is not None:
        return 1.0 if flag(op, "unbiased", unbiased) else 0.0
    return 1.0 if correction is None else number(op, "correction", correction, low=0)


@dims
def var(x, axis=None, unbiased=None, keepdims=False, *, correction=None):
    """Variance over `axis` (None: all; alias dim): sum((x - mean)^2) / (count - correction).
    correction defaults to 1 (torch's unbiased estimate; numpy's ddof defaults to 0: pass ddof=0
    or unbiased=False for the population variance). Differentiable."""
    float_array("var", "input", x)
    c = _correction("var", unbiased, correction)
    return Var.apply(x, axis=normalize_axis(axis, x.ndim, "var"), keepdims=bool(keepdims),
                     correction=c)


@dims
def std(x, axis=None, unbiased=None, keepdims=False, *, correction=None):
    """Standard deviation, sqrt(var(...)) with var's arguments (correction 1 by default). Its
    gradient is nan where the deviation is 0, as torch's."""
    return sqrt(var(x, axis, unbiased, keepdims, correction=correction))

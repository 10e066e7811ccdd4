"""softmax and log_softmax along any axis: one fused numba pass per row each way (the row kernels
are rows.py's `softmax_rows` / `softmax_rows_grad`).

The axis is moved last (a copy only when it is not already last), so one row kernel serves every
axis. Rows are stabilised by their maximum; float32 rows use rows.py's vectorisable exp.
"""
from __future__ import annotations

import numpy as np

from .._check import float_array, int_arg
from .._jit import launch
from ..autograd import Function
from ._util import dims
from .rows import SERIAL_ELEMS, softmax_rows, softmax_rows_grad

__all__ = ["softmax", "log_softmax"]

def _rows(a, axis):
    """a with `axis` moved last, C-contiguous, as (R, D)."""
    moved = a if axis == a.ndim - 1 else np.moveaxis(a, axis, -1)
    return np.ascontiguousarray(moved).reshape(-1, a.shape[axis])


def _unrows(rows, shape, axis):
    """The inverse of _rows: (R, D) back to `shape` (C-contiguous)."""
    moved = shape[:axis] + shape[axis + 1:] + (shape[axis],)
    out = rows.reshape(moved)
    return out if axis == len(shape) - 1 else np.ascontiguousarray(np.moveaxis(out, -1, axis))


def _forward(ctx, x, axis, log):
    ctx.meta = (x.shape, axis)
    if x.size == 0:
        ctx.save_for_backward(None)
        return x.copy()
    xs = x.reshape(1) if x.ndim == 0 else x  # a scalar is a one-element row
    x2 = _rows(xs, axis)
    y = np.empty(x2.shape, x.dtype)
    launch(softmax_rows, x.size < SERIAL_ELEMS, x2, y, log)
    ctx.save_for_backward(y)
    return _unrows(y, xs.shape, axis).reshape(x.shape)


def _backward(ctx, g, log):
    (y,) = ctx.saved_tensors
    shape, axis = ctx.meta
    if y is None:
        return g.copy()
    gs = g.reshape(1) if g.ndim == 0 else g
    gx = np.empty(y.shape, y.dtype)
    launch(softmax_rows_grad, y.size < SERIAL_ELEMS, _rows(gs.astype(y.dtype, copy=False), axis),
           y, gx, log)
    return _unrows(gx, gs.shape, axis).reshape(shape)


class SoftmaxFunction(Function):
    """y = exp(x - max) / sum exp(x - max) along `axis`."""

    @staticmethod
    def forward(ctx, x, *, axis):
        return _forward(ctx, x, axis, False)

    @staticmethod
    def backward(ctx, g):  # dL/dx = y (g - sum(g y)) along the axis
        return _backward(ctx, g, False)


class LogSoftmaxFunction(Function):
    """y = x - max - log(sum exp(x - max)) along `axis`."""

    @staticmethod
    def forward(ctx, x, *, axis):
        return _forward(ctx, x, axis, True)

    @staticmethod
    def backward(ctx, g):  # dL/dx = g - exp(y) sum(g) along the axis
        return _backward(ctx, g, True)


def _axis(name, x, dim):
    """dim checked against x's dimensions (a scalar has one, as in torch), as a non-negative axis."""
    a = float_array(name, "input", x)
    if dim is None:
        raise ValueError(f"{name}: dim must be given (torch's implicit choice of dim is deprecated)")
    dim = int_arg(name, "dim", dim, minimum=None)
    nd = max(a.ndim, 1)
    if not -nd <= dim < nd:
        raise ValueError(f"{name}: dim {dim} is out of range for an input of shape {a.shape}")
    return dim % nd


@dims
def softmax(x, dim):
    """torch.nn.functional.softmax: exp(x) / sum(exp(x)) along axis `dim` (negative counts from the
    end), computed stably; any shape, output of x's shape and dtype."""
    return SoftmaxFunction.apply(x, axis=_axis("softmax", x, dim))


@dims
def log_softmax(x, dim):
    """torch.nn.functional.log_softmax: x - log(sum(exp(x))) along axis `dim`, computed stably."""
    return LogSoftmaxFunction.apply(x, axis=_axis("log_softmax", x, dim))

"""softmax and log_softmax along any axis: one fused numba pass per row each way.

The axis is moved last (a copy only when it is not already last), so one row kernel serves every
axis. Rows are stabilised by their maximum. float64 rows use math.exp; float32 rows use `_exp32`
below, an exp written in plain arithmetic (~1.3 ulp) so that LLVM vectorises the row loop: numba
compiles math.exp to a scalar libm call unless Intel's SVML is installed.
"""
from __future__ import annotations

import math

import numpy as np
from numba import types
from numba.extending import overload

from .._check import float_array, int_arg
from .._jit import kernel, launch, prange
from ..autograd import Function
from ._util import dims
from .normalization import _like

__all__ = ["softmax", "log_softmax"]

# Below this many elements one thread is faster (_jit.launch).
_SERIAL_ELEMS = 1 << 15


def _exp(t):
    """exp(t) for t <= 88 (here always t <= 0): math.exp in float64, a vectorisable float32 form."""
    return math.exp(t)


def _exp32(t):
    """float32 exp by Cody-Waite reduction t = n ln2 + r, |r| <= ln2 / 2, Cephes' degree-7 expf
    polynomial for e^r, and 2^n written into the exponent bits; below -87 (where float32 leaves
    its normal range) the result is 0. A NaN stays NaN."""
    f = np.float32
    under = t < f(-87.0)
    t = f(-87.0) if under else t  # this order keeps a NaN (max() would drop it)
    n = np.floor(t * f(1.4426950408889634) + f(0.5))
    r = t - n * f(0.693359375) + n * f(2.12194440e-4)  # ln 2 in two parts: r stays exact
    p = ((((f(1.9875691500e-4) * r + f(1.3981999507e-3)) * r + f(8.3334519073e-3)) * r
          + f(4.1665795894e-2)) * r + f(1.6666665459e-1)) * r + f(5.0000001201e-1)
    p = p * (r * r) + r + f(1.0)
    scale = np.int32((np.int32(n) + np.int32(127)) << np.int32(23)).view(np.float32)
    return f(0.0) if under else p * scale


@overload(_exp, inline="always")
def _exp_overload(t):
    if isinstance(t, types.Float) and t.bitwidth == 32:
        return _exp32
    return lambda t: math.exp(t)


@kernel
def _row_dot(a, b, r, use_b):
    """sum_j a[r, j] (b[r, j] if use_b), in float64 with four accumulators (no serial chain)."""
    D = a.shape[1]
    s0 = s1 = s2 = s3 = 0.0
    j = 0
    while j + 4 <= D:
        if use_b:
            s0 += a[r, j] * b[r, j]
            s1 += a[r, j + 1] * b[r, j + 1]
            s2 += a[r, j + 2] * b[r, j + 2]
            s3 += a[r, j + 3] * b[r, j + 3]
        else:
            s0 += a[r, j]
            s1 += a[r, j + 1]
            s2 += a[r, j + 2]
            s3 += a[r, j + 3]
        j += 4
    while j < D:
        s0 += a[r, j] * b[r, j] if use_b else a[r, j]
        j += 1
    return (s0 + s1) + (s2 + s3)


@kernel
def _row_max(x, r):
    """max_j x[r, j] with four running maxima (NaN never wins here; it spreads through exp)."""
    D = x.shape[1]
    m0 = m1 = m2 = m3 = x[r, 0]
    j = 1
    while j + 4 <= D:
        m0 = x[r, j] if x[r, j] > m0 else m0
        m1 = x[r, j + 1] if x[r, j + 1] > m1 else m1
        m2 = x[r, j + 2] if x[r, j + 2] > m2 else m2
        m3 = x[r, j + 3] if x[r, j + 3] > m3 else m3
        j += 4
    while j < D:
        m0 = x[r, j] if x[r, j] > m0 else m0
        j += 1
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    return m2 if m2 > m0 else m0


@kernel(parallel=True)
def _softmax_kernel(x, y, log):
    """Rows of x (R, D): y = exp(x - m) / s, or with `log` y = x - m - log(s), where m is the row
    maximum and s = sum exp(x - m)."""
    R, D = x.shape
    for r in prange(R):
        m = _row_max(x, r)
        for j in range(D):
            y[r, j] = _exp(x[r, j] - m)
        s = _row_dot(y, y, r, False)
        if log:
            ls = _like(math.log(s), x[r, 0])
            for j in range(D):
                y[r, j] = (x[r, j] - m) - ls  # not x - (m + ls): m may dwarf ls
        else:
            inv = _like(1.0 / s, x[r, 0])  # float32 rows scale in float32 (twice the lanes)
            for j in range(D):
                y[r, j] = y[r, j] * inv


@kernel(parallel=True)
def _softmax_grad_kernel(g, y, gx, log):
    """Rows: gx = y (g - sum(g y)) for softmax, gx = g - exp(y) sum(g) for log_softmax."""
    R, D = y.shape
    for r in prange(R):
        if log:
            s = _like(_row_dot(g, g, r, False), y[r, 0])
            for j in range(D):
                gx[r, j] = g[r, j] - _exp(y[r, j]) * s
        else:
            s = _like(_row_dot(g, y, r, True), y[r, 0])
            for j in range(D):
                gx[r, j] = y[r, j] * (g[r, j] - s)


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
    launch(_softmax_kernel, x.size < _SERIAL_ELEMS, x2, y, log)
    ctx.save_for_backward(y)
    return _unrows(y, xs.shape, axis).reshape(x.shape)


def _backward(ctx, g, log):
    (y,) = ctx.saved_tensors
    shape, axis = ctx.meta
    if y is None:
        return g.copy()
    gs = g.reshape(1) if g.ndim == 0 else g
    gx = np.empty(y.shape, y.dtype)
    launch(_softmax_grad_kernel, y.size < _SERIAL_ELEMS, _rows(gs.astype(y.dtype, copy=False), axis),
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

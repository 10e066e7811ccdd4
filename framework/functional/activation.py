"""Activations: relu, leaky_relu, prelu, sigmoid, tanh, gelu (exact erf or tanh approximation).

Every op keeps the input's float dtype; integer input is a TypeError naming the argument. Gradients
at the kinks follow PyTorch: relu'(0) = 0, leaky_relu'(0) = negative_slope, prelu'(0) = weight.
"""
from __future__ import annotations

import math

import numpy as np

from ..autograd import Function
from .._jit import kernel, prange
from ._util import data_of

__all__ = ["relu", "leaky_relu", "prelu", "sigmoid", "tanh", "gelu"]


def check_float(op: str, name: str, x) -> None:
    """TypeError unless `x` holds float32 or float64 data (shared by activation, normalization, loss)."""
    dtype = np.asarray(data_of(x)).dtype
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"{op}: {name} must be a float32 or float64 tensor, got dtype {dtype}")


class ReLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x > 0)
        return np.maximum(x, x.dtype.type(0))  # maximum, not a mask product: NaN stays NaN, as torch

    @staticmethod
    def backward(ctx, g):  # dL/dx = g [x > 0]
        (positive,) = ctx.saved_tensors
        return g * positive


class LeakyReLU(Function):
    @staticmethod
    def forward(ctx, x, *, negative_slope):
        slope = np.where(x > 0, x.dtype.type(1), x.dtype.type(negative_slope))
        ctx.save_for_backward(slope)
        return x * slope

    @staticmethod
    def backward(ctx, g):  # dL/dx = g (1 if x > 0 else slope)
        (slope,) = ctx.saved_tensors
        return g * slope


class PReLU(Function):
    @staticmethod
    def forward(ctx, x, w):
        wb = _channel_view(w, x.ndim)
        neg = x <= 0
        ctx.save_for_backward(x, wb, neg)
        ctx.w_shape = w.shape
        return np.where(neg, wb * x, x)

    @staticmethod
    def backward(ctx, g):  # dL/dx = g (1 if x > 0 else w);  dL/dw = sum(g x over x <= 0)
        x, wb, neg = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad
        gx = np.where(neg, g * wb, g) if need_x else None
        gw = None
        if need_w:
            gxw = np.where(neg, g * x, 0).astype(g.dtype)
            axes = tuple(i for i in range(x.ndim) if not (i == 1 and ctx.w_shape[0] > 1))
            gw = gxw.sum(axis=axes).reshape(ctx.w_shape)
        return gx, gw


def _channel_view(w, ndim):
    """Weight of shape (1,) or (C,) broadcast against (N, C, ...): (1, C, 1, ...)."""
    if w.shape[0] == 1 or ndim < 2:
        return w.reshape((1,) * ndim) if ndim else w.reshape(())
    return w.reshape((1, -1) + (1,) * (ndim - 2))


class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        # exp(-|x|) never overflows; the two branches are 1/(1+e^-x) and e^x/(1+e^x)
        e = np.exp(-np.abs(x))
        out = np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):  # dL/dx = g s (1 - s)
        (out,) = ctx.saved_tensors
        return g * out * (1 - out)


class Tanh(Function):
    @staticmethod
    def forward(ctx, x):
        out = np.tanh(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):  # dL/dx = g (1 - tanh^2)
        (out,) = ctx.saved_tensors
        return g * (1 - out * out)


@kernel(parallel=True)
def _gelu_exact_kernel(x, y, dydx):
    """y = x Phi(x), dy/dx = Phi(x) + x phi(x), with Phi the standard normal CDF (via math.erf,
    which numpy lacks). Flat arrays; one pass computes both so backward needs no second kernel."""
    inv_sqrt2 = 0.7071067811865476
    inv_sqrt2pi = 0.3989422804014327
    for i in prange(x.size):
        v = x[i]
        cdf = 0.5 * (1.0 + math.erf(v * inv_sqrt2))
        y[i] = v * cdf
        dydx[i] = cdf + v * inv_sqrt2pi * math.exp(-0.5 * v * v)


class GELUExact(Function):
    @staticmethod
    def forward(ctx, x):
        flat = np.ascontiguousarray(x).reshape(-1)
        y, dydx = np.empty_like(flat), np.empty_like(flat)
        _gelu_exact_kernel(flat, y, dydx)
        ctx.save_for_backward(dydx.reshape(x.shape))
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, g):  # dL/dx = g (Phi(x) + x phi(x))
        (dydx,) = ctx.saved_tensors
        return g * dydx


class GELUTanh(Function):
    # y = 0.5 x (1 + tanh(k (x + c x^3))), k = sqrt(2/pi), c = 0.044715 (torch's approximate="tanh")
    @staticmethod
    def forward(ctx, x):
        k, c = x.dtype.type(math.sqrt(2 / math.pi)), x.dtype.type(0.044715)
        t = np.tanh(k * (x + c * x * x * x))
        ctx.save_for_backward(x, t)
        return x * (1 + t) * x.dtype.type(0.5)

    @staticmethod
    def backward(ctx, g):  # dL/dx = g (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)), as ATen
        x, t = ctx.saved_tensors
        k, c, half = x.dtype.type(math.sqrt(2 / math.pi)), x.dtype.type(0.044715), x.dtype.type(0.5)
        return g * (half * (1 + t) + half * x * (1 - t * t) * k * (1 + 3 * c * x * x))


def relu(x):
    """max(x, 0) elementwise, any shape; gradient 0 at x = 0."""
    check_float("relu", "input", x)
    return ReLU.apply(x)


def leaky_relu(x, negative_slope=0.01):
    """x if x > 0 else negative_slope * x, any shape."""
    check_float("leaky_relu", "input", x)
    return LeakyReLU.apply(x, negative_slope=float(negative_slope))


def prelu(x, weight):
    """x if x > 0 else weight * x. weight: (1,) shared, or (C,) per channel of x (N, C, ...)."""
    check_float("prelu", "input", x)
    check_float("prelu", "weight", weight)
    ws, xs = np.shape(data_of(weight)), np.shape(data_of(x))
    if len(ws) != 1 or ws[0] < 1:
        raise ValueError(f"prelu: weight must be 1-D with 1 or C entries, got shape {ws}")
    if ws[0] > 1 and (len(xs) < 2 or xs[1] != ws[0]):
        raise ValueError(f"prelu: weight has {ws[0]} entries (per channel) but input of shape {xs} "
                         f"has {xs[1] if len(xs) >= 2 else 'no'} channels in dimension 1")
    if np.asarray(data_of(weight)).dtype != np.asarray(data_of(x)).dtype:
        raise TypeError(f"prelu: weight dtype {np.asarray(data_of(weight)).dtype} differs from input "
                        f"dtype {np.asarray(data_of(x)).dtype}")
    return PReLU.apply(x, weight)


def sigmoid(x):
    """1 / (1 + exp(-x)), computed without overflow for large |x|."""
    check_float("sigmoid", "input", x)
    return Sigmoid.apply(x)


def tanh(x):
    check_float("tanh", "input", x)
    return Tanh.apply(x)


def gelu(x, approximate="none"):
    """x Phi(x) with the exact normal CDF (approximate="none", default) or torch's tanh form
    (approximate="tanh")."""
    check_float("gelu", "input", x)
    if approximate == "none":
        return GELUExact.apply(x)
    if approximate == "tanh":
        return GELUTanh.apply(x)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")

"""Regression losses: the pointwise l1_loss, mse_loss, charbonnier_loss (reduction "mean" | "sum" |
"none"), and frobenius_loss, the norm ||input - target||_F (PerceptualLoss's criterion "fro").

The pointwise three differ only in the elementwise penalty rho(d) of d = input - target and its
derivative, written once (`_penalty`), so one Function and its two kernels serve them all."""
from __future__ import annotations

import numpy as np

from .._check import choice, float_array, number
from .._jit import kernel
from ..autograd import Function

__all__ = ["l1_loss", "mse_loss", "charbonnier_loss", "frobenius_loss", "REDUCTIONS"]

REDUCTIONS = ("mean", "sum", "none")  # torch's names, for every loss here, logistic.py's and nn's
_KINDS = {"l1": 0, "mse": 1, "charbonnier": 2}


@kernel
def _penalty(d, kind, eps):
    """(rho(d), rho'(d)) of kind 0 l1: |d|, sign d (sign 0 = 0: tied elements get no gradient, as
    torch); 1 mse: d^2, 2 d; 2 charbonnier: r = sqrt(d^2 + eps^2), d / r. In d's float type."""
    if kind == 0:
        return abs(d), np.sign(d)
    if kind == 1:
        return d * d, d + d
    r = np.sqrt(d * d + eps * eps)
    return r, d / r


@kernel
def _pointwise_kernel(x, t, kind, eps, value, deriv):
    """Flat arrays: value = rho(x - t), deriv = rho'(x - t) (reduction "none")."""
    for i in range(x.shape[0]):
        value[i], deriv[i] = _penalty(x[i] - t[i], kind, eps)


@kernel
def _reduced_kernel(x, t, kind, eps, deriv, row_sums):
    """One pass of a reduced loss over x, t viewed as (R, L): deriv = rho'(x - t) and row_sums[r] =
    sum_l rho(x - t) in float64 (the caller adds the rows). Serial: memory-bound work (see
    activation.py)."""
    R, L = x.shape
    for r in range(R):
        acc = 0.0
        for i in range(L):
            v, deriv[r, i] = _penalty(x[r, i] - t[r, i], kind, eps)
            acc += v
        row_sums[r] = acc


class PointwiseLoss(Function):
    @staticmethod
    def forward(ctx, x, t, *, kind, eps, reduction):
        ctx.reduction = reduction
        deriv = np.empty(x.shape, x.dtype)
        xc, tc = np.ascontiguousarray(x), np.ascontiguousarray(t)
        if reduction == "none":
            value = np.empty(x.shape, x.dtype)
            _pointwise_kernel(xc.reshape(-1), tc.reshape(-1), _KINDS[kind], x.dtype.type(eps),
                              value.reshape(-1), deriv.reshape(-1))
            ctx.save_for_backward(deriv)
            return value
        # "mean" and "sum": one fused pass (numpy's subtract, abs, sign and sum made four)
        rows = (x.shape[0], x.size // x.shape[0]) if x.ndim and x.shape[0] else (1, x.size)
        row_sums = np.empty(rows[0], np.float64)
        _reduced_kernel(xc.reshape(rows), tc.reshape(rows), _KINDS[kind], x.dtype.type(eps),
                        deriv.reshape(rows), row_sums)
        ctx.save_for_backward(deriv)
        total = x.dtype.type(row_sums.sum())
        return total / x.dtype.type(x.size) if reduction == "mean" else total

    @staticmethod
    def backward(ctx, g):  # dL/dinput = g rho'(d) (/ numel for mean);  dL/dtarget = -dL/dinput
        (deriv,) = ctx.saved_tensors
        if ctx.reduction == "mean":
            g = g / g.dtype.type(deriv.size)
        gx = g * deriv
        need_x, need_t = ctx.needs_input_grad
        return (gx if need_x else None), (-gx if need_t else None)


class FrobeniusLoss(Function):
    @staticmethod
    def forward(ctx, x, t):
        d = x - t
        norm = x.dtype.type(np.sqrt(np.dot(d.ravel().astype(np.float64, copy=False), d.ravel())))
        ctx.save_for_backward(d, norm)
        return np.asarray(norm)

    @staticmethod
    def backward(ctx, g):  # dL/dinput = g d / ||d|| (0 where ||d|| = 0, torch's choice); dL/dtarget = -that
        d, norm = ctx.saved_tensors
        gx = np.zeros_like(d) if norm == 0 else d * (g / norm).astype(d.dtype)
        need_x, need_t = ctx.needs_input_grad
        return (gx if need_x else None), (-gx if need_t else None)


def _operands(op, x, t):
    xa, ta = float_array(op, "input", x), float_array(op, "target", t)
    if xa.shape != ta.shape:
        raise ValueError(f"{op}: input shape {xa.shape} and target shape {ta.shape} differ (no "
                         f"broadcasting)")
    if xa.dtype != ta.dtype:
        raise TypeError(f"{op}: input dtype {xa.dtype} and target dtype {ta.dtype} differ")


def _loss(op, kind, x, t, eps, reduction):
    _operands(op, x, t)
    choice(op, "reduction", reduction, REDUCTIONS)
    return PointwiseLoss.apply(x, t, kind=kind, eps=eps, reduction=reduction)


def l1_loss(input, target, reduction="mean"):
    """|input - target|, reduced by "mean" (default), "sum" or "none". input, target: same shape."""
    return _loss("l1_loss", "l1", input, target, 0.0, reduction)


def mse_loss(input, target, reduction="mean"):
    """(input - target)^2, reduced by "mean" (default), "sum" or "none". input, target: same shape."""
    return _loss("mse_loss", "mse", input, target, 0.0, reduction)


def charbonnier_loss(input, target, eps=1e-3, reduction="mean"):
    """sqrt((input - target)^2 + eps^2) (a smooth L1), reduced by "mean" (default), "sum" or "none".
    eps default 1e-3."""
    eps = number("charbonnier_loss", "eps", eps, low=0, low_open=True)
    return _loss("charbonnier_loss", "charbonnier", input, target, eps, reduction)


def frobenius_loss(input, target):
    """||input - target||_F = sqrt(sum (input - target)^2) over every element (torch.norm(input -
    target, p="fro")), a 0-d tensor; the gradient at input == target is 0, as torch's."""
    _operands("frobenius_loss", input, target)
    return FrobeniusLoss.apply(input, target)

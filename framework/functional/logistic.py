"""The log(1 + e^x) family, in forms that neither overflow nor lose the small terms: softplus and
binary_cross_entropy_with_logits (the GAN losses' vanilla and wgan_softplus types).

binary_cross_entropy_with_logits(x, t) = -[t log s(x) + (1 - t) log(1 - s(x))], s the sigmoid,
= max(x, 0) - t x + log1p(exp(-|x|)): exp never overflows, and log1p keeps the tail where
log(1 + tiny) would round to 0 (torch's form: (1 - t) x - log_sigmoid(x), the same value).
"""
from __future__ import annotations

import numpy as np

from .._check import choice, float_array, number
from ..autograd import Function
from .loss import REDUCTIONS

__all__ = ["softplus", "binary_cross_entropy_with_logits"]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x) without overflow: e^-|x| is at most 1."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def _reduce(loss: np.ndarray, reduction: str):
    if reduction == "none":
        return loss
    total = loss.sum(dtype=np.float64)  # float64 partial sums, as l1_loss and mse_loss
    return loss.dtype.type(total / loss.size if reduction == "mean" else total)


def _unreduce(g: np.ndarray, shape, dtype, reduction: str) -> np.ndarray:
    """The upstream gradient per element: g itself ("none"), g broadcast ("sum"), g / n ("mean")."""
    if reduction == "none":
        return g
    n = int(np.prod(shape, dtype=np.int64))
    g = g.astype(dtype, copy=False)
    return np.broadcast_to(g / dtype.type(n) if reduction == "mean" else g, shape)


class SoftplusFunction(Function):
    @staticmethod
    def forward(ctx, x, *, beta, threshold):
        b, th = x.dtype.type(beta), x.dtype.type(threshold)
        bx = x * b
        linear = bx > th  # torch's switch to the identity, where log1p(e^bx)/b == x in floating point
        z = np.exp(np.where(linear, x.dtype.type(0), bx))
        ctx.save_for_backward(np.where(linear, x.dtype.type(1), z / (z + 1)))
        return np.where(linear, x, np.log1p(z) / b)

    @staticmethod
    def backward(ctx, g):  # dL/dx = g e^bx / (1 + e^bx) = g sigmoid(bx); g above the threshold
        (deriv,) = ctx.saved_tensors
        return g * deriv


class BCEWithLogitsFunction(Function):
    @staticmethod
    def forward(ctx, x, t, *, reduction):
        loss = np.maximum(x, x.dtype.type(0)) - t * x + np.log1p(np.exp(-np.abs(x)))
        ctx.reduction = reduction
        ctx.save_for_backward(_sigmoid(x) - t, x if ctx.needs_input_grad[1] else None)
        return _reduce(loss, reduction)

    @staticmethod
    def backward(ctx, g):  # dL/dx = g (sigmoid(x) - t);  dL/dt = -g x
        dx, x = ctx.saved_tensors
        g = _unreduce(g, dx.shape, dx.dtype, ctx.reduction)
        need_x, need_t = ctx.needs_input_grad
        return (g * dx if need_x else None), (-(g * x) if need_t else None)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta elementwise, any shape (torch.nn.functional.softplus); x itself
    where beta x > threshold. beta > 0 (default 1), threshold default 20."""
    float_array("softplus", "input", input)
    beta = number("softplus", "beta", beta, low=0, low_open=True)
    threshold = number("softplus", "threshold", threshold)
    return SoftplusFunction.apply(input, beta=beta, threshold=threshold)


def binary_cross_entropy_with_logits(input, target, reduction="mean"):
    """Binary cross entropy of logits `input` against probabilities `target` (same shape and dtype),
    reduced by "mean" (default), "sum" or "none"; differentiable in both. BCEWithLogitsLoss's
    formula, stable for any logit."""
    op = "binary_cross_entropy_with_logits"
    xa, ta = float_array(op, "input", input), float_array(op, "target", target)
    if xa.shape != ta.shape:
        raise ValueError(f"{op}: target shape {ta.shape} must equal input shape {xa.shape}")
    if xa.dtype != ta.dtype:
        raise TypeError(f"{op}: input dtype {xa.dtype} and target dtype {ta.dtype} differ")
    choice(op, "reduction", reduction, REDUCTIONS)
    if xa.size == 0 and reduction == "mean":
        raise ValueError(f"{op}: the mean of an empty input is undefined")
    return BCEWithLogitsFunction.apply(input, target, reduction=reduction)

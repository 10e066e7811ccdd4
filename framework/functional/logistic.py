"""The log(1 + e^x) family, in forms that neither overflow nor lose the small terms: softplus,
binary_cross_entropy_with_logits (the GAN losses' vanilla and wgan_softplus types), and the two
activations built on the logistic function, silu(x) = x sigmoid(x) and mish(x) = x tanh(softplus(x)).

silu and mish are one fused numba pass each way. Both need only e = exp(-|x|) <= 1, which never
overflows (float32 through rows.py's vectorisable exp):

    sigmoid(x)           = 1 / (1 + e)                      (x >= 0),  e / (1 + e)           (x < 0)
    tanh(softplus(x))    = (1 + 2e) / (1 + 2e + 2e^2)        (x >= 0),  n / (n + 2), n = e (e + 2)  (x < 0)

(tanh(log(1 + z)) = ((1 + z)^2 - 1) / ((1 + z)^2 + 1) with z = e^x, divided through by z^2 when
x >= 0). Their derivatives: silu' = s (1 + x (1 - s)), mish' = t + x s (1 - t) (1 + t), as torch's,
with 1 - s = e / (1 + e) (x >= 0) and 1 - t = 2e^2 / (1 + 2e + 2e^2) (x >= 0), 2 / (n + 2) (x < 0)
computed directly: subtracting would cancel in the right tail (8 float32 ulps at x = 8; torch's).

binary_cross_entropy_with_logits(x, t) = -[t log s(x) + (1 - t) log(1 - s(x))], s the sigmoid,
= max(x, 0) - t x + log1p(exp(-|x|)): exp never overflows, and log1p keeps the tail where
log(1 + tiny) would round to 0 (torch's form: (1 - t) x - log_sigmoid(x), the same value).
"""
from __future__ import annotations

import numpy as np

from .._check import choice, float_array, number
from .._jit import kernel, launch, prange
from ..autograd import Function
from .loss import REDUCTIONS
from .rows import SERIAL_ELEMS, like, vexp

__all__ = ["softplus", "binary_cross_entropy_with_logits", "silu", "mish"]



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


@kernel
def _logistic(v):
    """(s, 1 - s, t, 1 - t) for s = sigmoid(v), t = tanh(softplus(v)) in v's float type, from
    e = exp(-|v|) (module docstring); each complement from its own quotient, not by a subtraction
    that would cancel in the tails. A NaN stays NaN."""
    one = like(1.0, v)
    two = one + one
    pos = v >= 0
    e = vexp(-v if pos else v)
    q = one / (one + e)
    p = e * q  # e / (1 + e)
    if pos:  # t = (1 + 2e) / (1 + 2e + 2e^2), 1 - t = 2e^2 / (1 + 2e + 2e^2)
        d = one + two * e + two * e * e
        return q, p, (one + two * e) / d, two * e * e / d
    n = e * (e + two)  # t = n / (n + 2), 1 - t = 2 / (n + 2)
    return p, q, n / (n + two), two / (n + two)


@kernel(parallel=True)
def _silu_kernel(x, grad, g, out):
    """out = x sigmoid(x), or (grad) g s (1 + x (1 - s)); flat arrays."""
    for i in prange(x.size):
        v, one = x[i], like(1.0, x[i])
        s, sc, _, _ = _logistic(v)
        out[i] = g[i] * (s * (one + v * sc)) if grad else v * s


@kernel(parallel=True)
def _mish_kernel(x, grad, g, out):
    """out = x tanh(softplus(x)), or (grad) g (t + x s (1 - t^2)); flat arrays."""
    for i in prange(x.size):
        v, one = x[i], like(1.0, x[i])
        s, _, t, tc = _logistic(v)
        out[i] = g[i] * (t + v * s * (tc * (one + t))) if grad else v * t


@kernel(parallel=True)
def _sigmoid_kernel(x, grad, g, out):
    """out = sigmoid(x), or (grad, x holding sigmoid's output s) g s (1 - s); flat arrays."""
    for i in prange(x.size):
        v = x[i]
        if grad:
            out[i] = g[i] * (v * (like(1.0, v) - v))
        else:
            out[i] = _logistic(v)[0]


def sigmoid_pass(x, g=None):
    """sigmoid(x) as one vectorised pass, or (g given, x = sigmoid's output) its backward
    g s (1 - s); activation.py's sigmoid runs on these."""
    return _self_gated(_sigmoid_kernel, x, g)


def _self_gated(kern, x, g=None):
    """kern over flat x (and the upstream gradient g when given): y, or dL/dx, in x's shape. The
    backward recomputes the gate from x (one array fewer saved than keeping it)."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    gf = flat if g is None else np.ascontiguousarray(g, flat.dtype).reshape(-1)
    launch(kern, flat.size < SERIAL_ELEMS, flat, g is not None, gf, out)
    return out.reshape(x.shape)


class SiLUFunction(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _self_gated(_silu_kernel, x)

    @staticmethod
    def backward(ctx, g):  # dL/dx = g s (1 + x (1 - s)), s = sigmoid(x)
        return _self_gated(_silu_kernel, ctx.saved_tensors[0], g)


class MishFunction(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _self_gated(_mish_kernel, x)

    @staticmethod
    def backward(ctx, g):  # dL/dx = g (t + x s (1 - t^2)), t = tanh(softplus(x)), s = sigmoid(x)
        return _self_gated(_mish_kernel, ctx.saved_tensors[0], g)


def silu(input, inplace=False):
    """x sigmoid(x) elementwise, any shape (torch.nn.functional.silu, the swish). inplace is accepted
    for torch compatibility (srgrad computes out of place)."""
    float_array("silu", "input", input)
    return SiLUFunction.apply(input)


def mish(input, inplace=False):
    """x tanh(softplus(x)) elementwise, any shape (torch.nn.functional.mish). inplace is accepted for
    torch compatibility (srgrad computes out of place)."""
    float_array("mish", "input", input)
    return MishFunction.apply(input)


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

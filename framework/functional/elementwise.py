"""Elementwise ops with numpy broadcasting: + - * / ** neg exp log sqrt abs clamp maximum minimum where,
and dtype casts, clone. Every binary op's backward sums the gradient back to each operand's shape."""
from __future__ import annotations

import numpy as np

from ..autograd import Function
from ._util import as_operand, check_broadcast, unbroadcast


class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (np.shape(a), np.shape(b))
        return np.add(a, b)

    @staticmethod
    def backward(ctx, g):  # dL/da = g, dL/db = g (summed over broadcast axes)
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad
        return (unbroadcast(g, sa) if na else None), (unbroadcast(g, sb) if nb else None)


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (np.shape(a), np.shape(b))
        return np.subtract(a, b)

    @staticmethod
    def backward(ctx, g):  # dL/da = g, dL/db = -g
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad
        return (unbroadcast(g, sa) if na else None), (unbroadcast(-g, sb) if nb else None)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.multiply(a, b)

    @staticmethod
    def backward(ctx, g):  # dL/da = g b, dL/db = g a
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        return (unbroadcast(g * b, np.shape(a)) if na else None), (
            unbroadcast(g * a, np.shape(b)) if nb else None)


class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.divide(a, b)

    @staticmethod
    def backward(ctx, g):  # dL/da = g / b, dL/db = -g a / b^2
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        ga = unbroadcast(g / b, np.shape(a)) if na else None
        gb = unbroadcast(-g * a / (b * b), np.shape(b)) if nb else None
        return ga, gb


class Pow(Function):
    @staticmethod
    def forward(ctx, a, b):
        out = np.power(a, b)
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, g):  # dL/da = g b a^(b-1), dL/db = g a^b log(a)
        a, b, out = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        ga = unbroadcast(g * b * np.power(a, b - 1), np.shape(a)) if na else None
        gb = None
        if nb:
            with np.errstate(divide="ignore", invalid="ignore"):
                logs = np.where(a > 0, np.log(np.where(a > 0, a, 1)), 0).astype(out.dtype)
            gb = unbroadcast(g * out * logs, np.shape(b))
        return ga, gb


class Neg(Function):
    @staticmethod
    def forward(ctx, a):
        return np.negative(a)

    @staticmethod
    def backward(ctx, g):
        return -g


class Exp(Function):
    @staticmethod
    def forward(ctx, a):
        out = np.exp(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):  # d exp(a) = exp(a)
        (out,) = ctx.saved_tensors
        return g * out


class Log(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.log(a)

    @staticmethod
    def backward(ctx, g):  # d log(a) = 1 / a
        (a,) = ctx.saved_tensors
        return g / a


class Sqrt(Function):
    @staticmethod
    def forward(ctx, a):
        out = np.sqrt(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):  # d sqrt(a) = 1 / (2 sqrt(a))
        (out,) = ctx.saved_tensors
        return g / (2 * out)


class Abs(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.abs(a)

    @staticmethod
    def backward(ctx, g):  # d|a| = sign(a), 0 at 0 (as torch)
        (a,) = ctx.saved_tensors
        return g * np.sign(a)


class Clamp(Function):
    @staticmethod
    def forward(ctx, a, *, min=None, max=None):
        ctx.save_for_backward(a)
        ctx.bounds = (min, max)
        return np.clip(a, min, max)

    @staticmethod
    def backward(ctx, g):  # gradient passes where min <= a <= max (bounds inclusive, as torch)
        (a,) = ctx.saved_tensors
        lo, hi = ctx.bounds
        mask = np.ones(a.shape, bool)
        if lo is not None:
            mask &= a >= lo
        if hi is not None:
            mask &= a <= hi
        return g * mask


class Maximum(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.maximum(a, b)

    @staticmethod
    def backward(ctx, g):  # g goes to the larger operand; ties split it in half (as torch)
        a, b = ctx.saved_tensors
        return _select_grads(ctx, g, a, b, np.greater(a, b))


class Minimum(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.minimum(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return _select_grads(ctx, g, a, b, np.less(a, b))


def _select_grads(ctx, g, a, b, a_wins):
    tie = np.equal(a, b)
    wa = np.where(a_wins, 1.0, np.where(tie, 0.5, 0.0)).astype(g.dtype)
    na, nb = ctx.needs_input_grad
    ga = unbroadcast(g * wa, np.shape(a)) if na else None
    gb = unbroadcast(g * (1 - wa), np.shape(b)) if nb else None
    return ga, gb


class Where(Function):
    @staticmethod
    def forward(ctx, cond, a, b):
        ctx.cond = np.asarray(cond, bool)
        ctx.shapes = (np.shape(a), np.shape(b))
        return np.where(ctx.cond, a, b)

    @staticmethod
    def backward(ctx, g):  # g flows to a where cond, to b elsewhere
        sa, sb = ctx.shapes
        _, na, nb = ctx.needs_input_grad
        zero = np.zeros((), g.dtype)
        ga = unbroadcast(np.where(ctx.cond, g, zero), sa) if na else None
        gb = unbroadcast(np.where(ctx.cond, zero, g), sb) if nb else None
        return None, ga, gb


class Cast(Function):
    @staticmethod
    def forward(ctx, a, *, dtype):
        ctx.dtype = a.dtype
        return a.astype(dtype)

    @staticmethod
    def backward(ctx, g):
        return g.astype(ctx.dtype)


class Clone(Function):
    @staticmethod
    def forward(ctx, a):
        return a.copy()

    @staticmethod
    def backward(ctx, g):  # dL/dx = g
        return g


def _binary(fn, name):
    def op(a, b):
        check_broadcast(name, a, b)
        a2 = as_operand(a, like=b)
        return fn.apply(a2, as_operand(b, like=a2))
    op.__name__ = name
    op.__doc__ = f"Elementwise {name} with numpy broadcasting; differentiable in both operands."
    return op


add = _binary(Add, "add")
sub = _binary(Sub, "sub")
mul = _binary(Mul, "mul")
div = _binary(Div, "div")
pow = _binary(Pow, "pow")
maximum = _binary(Maximum, "maximum")
minimum = _binary(Minimum, "minimum")


def neg(x):
    return Neg.apply(x)


def exp(x):
    return Exp.apply(x)


def log(x):
    return Log.apply(x)


def sqrt(x):
    return Sqrt.apply(x)


def abs(x):
    return Abs.apply(x)


def clamp(x, min=None, max=None):
    """Clip into [min, max] (either may be None); gradient 1 inside the closed interval, 0 outside."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    return Clamp.apply(x, min=min, max=max)


def where(cond, a, b):
    """`a` where `cond` is true, else `b` (broadcast); differentiable in `a` and `b`."""
    check_broadcast("where", a, b)
    a2 = as_operand(a, like=b)
    return Where.apply(as_operand(cond), a2, as_operand(b, like=a2))


def cast(x, dtype):
    """Differentiable dtype conversion (the gradient is cast back)."""
    return Cast.apply(x, dtype=np.dtype(dtype))


def clone(x):
    """A differentiable copy of x (new memory, same dtype; the gradient passes through)."""
    return Clone.apply(x)

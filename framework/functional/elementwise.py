"""Elementwise ops with numpy broadcasting: + - * / ** neg exp log sqrt abs clamp maximum minimum where,
and dtype casts, clone. Every binary op's backward sums the gradient back to each operand's shape."""
from __future__ import annotations

import numpy as np

from .._check import ArgumentTypeError
from .._jit import kernel, prange
from ..autograd import Function
from ..tensor import Tensor
from ._promote import array_of, result_type
from ._util import check_broadcast, data_of, unbroadcast


_PARALLEL_ADD = 1 << 16  # elements: below, np.add on one thread is faster than a parallel region
_ADD_CHUNK = 1 << 14


@kernel(parallel=True)
def _add_flat(a, b, out):
    """out = a + b over flat arrays, in chunks on every thread (out may be a or b)."""
    n = out.shape[0]
    for t in prange((n + _ADD_CHUNK - 1) // _ADD_CHUNK):
        lo = t * _ADD_CHUNK
        for i in range(lo, min(n, lo + _ADD_CHUNK)):
            out[i] = a[i] + b[i]


def add_arrays(a, b, out=None):
    """np.add(a, b, out=out), its values (one IEEE sum per element); two C-contiguous float arrays of
    one shape and dtype from _PARALLEL_ADD elements on every thread (numpy's ufuncs run on one:
    a training graph's residual adds and gradient sums, 0.14 -> 0.10 ms at 16 x 32 x 24^2)."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.shape == b.shape and a.dtype == b.dtype \
            and a.dtype in (np.float32, np.float64) and a.size >= _PARALLEL_ADD \
            and a.flags.c_contiguous and b.flags.c_contiguous \
            and (out is None or (type(out) is np.ndarray and out.shape == a.shape and out.dtype == a.dtype
                                 and out.flags.c_contiguous)):
        out = np.empty(a.shape, a.dtype) if out is None else out
        _add_flat(a.reshape(-1), b.reshape(-1), out.reshape(-1))
        return out
    return np.add(a, b, out=out)


class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (np.shape(a), np.shape(b))
        return add_arrays(a, b)

    @staticmethod
    def backward(ctx, g):  # dL/da = g, dL/db = g (summed over broadcast axes)
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad
        return (unbroadcast(g, sa) if na else None), (unbroadcast(g, sb) if nb else None)


@kernel(parallel=True)
def _scale_add_planes(a, s, x, out):
    """out[n, c] = a[n, c] * s[n or 0, c] + x[n, c] over planes (N, C, L): the product rounded, then
    the sum (np.multiply's then np.add's values; no fused multiply-add: numba does not contract)."""
    N, C = a.shape[0], a.shape[1]
    for t in prange(N * C):
        n, c = t // C, t % C
        sv, ap, xp, op = s[n if s.shape[0] > 1 else 0, c], a[n, c], x[n, c], out[n, c]
        for i in range(ap.shape[0]):
            op[i] = ap[i] * sv + xp[i]


def scale_add(a, s, x):
    """a * s + x for a, x (N, C, H, W) and s (N or 1, C, 1, 1) of one float dtype, in one pass: a
    channel attention's scale and its block's residual add (an inference graph's fold,
    capture/_lower.py), the values of Mul then Add."""
    N, C = a.shape[:2]
    out = np.empty(a.shape, a.dtype)
    _scale_add_planes(np.ascontiguousarray(a).reshape(N, C, -1), np.ascontiguousarray(s).reshape(-1, C),
                      np.ascontiguousarray(x).reshape(N, C, -1), out.reshape(N, C, -1))
    return out


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


@kernel(parallel=True)
def _row_scale_grads(g, a, s, ga, gs):
    """ga[r] = g[r] * s[r] (np.multiply's values) and gs[r] = sum_k g[r, k] a[r, k] (float64 sums,
    in order) for rows r of (R, L): both gradients of a * s with s one value per row, in one pass."""
    for r in prange(g.shape[0]):
        sv, gr, ar, out = s[r], g[r], a[r], ga[r]
        acc = 0.0
        for k in range(gr.shape[0]):
            out[k] = gr[k] * sv
            acc += np.float64(gr[k]) * np.float64(ar[k])
        gs[r] = acc


def _row_scale(a, b, g):
    """The rows (R, L) if b is one value per row of a (a (N, C, H, W), b (N, C, 1, 1): a channel
    attention's scale), both of g's float dtype, else None."""
    sa, sb = np.shape(a), np.shape(b)
    k = len(sb)
    while k > 0 and sb[k - 1] == 1:
        k -= 1
    if len(sa) != len(sb) or not 0 < k < len(sa) or sa[:k] != sb[:k] or g.shape != sa or \
            g.dtype not in (np.float32, np.float64) or not np.result_type(a) == np.result_type(b) == g.dtype:
        return None
    rows = int(np.prod(sa[:k]))
    return rows, g.size // max(rows, 1)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.multiply(a, b)

    @staticmethod
    def backward(ctx, g):  # dL/da = g b, dL/db = g a
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        for x, s in ((a, b), (b, a)) if na and nb else ():  # x * s, s one value per row of x
            rows = _row_scale(x, s, g)
            if rows is not None and rows[1] > 1:  # one pass, not three (RCAN's scales: 0.38 -> 0.10 ms)
                gx, gs = np.empty(g.shape, g.dtype), np.empty(np.shape(s), g.dtype)
                _row_scale_grads(np.ascontiguousarray(g).reshape(rows), np.ascontiguousarray(x).reshape(rows),
                                 np.ascontiguousarray(s).reshape(-1), gx.reshape(rows), gs.reshape(-1))
                return (gx, gs) if x is a else (gs, gx)
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
        if a.dtype.kind in "iu" and np.any(b < 0):
            out = _int_power(a, b)
        else:
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


class Remainder(Function):
    """a - floor(a / b) b, the sign of b's (Python's %, torch.remainder); an int remainder by 0 is
    a ZeroDivisionError, as torch's."""

    @staticmethod
    def forward(ctx, a, b):
        _check_int_divisor("remainder", b)
        ctx.save_for_backward(a, b)
        return np.remainder(a, b)

    @staticmethod
    def backward(ctx, g):  # dL/da = g, dL/db = -g floor(a / b)
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        return (unbroadcast(g, np.shape(a)) if na else None), (
            unbroadcast(-g * np.floor_divide(a, b), np.shape(b)) if nb else None)


class FloorDivide(Function):
    """floor(a / b) (Python's //, torch.floor_divide); torch defines no derivative for it."""

    @staticmethod
    def forward(ctx, a, b):
        _check_int_divisor("floor_divide", b)
        return np.floor_divide(a, b)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("floor_divide (//): its derivative is not implemented (as in torch: "
                           "it is 0 almost everywhere); detach() the operands or use div")


class IntegerDivisionByZero(ZeroDivisionError, RuntimeError):
    """An int // or % by 0: Python's ZeroDivisionError, and the RuntimeError torch raises."""


def _check_int_divisor(name, b):
    if np.asarray(b).dtype.kind in "iub" and not np.all(b):
        raise IntegerDivisionByZero(f"{name}: integer division by zero")


def _int_power(a, b):
    """torch's integer a ** b with negative exponents (a tensor of them): 1 ** b = 1,
    (-1) ** b = +-1 by parity, anything else 0 (the integer part of a ** b)."""
    pos = np.power(a, np.maximum(b, 0))
    neg = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0)).astype(pos.dtype)
    return np.where(b < 0, neg, pos)


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


def promote(name, a, b, *, to_float=False):
    """(a, b) broadcast-checked and brought to torch's result dtype (_promote.result_type; with
    `to_float` an int or bool result becomes float32, true division's rule). A Tensor of another
    dtype is cast differentiably; other operands become arrays."""
    check_broadcast(name, a, b)
    if isinstance(a, Tensor):  # the common cases, without the general rule
        kind = a.data.dtype.kind
        if isinstance(b, Tensor):
            if a.data.dtype == b.data.dtype and (not to_float or kind == "f"):
                return a, b
        elif kind == "f" and type(b) in (float, int):
            return a, np.asarray(b, a.data.dtype)
    elif isinstance(b, Tensor) and b.data.dtype.kind == "f" and type(a) in (float, int):
        return np.asarray(a, b.data.dtype), b
    dtype = result_type(a, b)
    if to_float and dtype.kind != "f":
        dtype = np.dtype(np.float32)
    return _to(a, dtype), _to(b, dtype)


def _to(x, dtype):
    if isinstance(x, Tensor):
        return x if x.data.dtype == dtype else Cast.apply(x, dtype=dtype)
    return array_of(x, dtype)


def refuse_bool(name, what, *xs):
    """torch's refusals of arithmetic on bools (a mask wants ~, ^, logical_not or .long())."""
    if any(data_of(x).dtype == np.bool_ or isinstance(x, (bool, np.bool_)) for x in xs):
        raise TypeError(f"{name}: {what} is not supported on bool tensors (torch's rule; use ^ or "
                        f"~ for masks, or convert with .long())")


def _binary(fn, name, *, to_float=False, bools="ok"):
    """The wrapper of a binary Function. bools: "ok"; "any" (sub: no bool operand at all);
    "result" (// %: not when both are bools); "exponent" (pow: a bool base takes only a
    Python-number exponent, as torch)."""
    def op(a, b):
        if bools == "any":
            refuse_bool(name, "this operator with a bool operand", a, b)
        a2, b2 = promote(name, a, b, to_float=to_float)
        if bools == "exponent" and not isinstance(b, Tensor) and a2.dtype.kind in "iu" and \
                np.any(b2 < 0):
            raise ValueError("pow: integers to negative integer powers are not allowed (as torch "
                             "for a number exponent; use a float base)")
        if bools != "ok" and a2.dtype == np.bool_:
            if bools == "result" or isinstance(b, Tensor) or isinstance(a, (bool, np.bool_)):
                raise TypeError(f"{name}: not implemented for bool tensors (as in torch)")
            return cast(fn.apply(a2, b2), np.bool_)
        return fn.apply(a2, b2)
    op.__name__ = name
    op.__doc__ = (f"Elementwise {name} with broadcasting and torch's type promotion; "
                  f"differentiable in both operands.")
    return op


add = _binary(Add, "add")
sub = _binary(Sub, "sub", bools="any")
mul = _binary(Mul, "mul")
div = _binary(Div, "div", to_float=True)
pow = _binary(Pow, "pow", bools="exponent")
maximum = _binary(Maximum, "maximum")
minimum = _binary(Minimum, "minimum")
remainder = _binary(Remainder, "remainder", bools="result")
floor_divide = _binary(FloorDivide, "floor_divide", bools="result")


def neg(x):
    refuse_bool("neg", "negation (-)", x)
    return Neg.apply(x)


def _floating(x):
    """An int or bool tensor as float32 (torch's default dtype) for a float op: exp, log, sqrt."""
    if isinstance(x, Tensor) and x.data.dtype.kind not in "f":
        return Cast.apply(x, dtype=np.dtype(np.float32))
    return x


def positive(x):
    """+x: x itself (torch.positive), refused on a bool tensor as in torch."""
    refuse_bool("positive", "unary +", x)
    return x


def exp(x):
    return Exp.apply(_floating(x))


def log(x):
    return Log.apply(_floating(x))


def sqrt(x):
    return Sqrt.apply(_floating(x))


def abs(x):
    refuse_bool("abs", "abs", x)
    return Abs.apply(x)


def clamp(x, min=None, max=None):
    """Clip into [min, max] (either may be None; numbers or tensors that broadcast to x), in
    torch's promoted dtype (an int x with a float bound is float32); gradient 1 to x inside the
    closed interval, 0 outside; a tensor bound gets the gradient where it clips."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    bounds = [b for b in (min, max) if b is not None]
    dtype = result_type(x, *bounds)
    if dtype != x.dtype:
        x = _to(x, dtype)
    if any(isinstance(b, np.ndarray) and b.ndim or isinstance(b, Tensor) and (
            b.ndim or b.requires_grad) for b in bounds):
        for b in bounds:
            if np.broadcast_shapes(np.shape(data_of(b)), x.shape) != x.shape:
                raise ValueError(f"clamp: a bound of shape {np.shape(data_of(b))} does not "
                                 f"broadcast to the input's shape {x.shape}")
        if min is not None:  # where(x < lo, lo, x): x's gradient inside, lo's where it clips
            x = where(data_of(x) < data_of(min), _to(min, dtype), x)
        if max is not None:
            x = where(data_of(x) > data_of(max), _to(max, dtype), x)
        return x
    lo, hi = (None if b is None else data_of(b).item() for b in (min, max))
    return Clamp.apply(x, min=lo, max=hi)


def where(cond, a=None, b=None):
    """`a` where `cond` is true, else `b` (broadcast, torch's promotion); differentiable in `a`
    and `b`. where(cond) alone is nonzero(cond, as_tuple=True), as torch's."""
    if a is None and b is None:
        from .compare import nonzero
        return nonzero(cond, as_tuple=True)
    if a is None or b is None:
        raise ArgumentTypeError("where: give both values (where(cond, a, b)) or neither")
    a2, b2 = promote("where", a, b)
    cond = data_of(cond)
    if cond.dtype != np.bool_:
        raise TypeError(f"where: the condition must be a bool tensor, got dtype {cond.dtype}")
    return Where.apply(cond, a2, b2)


def cast(x, dtype):
    """Differentiable dtype conversion (the gradient is cast back)."""
    return Cast.apply(x, dtype=np.dtype(dtype))


def clone(x):
    """A differentiable copy of x (new memory, same dtype; the gradient passes through)."""
    return Clone.apply(x)

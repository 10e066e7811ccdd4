"""Activations: relu, leaky_relu, prelu, sigmoid, tanh, gelu (exact erf or tanh approximation).

Every op keeps the input's float dtype; integer input is a TypeError naming the argument. Gradients
at the kinks follow PyTorch: relu'(0) = 0, leaky_relu'(0) = negative_slope, prelu'(0) = weight.
"""
from __future__ import annotations

import math

import numpy as np
from numba import types
from numba.extending import overload

from .._check import choice, float_array
from .._jit import kernel, launch, prange
from .._simd import wide
from ..autograd import Function
from .logistic import sigmoid_pass
from ._util import memory_order, unflat
from .rows import SERIAL_ELEMS, exp32, vexp

__all__ = ["relu", "leaky_relu", "prelu", "sigmoid", "tanh", "gelu"]


def _flat(a):
    return np.ascontiguousarray(a).reshape(-1)


_expf = kernel(exp32)  # rows.py's vectorisable float32 exp, as a call (nested inlining trips numba)

# The elementwise kernels run in chunks of _CHUNK elements on numba's threads (a training step's
# activations were 7-15% of it on one thread: docs/benchmarks.md), and on one thread below
# SERIAL_ELEMS (softmax's threshold), where a parallel region costs more than it saves. Each element's value does not
# depend on the chunks.
_CHUNK = 1 << 14


@kernel
def _chunks(n):
    return (n + _CHUNK - 1) // _CHUNK


def _run(kern, n, *args):
    """kern(*args) over n elements: on one thread when small (_jit.launch)."""
    return launch(kern, n < SERIAL_ELEMS, *args)


@kernel(parallel=True)
def _relu_grad_kernel(g, y, gx):
    """gx = g where y > 0 (y = relu(x) > 0 exactly where x > 0), else 0; flat arrays."""
    zero = g.dtype.type(0)
    for k in prange(_chunks(g.size)):
        lo = k * _CHUNK
        gs, ys, gxs = g[lo:lo + _CHUNK], y[lo:lo + _CHUNK], gx[lo:lo + _CHUNK]
        for i in range(gs.shape[0]):
            gxs[i] = gs[i] if ys[i] > zero else zero


class ReLUFunction(Function):
    # The output is saved, not a mask: the next layer holds it anyway, and the gradient is one pass.
    @staticmethod
    def forward(ctx, x):
        y = np.maximum(x, x.dtype.type(0))  # maximum, not a mask product: NaN stays NaN, as torch
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):  # dL/dx = g [x > 0]
        (y,) = ctx.saved_tensors
        gx = np.empty(y.shape, y.dtype)
        _run(_relu_grad_kernel, y.size, _flat(g.astype(y.dtype, copy=False)), _flat(y), gx.reshape(-1))
        return gx


@kernel(parallel=True)
def _leaky_relu_kernel(x, slope, y):
    """y = x if x > 0 else slope x on flat arrays (NaN stays NaN)."""
    zero = x.dtype.type(0)
    for k in prange(_chunks(x.size)):
        lo = k * _CHUNK
        xs, ys = x[lo:lo + _CHUNK], y[lo:lo + _CHUNK]
        for i in range(xs.shape[0]):
            v = xs[i]
            ys[i] = v if v > zero else v * slope


@kernel(parallel=True)
def _leaky_relu_grad_kernel(g, s, slope, gx):
    """gx = g where s > 0, else slope g; s is the input, or the output, which has its sign."""
    zero = s.dtype.type(0)
    for k in prange(_chunks(g.size)):
        lo = k * _CHUNK
        gs, ss, gxs = g[lo:lo + _CHUNK], s[lo:lo + _CHUNK], gx[lo:lo + _CHUNK]
        for i in range(gs.shape[0]):
            gxs[i] = gs[i] if ss[i] > zero else gs[i] * slope


class LeakyReLUFunction(Function):
    # One numba pass each way: numpy's where/multiply made a full-size slope array and two passes
    # (docs/benchmarks.md). With slope >= 0 the output is saved, not the input: it has the input's
    # sign, and the next layer holds it anyway.
    @staticmethod
    def forward(ctx, x, *, negative_slope):
        slope = x.dtype.type(negative_slope)
        y = np.empty(x.shape, x.dtype)
        _run(_leaky_relu_kernel, x.size, _flat(x), slope, y.reshape(-1))
        ctx.save_for_backward(y if negative_slope >= 0 else x)
        ctx.slope = slope
        return y

    @staticmethod
    def backward(ctx, g):  # dL/dx = g (1 if x > 0 else slope)
        (s,) = ctx.saved_tensors
        gx = np.empty(s.shape, s.dtype)
        _run(_leaky_relu_grad_kernel, s.size, _flat(g.astype(s.dtype, copy=False)), _flat(s), ctx.slope,
             gx.reshape(-1))
        return gx


def rectify_(y, slope):
    """leaky_relu(y, slope) in place (slope 0: relu) on a contiguous array y: conv2d's fused epilogue
    (relu_slope), which writes over its own fresh output instead of allocating a second one."""
    if slope == 0:
        np.maximum(y, y.dtype.type(0), out=y)  # as relu: NaN stays NaN
    else:
        flat = y.reshape(-1)
        _run(_leaky_relu_kernel, flat.size, flat, y.dtype.type(slope), flat)
    return y


def rectify_grad(g, y, slope):
    """dL/d(pre-activation) of rectify_ from its output y (same sign as its input, slope >= 0)."""
    gx = np.empty(y.shape, y.dtype)
    if slope == 0:
        _run(_relu_grad_kernel, y.size, _flat(g.astype(y.dtype, copy=False)), y.reshape(-1), gx.reshape(-1))
    else:
        _run(_leaky_relu_grad_kernel, y.size, _flat(g.astype(y.dtype, copy=False)), y.reshape(-1),
             y.dtype.type(slope), gx.reshape(-1))
    return gx


@kernel(parallel=True)
def _prelu_kernel(x, w, y):
    """y[a, c, l] = x if x > 0 else w[c] x, for x viewed as (A, C, L) with w (C,)."""
    A, C, L = x.shape
    for r in prange(A * C):
        a, c = r // C, r % C
        wc, xs, ys = w[c], x[a, c], y[a, c]  # 1-D rows: the select vectorises (_jit.py)
        for i in range(xs.shape[0]):
            v = xs[i]
            ys[i] = wc * v if v <= 0 else v


@kernel(parallel=True)
def _prelu_grad_kernel(g, x, w, gx, gw_rows, need_x):
    """gx = g if x > 0 else w[c] g (when need_x); gw_rows[a, c] = sum_l g min(x, 0) in float64,
    partial sums reduced by the caller."""
    A, C, L = x.shape
    for r in prange(A * C):
        a, c = r // C, r % C
        wc, xs, gs = w[c], x[a, c], g[a, c]
        if need_x:  # its own loop over 1-D rows: a select that vectorises, unlike the float64 sum
            gxs = gx[a, c]
            for i in range(xs.shape[0]):
                gxs[i] = gs[i] * wc if xs[i] <= 0 else gs[i]
        # g min(x, 0) (no branch: random signs mispredict), into four float64 partial sums, which
        # vectorises where one branchy sum does not (docs/benchmarks.md)
        zero, n = xs.dtype.type(0), xs.shape[0] // 4 * 4
        acc0 = acc1 = acc2 = acc3 = 0.0
        for i in range(0, n, 4):
            acc0 += gs[i] * min(xs[i], zero)
            acc1 += gs[i + 1] * min(xs[i + 1], zero)
            acc2 += gs[i + 2] * min(xs[i + 2], zero)
            acc3 += gs[i + 3] * min(xs[i + 3], zero)
        for i in range(n, xs.shape[0]):
            acc0 += gs[i] * min(xs[i], zero)
        gw_rows[a, c] = (acc0 + acc1) + (acc2 + acc3)


def _channel_rows(shape, w_size):
    """The (A, C, L) view of an input of `shape` for a weight of w_size entries: the channels on
    axis 1 when per channel (w_size = C), else C = 1 (one weight for all)."""
    if w_size > 1:
        return (shape[0], shape[1], int(np.prod(shape[2:], dtype=np.int64)))
    last = shape[-1] if shape else 1
    return (int(np.prod(shape[:-1], dtype=np.int64)) if shape else 1, 1, last)


class PReLUFunction(Function):
    # One numba pass each way; numpy's where/multiply chain made five full-size temporaries.
    @staticmethod
    def forward(ctx, x, w):
        x = np.ascontiguousarray(x)
        rows = _channel_rows(x.shape, w.size)
        y = np.empty(x.shape, x.dtype)
        _run(_prelu_kernel, x.size, x.reshape(rows), w, y.reshape(rows))
        ctx.save_for_backward(x, w)
        return y

    @staticmethod
    def backward(ctx, g):  # dL/dx = g (1 if x > 0 else w);  dL/dw = sum(g x over x <= 0)
        x, w = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad
        rows = _channel_rows(x.shape, w.size)
        g = np.ascontiguousarray(g, dtype=x.dtype)
        gx = np.empty(x.shape, x.dtype)
        gw_rows = np.empty(rows[:2], np.float64)
        _run(_prelu_grad_kernel, x.size, g.reshape(rows), x.reshape(rows), w, gx.reshape(rows), gw_rows,
             need_x)
        gw = gw_rows.sum(axis=0).astype(x.dtype).reshape(w.shape) if need_w else None
        return (gx if need_x else None), gw


class SigmoidFunction(Function):
    # one numba pass each way (logistic.py): exp(-|x|) never overflows; 1/(1+e^-x) or e^x/(1+e^x)
    @staticmethod
    def forward(ctx, x):
        out = sigmoid_pass(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):  # dL/dx = g s (1 - s)
        (out,) = ctx.saved_tensors
        return sigmoid_pass(out, g)


class TanhFunction(Function):
    @staticmethod
    def forward(ctx, x):
        if x.dtype == np.float32:
            out = np.empty(x.shape, np.float32)
            _run(_tanh32_kernel, x.size, _flat(x), out.reshape(-1))
        else:
            out = np.tanh(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):  # dL/dx = g (1 - tanh^2)
        (out,) = ctx.saved_tensors
        gx = np.empty(out.shape, out.dtype)
        _run(_tanh_grad_kernel, out.size, _flat(g.astype(out.dtype, copy=False)), out.reshape(-1),
             gx.reshape(-1))
        return gx


@kernel(parallel=True)
def _tanh32_kernel(x, y):
    """y = tanh(x) on flat float32 arrays, Cephes' tanhf: an odd polynomial below |x| = 0.625, else
    1 - 2 / (e^2|x| + 1) with the vectorisable exp (|x| clamped at 10, where float32's tanh is 1).
    Both are computed and one selected, so the loop vectorises (np.tanh's float32 and torch's
    against it: docs/benchmarks.md); within 1.5 ulp, as numpy's (tests/framework/functional/test_activation.py)."""
    f = np.float32
    for k in prange(_chunks(x.size)):
        wide()
        lo = k * _CHUNK
        xs, ys = x[lo:lo + _CHUNK], y[lo:lo + _CHUNK]
        for i in range(xs.shape[0]):
            v = xs[i]
            a = -v if v < f(0.0) else v  # |x| (a NaN stays NaN through every step)
            a = f(10.0) if a > f(10.0) else a
            big = f(1.0) - f(2.0) / (vexp(f(2.0) * a) + f(1.0))  # inlined: the loop vectorises
            big = -big if v < f(0.0) else big
            z = v * v
            small = ((((f(-5.70498872745e-3) * z + f(2.06390887954e-2)) * z - f(5.37397155531e-2)) * z
                      + f(1.33314422036e-1)) * z - f(3.33332819422e-1)) * z * v + v
            small = v if z == f(0.0) else small  # keeps -0.0 (the sum above gives +0.0)
            ys[i] = small if a < f(0.625) else big


@kernel(parallel=True)
def _tanh_grad_kernel(g, t, gx):
    """gx = g (1 - t t) on flat arrays, in one pass (numpy made three)."""
    for k in prange(_chunks(g.size)):
        lo = k * _CHUNK
        gs, ts, gxs = g[lo:lo + _CHUNK], t[lo:lo + _CHUNK], gx[lo:lo + _CHUNK]
        for i in range(gs.shape[0]):
            gxs[i] = gs[i] * (1 - ts[i] * ts[i])


# erfc(z) = t exp(-z^2 + P(t)) with t = 1 / (1 + z / 2), z >= 0: the form of Numerical Recipes'
# erfcc, coefficients fitted here (relative error 4.4e-8 in float64 over z in [0, 9.6], beyond which
# float32's Phi is 0 or 1). One exp, no branch: the float32 loop vectorises, and the negative tail
# keeps its relative accuracy (0.5 (1 + erf) would cancel there).
@kernel
def _erfc_poly(t):
    f = np.float32
    p = f(0.13898774994021898) * t + f(-0.6483891601181794)
    p = p * t + f(1.0802646289921058)
    p = p * t + f(-0.5943698074516693)
    p = p * t + f(-0.16455580414165394)
    p = p * t + f(0.045997559417824796)
    p = p * t + f(0.019423796044845898)
    p = p * t + f(0.3898050135192788)
    p = p * t + f(0.9982661177241595)
    return p * t + f(-1.2654300501816453)


def _normal(v, with_pdf):
    """(Phi(v), phi(v)) of the standard normal (phi only when with_pdf, else 0): math.erf in float64,
    the erfc form above in float32 (a NaN stays NaN). Kernels get the overload below."""
    return _normal64(v, with_pdf)


def _normal64(v, with_pdf):
    cdf = 0.5 * (1.0 + math.erf(v * 0.7071067811865476))
    return cdf, (0.3989422804014327 * math.exp(-0.5 * v * v) if with_pdf else 0.0)


def _normal32(v, with_pdf):
    f = np.float32
    z = abs(v) * f(0.70710678118654752)
    t = f(1.0) / (f(1.0) + f(0.5) * z)
    zz = z * z
    if with_pdf:  # two exps: exp(-z^2) is phi's too
        ez = _expf(-zz)
        half = f(0.5) * t * ez * _expf(_erfc_poly(t))
        pdf = f(0.3989422804014327) * ez
    else:
        half = f(0.5) * t * _expf(_erfc_poly(t) - zz)
        pdf = f(0.0)
    return (half if v < f(0.0) else f(1.0) - half), pdf


@overload(_normal)
def _normal_overload(v, with_pdf):
    if isinstance(v, types.Float) and v.bitwidth == 32:
        return _normal32
    return _normal64


@kernel(parallel=True)
def _gelu_exact_kernel(x, y):
    """y = x Phi(x) on flat arrays, in chunks of _CHUNK (each in 512-bit vectors where the CPU has
    them: the loop is arithmetic, not memory, bound; wide() changes no value)."""
    for k in prange(_chunks(x.size)):
        wide()
        lo = k * _CHUNK
        xs, ys = x[lo:lo + _CHUNK], y[lo:lo + _CHUNK]
        for i in range(xs.shape[0]):
            v = xs[i]
            ys[i] = v * _normal(v, False)[0]


@kernel(parallel=True)
def _gelu_exact_grad_kernel(g, x, gx):
    """gx = g (Phi(x) + x phi(x)) on flat arrays: the derivative is computed here, not saved by the
    forward (one array fewer written there, and backward reads x instead)."""
    for i in prange(x.size):
        v = x[i]
        cdf, pdf = _normal(v, True)
        gx[i] = g[i] * (cdf + v * pdf)


class GELUExact(Function):
    @staticmethod
    def forward(ctx, x):  # the output laid out as x (memory_order): a channels-last x is not copied
        order = memory_order(x)
        flat = _flat(x) if order is None else x.transpose(order).reshape(-1)
        y = np.empty_like(flat)
        launch(_gelu_exact_kernel, flat.size < SERIAL_ELEMS, flat, y)
        ctx.save_for_backward(flat)
        ctx.layout = (x.shape, order)
        return unflat(y, x.shape, order)

    @staticmethod
    def backward(ctx, g):  # dL/dx = g (Phi(x) + x phi(x))
        (flat,) = ctx.saved_tensors
        shape, order = ctx.layout
        gx = np.empty_like(flat)
        gl = g.astype(flat.dtype, copy=False)
        launch(_gelu_exact_grad_kernel, flat.size < SERIAL_ELEMS,
               _flat(gl if order is None else gl.transpose(order)), flat, gx)
        return unflat(gx, shape, order)


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
    float_array("relu", "input", x)
    return ReLUFunction.apply(x)


def leaky_relu(x, negative_slope=0.01):
    """x if x > 0 else negative_slope * x, any shape."""
    float_array("leaky_relu", "input", x)
    return LeakyReLUFunction.apply(x, negative_slope=float(negative_slope))


def prelu(x, weight):
    """x if x > 0 else weight * x. weight: (1,) shared, or (C,) per channel of x (N, C, ...)."""
    xa, wa = float_array("prelu", "input", x), float_array("prelu", "weight", weight)
    ws, xs = wa.shape, xa.shape
    if len(ws) != 1 or ws[0] < 1:
        raise ValueError(f"prelu: weight must be 1-D with 1 or C entries, got shape {ws}")
    if ws[0] > 1 and (len(xs) < 2 or xs[1] != ws[0]):
        raise ValueError(f"prelu: weight has {ws[0]} entries (per channel) but input of shape {xs} "
                         f"has {xs[1] if len(xs) >= 2 else 'no'} channels in dimension 1")
    if wa.dtype != xa.dtype:
        raise TypeError(f"prelu: weight dtype {wa.dtype} differs from input dtype {xa.dtype}")
    return PReLUFunction.apply(x, weight)


def sigmoid(x):
    """1 / (1 + exp(-x)), computed without overflow for large |x|."""
    float_array("sigmoid", "input", x)
    return SigmoidFunction.apply(x)


def tanh(x):
    float_array("tanh", "input", x)
    return TanhFunction.apply(x)


def gelu(x, approximate="none"):
    """x Phi(x) with the exact normal CDF (approximate="none", default) or torch's tanh form
    (approximate="tanh"). Special values follow IEEE arithmetic on the formulas, in both dtypes:
    gelu(+inf) = +inf, gelu(-inf) = -inf * 0 = NaN, the gradient Phi(x) + x phi(x) is NaN at
    +-inf, the left tail is -0 with gradient 0 (torch agrees except its float32 AVX-512 kernel,
    which gives NaN at +inf: docs/numerics.md)."""
    float_array("gelu", "input", x)
    fn = {"none": GELUExact, "tanh": GELUTanh}[choice("gelu", "approximate", approximate, ("none", "tanh"))]
    return fn.apply(x)

"""Products: linear (x W^T + b, PyTorch's (out, in) weight layout) and matmul (numpy's rules: 1-D
operands, batched broadcasting).

Every product is BLAS. A product with a shared 2-D matrix (linear, or a batch times one matrix) folds
the leading axes into rows: one large product instead of one small product per batch entry; linear
runs those rows in fixed chunks on conv's worker threads with single-threaded BLAS. A
batched product (attention's q k^T and attn v: thousands of 64 x 30 matrices) is one small BLAS call
per matrix, and BLAS runs matrices this small on one thread; above a size the batch runs as a few
slices on conv's worker threads, each with single-threaded BLAS (framework/functional/_tiles.py).
Under `autocast("bf16")` on an AMX CPU linear's products are _gemm_bf16.py's instead (bfloat16
operands, float32 sums), and so are matmul's products of matrices whose inner and output sides
are both at least BF16_MIN_SIDE (docs/numerics.md).
"""
from __future__ import annotations

import numpy as np

from .. import precision
from .._check import float_array
from ..autograd import Function
from ..tensor import Tensor
from . import _gemm_bf16, _tiles
from ._util import unbroadcast

__all__ = ["linear", "matmul"]

# Below this many multiply-adds a batched product runs as one np.matmul call: the worker pool's
# fork/join (and, with a core busy elsewhere, a worker waiting for its time slice) costs more than
# the second core saves.
_SERIAL_MACS = 1 << 26


def _rows(a: np.ndarray) -> np.ndarray:
    """(..., k) -> (M, k): a view when a is contiguous."""
    return a.reshape(-1, a.shape[-1])


def _slice_product(p, q, out, lo, hi):
    np.matmul(p[lo:hi], q[lo:hi], out=out[lo:hi])


def _product(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """np.matmul(p, q) for p (..., n, k) and q (..., k, m) (numpy's broadcasting, p's dtype)."""
    if q.ndim == 2 and p.ndim > 2:  # one shared matrix: fold the batch into rows
        return (_rows(p) @ q).reshape(p.shape[:-1] + (q.shape[-1],))
    batch = np.broadcast_shapes(p.shape[:-2], q.shape[:-2])
    workers = _tiles.default_workers()
    macs = int(np.prod(batch, dtype=np.int64)) * p.shape[-2] * p.shape[-1] * q.shape[-1]
    if not batch or batch[0] < 2 * workers or workers < 2 or macs < _SERIAL_MACS:
        return np.matmul(p, q)
    n, m = p.shape[-2], q.shape[-1]
    p = np.broadcast_to(p, batch + p.shape[-2:])  # views: slicing axis 0 then needs no copy
    q = np.broadcast_to(q, batch + q.shape[-2:])
    out = np.empty(batch + (n, m), np.result_type(p, q))
    step = -(-batch[0] // (2 * workers))  # two slices per worker: one late thread delays less
    tasks = [(lo, min(batch[0], lo + step)) for lo in range(0, batch[0], step)]
    _tiles.run(tasks, lambda t, _: _slice_product(p, q, out, *t), 0, out.dtype, workers)
    return out


# matmul's bfloat16 route takes a product whose inner and output sides are both at least this: below,
# padding them to the tiles' 32 made it slower than float32 BLAS (512 products of 64 x 16 @ 16 x 64:
# 0.92 against 0.60 ms; at 24 and 32 as fast or faster; docs/benchmarks.md, issue 41). A function of
# shapes only, as conv's routes.
BF16_MIN_SIDE = 24


def _mm(p: np.ndarray, q: np.ndarray, bf16: bool) -> np.ndarray:
    """_product(p, q), or with bfloat16 operands and float32 sums (_gemm_bf16.py) when `bf16` and
    both the inner and the output side are at least BF16_MIN_SIDE."""
    if not (bf16 and p.shape[-1] >= BF16_MIN_SIDE and q.shape[-1] >= BF16_MIN_SIDE):
        return _product(p, q)
    if q.ndim == 2:  # one shared matrix: the batch folded into rows, one product
        return _gemm_bf16.matmul(_rows(p), q).reshape(p.shape[:-1] + (q.shape[-1],))
    batch = np.broadcast_shapes(p.shape[:-2], q.shape[:-2])
    p3 = np.broadcast_to(p, batch + p.shape[-2:]).reshape((-1,) + p.shape[-2:])
    q3 = np.broadcast_to(q, batch + q.shape[-2:]).reshape((-1,) + q.shape[-2:])
    return _gemm_bf16.matmul_batched(p3, q3).reshape(batch + (p.shape[-2], q.shape[-1]))


class MatMulFunction(Function):
    """a (..., n, k) or (k,), b (..., k, m) or (k,) -> numpy's matmul of the two. Under
    autocast('bf16') on an AMX CPU, matrix operands' products take _mm's bfloat16 route (the
    backward's too, each product by its own sides)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        if a.ndim == 1 or b.ndim == 1:
            ctx.bf16 = False
            return np.matmul(a, b)
        ctx.bf16 = _bf16(a.dtype) and a.dtype == b.dtype
        return _mm(a, b, ctx.bf16)

    @staticmethod
    def backward(ctx, g):  # dL/dA = g B^T, dL/dB = A^T g (1-D operands promoted, broadcast axes summed)
        a, b = ctx.saved_tensors
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        g2 = g.reshape(batch + (a2.shape[-2], b2.shape[-1]))
        need_a, need_b = ctx.needs_input_grad
        ga = gb = None
        if need_a:
            ga = unbroadcast(_mm(g2, np.swapaxes(b2, -1, -2), ctx.bf16), a2.shape).reshape(a.shape)
        if need_b:
            if b2.ndim == 2 and a2.ndim > 2:  # shared b: sum over the batch inside one product
                gb = _mm(_rows(a2).T, _rows(g2), ctx.bf16)
            else:
                gb = unbroadcast(_mm(np.swapaxes(a2, -1, -2), g2, ctx.bf16), b2.shape)
            gb = gb.reshape(b.shape)
        return ga, gb


# linear's products run over fixed chunks of this many rows: the weight and bias gradients are sums
# of per-chunk partials in chunk order, so they do not depend on the thread count.
_CHUNK_ROWS = 2048


def _over_rows(m, work):
    """[work(lo, hi) for each chunk of the m rows], on conv's worker threads with single-threaded
    BLAS whenever there are two chunks or more: OpenBLAS's own threads busy-wait for each other
    and then spin idle after the call, and beside numba's threads (or on a shared machine) that was
    most of linear's time in SwinIR's step. A chunk is at least 2048 x in x out multiply-adds, far
    more than the pool's fork/join."""
    tasks = [(lo, min(m, lo + _CHUNK_ROWS)) for lo in range(0, m, _CHUNK_ROWS)]
    return _tiles.run(tasks, lambda t, _: work(*t), 0, np.uint8, _tiles.default_workers())


def _sum_partials(parts):
    """parts[0] + parts[1] + ... in order (a fixed order: the result does not depend on threads)."""
    total = parts[0]
    for p in parts[1:]:
        total += p
    return total


def _bf16(dtype) -> bool:
    """Whether linear's products run with bfloat16 operands now (autocast('bf16'), float32, AMX)."""
    return precision.bf16_active(dtype) and _gemm_bf16.available()


def linear_arrays(x, weight, bias, residual=None):
    """LinearFunction's forward on arrays: x (..., in) W^T (+ b) (+ residual (..., out), added last:
    add_arrays' value, one IEEE sum per element, done as the product is stored: an inference graph's
    `x + fc2(h)`, capture/_lower.py). bf16 under autocast on AMX, else BLAS in chunks of rows."""
    x2 = _rows(x)
    r2 = None if residual is None else _rows(residual)
    if _bf16(x2.dtype):  # the bias and the residual added as each block is stored
        out = _gemm_bf16.matmul(x2, weight.T, bias, r2)
        return out.reshape(x.shape[:-1] + (weight.shape[0],))
    out = np.empty((x2.shape[0], weight.shape[0]), np.result_type(x2, weight))
    wt = weight.T

    def chunk(lo, hi):  # the bias (and residual) added while the chunk is still in cache
        np.matmul(x2[lo:hi], wt, out=out[lo:hi])
        if bias is not None:
            out[lo:hi] += bias
        if r2 is not None:
            out[lo:hi] += r2[lo:hi]

    _over_rows(x2.shape[0], chunk)
    return out.reshape(x.shape[:-1] + (weight.shape[0],))


class LinearFunction(Function):
    """x (..., in), weight (out, in), bias (out,) or None -> x W^T + b (..., out). Under
    autocast('bf16') on an AMX CPU the three products take bfloat16 operands (_gemm_bf16.py)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(_rows(x), weight)
        ctx.shape, ctx.precision = x.shape, precision.current()
        return linear_arrays(x, weight, bias)

    @staticmethod
    def backward(ctx, g):  # dL/dx = g W, dL/dW = g^T x, dL/db = sum g (over every leading axis)
        x2, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        g2 = _rows(g)
        with precision.autocast(ctx.precision):  # the forward's precision
            if _bf16(g2.dtype):
                return ((_gemm_bf16.matmul(g2, weight).reshape(ctx.shape) if need_x else None),
                        (_gemm_bf16.matmul(g2.T, x2) if need_w else None),
                        (g2.sum(axis=0) if need_b else None))
        gx = np.empty(x2.shape, x2.dtype) if need_x else None

        def chunk(lo, hi):
            if need_x:
                np.matmul(g2[lo:hi], weight, out=gx[lo:hi])
            return (g2[lo:hi].T @ x2[lo:hi] if need_w else None,
                    g2[lo:hi].sum(axis=0) if need_b else None)

        parts = _over_rows(x2.shape[0], chunk)
        if not parts:  # no rows: nothing to sum
            parts = [(np.zeros(weight.shape, weight.dtype), np.zeros(weight.shape[0], weight.dtype))]
        gw = _sum_partials([p[0] for p in parts]) if need_w else None
        gb = _sum_partials([p[1] for p in parts]) if need_b else None
        return (gx.reshape(ctx.shape) if need_x else None), gw, gb


def _same_dtype(op, name, arr, ref):
    if arr.dtype != ref.dtype:
        raise TypeError(f"{op}: {name} dtype {arr.dtype} differs from input dtype {ref.dtype}")


def linear(x, weight, bias=None):
    """torch.nn.functional.linear: x (..., in_features) @ weight^T + bias -> (..., out_features).
    weight: (out_features, in_features); bias: (out_features,) or None (default). x may be 1-D."""
    xa = float_array("linear", "input", x)
    wa = float_array("linear", "weight", weight)
    if xa.ndim < 1:
        raise ValueError("linear: input must have at least 1 dimension (..., in_features), got a scalar")
    if wa.ndim != 2 or wa.shape[1] != xa.shape[-1]:
        raise ValueError(f"linear: weight must have shape (out_features, {xa.shape[-1]}) for input of "
                         f"shape {xa.shape}, got {wa.shape}")
    _same_dtype("linear", "weight", wa, xa)
    if bias is not None:
        ba = float_array("linear", "bias", bias)
        if ba.shape != (wa.shape[0],):
            raise ValueError(f"linear: bias must have shape ({wa.shape[0]},) for weight of shape "
                             f"{wa.shape}, got {ba.shape}")
        _same_dtype("linear", "bias", ba, xa)
    return LinearFunction.apply(x, weight, bias)


def matmul(a, b):
    """Matrix product with numpy semantics: (..., n, k) @ (..., k, m) -> (..., n, m), the batch axes
    broadcast; a 1-D operand is a row (left) or column (right) vector and its axis is dropped. Float
    operands must share one dtype (float32 @ float64, float32 @ int64 and int32 @ int64 are
    TypeErrors, as in torch; so is bool @ bool)."""
    a = a if isinstance(a, Tensor) else np.asarray(a)
    b = b if isinstance(b, Tensor) else np.asarray(b)
    sa, sb = a.shape, b.shape
    if len(sa) == 0 or len(sb) == 0:
        raise ValueError(f"matmul: operands must have at least 1 dimension, got {sa} and {sb}")
    ka = sa[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if ka != kb:
        raise ValueError(f"matmul: shapes {sa} and {sb} do not align ({ka} != {kb})")
    try:
        np.broadcast_shapes(sa[:-2], sb[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch shapes of {sa} and {sb} cannot be broadcast") from None
    da, db = a.dtype, b.dtype
    if da == db == np.bool_:
        raise TypeError("matmul: not implemented for bool tensors (as in torch); .long() them")
    if da != db:
        raise TypeError(f"matmul: operand dtypes differ ({da} and {db}); cast one with .float() or "
                        ".double()")
    return MatMulFunction.apply(a, b)

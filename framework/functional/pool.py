"""Pooling: avg_pool2d, max_pool2d, adaptive_avg_pool2d, adaptive_max_pool2d, with torch's output
sizes, windows and divisors.

Both average pools are separable window sums: a window per output row and per output column (start and
end clipped to the input, computed in numpy from the pool's rules) and a divisor that is a product of
a row and a column factor. They are resample.py's window tables through its kernels (so area
interpolation and adaptive pooling are one computation, and the backward is the transposed tables).
max_pool2d and adaptive_max_pool2d record the argmax (torch's flat h * W + w index) and their
backward adds g there (one adjoint kernel); their kernels run one (n, c) plane per thread, so every
scatter is race-free.
"""
from __future__ import annotations

import numpy as np

from .._check import float_array, int_pair, is_int, is_number
from .._jit import kernel, launch, prange
from ..autograd import Function
from .resample import ResampleFunction, area_windows, window_table

__all__ = ["avg_pool2d", "max_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d"]

# Below this many window reads one thread is faster (_jit.launch; measured in docs/benchmarks.md).
_SERIAL_WORK = 1 << 18


def _launch(kern, work, *args):
    """kern(*args), on one numba thread when `work` (window reads) is small."""
    return launch(kern, work < _SERIAL_WORK, *args)


# -- kernels -------------------------------------------------------------------------------------------

@kernel(parallel=True)
def _max_windows(x, h_lo, h_hi, dh, w_lo, w_hi, dw, out, idx):
    """out[n, c, i, j] = the max of x[n, c, h_lo[i]:h_hi[i]:dh, w_lo[j]:w_hi[j]:dw] (each output's
    window, clipped to the input: padding never wins), idx its flat h * W + w; as ATen: the first
    maximum in row-major window order wins ties, and a NaN wins (and propagates). An empty window
    (only padding, possible with dilation) gives -inf and index -1 (ATen: an index past the input)."""
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    for t in prange(N * C):
        n, c = t // C, t % C
        for i in range(OH):
            for j in range(OW):
                best = -np.inf
                arg = -1
                for h in range(h_lo[i], h_hi[i], dh):
                    for w in range(w_lo[j], w_hi[j], dw):
                        v = x[n, c, h, w]
                        if v > best or np.isnan(v) or arg < 0:
                            best = v
                            arg = h * W + w
                out[n, c, i, j] = best
                idx[n, c, i, j] = arg


@kernel(parallel=True)
def _max_window_adjoint(g, idx, dx):
    """dx[n, c].flat[idx[n, c, i, j]] += g[n, c, i, j] (dx zero on entry)."""
    N, C = g.shape[0], g.shape[1]
    OH, OW = g.shape[2], g.shape[3]
    W = dx.shape[3]
    for t in prange(N * C):
        n, c = t // C, t % C
        for i in range(OH):
            for j in range(OW):
                k = idx[n, c, i, j]
                if k >= 0:
                    dx[n, c, k // W, k % W] += g[n, c, i, j]


# -- Functions ---------------------------------------------------------------------------------------

def _dilated_windows(size, k, s, p, d, out):
    """Each output's window along one axis as (first, end) input indices of a step-d range: the
    start i s - p moved past the padding by whole steps, the end clipped to the input."""
    start = np.arange(out) * s - p
    end = np.minimum(start + (k - 1) * d + 1, size)
    first = np.where(start < 0, start % d, start)  # start + ceil(-start / d) d
    return first, end


class MaxPool2dFunction(Function):
    @staticmethod
    def forward(ctx, x, *, kernel, stride, padding, dilation, out_size):
        x = np.ascontiguousarray(x)
        out = np.empty(x.shape[:2] + out_size, x.dtype)
        idx = np.empty(x.shape[:2] + out_size, np.int64)
        ctx.meta = (x.shape, idx, x.size + out.size * kernel[0] * kernel[1])
        (h_lo, h_hi), (w_lo, w_hi) = (_dilated_windows(*a) for a in zip(
            x.shape[2:], kernel, stride, padding, dilation, out_size))
        _launch(_max_windows, ctx.meta[2], x, h_lo, h_hi, dilation[0], w_lo, w_hi, dilation[1], out,
                idx)
        return out, idx

    @staticmethod
    def backward(ctx, g, g_idx):  # dL/dx = g added at each window's argmax
        shape, idx, work = ctx.meta
        dx = np.zeros(shape, g.dtype)
        _launch(_max_window_adjoint, work, np.ascontiguousarray(g), idx, dx)
        return dx


class AdaptiveMaxPool2dFunction(Function):
    """Max over explicit windows per axis: (lo, hi) bounds for the rows and for the columns."""

    @staticmethod
    def forward(ctx, x, *, windows):
        (h_lo, h_hi), (w_lo, w_hi) = windows
        x = np.ascontiguousarray(x)
        out = np.empty(x.shape[:2] + (len(h_lo), len(w_lo)), x.dtype)
        idx = np.empty(out.shape, np.int64)
        work = x.size + out.size * int((h_hi - h_lo).max()) * int((w_hi - w_lo).max())
        ctx.meta = (x.shape, idx, work)
        _launch(_max_windows, work, x, h_lo, h_hi, 1, w_lo, w_hi, 1, out, idx)
        return out, idx

    backward = MaxPool2dFunction.backward  # dL/dx = g added at each window's argmax


# -- sizes, windows, validation --------------------------------------------------------------------

def _check_input(name, x):
    a = float_array(name, "input", x)
    if a.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D input (N, C, H, W), got shape {a.shape}")
    return a


def _pool_geometry(name, a, kernel_size, stride, padding, dilation, ceil_mode):
    """Checked (kernel, stride, padding, dilation, output size) with torch's rules: padding at most
    half the kernel; OH = floor((H + 2p - d (k - 1) - 1 + (s - 1 if ceil_mode)) / s) + 1, one less if
    ceil_mode would start the last window past the input and its left padding."""
    kernel = int_pair(name, "kernel_size", kernel_size, 1)
    stride = kernel if stride is None or stride == [] or stride == () else int_pair(name, "stride", stride, 1)
    padding = int_pair(name, "padding", padding, 0)
    dilation = int_pair(name, "dilation", dilation, 1)
    if padding[0] > kernel[0] // 2 or padding[1] > kernel[1] // 2:
        raise ValueError(f"{name}: padding {padding} must be at most half of kernel_size {kernel}")
    out = []
    for size, k, s, p, d in zip(a.shape[2:], kernel, stride, padding, dilation):
        o = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (o - 1) * s >= size + p:
            o -= 1
        out.append(o)
    if out[0] < 1 or out[1] < 1:
        raise ValueError(f"{name}: output size {tuple(out)} is below 1 for input {a.shape} with kernel_size "
                         f"{kernel}, stride {stride}, padding {padding}, dilation {dilation}")
    return kernel, stride, padding, dilation, tuple(out)


def _avg_windows(size, k, s, p, out):
    """Clipped window bounds, torch's count_include_pad size (the window clipped to the padded input)
    and the in-bounds count, along one axis."""
    start = np.arange(out) * s - p
    end = np.minimum(start + k, size + p)
    lo, hi = np.maximum(start, 0), np.minimum(end, size)
    return lo, hi, end - start, hi - lo


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Average pooling, as torch: x (N, C, H, W) -> (N, C, OH, OW).

    kernel_size, stride (default: kernel_size), padding (default 0, at most half the kernel): int or
    (h, w). The divisor is divisor_override if given, else the window clipped to the padded input
    (count_include_pad=True, default) or the number of input pixels in it."""
    name = "avg_pool2d"
    a = _check_input(name, x)
    kernel, stride, padding, _, out = _pool_geometry(name, a, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and (not is_number(divisor_override) or divisor_override == 0):
        raise ValueError(f"{name}: divisor_override must be a non-zero number, got {divisor_override!r}")
    hs, he, h_pad, h_in = _avg_windows(a.shape[2], kernel[0], stride[0], padding[0], out[0])
    ws, we, w_pad, w_in = _avg_windows(a.shape[3], kernel[1], stride[1], padding[1], out[1])
    # the divisor is a product of a row and a column factor: each axis's table carries its own
    if divisor_override is not None:
        h_div, w_div = np.ones(out[0]), np.full(out[1], float(divisor_override))
    elif count_include_pad:
        h_div, w_div = h_pad, w_pad
    else:
        h_div, w_div = h_in, w_in
    tables = (window_table(a.shape[2], hs, he, 1.0 / h_div), window_table(a.shape[3], ws, we, 1.0 / w_div))
    call = ("avg_pool2d", dict(kernel=kernel, stride=stride, padding=padding, ceil_mode=bool(ceil_mode),
                               count_include_pad=bool(count_include_pad),
                               divisor_override=divisor_override))
    return ResampleFunction.apply(x, tables=tables, call=call)


def _adaptive_sizes(name, a, output_size):
    """output_size (int or pair, None keeping that input size) as a checked (OH, OW)."""
    sizes = (output_size, output_size) if not isinstance(output_size, (tuple, list)) else output_size
    if len(sizes) != 2:
        raise ValueError(f"{name}: output_size must be an int or a pair, got {output_size!r}")
    sizes = tuple(a.shape[2 + i] if s is None else s for i, s in enumerate(sizes))
    if not all(is_int(s) and s >= 1 for s in sizes):
        raise ValueError(f"{name}: output_size must hold positive ints (or None), got {output_size!r} "
                         f"for input {a.shape}")
    if a.shape[2] == 0 or a.shape[3] == 0:
        raise ValueError(f"{name}: input {a.shape} has an empty spatial dimension")
    return tuple(int(s) for s in sizes)


def adaptive_avg_pool2d(x, output_size):
    """Average pooling to a fixed output size, as torch: x (N, C, H, W) -> (N, C, OH, OW).

    output_size: int or (OH, OW); a None entry keeps that input size. Window i along an axis of size
    H covers [floor(i H / OH), ceil((i + 1) H / OH))."""
    name = "adaptive_avg_pool2d"
    a = _check_input(name, x)
    sizes = _adaptive_sizes(name, a, output_size)
    tables = []
    for n, m in zip(a.shape[2:], sizes):
        lo, hi = area_windows(n, m)
        tables.append(window_table(n, lo, hi, 1.0 / (hi - lo)))
    call = ("adaptive_avg_pool2d", dict(output_size=sizes))
    return ResampleFunction.apply(x, tables=tuple(tables), call=call)


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max pooling, as torch: x (N, C, H, W) -> (N, C, OH, OW) (and, with return_indices, the argmax
    of each window as a flat h * W + w index, int64; -1 for a window made only of padding).

    kernel_size, stride (default: kernel_size), padding (default 0, acts as -inf, at most half the
    kernel), dilation (default 1): int or (h, w). Ties go to the first maximum in row-major order;
    backward routes each gradient to its window's argmax."""
    name = "max_pool2d"
    a = _check_input(name, x)
    kernel, stride, padding, dilation, out = _pool_geometry(name, a, kernel_size, stride, padding,
                                                            dilation, ceil_mode)
    y, idx = MaxPool2dFunction.apply(x, kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                             out_size=out)
    return (y, idx) if return_indices else y


def adaptive_max_pool2d(x, output_size, return_indices=False):
    """Max pooling to a fixed output size, as torch: x (N, C, H, W) -> (N, C, OH, OW) (and, with
    return_indices, each window's argmax as a flat h * W + w index, int64).

    output_size: int or (OH, OW); a None entry keeps that input size. Window i along an axis of size
    H covers [floor(i H / OH), ceil((i + 1) H / OH)) (adaptive_avg_pool2d's windows; they overlap
    when H is not a multiple of OH, and OH > H repeats input rows). Ties go to the first maximum in
    row-major order, a NaN wins; backward routes each gradient to its window's argmax."""
    name = "adaptive_max_pool2d"
    a = _check_input(name, x)
    sizes = _adaptive_sizes(name, a, output_size)
    windows = tuple(area_windows(n, m) for n, m in zip(a.shape[2:], sizes))
    y, idx = AdaptiveMaxPool2dFunction.apply(x, windows=windows)
    return (y, idx) if return_indices else y

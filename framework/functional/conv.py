"""conv2d and conv_transpose2d: each one's input gradient is the other's forward.

A correlation links an "image side" X (N, C, H, W) and a "feature side" Y (N, O, OH, OW) through a weight
W (O, C/groups, kh, kw). Three routines carry all the arithmetic:

    _correlate(X, W)          Y  = W @ im2col(X)            conv2d forward, conv_transpose2d's dL/dx
    _correlate_adjoint(Y, W)  X  = col2im(W^T @ Y)          conv_transpose2d forward, conv2d's dL/dx
    _weight_grad(X, Y)        dW = sum_n Y_n @ im2col(X_n)^T  both weight gradients

For conv2d, X is the input and Y the output; for conv_transpose2d the roles swap (its input is the feature
side), which is why torch's transposed weight layout (in, out/groups, kh, kw) is the same matrix.

im2col and col2im are parallel numba kernels; the products go to BLAS through np.matmul. The column
matrix is built one tile (some whole images, or some output rows of one image) at a time so that it
never exceeds COL_BUFFER_BYTES whatever the batch or image size.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._jit import kernel, prange
from ..autograd import Function
from ._util import data_of

__all__ = ["conv2d", "conv_transpose2d"]

# Largest column tile (bytes). Besides bounding memory, small tiles keep the column matrix in the
# L2/L3 caches between im2col and the matmul that reads it (measured in scripts/bench_conv.py).
COL_BUFFER_BYTES = 16 * 2**20


class _Geometry(NamedTuple):
    """Everything the kernels need; padding is (top, left): bottom/right follow from the sizes."""

    kernel: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int
    image: tuple  # (H, W) of the image side
    features: tuple  # (OH, OW) of the feature side

    def flat(self):
        return (*self.kernel, *self.stride, *self.padding, *self.dilation)

    def is_pointwise(self):
        """1x1, stride 1, no padding: im2col is the identity and the convolution a plain matmul."""
        return (self.kernel == (1, 1) and self.stride == (1, 1) and self.padding == (0, 0)
                and self.image == self.features)


# -- kernels -------------------------------------------------------------------------------------------

@kernel
def _valid_columns(off, sw, W, OW):
    """The output columns j in [j0, j1) whose source column j*sw + off lies inside [0, W)."""
    j0 = 0 if off >= 0 else (-off + sw - 1) // sw
    j1 = (W - off + sw - 1) // sw
    j1 = max(j0, min(OW, j1))
    return min(j0, OW), j1


@kernel(parallel=True)
def _im2col(x, col, b0, r0, OW, kh, kw, sh, sw, ph, pw, dh, dw):
    """col[b, (c, p, q), (i, j)] = x[b0 + b, c, (r0 + i) sh + p dh - ph, j sw + q dw - pw] (0 outside)."""
    nb, K, n = col.shape
    nr = n // OW
    H, W = x.shape[2], x.shape[3]
    for t in prange(nb * K):
        b, k = t // K, t % K
        c, p, q = k // (kh * kw), (k // kw) % kh, k % kw
        off = q * dw - pw
        j0, j1 = _valid_columns(off, sw, W, OW)
        for i in range(nr):
            row = col[b, k, i * OW:(i + 1) * OW]
            y = (r0 + i) * sh + p * dh - ph
            if y < 0 or y >= H:
                row[:] = 0
                continue
            src = x[b0 + b, c, y]
            row[:j0] = 0
            for j in range(j0, j1):
                row[j] = src[j * sw + off]
            row[j1:] = 0


@kernel(parallel=True)
def _col2im(col, x, b0, r0, OW, kh, kw, sh, sw, ph, pw, dh, dw):
    """The adjoint of _im2col: x[b0 + b, c, ...] += every column entry im2col copied from there.
    One thread owns one (image, channel) plane of x, so the scatter is race-free."""
    nb, K, n = col.shape
    nr = n // OW
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    for t in prange(nb * C):
        b, c = t // C, t % C
        for p in range(kh):
            for q in range(kw):
                k = (c * kh + p) * kw + q
                off = q * dw - pw
                j0, j1 = _valid_columns(off, sw, W, OW)
                for i in range(nr):
                    y = (r0 + i) * sh + p * dh - ph
                    if y < 0 or y >= H:
                        continue
                    dst = x[b0 + b, c, y]
                    src = col[b, k, i * OW:(i + 1) * OW]
                    for j in range(j0, j1):
                        dst[j * sw + off] += src[j]


# -- the three routines ------------------------------------------------------------------------------

def _tiles(n_images, out_rows, row_bytes):
    """Split (images, output rows) into tiles whose column matrix fits COL_BUFFER_BYTES: whole images
    when one fits, else bands of rows of one image (at least one row). Returns (tiles, buffer bytes),
    each tile (b0, b1, r0, r1)."""
    cap = COL_BUFFER_BYTES
    image_bytes = out_rows * row_bytes
    if image_bytes <= cap:
        step = max(1, cap // max(image_bytes, 1))
        tiles = [(b, min(n_images, b + step), 0, out_rows) for b in range(0, n_images, step)]
        return tiles, min(step, n_images) * image_bytes
    rows = max(1, cap // row_bytes)
    tiles = [(b, b + 1, r, min(out_rows, r + rows))
             for b in range(n_images) for r in range(0, out_rows, rows)]
    return tiles, min(rows, out_rows) * row_bytes


def _column_tiles(x_side, geo):
    """Tiles and a reusable column buffer for an image side of shape (N, C, H, W)."""
    N, C = x_side[0], x_side[1]
    OH, OW = geo.features
    K = C * geo.kernel[0] * geo.kernel[1]
    itemsize = np.dtype(x_side[2]).itemsize
    tiles, nbytes = _tiles(N, OH, K * OW * itemsize)
    return tiles, np.empty(nbytes // itemsize, x_side[2]), K


def _correlate(x, w, geo, bias=None):
    """Y = W @ im2col(X) (+ bias): X (N, C, H, W), W (O, C/g, kh, kw) -> Y (N, O, OH, OW)."""
    N, g, O = x.shape[0], geo.groups, w.shape[0]
    OH, OW = geo.features
    L = OH * OW
    y = np.empty((N, O, OH, OW), x.dtype)
    wm = w.reshape(g, O // g, -1)
    yv = y.reshape(N, g, O // g, L)
    if geo.is_pointwise():
        np.matmul(wm, x.reshape(N, g, -1, L), out=yv)
        if bias is not None:
            yv += bias.reshape(g, O // g, 1)
        return y
    tiles, buf, K = _column_tiles((N, x.shape[1], x.dtype), geo)
    for b0, b1, r0, r1 in tiles:
        nb, n = b1 - b0, (r1 - r0) * OW
        col = buf[:nb * K * n].reshape(nb, K, n)
        _im2col(x, col, b0, r0, OW, *geo.flat())
        out = yv[b0:b1, :, :, r0 * OW:r1 * OW]
        np.matmul(wm, col.reshape(nb, g, K // g, n), out=out)
        if bias is not None:  # while the tile is still in cache
            out += bias.reshape(g, O // g, 1)
    return y


def _correlate_adjoint(y, w, geo, c_out, bias=None):
    """X = col2im(W^T @ Y) (+ bias): Y (N, O, OH, OW), W (O, C/g, kh, kw) -> X (N, C, H, W)."""
    N, g, O = y.shape[0], geo.groups, w.shape[0]
    H, W = geo.image
    OH, OW = geo.features
    L = OH * OW
    wt = w.reshape(g, O // g, -1).transpose(0, 2, 1)  # (g, C/g * kh * kw, O/g)
    yv = y.reshape(N, g, O // g, L)
    if geo.is_pointwise():
        x = np.matmul(wt, yv).reshape(N, c_out, H, W)
    else:
        x = np.zeros((N, c_out, H, W), y.dtype)
        tiles, buf, K = _column_tiles((N, c_out, y.dtype), geo)
        for b0, b1, r0, r1 in tiles:
            nb, n = b1 - b0, (r1 - r0) * OW
            col = buf[:nb * K * n].reshape(nb, K, n)
            np.matmul(wt, yv[b0:b1, :, :, r0 * OW:r1 * OW], out=col.reshape(nb, g, K // g, n))
            _col2im(col, x, b0, r0, OW, *geo.flat())
    if bias is not None:
        x += bias.reshape(1, c_out, 1, 1)
    return x


def _weight_grad(x, y, geo, w_shape):
    """dW = sum_n Y_n @ im2col(X_n)^T: X (N, C, H, W), Y (N, O, OH, OW) -> dW (O, C/g, kh, kw)."""
    N, g, O = x.shape[0], geo.groups, y.shape[1]
    OH, OW = geo.features
    L = OH * OW
    yv = y.reshape(N, g, O // g, L)
    if geo.is_pointwise():
        cols = x.reshape(N, g, -1, L).transpose(0, 1, 3, 2)
        return np.matmul(yv, cols).sum(axis=0).reshape(w_shape)
    dw = np.zeros((g, O // g, w_shape[1] * w_shape[2] * w_shape[3]), x.dtype)
    tiles, buf, K = _column_tiles((N, x.shape[1], x.dtype), geo)
    for b0, b1, r0, r1 in tiles:
        nb, n = b1 - b0, (r1 - r0) * OW
        col = buf[:nb * K * n].reshape(nb, K, n)
        _im2col(x, col, b0, r0, OW, *geo.flat())
        cols = col.reshape(nb, g, K // g, n).transpose(0, 1, 3, 2)
        dw += np.matmul(yv[b0:b1, :, :, r0 * OW:r1 * OW], cols).sum(axis=0)
    return dw.reshape(w_shape)


# -- Functions ---------------------------------------------------------------------------------------

class Conv2d(Function):
    @staticmethod
    def forward(ctx, x, w, b=None, *, geo):
        x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
        ctx.save_for_backward(x, w)
        ctx.geo = geo
        return _correlate(x, w, geo, b)

    @staticmethod
    def backward(ctx, g):  # dL/dx = col2im(W^T g), dL/dW = sum_n g_n im2col(x_n)^T, dL/db = sum g
        x, w = ctx.saved_tensors
        nx, nw, nb = ctx.needs_input_grad
        g = np.ascontiguousarray(g)
        gx = _correlate_adjoint(g, w, ctx.geo, x.shape[1]) if nx else None
        gw = _weight_grad(x, g, ctx.geo, w.shape) if nw else None
        gb = g.sum(axis=(0, 2, 3)) if nb else None
        return gx, gw, gb


class ConvTranspose2d(Function):
    @staticmethod
    def forward(ctx, x, w, b=None, *, geo):
        x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
        ctx.save_for_backward(x, w)
        ctx.geo = geo
        return _correlate_adjoint(x, w, geo, w.shape[1] * geo.groups, b)

    @staticmethod
    def backward(ctx, g):  # dL/dx = W im2col(g) (= conv2d), dL/dW = sum_n x_n im2col(g_n)^T, dL/db = sum g
        x, w = ctx.saved_tensors
        nx, nw, nb = ctx.needs_input_grad
        g = np.ascontiguousarray(g)
        gx = _correlate(g, w, ctx.geo) if nx else None
        gw = _weight_grad(g, x, ctx.geo, w.shape) if nw else None
        gb = g.sum(axis=(0, 2, 3)) if nb else None
        return gx, gw, gb


# -- validation and the public wrappers ---------------------------------------------------------------

def _pair(name, arg, value, minimum):
    """An int or a pair of ints, each >= minimum, as a tuple of two Python ints."""
    items = (value, value) if isinstance(value, (int, np.integer)) else value
    if (not isinstance(items, (tuple, list)) or len(items) != 2
            or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items)):
        raise ValueError(f"{name}: {arg} must be an int or a pair of ints, got {value!r}")
    if isinstance(value, bool) or any(v < minimum for v in items):
        raise ValueError(f"{name}: {arg} must be >= {minimum}, got {value!r}")
    return int(items[0]), int(items[1])


def _check_operands(name, x, w, b):
    """4-D float input and weight of one dtype; bias 1-D of that dtype. Returns the three arrays."""
    xa, wa = data_of(x), data_of(w)
    ba = None if b is None else data_of(b)
    for arg, a in (("input", xa), ("weight", wa), ("bias", ba)):
        if a is not None and a.dtype not in (np.float32, np.float64):
            raise TypeError(f"{name}: {arg} must be float32 or float64, got dtype {a.dtype}")
    if xa.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D input (N, C, H, W), got input of shape {xa.shape} "
                         f"(weight {wa.shape})")
    if wa.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D weight, got weight of shape {wa.shape} "
                         f"(input {xa.shape})")
    for arg, a in (("weight", wa), ("bias", ba)):
        if a is not None and a.dtype != xa.dtype:
            raise TypeError(f"{name}: {arg} dtype {a.dtype} differs from input dtype {xa.dtype}")
    return xa, wa, ba


def _check_bias(name, ba, channels, wa):
    if ba is not None and ba.shape != (channels,):
        raise ValueError(f"{name}: bias of shape {ba.shape} must have shape ({channels},) to match "
                         f"weight {wa.shape}")


def _check_groups(name, groups, xa, wa, dividend, what):
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"{name}: groups must be a positive int, got {groups!r}")
    if dividend % groups:
        raise ValueError(f"{name}: groups={groups} does not divide the {dividend} {what} of weight "
                         f"{wa.shape} (input {xa.shape})")


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation, as torch.nn.functional.conv2d.

    x (N, C, H, W); weight (O, C/groups, kh, kw); bias (O,) or None -> (N, O, OH, OW) with
    OH = floor((H + 2 ph - dh (kh - 1) - 1) / sh) + 1. stride, dilation: int or (h, w), default 1;
    padding: int or (h, w) (zeros, default 0), "valid" (= 0) or "same" (output size = input size,
    stride 1 only; an odd total padding puts the extra pixel at the bottom/right, as torch)."""
    name = "conv2d"
    xa, wa, ba = _check_operands(name, x, weight, bias)
    stride = _pair(name, "stride", stride, 1)
    dilation = _pair(name, "dilation", dilation, 1)
    kernel = wa.shape[2:]
    _check_groups(name, groups, xa, wa, wa.shape[0], "output channels")
    if xa.shape[1] != wa.shape[1] * groups:
        raise ValueError(f"{name}: input {xa.shape} has {xa.shape[1]} channels but weight {wa.shape} "
                         f"with groups={groups} expects {wa.shape[1] * groups}")
    _check_bias(name, ba, wa.shape[0], wa)
    H, W = xa.shape[2:]
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"{name}: padding must be an int, a pair, 'same' or 'valid', got {padding!r}")
        if padding == "same" and stride != (1, 1):
            raise ValueError(f"{name}: padding='same' is not supported for strided convolutions "
                             f"(stride={stride})")
        # "same": total padding d (k - 1), top/left total // 2, the odd pixel at the bottom/right (torch)
        total = [d * (k - 1) if padding == "same" else 0 for k, d in zip(kernel, dilation)]
        pad = (total[0] // 2, total[1] // 2)
    else:
        pad = _pair(name, "padding", padding, 0)
        total = [2 * p for p in pad]
    padded = (H + total[0], W + total[1])
    extent = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    if padded[0] < extent[0] or padded[1] < extent[1]:
        raise ValueError(f"{name}: kernel {tuple(kernel)} with dilation {dilation} spans {extent}, larger "
                         f"than the padded input {padded} (input {xa.shape}, weight {wa.shape})")
    out = tuple((p - e) // s + 1 for p, e, s in zip(padded, extent, stride))
    geo = _Geometry(tuple(kernel), stride, pad, dilation, int(groups), (H, W), out)
    return Conv2d.apply(x, weight, bias, geo=geo)


def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-D transposed convolution (the adjoint of conv2d in its input), as torch's conv_transpose2d.

    x (N, C, H, W); weight (C, O/groups, kh, kw); bias (O,) or None -> (N, O, OH, OW) with
    OH = (H - 1) sh - 2 ph + dh (kh - 1) + oph + 1. stride, dilation: int or (h, w), default 1;
    padding: int or (h, w), default 0; output_padding (default 0) must be smaller than stride or
    dilation."""
    name = "conv_transpose2d"
    xa, wa, ba = _check_operands(name, x, weight, bias)
    stride = _pair(name, "stride", stride, 1)
    dilation = _pair(name, "dilation", dilation, 1)
    pad = _pair(name, "padding", padding, 0)
    out_pad = _pair(name, "output_padding", output_padding, 0)
    kernel = wa.shape[2:]
    _check_groups(name, groups, xa, wa, wa.shape[0], "input channels")
    if xa.shape[1] != wa.shape[0]:
        raise ValueError(f"{name}: input {xa.shape} has {xa.shape[1]} channels but weight {wa.shape} "
                         f"expects {wa.shape[0]}")
    c_out = wa.shape[1] * groups
    _check_bias(name, ba, c_out, wa)
    for op, s, d in zip(out_pad, stride, dilation):
        if op >= max(s, d):
            raise ValueError(f"{name}: output_padding {out_pad} must be smaller than stride {stride} "
                             f"or dilation {dilation}")
    H, W = xa.shape[2:]
    out = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1
                for i, s, p, d, k, op in zip((H, W), stride, pad, dilation, kernel, out_pad))
    if out[0] < 1 or out[1] < 1:
        raise ValueError(f"{name}: output size {out} is below 1 (input {xa.shape}, weight {wa.shape}, "
                         f"stride {stride}, padding {pad}, dilation {dilation})")
    geo = _Geometry(tuple(kernel), stride, pad, dilation, int(groups), out, (H, W))
    return ConvTranspose2d.apply(x, weight, bias, geo=geo)

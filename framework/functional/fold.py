"""unfold / fold (torch.nn.functional's): sliding blocks to columns and back, an adjoint pair
written once -- unfold's backward is fold and fold's backward is unfold -- on conv.py's own
im2col / col2im kernels (_im2col.py).

unfold: (N, C, H, W) -> (N, C kh kw, L), column (c, p, q) of block l = (i, j) holds
x[n, c, i sh + p dh - ph, j sw + q dw - pw] (0 in the padding), L = OH OW with
OH = floor((H + 2 ph - dh (kh - 1) - 1) / sh) + 1. fold sums the columns back into
(N, C, H, W) (overlaps add up)."""
from __future__ import annotations

import numpy as np

from .._check import ArgumentTypeError
from ..autograd import Function
from ._im2col import col2im, im2col


def _unfold(x, geo):
    (kh, kw), (dh, dw), (ph, pw), (sh, sw), (OH, OW) = geo
    n, c, h, w = x.shape
    col = np.empty((n, c * kh * kw, OH * OW), x.dtype)
    if col.size:
        im2col(np.ascontiguousarray(x).reshape(n, c, h * w), w, col, 0, 0, OW, kh, kw, sh, sw,
               ph, pw, dh, dw)
    return col


def _fold(col, size, geo):
    (kh, kw), (dh, dw), (ph, pw), (sh, sw), (OH, OW) = geo
    (h, w), n = size, col.shape[0]
    c = col.shape[1] // (kh * kw)
    x = np.zeros((n, c, h * w), col.dtype)
    if col.size:
        col2im(np.ascontiguousarray(col), x, w, 0, 0, OW, 0, h, kh, kw, sh, sw, ph, pw, dh, dw)
    return x.reshape(n, c, h, w)


class Unfold(Function):
    @staticmethod
    def forward(ctx, x, *, geo):
        ctx.meta = (x.shape[2:], geo)
        return _unfold(x, geo)

    @staticmethod
    def backward(ctx, g):  # dL/dx = fold(g): each column entry back where it was copied from
        size, geo = ctx.meta
        return _fold(g, size, geo)


class Fold(Function):
    @staticmethod
    def forward(ctx, col, *, size, geo):
        ctx.geo = geo
        return _fold(col, size, geo)

    @staticmethod
    def backward(ctx, g):  # dL/dcol = unfold(g)
        return _unfold(g, ctx.geo)


def _pair(owner, name, v, low):
    vals = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if len(vals) != 2 or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool)
                                 and i >= low for i in vals):
        raise ArgumentTypeError(f"{owner}: {name} must be an int >= {low} or a pair of them, "
                                f"got {v!r}")
    return tuple(int(i) for i in vals)


def _geometry(owner, size, kernel_size, dilation, padding, stride):
    k, d = _pair(owner, "kernel_size", kernel_size, 1), _pair(owner, "dilation", dilation, 1)
    p, s = _pair(owner, "padding", padding, 0), _pair(owner, "stride", stride, 1)
    blocks = tuple((n + 2 * pi - di * (ki - 1) - 1) // si + 1
                   for n, ki, di, pi, si in zip(size, k, d, p, s))
    if min(blocks) < 1:
        raise ValueError(f"{owner}: a {k} kernel (dilation {d}, padding {p}) does not fit a "
                         f"{tuple(size)} image: no sliding block")
    return k, d, p, s, blocks


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """torch.nn.functional.unfold: (N, C, H, W) -> (N, C kh kw, L) sliding blocks as columns
    (each of kernel_size, dilation, padding, stride an int or a pair); an unbatched (C, H, W)
    gives (C kh kw, L). Differentiable."""
    if input.ndim == 3:
        return unfold(input.unsqueeze(0), kernel_size, dilation, padding, stride).squeeze(0)
    if input.ndim != 4:
        raise ValueError(f"unfold: expects a 4-D (N, C, H, W) input, got shape {input.shape}")
    geo = _geometry("unfold", input.shape[2:], kernel_size, dilation, padding, stride)
    return Unfold.apply(input, geo=geo)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """torch.nn.functional.fold: (N, C kh kw, L) columns summed back into (N, C, H, W) with
    (H, W) = output_size; L must be the number of blocks unfold gives there; an unbatched
    (C kh kw, L) gives (C, H, W). Differentiable."""
    if input.ndim == 2:
        return fold(input.unsqueeze(0), output_size, kernel_size, dilation, padding,
                    stride).squeeze(0)
    size = _pair("fold", "output_size", output_size, 1)
    if input.ndim != 3:
        raise ValueError(f"fold: expects a 3-D (N, C*kh*kw, L) input, got shape {input.shape}")
    geo = _geometry("fold", size, kernel_size, dilation, padding, stride)
    kh, kw = geo[0]
    if input.shape[1] % (kh * kw):
        raise ValueError(f"fold: {input.shape[1]} channels are not a multiple of the kernel's "
                         f"{kh} x {kw} = {kh * kw}")
    blocks = geo[4][0] * geo[4][1]
    if input.shape[2] != blocks:
        raise ValueError(f"fold: {input.shape[2]} blocks given; output_size {size} with these "
                         f"settings has {geo[4][0]} x {geo[4][1]} = {blocks}")
    return Fold.apply(input, size=size, geo=geo)

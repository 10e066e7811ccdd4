"""pixel_shuffle and pixel_unshuffle (torch's channel order): each is the other's inverse, and since
both are permutations of the elements, each is also the other's backward."""
from __future__ import annotations

import numpy as np

from .._check import float_array, int_arg
from .._jit import kernel, launch, prange
from ..autograd import Function
from .rows import SERIAL_ELEMS

__all__ = ["pixel_shuffle", "pixel_unshuffle"]


@kernel(parallel=True)
def _permute(x, out, r, to_space):
    """The one index map of both directions, space[n, c, h r + a, w r + b] = depth[n, c r^2 + a r + b,
    h, w]: to_space copies depth x into space `out`, else space x into depth `out`. One pass (numpy's
    transposed copy of the 6-D view was slower: docs/benchmarks.md), the (n, c) planes on numba's
    threads."""
    N, C = out.shape[0], (out.shape[1] if to_space else x.shape[1])
    H, W = (x.shape[2], x.shape[3]) if to_space else (out.shape[2], out.shape[3])
    for t in prange(N * C):
        n, c = t // C, t % C
        for h in range(H):
            for a in range(r):  # the r^2 rows of depth that fill the r rows of space at h, in turn
                for b in range(r):
                    k = c * r * r + a * r + b
                    if to_space:
                        src, dst = x[n, k, h], out[n, c, h * r + a]
                        for w in range(W):
                            dst[w * r + b] = src[w]
                    else:
                        src, dst = x[n, c, h * r + a], out[n, k, h]
                        for w in range(W):
                            dst[w] = src[w * r + b]


def _shuffle(x, r):
    """(N, C r^2, H, W) -> (N, C, H r, W r): out[n, c, h r + a, w r + b] = x[n, c r^2 + a r + b, h, w]."""
    N, Cr2, H, W = x.shape
    out = np.empty((N, Cr2 // (r * r), H * r, W * r), x.dtype)
    launch(_permute, x.size < SERIAL_ELEMS, np.ascontiguousarray(x), out, r, True)
    return out


def _unshuffle(x, r):
    """(N, C, H r, W r) -> (N, C r^2, H, W), the inverse of _shuffle."""
    N, C, Hr, Wr = x.shape
    out = np.empty((N, C * r * r, Hr // r, Wr // r), x.dtype)
    launch(_permute, x.size < SERIAL_ELEMS, np.ascontiguousarray(x), out, r, False)
    return out


class PixelShuffleFunction(Function):
    @staticmethod
    def forward(ctx, x, *, r):
        ctx.r = r
        return _shuffle(x, r)

    @staticmethod
    def backward(ctx, g):  # a permutation: dL/dx = its inverse applied to g
        return _unshuffle(g, ctx.r)


class PixelUnshuffleFunction(Function):
    @staticmethod
    def forward(ctx, x, *, r):
        ctx.r = r
        return _unshuffle(x, r)

    @staticmethod
    def backward(ctx, g):  # a permutation: dL/dx = its inverse applied to g
        return _shuffle(g, ctx.r)


def _check(name, arg, x, r):
    a = float_array(name, "input", x)
    if a.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D input (N, C, H, W), got shape {a.shape}")
    return a, int_arg(name, arg, r)


def pixel_shuffle(x, upscale_factor):
    """Rearrange (N, C r^2, H, W) -> (N, C, H r, W r) with r = upscale_factor, as torch (ESPCN's
    sub-pixel upsampling): out[n, c, h r + a, w r + b] = x[n, c r^2 + a r + b, h, w]."""
    a, r = _check("pixel_shuffle", "upscale_factor", x, upscale_factor)
    if a.shape[1] % (r * r):
        raise ValueError(f"pixel_shuffle: input {a.shape} has {a.shape[1]} channels, not divisible by "
                         f"upscale_factor^2 = {r * r}")
    return PixelShuffleFunction.apply(x, r=r)


def pixel_unshuffle(x, downscale_factor):
    """Rearrange (N, C, H r, W r) -> (N, C r^2, H, W) with r = downscale_factor: the inverse of
    pixel_shuffle, as torch."""
    a, r = _check("pixel_unshuffle", "downscale_factor", x, downscale_factor)
    if a.shape[2] % r or a.shape[3] % r:
        raise ValueError(f"pixel_unshuffle: input {a.shape} has height {a.shape[2]} and width "
                         f"{a.shape[3]}, not both divisible by downscale_factor {r}")
    return PixelUnshuffleFunction.apply(x, r=r)

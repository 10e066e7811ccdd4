"""Copies of permuted arrays into C order through 16 x 16 register transposes (_simd.vtranspose16).

A transformer's tokens (N, HW, C) and an image's planes (N, C, H, W) are the same values in two
memory orders; where one is read in the other's order (a conv of permuted tokens, a residual add of
a conv's output to tokens, a Reshape of a permuted array) numpy copies or iterates with one side
strided, ~1 ns an element. `contiguous(x)` copies a permutation that swaps two runs of axes after
the same leading ones (memory order (B, Q, P) read as (B, P, Q)) tile by tile instead: the values
are moved, never computed, so the result is np.ascontiguousarray's bit for bit.
"""
from __future__ import annotations

import math

import numpy as np

from .._jit import kernel, prange
from .._simd import vtranspose16, wide
from ._util import memory_order

MIN_ELEMS = 1 << 14  # below, numpy's copy costs less than a parallel region


def swap(x):
    """(order, B, Q, P) where x's memory is x.transpose(order), C-contiguous, of shape (B, Q, P) (the
    leading axes, then the axes that come last in x, then those between) with x itself (B, P, Q):
    a swap of two runs of axes; else None."""
    order = memory_order(x)
    if order is None:
        return None
    nd = x.ndim
    for s in range(nd):
        for k in range(s + 1, nd):
            if order == tuple(range(s)) + tuple(range(k, nd)) + tuple(range(s, k)):
                return order, math.prod(x.shape[:s]), math.prod(x.shape[k:]), math.prod(x.shape[s:k])
    return None


_CHUNK = 256  # columns of src a task transposes: tasks enough for every thread on one image


@kernel(parallel=True)
def _swap_copy(src, dst, B, Q, P):
    """dst (B, P, Q) = src (B, Q, P) transposed per leading index, both flat, Q and P at least 16: 16
    x 16 tiles through registers, a task per 16 rows and _CHUNK columns of src. A strip or a chunk
    that ends inside a tile is done by the tile that ends at its end (overlapping its neighbour's:
    those elements are written twice, with the same values)."""
    nq, nc = -(-Q // 16), -(-P // _CHUNK)
    for t in prange(B * nq * nc):
        wide()
        b, r = t // (nq * nc), t % (nq * nc)
        q0 = min((r // nc) * 16, Q - 16)
        c0 = (r % nc) * _CHUNK
        c1 = min(P, c0 + _CHUNK)
        s0, d0 = b * Q * P, b * P * Q
        p0 = c0
        while p0 < c1:
            p = min(p0, P - 16)
            vtranspose16(src, s0 + q0 * P + p, P, dst, d0 + p * Q + q0, Q)
            p0 += 16


def contiguous(x):
    """np.ascontiguousarray(x) (the same bits, C order): by tiles in registers where x is a large
    float array whose memory order swaps two runs of its axes (`swap`), else numpy's copy."""
    if x.flags.c_contiguous:
        return x
    if x.dtype in (np.float32, np.float64) and x.size >= MIN_ELEMS:
        split = swap(x)
        if split is not None and min(split[2], split[3]) >= 16:
            order, B, Q, P = split
            out = np.empty(x.shape, x.dtype)
            _swap_copy(x.transpose(order).reshape(-1), out.reshape(-1), B, Q, P)
            return out
    return np.ascontiguousarray(x)

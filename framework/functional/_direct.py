"""Direct convolution for conv.py's stride-1 correlations: each output summed where it is stored,
vectorised over output channels, with the sums in registers (_simd.py's explicit vectors).

The forward keeps, per register block, 8 output pixels of one row x `lanes` output channels in 8
vector accumulators, and adds into them one kernel tap of one input channel at a time: a vector of
weights (wt[o-block, c, i, j], the lanes contiguous) times one input pixel in every lane. The weight
gradient keeps 8 taps (c, i, j) x `lanes` output channels and runs over every output pixel of the
batch: a vector of the gradient (channels last) times one input pixel per tap. Each output element is
one fused multiply-add chain in a fixed order (c, i, j for the forward; image, row, column for the
weight gradient), so the result does not depend on the tiles, the threads or the vector width, and is
the same on every CPU (vfma rounds once, in hardware or in libm).

    correlate(x, w, ...)    y  = act(W * x + b)       conv2d forward; conv2d's dL/dx (flipped kernel)
    weight_grad(x, g, ...)  dW = sum_n g_n * x_n      conv2d's weight gradient

The input is zero-padded once (a band of rows per tile), so the inner loops have no edges.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import _simd
from .._jit import kernel
from .._simd import vadd, vfma, vload, vsplat, vstore, wide
from ._im2col import valid_range

P = 8  # output pixels (forward) or taps (weight gradient) per register block: a0..a7 below
# Products per partial sum of the forward: each output is a sum of blocks of about this many
# (channels x taps), each a chain from 0 added to the running total. One chain over all C kh kw terms
# had up to 5x im2col's float32 error, over all N OH OW pixels of the weight gradient 15x; the weight
# gradient's blocks are rows of about sqrt(N OH OW) pixels (docs/benchmarks.md).
BLOCK_TERMS = 128


ALIGN = 64  # bytes: a vector load or store within one cache line (split ones cost ~13% here)


def _aligned(a):
    """The 1-D array a from its first ALIGN-byte boundary (a has ALIGN bytes to spare)."""
    return a[(-a.ctypes.data % ALIGN) // a.itemsize:]


def _aligned_empty(shape, dtype):
    n = int(np.prod(shape))
    return _aligned(np.empty(n + ALIGN // np.dtype(dtype).itemsize, dtype))[:n].reshape(shape)


def padded_width(OW, kw):
    """Width of the padded input rows the forward reads: whole blocks of P output pixels."""
    return -(-OW // P) * P + kw - 1


@kernel
def _pad(x, xp, b0, top, left):
    """xp[b, c, i, j] = x[b0 + b, c, top + i, j - left], 0 outside x: a band of padded rows."""
    nb, C, rows, Wp = xp.shape
    H, W = x.shape[2], x.shape[3]
    i0, i1 = valid_range(top, 1, H, rows)
    j0, j1 = valid_range(-left, 1, W, Wp)
    for t in range(nb * C):
        b, c = t // C, t % C
        for i in range(rows):
            row = xp[b, c, i]
            if i < i0 or i >= i1:
                for j in range(Wp):
                    row[j] = 0
                continue
            for j in range(j0):
                row[j] = 0
            d, s = row[j0:j1], x[b0 + b, c, top + i, j0 - left:]
            for j in range(d.shape[0]):
                d[j] = s[j]
            for j in range(j1, Wp):
                row[j] = 0


@kernel
def _channels_last(g, gt, b0):
    """gt[b, h w, o] = g[b0 + b, o, h, w] (channels past g's: 0): the weight gradient's layout."""
    nb, HW, Opad = gt.shape
    O = g.shape[1]
    for b in range(nb):
        src = g[b0 + b]
        dst = gt[b]
        for o in range(O):
            s = src[o]
            for q in range(HW):
                dst[q, o] = s[q]
        for q in range(HW):
            d = dst[q]
            for o in range(O, Opad):
                d[o] = 0


@functools.lru_cache(maxsize=None)
def _correlate_kernel(L):
    """The forward kernel for blocks of L output channels (a compile-time constant)."""

    @kernel
    def correlate(xp, wt, bias, y, b0, r0, cb, slope, act, acc):
        """y[b0 + b, o, r0 + h, w] = act(sum_{c, i, j} wt[o // L, c, i, j, o % L] xp[b, c, h + i,
        w + j] + bias[o]) for the nb padded images (or bands) xp (nb, C, rows + kh - 1, Wp); the sum
        in blocks of cb channels (each a chain from 0, then added to the running total, the first
        block's chain starting from the bias); act: 0 none, 1 relu (slope 0) or leaky relu. acc:
        scratch of P L (the running totals)."""
        wide()
        nb, C, Hp, _ = xp.shape
        OB, _, kh, kw, _ = wt.shape
        O, OW = y.shape[1], y.shape[3]
        rows = Hp - kh + 1
        zero = y.dtype.type(0)
        for t in range(nb * OB * rows):
            b, ob, h = t // (OB * rows), (t // rows) % OB, t % rows
            for w0 in range(0, OW, P):
                for c0 in range(0, C, cb):
                    a0 = vload(bias, ob * L, L) if c0 == 0 else vsplat(zero, L)
                    a1 = a2 = a3 = a4 = a5 = a6 = a7 = a0
                    for c in range(c0, min(C, c0 + cb)):
                        for i in range(kh):
                            xr, wr = xp[b, c, h + i, w0:], wt[ob, c, i]
                            for j in range(kw):
                                wv = vload(wr[j], 0, L)
                                a0 = vfma(wv, vsplat(xr[j], L), a0)
                                a1 = vfma(wv, vsplat(xr[j + 1], L), a1)
                                a2 = vfma(wv, vsplat(xr[j + 2], L), a2)
                                a3 = vfma(wv, vsplat(xr[j + 3], L), a3)
                                a4 = vfma(wv, vsplat(xr[j + 4], L), a4)
                                a5 = vfma(wv, vsplat(xr[j + 5], L), a5)
                                a6 = vfma(wv, vsplat(xr[j + 6], L), a6)
                                a7 = vfma(wv, vsplat(xr[j + 7], L), a7)
                    if c0 > 0:
                        a0 = vadd(vload(acc, 0, L), a0)
                        a1 = vadd(vload(acc, L, L), a1)
                        a2 = vadd(vload(acc, 2 * L, L), a2)
                        a3 = vadd(vload(acc, 3 * L, L), a3)
                        a4 = vadd(vload(acc, 4 * L, L), a4)
                        a5 = vadd(vload(acc, 5 * L, L), a5)
                        a6 = vadd(vload(acc, 6 * L, L), a6)
                        a7 = vadd(vload(acc, 7 * L, L), a7)
                    vstore(acc, 0, a0)
                    vstore(acc, L, a1)
                    vstore(acc, 2 * L, a2)
                    vstore(acc, 3 * L, a3)
                    vstore(acc, 4 * L, a4)
                    vstore(acc, 5 * L, a5)
                    vstore(acc, 6 * L, a6)
                    vstore(acc, 7 * L, a7)
                n = min(P, OW - w0)
                for l in range(min(L, O - ob * L)):
                    yr = y[b0 + b, ob * L + l, r0 + h, w0:w0 + n]
                    for p in range(n):
                        v = acc[p * L + l]
                        if act:  # as activation.rectify_: relu sends -0 to +0, NaN stays NaN
                            v = (zero if v <= zero else v) if slope == zero else (v if v > zero else v * slope)
                        yr[p] = v

    return correlate


@functools.lru_cache(maxsize=None)
def _weight_grad_kernel(L):
    """The weight-gradient kernel for blocks of L output channels (a compile-time constant)."""

    @kernel
    def weight_grad(xf, gf, offsets, Wp, OW, rb, dwt, ob, t0, t1):
        """dwt[ob, t, l] = sum_{b, h, w} g[b, h, w, ob L + l] xf[b, offsets[t] + h Wp + w] for the
        taps t in [t0, t1) (a multiple of P apart; offsets padded to whole blocks): per image, per
        block of rb rows, a chain from 0 over the block's pixels, added to the running total in
        that order. xf (nb, C Hp Wp): flat padded images; gf (nb, OH OW Opad): the gradient
        channels last, flat."""
        wide()
        nb, Opad = gf.shape[0], dwt.shape[0] * L
        OH = gf.shape[1] // (OW * Opad)
        zero = vsplat(dwt.dtype.type(0), L)
        for t in range(t0, t1, P):
            f0, f1, f2, f3 = offsets[t], offsets[t + 1], offsets[t + 2], offsets[t + 3]
            f4, f5, f6, f7 = offsets[t + 4], offsets[t + 5], offsets[t + 6], offsets[t + 7]
            d = dwt[ob]
            for q in range(P):
                vstore(d[t + q], 0, zero)
            for b in range(nb):
                xb, gb = xf[b], gf[b]
                for h0 in range(0, OH, rb):
                    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero
                    for h in range(h0, min(OH, h0 + rb)):
                        s = h * Wp  # each tap's row as a view from 0: no negative-index wrap (_jit.py)
                        x0, x1, x2, x3 = xb[f0 + s:], xb[f1 + s:], xb[f2 + s:], xb[f3 + s:]
                        x4, x5, x6, x7 = xb[f4 + s:], xb[f5 + s:], xb[f6 + s:], xb[f7 + s:]
                        gr = gb[h * OW * Opad + ob * L:]
                        for w in range(OW):
                            gv = vload(gr, w * Opad, L)
                            a0 = vfma(gv, vsplat(x0[w], L), a0)
                            a1 = vfma(gv, vsplat(x1[w], L), a1)
                            a2 = vfma(gv, vsplat(x2[w], L), a2)
                            a3 = vfma(gv, vsplat(x3[w], L), a3)
                            a4 = vfma(gv, vsplat(x4[w], L), a4)
                            a5 = vfma(gv, vsplat(x5[w], L), a5)
                            a6 = vfma(gv, vsplat(x6[w], L), a6)
                            a7 = vfma(gv, vsplat(x7[w], L), a7)
                    vstore(d[t], 0, vadd(vload(d[t], 0, L), a0))
                    vstore(d[t + 1], 0, vadd(vload(d[t + 1], 0, L), a1))
                    vstore(d[t + 2], 0, vadd(vload(d[t + 2], 0, L), a2))
                    vstore(d[t + 3], 0, vadd(vload(d[t + 3], 0, L), a3))
                    vstore(d[t + 4], 0, vadd(vload(d[t + 4], 0, L), a4))
                    vstore(d[t + 5], 0, vadd(vload(d[t + 5], 0, L), a5))
                    vstore(d[t + 6], 0, vadd(vload(d[t + 6], 0, L), a6))
                    vstore(d[t + 7], 0, vadd(vload(d[t + 7], 0, L), a7))

    return weight_grad


def _blocks(n, L):
    return -(-n // L)


def correlate(x, w, features, padding, bias, slope, tiles, run):
    """conv.py's _correlate for a stride-1, undilated, ungrouped kernel, with the activation fused
    (slope None: none, 0: relu, > 0: leaky relu). x (N, C, H, W), w (O, C, kh, kw) -> (N, O, OH, OW)
    with features = (OH, OW); tiles (b0, b1, r0, r1) over (images, output rows); `run(tasks, work,
    elems, dtype)` runs them with a buffer of elems per worker."""
    N, C = x.shape[:2]
    O, _, kh, kw = w.shape
    OH, OW = features
    dt = x.dtype
    L = _simd.lanes(8 * dt.itemsize)
    OB = _blocks(O, L)
    wt = _aligned_empty((OB, C, kh, kw, L), dt)  # (o-block, c, i, j, lane): a tap's lanes contiguous
    for ob in range(OB):
        n = min(L, O - ob * L)
        wt[ob, ..., :n] = w[ob * L:ob * L + n].transpose(1, 2, 3, 0)
        wt[ob, ..., n:] = 0
    b = np.zeros(OB * L, dt)
    if bias is not None:
        b[:O] = bias
    y = np.empty((N, O, OH, OW), dt)
    Wp = padded_width(OW, kw)
    kern = _correlate_kernel(L)
    act, s = slope is not None, dt.type(0 if slope is None else slope)
    cb = max(1, BLOCK_TERMS // (kh * kw))
    slack = ALIGN // dt.itemsize
    elems = max([(b1 - b0) * C * (r1 - r0 + kh - 1) * Wp for b0, b1, r0, r1 in tiles], default=0) + P * L + slack

    def work(tile, buf):
        b0, b1, r0, r1 = tile
        buf = _aligned(buf)
        n = (b1 - b0) * C * (r1 - r0 + kh - 1) * Wp
        xp = buf[P * L:P * L + n].reshape(b1 - b0, C, r1 - r0 + kh - 1, Wp)
        _pad(x, xp, b0, r0 - padding[0], padding[1])
        kern(xp, wt, b, y, b0, r0, cb, s, act, buf[:P * L])

    run(tiles, work, elems, dt)
    return y


def weight_grad(x, g, padding, kernel_size, image_tiles, run, workers):
    """conv.py's _weight_grad for a stride-1, undilated, ungrouped kernel: x (N, C, H, W), g (N, O,
    OH, OW) -> dW (O, C, kh, kw). image_tiles: (b0, b1) ranges for the layout pass."""
    N, C = x.shape[:2]
    O, OH, OW = g.shape[1:]
    kh, kw = kernel_size
    dt = x.dtype
    L = _simd.lanes(8 * dt.itemsize)
    OB = _blocks(O, L)
    Hp, Wp = OH + kh - 1, OW + kw - 1
    xp = np.empty((N, C, Hp, Wp), dt)
    gt = _aligned_empty((N, OH * OW, OB * L), dt)

    def layout(tile, buf):
        b0, b1 = tile
        _pad(x, xp[b0:b1], b0, -padding[0], padding[1])
        _channels_last(g.reshape(N, O, OH * OW), gt[b0:b1], b0)

    run(image_tiles, layout, 1, dt)
    K = C * kh * kw
    Kpad = _blocks(K, P) * P
    c, i, j = np.unravel_index(np.arange(K), (C, kh, kw))
    offsets = np.zeros(Kpad, np.int64)  # the padded taps read element 0: junk rows, dropped below
    offsets[:K] = (c * Hp + i) * Wp + j
    dwt = _aligned_empty((OB, Kpad, L), dt)
    kern = _weight_grad_kernel(L)
    xf = xp.reshape(N, C * Hp * Wp)
    # tasks: (o-block, a run of whole tap blocks); every sum runs over all pixels in one task
    per = _blocks(Kpad // P, max(1, 2 * workers // OB)) * P
    tasks = [(ob, t0, min(Kpad, t0 + per)) for ob in range(OB) for t0 in range(0, Kpad, per)]

    gf = gt.reshape(N, OH * OW * OB * L)
    rb = max(1, round((N * OH * OW) ** 0.5 / OW))  # about sqrt(terms) blocks of sqrt(terms) terms

    def work(task, buf):
        kern(xf, gf, offsets, Wp, OW, rb, dwt, *task)

    run(tasks, work, 1, dt)
    dw = dwt[:, :K].transpose(0, 2, 1).reshape(OB * L, C, kh, kw)[:O]
    return np.ascontiguousarray(dw)

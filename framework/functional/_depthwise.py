"""conv.py's large-kernel route: depthwise and large-kernel stride-1 correlations as numba loops, with
no column matrix (an im2col of a 17x17 kernel copies every input pixel 289 times).

Two kernels carry the arithmetic, for any groups, dilation and padding at stride 1 (c0 the first
input channel of o's group):

    _forward       y[b, o, i, j]  = bias[o]
                                    + sum_{c, p, q} w[o, c, p, q] x[b, c0 + c, i + p dh - ph, j + q dw - pw]
    _weight_grad   dw[o, c, p, q] = sum_{b, i, j} g[b, o, i, j] x[b, c0 + c, i + p dh - ph, j + q dw - pw]

The input gradient is `_forward` on the flipped kernel (`adjoint`): at stride 1 a correlation's
adjoint is the correlation of the other side with the kernel flipped and its channels transposed
per group, padded by d (k - 1) - p (negative: a crop).

An input that keeps each pixel's channels together (a channels-last view: a transformer's tokens
(N, HW, C) permuted and reshaped into (N, C, H, W)) is read as it is by a depthwise forward
(_forward_last: the band padded pixel-major, 16 channels summed per vector, each output's terms in
_forward's order, so the same bits), whose output keeps that layout; the gradients take the planes.

The input band a block of output rows reads is copied once into a zero-padded plane of width
Wp = OW + dw (kw - 1), flat. In that layout tap (p, q) reads the plane at the fixed offset
p dh Wp + q dw from where it writes (the output block kept at width Wp too), so every tap is one
long multiply-add over the whole block, vectorised, four taps per pass (`_taps`). The weight
gradient sums the same products into one row of partial sums per tap and folds each once (without
fastmath a scalar sum would not vectorise).

Dense convolutions with many multiply-adds per output (FFT_WORK) take the frequency domain instead
(_fftconv.py). Tasks own disjoint outputs (images x output channels x row bands for the forward,
output channels for the weight gradient) and run on conv.py's worker threads (_tiles.run; a forward of
fewer than SERIAL_MACS multiply-adds on the calling thread); every output element gets its terms in
one fixed order (bias, then c, p, q; then b, i, j), so results do not depend on the thread count.
"""
from __future__ import annotations

import functools

import numpy as np

from .._jit import kernel
from .._simd import vadd, vload, vload_part, vmul, vsplat, vstore, vstore_part, wide
from . import _fftconv
from ._direct import ALIGN, _aligned, _aligned_empty
from .rows import like

# The route takes every depthwise convolution (groups == in == out channels) and the dense or grouped
# ones whose kernel has at least LARGE_KERNEL taps and at most LARGE_KERNEL_MAX_CHANNELS input
# channels per group (docs/benchmarks.md, "Where the code's thresholds come from").
LARGE_KERNEL = 7 * 7
LARGE_KERNEL_MAX_CHANNELS = 16
# Bytes of one task's padded planes: whole images of small maps, row bands of large ones.
PLANE_BYTES = 1 << 20
# Below this many multiply-adds a forward (or input gradient) runs its tasks on the calling thread:
# the worker pool's fork/join of 4 tasks a worker cost more than the second core saved (DAT's 48-channel
# 3x3 depthwise convs on 64^2: 0.29 ms inline against 0.41-0.55 on the pool; docs/benchmarks.md).
SERIAL_MACS = 1 << 22
# Dense stride-1 convolutions (groups 1, no dilation) with at least FFT_WORK multiply-adds per output
# value (input channels x taps: PLKSR's 16 x 17^2) go through the frequency domain (_fftconv.py).
FFT_WORK = 2500
# Rows per band of the weight gradient's partial sums (kept in L1 with four taps' rows).
_GRAD_ROWS = 8
_LANES = 16  # partial sums per fold: the fold vectorises, and its order is fixed


def applies(geo, c, o, dense_direct: bool = False):
    """True when these loops compute the stride-1 correlation `geo` between an image side of c
    channels and a feature side of o channels; dense_direct: conv.py's register-blocked direct route
    (_direct.py) takes it, and keeps it (as fast as the frequency domain or faster on PLKSR's 16 -> 16
    17x17, much faster on 7x7: docs/benchmarks.md)."""
    if geo.stride != (1, 1):
        return False
    g = geo.groups
    if g == c == o:
        return True
    kh, kw = geo.kernel
    return not dense_direct and kh * kw >= LARGE_KERNEL and c // g <= LARGE_KERNEL_MAX_CHANNELS


@kernel
def _pad_plane(src, dst, top, left, rows, Wp):
    """dst[r Wp + j] = src[top + r, j - left] for r < rows, j < Wp, zero outside src (H, W): the
    zero-padded band a block of output rows reads; top and left may be negative (padding)."""
    H, W = src.shape
    j0, j1 = min(max(left, 0), Wp), min(max(left + W, 0), Wp)
    for r in range(rows):
        d = dst[r * Wp:(r + 1) * Wp]
        sr = top + r
        if sr < 0 or sr >= H or j1 <= j0:
            for j in range(d.shape[0]):
                d[j] = 0
            continue
        for j in range(j0):
            d[j] = 0
        s, dd = src[sr, j0 - left:j1 - left], d[j0:j1]
        for j in range(dd.shape[0]):
            dd[j] = s[j]
        for j in range(j1, Wp):
            d[j] = 0


@kernel
def _taps(acc, src, offs, wts):
    """acc[m] += sum_t wts[t] src[offs[t] + m] for m < len(acc), taps in order, four per pass (one
    load and store of acc per four multiply-adds)."""
    n, T = acc.shape[0], offs.shape[0]
    t = 0
    while t + 4 <= T:
        w0, w1, w2, w3 = wts[t], wts[t + 1], wts[t + 2], wts[t + 3]
        s0, s1 = src[offs[t]:offs[t] + n], src[offs[t + 1]:offs[t + 1] + n]
        s2, s3 = src[offs[t + 2]:offs[t + 2] + n], src[offs[t + 3]:offs[t + 3] + n]
        for m in range(n):
            acc[m] += w0 * s0[m] + w1 * s1[m] + w2 * s2[m] + w3 * s3[m]
        t += 4
    while t < T:
        w0, s0 = wts[t], src[offs[t]:offs[t] + n]
        for m in range(n):
            acc[m] += w0 * s0[m]
        t += 1


@kernel
def _forward(x, w, bias, y, b0, b1, o0, o1, r0, r1, ph, pw, Hb, Wp, offs, buf):
    """y[b, o, r0:r1] for b in [b0, b1), o in [o0, o1) (module docstring). w (O, C/g, kh kw); bias
    of length 0 for none; the padded planes are Hb = r1 - r0 + dh (kh - 1) rows of Wp; offs the
    taps' offsets in them; buf at least (C/g) Hb Wp + (r1 - r0) Wp elements."""
    C = x.shape[1]
    O, cpg = w.shape[0], w.shape[1]
    OW = y.shape[3]
    opg = O // (C // cpg)
    plane = Hb * Wp
    acc = buf[cpg * plane:cpg * plane + (r1 - r0 - 1) * Wp + OW]
    for b in range(b0, b1):
        for grp in range(o0 // opg, (o1 - 1) // opg + 1):
            for c in range(cpg):
                _pad_plane(x[b, grp * cpg + c], buf[c * plane:(c + 1) * plane], r0 - ph, pw, Hb, Wp)
            for o in range(max(o0, grp * opg), min(o1, (grp + 1) * opg)):
                v = bias[o] if bias.shape[0] else 0
                for m in range(acc.shape[0]):
                    acc[m] = v
                for c in range(cpg):
                    _taps(acc, buf[c * plane:(c + 1) * plane], offs, w[o, c])
                for i in range(r1 - r0):
                    d, s = y[b, o, r0 + i], acc[i * Wp:i * Wp + OW]
                    for j in range(d.shape[0]):
                        d[j] = s[j]


@kernel(inline=True)
def _load(a, i, zero, n):
    """a[i:i + n] in the first n of 16 lanes, 0 in the others: a whole vector where n is 16 (a
    masked load computes its mask at every call)."""
    return vload(a, i, 16) if n == 16 else vload_part(a, i, zero, 0, n)


@kernel
def _forward_last(xf, xs, wt, bias, y, b, r0, r1, ph, pw, Hb, Wp, offs, buf):
    """_forward for a depthwise correlation whose input keeps each pixel's channels together (a
    channels-last view: a transformer's tokens (N, HW, C) permuted and reshaped): rows [r0, r1) of
    image b of y (N, OH, OW, C). x is xf[xs[0] b + xs[1] h + xs[2] w + c] (xf: the memory x spans, as
    a contiguous 1-D view; xs: its element strides, then H, W); wt the taps' weights (kh kw, C)
    flat; offs the taps' offsets in buf. The band is padded into buf as (Hb, Wp, Cp), Cp = C rounded
    up to whole vectors of 16; each output's 16 channels are summed in registers, its terms in
    _forward's order (the bias, then the taps four at a time, their products summed before they are
    added): the same bits as _forward on the same values."""
    wide()
    H, W, C = xs[3], xs[4], y.shape[3]
    OW = y.shape[2]
    T = offs.shape[0]
    Cp = -(-C // 16) * 16  # a pixel's channels in buf: whole vectors, so that every load is aligned
    zero = vsplat(like(0.0, wt[0]), 16)
    for r in range(Hb):
        sr = r0 - ph + r
        for j in range(Wp):
            d = (r * Wp + j) * Cp
            sj = j - pw
            inside = 0 <= sr < H and 0 <= sj < W
            s = xs[0] * b + xs[1] * sr + xs[2] * sj
            for c0 in range(0, C, 16):
                n = min(16, C - c0)
                vstore_part(buf, d + c0, _load(xf, s + c0, zero, n) if inside else zero, 0, n)
    for i in range(r1 - r0):
        row = y[b, r0 + i].reshape(-1)  # (OW, C) C-contiguous: a view
        for c0 in range(0, C, 16):
            n = min(16, C - c0)
            bv = _load(bias, c0, zero, n) if bias.shape[0] else zero
            if n == 16:  # a constant in the inlined loop: its loads and stores unmasked
                _pixels_last(row, buf, wt, offs, bv, zero, i * Wp * Cp + c0, C, Cp, c0, 16, OW, T)
            else:
                _pixels_last(row, buf, wt, offs, bv, zero, i * Wp * Cp + c0, C, Cp, c0, n, OW, T)


@kernel(inline=True)
def _group4(wt, k, C, buf, a, offs, t, zero, n):
    """The sum w_t x_t + ... + w_t+3 x_t+3 (in that order) of one pixel at a in buf."""
    p0 = vmul(_load(wt, k, zero, n), _load(buf, a + offs[t], zero, n))
    p1 = vmul(_load(wt, k + C, zero, n), _load(buf, a + offs[t + 1], zero, n))
    p2 = vmul(_load(wt, k + 2 * C, zero, n), _load(buf, a + offs[t + 2], zero, n))
    p3 = vmul(_load(wt, k + 3 * C, zero, n), _load(buf, a + offs[t + 3], zero, n))
    return vadd(vadd(vadd(p0, p1), p2), p3)


@kernel(inline=True)
def _store(row, i, v, n):
    if n == 16:
        vstore(row, i, v)
    else:
        vstore_part(row, i, v, 0, n)


@kernel(inline=True)
def _pixels_last(row, buf, wt, offs, bv, zero, base, C, Cp, c0, n, OW, T):
    """_forward_last's sums for channels c0..c0 + n of one output row (row: (OW, C) flat; base: the
    row's first pixel and channel c0 in buf, Cp apart), four pixels at a time (four independent
    sums in flight, each weight vector loaded once for the four)."""
    j = 0
    while j + 4 <= OW:
        a = base + j * Cp
        s0 = s1 = s2 = s3 = bv
        t = 0
        while t + 4 <= T:
            k = t * C + c0
            s0 = vadd(s0, _group4(wt, k, C, buf, a, offs, t, zero, n))
            s1 = vadd(s1, _group4(wt, k, C, buf, a + Cp, offs, t, zero, n))
            s2 = vadd(s2, _group4(wt, k, C, buf, a + 2 * Cp, offs, t, zero, n))
            s3 = vadd(s3, _group4(wt, k, C, buf, a + 3 * Cp, offs, t, zero, n))
            t += 4
        while t < T:
            wv = _load(wt, t * C + c0, zero, n)
            s0 = vadd(s0, vmul(wv, _load(buf, a + offs[t], zero, n)))
            s1 = vadd(s1, vmul(wv, _load(buf, a + Cp + offs[t], zero, n)))
            s2 = vadd(s2, vmul(wv, _load(buf, a + 2 * Cp + offs[t], zero, n)))
            s3 = vadd(s3, vmul(wv, _load(buf, a + 3 * Cp + offs[t], zero, n)))
            t += 1
        _store(row, j * C + c0, s0, n)
        _store(row, (j + 1) * C + c0, s1, n)
        _store(row, (j + 2) * C + c0, s2, n)
        _store(row, (j + 3) * C + c0, s3, n)
        j += 4
    while j < OW:
        a = base + j * Cp
        s0 = bv
        t = 0
        while t + 4 <= T:
            s0 = vadd(s0, _group4(wt, t * C + c0, C, buf, a, offs, t, zero, n))
            t += 4
        while t < T:
            s0 = vadd(s0, vmul(_load(wt, t * C + c0, zero, n), _load(buf, a + offs[t], zero, n)))
            t += 1
        _store(row, j * C + c0, s0, n)
        j += 1


@kernel
def _fold(a, part):
    """sum(a) in a fixed order: _LANES partial sums (vectorised), then those in turn."""
    L = part.shape[0]
    for l in range(L):
        part[l] = 0
    n = a.shape[0] // L * L
    for m0 in range(0, n, L):
        s = a[m0:m0 + L]
        for l in range(L):
            part[l] += s[l]
    t = part[0] * 0
    for l in range(L):
        t += part[l]
    for m in range(n, a.shape[0]):
        t += a[m]
    return t


@kernel
def _weight_grad(x, g, dwt, o0, o1, ph, pw, Hp, Wp, offs, R, buf):
    """dwt[o] for o in [o0, o1) (module docstring), dwt (O, C/g, kh kw). The images' padded planes
    are Hp = OH + dh (kh - 1) rows of Wp; g's rows are laid out at width Wp with zeros beyond OW, so
    that bands of R rows are flat runs. buf: at least N Hp Wp + N OH Wp + 4 R Wp + _LANES elements."""
    N, C = x.shape[0], x.shape[1]
    O, cpg, T = dwt.shape
    OH, OW = g.shape[2], g.shape[3]
    opg = O // (C // cpg)
    xp_size, gp_size = Hp * Wp, OH * Wp
    used = gp_size - Wp + OW  # the last row's columns beyond OW would read past the padded plane
    xs = buf[:N * xp_size]
    gs = buf[N * xp_size:N * (xp_size + gp_size)]
    rest = buf[N * (xp_size + gp_size):]
    band = R * Wp
    acc, part = rest[:4 * band], rest[4 * band:4 * band + _LANES]
    for o in range(o0, o1):
        for b in range(N):
            _pad_plane(g[b, o], gs[b * gp_size:(b + 1) * gp_size], 0, 0, OH, Wp)
        cb = (o // opg) * cpg
        for c in range(cpg):
            for b in range(N):
                _pad_plane(x[b, cb + c], xs[b * xp_size:(b + 1) * xp_size], -ph, pw, Hp, Wp)
            for t0 in range(0, T, 4):
                k = min(4, T - t0)
                for m in range(4 * band):
                    acc[m] = 0
                for b in range(N):
                    gb, xb = gs[b * gp_size:(b + 1) * gp_size], xs[b * xp_size:(b + 1) * xp_size]
                    for m0 in range(0, used, band):
                        n = min(band, used - m0)
                        gr = gb[m0:m0 + n]
                        for u in range(k):
                            a, s = acc[u * band:u * band + n], xb[offs[t0 + u] + m0:offs[t0 + u] + m0 + n]
                            for m in range(n):
                                a[m] += gr[m] * s[m]
                for u in range(k):
                    dwt[o, c, t0 + u] = _fold(acc[u * band:(u + 1) * band], part)


@functools.lru_cache(maxsize=256)
def _offsets(kernel, dilation, Wp):
    """Each tap's offset in a padded plane of width Wp, in (p, q) order (read-only: shared)."""
    (kh, kw), (dh, dw) = kernel, dilation
    offs = (np.arange(kh)[:, None] * (dh * Wp) + np.arange(kw)[None, :] * dw).ravel().astype(np.int64)
    offs.flags.writeable = False
    return offs


def _forward_tasks(n, o, opg, rows, row_cap, workers):
    """Disjoint (b0, b1, o0, o1, r0, r1) blocks covering (images, output channels, rows): bands of at
    most row_cap rows, about four blocks per worker (balance on a shared machine), output-channel
    blocks of whole groups when the groups are large."""
    want = 4 * workers
    r_step = min(rows, row_cap)
    bands = [(r0, min(rows, r0 + r_step)) for r0 in range(0, rows, r_step)]
    if n * len(bands) >= want:
        step = max(1, n // want) if len(bands) == 1 else 1
        return [(b, min(n, b + step), 0, o, r0, r1) for b in range(0, n, step) for r0, r1 in bands]
    blocks = min(o, -(-want // (n * len(bands))))
    o_step = -(-o // blocks)
    if opg > 1 and o_step % opg:  # whole groups per block: each block pads its groups' planes once
        o_step = min(o, -(-o_step // opg) * opg)
    return [(b, b + 1, o0, min(o, o0 + o_step), r0, r1)
            for b in range(n) for o0 in range(0, o, o_step) for r0, r1 in bands]


def _by_fft(c, cpg, kernel, dilation):
    """Whether the frequency domain computes this correlation (FFT_WORK)."""
    return cpg == c and dilation == (1, 1) and cpg * kernel[0] * kernel[1] >= FFT_WORK


def _forward_call(x, w, pad, out_hw, bias, run, workers, dilation):
    """y (N, O, *out_hw) = the direct correlation of x with w padded by pad (top, left)."""
    N, C = x.shape[:2]
    O, cpg, kh, kw = w.shape
    if _by_fft(C, cpg, (kh, kw), dilation):
        return _fftconv.correlate(x, w, pad, out_hw, bias)
    if reads_in_place(x, w.shape):
        return _forward_last_call(x, w, pad, out_hw, bias, run, workers, dilation)
    (ph, pw), (dh, dw) = pad, dilation
    OH, OW = out_hw
    Wp = OW + dw * (kw - 1)
    halo = dh * (kh - 1)
    y = np.empty((N, O, *out_hw), x.dtype)
    if y.size == 0:
        return y
    row_cap = max(1, PLANE_BYTES // (x.itemsize * Wp * cpg) - halo)
    serial = N * O * OH * OW * cpg * kh * kw < SERIAL_MACS  # (the split changes no value: each output's
    # terms come in one order)
    tasks = _forward_tasks(N, O, O // (C // cpg), OH, row_cap, 1 if serial else workers)
    rows = max(t[5] - t[4] for t in tasks)
    offs = _offsets((kh, kw), dilation, Wp)
    w3 = np.ascontiguousarray(w).reshape(O, cpg, kh * kw)
    b = np.zeros(0, x.dtype) if bias is None else np.ascontiguousarray(bias, x.dtype)

    def work(t, buf):
        _forward(x, w3, b, y, *t, ph, pw, t[5] - t[4] + halo, Wp, offs, buf)

    run(tasks, work, cpg * (rows + halo) * Wp + rows * Wp, x.dtype, macs=0 if serial else None)  # 0: inline
    return y


def channels_together(x):
    """Whether x (N, C, H, W) keeps each pixel's C channels next to each other in memory (a channels-
    last view, e.g. a transformer's tokens (N, HW, C) permuted and reshaped) rather than in planes:
    the depthwise forward then reads it as it is (_forward_last) instead of copying it into planes."""
    return (x.shape[1] > 1 and x.strides[1] == x.itemsize and not x.flags.c_contiguous
            and all(s >= 0 and s % x.itemsize == 0 for s in x.strides))


def reads_in_place(x, w_shape):
    """Whether this route's forward reads x where it is (_forward_last): a depthwise correlation (w
    (C, 1, kh, kw)) of a channels-together x; conv2d then passes x on without a contiguous copy."""
    return channels_together(x) and w_shape[1] == 1 and w_shape[0] == x.shape[1]


def _span(x):
    """(xf, xs): the memory x (N, C, H, W) spans from its first element as a contiguous 1-D view, and
    (x's N, H, W strides in elements, H, W): what _forward_last reads x through (numba's loads from a
    view of unknown strides would not vectorise)."""
    e = x.itemsize
    n = 1 + sum((d - 1) * s for d, s in zip(x.shape, x.strides)) // e if x.size else 0
    owner = x
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    start = x.ctypes.data - owner.ctypes.data
    if owner.flags.c_contiguous and owner.dtype == x.dtype and start % e == 0:  # a slice of it: cheap
        xf = owner.reshape(-1)[start // e:start // e + n]
    else:
        xf = np.lib.stride_tricks.as_strided(x, shape=(n,), strides=(e,), writeable=False)
    return xf, np.array([x.strides[0] // e, x.strides[2] // e, x.strides[3] // e, x.shape[2], x.shape[3]],
                        np.int64)


def _forward_last_call(x, w, pad, out_hw, bias, run, workers, dilation):
    """_forward_call's depthwise correlation of a channels-together x: y (N, C, OH, OW), a view of a
    channels-last (N, OH, OW, C) array (the layout the input had, so a reader that permutes it back
    into tokens gets a contiguous array), each value _forward's bits."""
    N, C = x.shape[:2]
    _, _, kh, kw = w.shape
    (ph, pw), (dh, dw), (OH, OW) = pad, dilation, out_hw
    y = _aligned_empty((N, OH, OW, C), x.dtype)
    if y.size == 0:
        return y.transpose(0, 3, 1, 2)
    Wp, halo = OW + dw * (kw - 1), dh * (kh - 1)
    serial = N * C * OH * OW * kh * kw < SERIAL_MACS
    want = 1 if serial else -(-4 * workers // N)  # bands per image: about four tasks a worker
    step = max(1, min(-(-OH // want), PLANE_BYTES // (x.itemsize * Wp * -(-C // 16) * 16) - halo))
    tasks = [(b, r0, min(OH, r0 + step)) for b in range(N) for r0 in range(0, OH, step)]
    offs = _offsets((kh, kw), dilation, Wp)
    wt = np.ascontiguousarray(w.reshape(C, kh * kw).T).reshape(-1)
    b = np.zeros(0, x.dtype) if bias is None else np.ascontiguousarray(bias, x.dtype)
    xf, xs = _span(x)
    Cp = -(-C // 16) * 16  # _forward_last's pixel in buf
    offs = offs * Cp

    def work(t, buf):
        _forward_last(xf, xs, wt, b, y, t[0], t[1], t[2], ph, pw, t[2] - t[1] + halo, Wp, offs, _aligned(buf))

    run(tasks, work, (step + halo) * Wp * Cp + ALIGN // x.itemsize, x.dtype, macs=0 if serial else None)
    return y.transpose(0, 3, 1, 2)


def correlate(x, w, geo, bias, run, workers):
    """conv.py's _correlate by the direct route: x (N, C, H, W), w (O, C/g, kh, kw) -> (N, O, OH, OW)."""
    return _forward_call(x, w, geo.padding, geo.features, bias, run, workers, geo.dilation)


def flip(w, groups, c):
    """W (O, C/g, kh, kw) -> the kernel of the adjoint correlation (C, O/g, kh, kw): flipped, channels
    transposed within each group."""
    O, _, kh, kw = w.shape
    wf = w.reshape(groups, O // groups, c // groups, kh, kw)[:, :, :, ::-1, ::-1].transpose(0, 2, 1, 3, 4)
    return np.ascontiguousarray(wf).reshape(c, O // groups, kh, kw)


def adjoint(y, w, geo, c_out, bias, run, workers):
    """conv.py's _correlate_adjoint by the direct route: y (N, O, OH, OW), w (O, C/g, kh, kw) ->
    x (N, C, H, W), the forward correlation of y with the flipped kernel, padded d (k - 1) - p."""
    (kh, kw), (dh, dw), (ph, pw) = geo.kernel, geo.dilation, geo.padding
    pad = (dh * (kh - 1) - ph, dw * (kw - 1) - pw)
    return _forward_call(y, flip(w, geo.groups, c_out), pad, geo.image, bias, run, workers, geo.dilation)


def weight_grad(x, y, geo, w_shape, run, workers):
    """conv.py's _weight_grad by the direct route: x (N, C, H, W), y (N, O, OH, OW) -> dW w_shape."""
    O, cpg, kh, kw = w_shape
    dwt = np.zeros((O, cpg, kh * kw), x.dtype)
    if x.shape[0] == 0 or y.size == 0:
        return dwt.reshape(w_shape)
    if _by_fft(x.shape[1], cpg, (kh, kw), geo.dilation):
        return _fftconv.weight_grad(x, y, geo.padding, w_shape)
    (ph, pw), (dh, dw) = geo.padding, geo.dilation
    N, (OH, OW) = x.shape[0], geo.features
    Wp = OW + dw * (kw - 1)
    Hp = OH + dh * (kh - 1)
    R = max(1, min(OH, _GRAD_ROWS))
    step = -(-O // min(O, 4 * workers))
    tasks = [(o0, min(O, o0 + step)) for o0 in range(0, O, step)]
    offs = _offsets((kh, kw), geo.dilation, Wp)

    def work(task, buf):
        _weight_grad(x, y, dwt, *task, ph, pw, Hp, Wp, offs, R, buf)

    run(tasks, work, N * (Hp + OH) * Wp + 4 * R * Wp + _LANES, x.dtype)
    return dwt.reshape(w_shape)

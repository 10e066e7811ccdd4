"""Direct convolution for conv.py's stride-1 correlations: each output summed where it is stored,
with the sums in registers (_simd.py's explicit vectors).

The forward keeps, per register block, a few output channels x a vector of consecutive output pixels
in vector accumulators (forward_block: 8 x 32 float32 in 16 zmm with AVX-512, 6 x 16 in 12 ymm with
AVX2) and adds into them one kernel tap of one input channel at a time: one weight in every lane
times a vector of input pixels. The image side is zero-padded once into flat planes of rows
Wp = OW + kw - 1 wide, and the output is computed at every flat position q = h Wp + w, so that tap
(i, j) of the whole block is one contiguous load at q + i Wp + j; the kw - 1 junk positions at the end
of each row are never stored (the block goes into the output by masked stores, with the activation).
The weight gradient keeps a few taps (c, i, j) x a vector of output channels (weight_grad_block) and
runs over every output pixel of the batch: a vector of the gradient (channels last) times one input
pixel per tap.

Each output element is one fused multiply-add chain in a fixed order (channels in blocks, then
(c, i, j) within a block for the forward; images, rows and columns for the weight gradient), so the
result does not depend on the tiles, the threads or the register blocking, and is the same on every
CPU (vfma rounds once, in hardware or in libm).

    correlate(x, w, ...)    y  = act(W * x + b)       conv2d forward; conv2d's dL/dx (flipped kernel)
    weight_grad(x, g, ...)  dW = sum_n g_n * x_n      conv2d's weight gradient
"""
from __future__ import annotations

import functools
import math
import types

import numba
import numpy as np

from .. import _simd
from .._jit import kernel, prange
from .._simd import vadd, vfma, vleaky, vload, vload_part, vrelu, vsplat, vstore, vstore_part, wide
from ._im2col import valid_range

MAX_BLOCK = 8  # output channels (forward) or taps (weight gradient) per register block: a0..a7 below
# Products per partial sum of the forward: each output is a sum of blocks of about this many
# (channels x taps), each a chain from 0 added to the running total. One chain over all C kh kw terms
# had up to 5x im2col's float32 error, over all N OH OW pixels of the weight gradient 15x; the weight
# gradient's blocks are rows of about sqrt(N OH OW) pixels (docs/benchmarks.md).
BLOCK_TERMS = 128
ALIGN = 64  # bytes: a vector load or store within one cache line (split ones cost ~13% here)


def _aligned(a):
    """The 1-D array a from its first ALIGN-byte boundary (a has ALIGN bytes to spare)."""
    return a[(-a.__array_interface__["data"][0] % ALIGN) // a.itemsize:]


def _aligned_empty(shape, dtype):
    """An empty array of `shape` whose data starts on an ALIGN-byte boundary (AMX tile rows and
    vector loads within cache lines)."""
    n = math.prod(shape) if isinstance(shape, (tuple, list)) else int(shape)
    return _aligned(np.empty(n + ALIGN // np.dtype(dtype).itemsize, dtype))[:n].reshape(shape)


def _blocks(n, L):
    return -(-n // L)


def row_elems(C, OW, kw):
    """Buffer elements per output row of the forward: its padded input row."""
    return C * (OW + kw - 1)


def plane_sizes(rows, OW, kh, kw, L):
    """(Wp, Q, S) of a band of `rows` output rows: padded row width, flat output positions (whole
    vectors of L) and the padded input plane's length (what the last vector's taps read)."""
    Wp = OW + kw - 1
    Q = _blocks(rows * Wp, L) * L
    return Wp, Q, Q + (kh - 1) * Wp + kw - 1


@kernel
def _pad(x, xf, b0, top, left, Wp):
    """xf[b, c, i Wp + j] = x[b0 + b, c, top + i, j - left], 0 outside x, for the rows i that fit in
    xf's planes; 0 past the last whole row: a band of padded rows as flat planes."""
    nb, C, S = xf.shape
    H, W = x.shape[2], x.shape[3]
    rows = S // Wp
    i0, i1 = valid_range(top, 1, H, rows)
    j0, j1 = valid_range(-left, 1, W, Wp)
    for t in range(nb * C):
        b, c = t // C, t % C
        plane = xf[b, c]
        for i in range(rows):
            row = plane[i * Wp:(i + 1) * Wp]
            if i < i0 or i >= i1:
                for j in range(Wp):
                    row[j] = 0
                continue
            for j in range(j0):
                row[j] = 0
            d, src = row[j0:j1], x[b0 + b, c, top + i, j0 - left:]
            for j in range(d.shape[0]):
                d[j] = src[j]
            for j in range(j1, Wp):
                row[j] = 0
        tail = plane[rows * Wp:]
        for j in range(tail.shape[0]):
            tail[j] = 0


@kernel
def _channels_last(g, gt, b0):
    """gt[b, q, o] = g[b0 + b, o, q] (channels past g's: 0): the weight gradient's layout, in blocks
    of 16 pixels (their rows of gt stay in L1 while every channel writes into them)."""
    nb, HW, Opad = gt.shape
    O = g.shape[1]
    for b in range(nb):
        src, dst = g[b0 + b], gt[b]
        for q0 in range(0, HW, 16):
            n = min(16, HW - q0)
            for o in range(O):
                s = src[o, q0:q0 + n]
                for q in range(n):
                    dst[q0 + q, o] = s[q]
            for q in range(q0, q0 + n):
                d = dst[q]
                for o in range(O, Opad):
                    d[o] = 0


@kernel
def _put(y, b, o, h, off, v, lo, hi, slope, act, res, residual):
    """y[b, o, h, off + p] = act(v[p]) (+ res[b, o, h, off + p] if residual) for lanes lo <= p < hi,
    if channel o exists; act: 0 none, 1 relu (slope 0) or leaky relu, as activation.rectify_. The
    residual's add is the one an Add op after the conv would do: the activated value rounded to the
    dtype, plus the other operand, rounded once."""
    if o < y.shape[1]:
        if act:
            v = vrelu(v) if slope == 0 else vleaky(v, slope)
        if residual:
            v = vadd(v, vload_part(res[b, o, h], off, v, lo, hi))
        vstore_part(y[b, o, h], off, v, lo, hi)


@kernel
def _store(y, b, r0, rows, o, NP, q, Wp, L, slope, act, res, residual, a0, a1, a2, a3, a4, a5, a6, a7):
    """The finished block: output channels o..o + NP - 1 at the L flat positions q..q + L - 1 =
    h Wp + w, into y[b, o + k, r0 + h, w] for the pixels of the band (w < OW, h < rows): one masked
    store per channel and row it covers."""
    OW = y.shape[3]
    p = q
    while p < q + L:
        h, w = p // Wp, p % Wp
        if w >= OW:  # a row's junk end
            p += Wp - w
            continue
        n = min(OW - w, q + L - p)
        if h < rows:
            lo, off = p - q, q - h * Wp
            for k, v in ((0, a0), (1, a1), (2, a2), (3, a3), (4, a4), (5, a5), (6, a6), (7, a7)):
                if k < NP:
                    _put(y, b, o + k, r0 + h, off, v, lo, lo + n, slope, act, res, residual)
        p += n


@functools.lru_cache(maxsize=None)
def _correlate_kernel(L, NP):
    """The forward kernel for blocks of NP <= 8 output channels x L pixels (compile-time constants:
    the accumulators past NP are dead code)."""

    @kernel
    def correlate(xf, wt, bias, y, b0, r0, rows, Wp, cb, slope, act, acc, res, residual):
        """y[b0 + b, o, r0 + h, w] = act(sum_{c, i, j} wt[o // NP, c, i, j, o % NP] xf[b, c, q + i Wp
        + j] + bias[o]) at every flat position q = h Wp + w of the band of `rows` rows (a whole
        number of vectors of L; the junk ones dropped by _store); the sum in blocks of cb channels,
        each a chain from 0 (the first from the bias) added to the running total in acc (8 L);
        with `residual`, res (y's shape) added to each activated output (_put)."""
        wide()
        nb, C, S = xf.shape
        OB, _, kh, kw, _ = wt.shape
        Q = (rows * Wp + L - 1) // L * L
        zero = vsplat(acc.dtype.type(0), L)
        for t in range(nb * (Q // L)):
            b, q = t // (Q // L), t % (Q // L) * L
            for ob in range(OB):  # every output block while the band's input near q is in cache
                o = ob * NP
                for c0 in range(0, C, cb):
                    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero
                    if c0 == 0:
                        a0, a1 = vsplat(bias[o], L), vsplat(bias[o + 1], L)
                        a2, a3 = vsplat(bias[o + 2], L), vsplat(bias[o + 3], L)
                        a4, a5 = vsplat(bias[o + 4], L), vsplat(bias[o + 5], L)
                        if NP > 6:
                            a6, a7 = vsplat(bias[o + 6], L), vsplat(bias[o + 7], L)
                    for c in range(c0, min(C, c0 + cb)):
                        xc = xf[b, c, q:]
                        for i in range(kh):
                            for j in range(kw):
                                xv = vload(xc, i * Wp + j, L)
                                wr = wt[ob, c, i, j]
                                a0 = vfma(vsplat(wr[0], L), xv, a0)
                                a1 = vfma(vsplat(wr[1], L), xv, a1)
                                a2 = vfma(vsplat(wr[2], L), xv, a2)
                                a3 = vfma(vsplat(wr[3], L), xv, a3)
                                a4 = vfma(vsplat(wr[4], L), xv, a4)
                                a5 = vfma(vsplat(wr[5], L), xv, a5)
                                if NP > 6:
                                    a6 = vfma(vsplat(wr[6], L), xv, a6)
                                    a7 = vfma(vsplat(wr[7], L), xv, a7)
                    if c0 > 0:  # the block's sums onto the running totals
                        a0, a1 = vadd(vload(acc, 0, L), a0), vadd(vload(acc, L, L), a1)
                        a2, a3 = vadd(vload(acc, 2 * L, L), a2), vadd(vload(acc, 3 * L, L), a3)
                        a4, a5 = vadd(vload(acc, 4 * L, L), a4), vadd(vload(acc, 5 * L, L), a5)
                        if NP > 6:
                            a6, a7 = vadd(vload(acc, 6 * L, L), a6), vadd(vload(acc, 7 * L, L), a7)
                    if c0 + cb >= C:
                        _store(y, b0 + b, r0, rows, o, NP, q, Wp, L, slope, act, res, residual,
                               a0, a1, a2, a3, a4, a5, a6, a7)
                        continue
                    vstore(acc, 0, a0)
                    vstore(acc, L, a1)
                    vstore(acc, 2 * L, a2)
                    vstore(acc, 3 * L, a3)
                    vstore(acc, 4 * L, a4)
                    vstore(acc, 5 * L, a5)
                    if NP > 6:
                        vstore(acc, 6 * L, a6)
                        vstore(acc, 7 * L, a7)

    return correlate


@functools.lru_cache(maxsize=None)
def _weight_grad_kernel(L, NT):
    """The weight-gradient kernel for blocks of NT <= 8 taps x L output channels (compile-time
    constants: the accumulators past NT are dead code)."""

    @kernel
    def weight_grad(xf, gf, offsets, Wp, OW, rb, dwt, ob, t0, t1):
        """dwt[ob, t, l] = sum_{b, h, w} g[b, h, w, ob L + l] xf[b, offsets[t] + h Wp + w] for the
        taps t in [t0, t1) (a multiple of NT apart; offsets padded to whole blocks and 8 more): per
        image, per block of rb rows, a chain from 0 over the block's pixels, added to the running
        total in that order. xf (nb, C Hp Wp): flat padded images; gf (nb, OH OW Opad): the gradient
        channels last, flat. Every tap block runs over one block of rows before the next block, so
        the gradient's rows stay in L1 (a whole batch's did not fit in L2)."""
        wide()
        nb, Opad = gf.shape[0], dwt.shape[0] * L
        OH = gf.shape[1] // (OW * Opad)
        d = dwt[ob]
        zero = vsplat(dwt.dtype.type(0), L)
        for t in range(t0, t1):
            vstore(d[t], 0, zero)
        for b in range(nb):
            xb, gb = xf[b], gf[b]
            for h0 in range(0, OH, rb):
                for t in range(t0, t1, NT):
                    f0, f1, f2, f3 = offsets[t], offsets[t + 1], offsets[t + 2], offsets[t + 3]
                    f4, f5, f6, f7 = offsets[t + 4], offsets[t + 5], offsets[t + 6], offsets[t + 7]
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
                            if NT > 6:
                                a6 = vfma(gv, vsplat(x6[w], L), a6)
                                a7 = vfma(gv, vsplat(x7[w], L), a7)
                    vstore(d[t], 0, vadd(vload(d[t], 0, L), a0))
                    vstore(d[t + 1], 0, vadd(vload(d[t + 1], 0, L), a1))
                    vstore(d[t + 2], 0, vadd(vload(d[t + 2], 0, L), a2))
                    vstore(d[t + 3], 0, vadd(vload(d[t + 3], 0, L), a3))
                    vstore(d[t + 4], 0, vadd(vload(d[t + 4], 0, L), a4))
                    vstore(d[t + 5], 0, vadd(vload(d[t + 5], 0, L), a5))
                    if NT > 6:
                        vstore(d[t + 6], 0, vadd(vload(d[t + 6], 0, L), a6))
                        vstore(d[t + 7], 0, vadd(vload(d[t + 7], 0, L), a7))

    return weight_grad


def forward_block(dtype):
    """(output channels, pixels) per register block of the forward: 8 x two registers of lanes with
    AVX-512's 32 registers (16 accumulators), 6 x two with AVX2's 16 (12; 8 x one was 5-17% slower,
    8 x two spilled: docs/benchmarks.md)."""
    return (MAX_BLOCK if _simd.has_avx512() else 6), 2 * _simd.lanes(8 * np.dtype(dtype).itemsize)


def weight_grad_block(O, dtype):
    """(taps, output channels) per register block of the weight gradient, as the forward's, with one
    register of output channels where O fits in one (RRDBNet's 16-channel dense convs)."""
    taps, lanes = forward_block(dtype)
    return taps, lanes // 2 if O <= lanes // 2 else lanes


def _tile_sizes(tile, C, OW, kh, kw, dtype):
    """(Wp, S, elems) of a tile: padded row width, plane length (a whole number of ALIGN bytes, so
    that every plane starts aligned) and its buffer: MAX_BLOCK L running totals, then the planes."""
    b0, b1, r0, r1 = tile
    L, slack = forward_block(dtype)[1], ALIGN // np.dtype(dtype).itemsize
    Wp, _, S = plane_sizes(r1 - r0, OW, kh, kw, L)
    S = _blocks(S, slack) * slack
    return Wp, S, MAX_BLOCK * L + (b1 - b0) * C * S


def buffer_elems(tiles, C, OW, kh, kw, dtype):
    """Elements of the buffer the forward needs per worker for these tiles (with room to align)."""
    slack = ALIGN // np.dtype(dtype).itemsize
    return max([_tile_sizes(t, C, OW, kh, kw, dtype)[2] for t in tiles], default=0) + slack


def _with_globals(fn, **names):
    """fn with `names` added to its globals. A driver reaches its (L, NP)-specific tile kernel as a
    global, not a closure cell: numba freezes a global into the machine code, but hashes a closure's
    cells into the on-disk cache's key, and a kernel pickles differently in every process (so the
    precompiled driver never matched the run's)."""
    return types.FunctionType(fn.__code__, dict(fn.__globals__, **names), fn.__name__, fn.__defaults__,
                              fn.__closure__)


@functools.lru_cache(maxsize=None)
def _correlate_tiles_kernel(L, NP):
    """The forward over every tile in one parallel region: a tile is padded into its thread's buffer
    and computed there (one numba fork/join per call, not a Python thread pool's)."""

    def correlate_tiles(x, wt, bias, y, tiles, top, left, Wp, cb, slope, act, bufs, res, residual):
        """tiles (T, 5): b0, b1, r0, r1 and the plane length S of each tile; bufs (threads, elems):
        each thread's running totals (MAX_BLOCK L elements), then its tile's planes; res: added to
        the output where `residual` (else unread: y itself)."""
        C, A = x.shape[1], MAX_BLOCK * L
        variant = (L, NP)  # noqa: F841 (closure cells: the cache key tells the variants apart)
        for k in prange(tiles.shape[0]):
            b0, b1, r0, r1, S = tiles[k, 0], tiles[k, 1], tiles[k, 2], tiles[k, 3], tiles[k, 4]
            buf = bufs[numba.get_thread_id()]
            xf = buf[A:A + (b1 - b0) * C * S].reshape((b1 - b0, C, S))
            _pad(x, xf, b0, r0 - top, left, Wp)
            _tile_kernel(xf, wt, bias, y, b0, r0, r1 - r0, Wp, cb, slope, act, buf[:A], res, residual)

    return kernel(parallel=True)(_with_globals(correlate_tiles, _tile_kernel=_correlate_kernel(L, NP)))


def _thread_buffers(elems, dtype):
    """(threads, elems) scratch, every row starting on an ALIGN-byte boundary."""
    slack = ALIGN // np.dtype(dtype).itemsize
    return _aligned_empty((numba.get_num_threads(), _blocks(elems, slack) * slack), dtype)


def pack(w, bias, dt):
    """The forward's weight layout (o-block, c, i, j, o % NP) and its zero-padded bias, from
    w (O, C, kh, kw) and bias (O,) or None: made per call by `correlate`, or once by a captured
    inference graph (framework/capture) for weights that no longer change."""
    O, C, kh, kw = w.shape
    NP, _ = forward_block(dt)
    OB = _blocks(O, NP)
    wt = _aligned_empty((OB, C, kh, kw, NP), dt)  # (o-block, c, i, j, o % NP): a tap's weights together
    whole = O // NP * NP  # the whole blocks in one copy, the partial last one (zero-filled) apart
    wt[:O // NP] = w[:whole].reshape(O // NP, NP, C, kh, kw).transpose(0, 2, 3, 4, 1)
    if whole < O:
        wt[-1] = 0
        wt[-1, ..., :O - whole] = w[whole:].transpose(1, 2, 3, 0)
    b = np.zeros(OB * NP + MAX_BLOCK, dt)  # (a0..a7 read past the last block)
    if bias is not None:
        b[:O] = bias
    return wt, b


def correlate(x, w, features, padding, bias, slope, tiles, elems, packed=None, residual=None):
    """conv.py's _correlate for a stride-1, undilated, ungrouped kernel, with the activation fused
    (slope None: none, 0: relu, > 0: leaky relu). x (N, C, H, W), w (O, C, kh, kw) -> (N, O, OH, OW)
    with features = (OH, OW); tiles (b0, b1, r0, r1) over (images, output rows), run on numba's
    threads with a buffer of elems (buffer_elems) each. `packed`: pack(w, bias, x.dtype), if
    already made. `residual`: an array of the output's shape and dtype added to every (activated)
    output as it is stored, the bits of `y + residual` computed after (a captured graph's fused
    Add, framework/capture/_lower.py)."""
    N, C = x.shape[:2]
    O, _, kh, kw = w.shape
    OH, OW = features
    dt = x.dtype
    NP, L = forward_block(dt)
    wt, b = pack(w, bias, dt) if packed is None else packed
    y = np.empty((N, O, OH, OW), dt)
    if residual is not None and (residual.shape != y.shape or residual.dtype != dt):
        raise ValueError(f"direct conv: residual {residual.shape} {residual.dtype} is not the output's "
                         f"{y.shape} {dt}")
    res = y if residual is None else np.ascontiguousarray(residual)
    act, s = slope is not None, dt.type(0 if slope is None else slope)
    cb = _blocks(C, _blocks(C * kh * kw, BLOCK_TERMS))  # channels per block, the blocks even
    table = np.array([(*t, _tile_sizes(t, C, OW, kh, kw, dt)[1]) for t in tiles], np.int64).reshape(-1, 5)
    _correlate_tiles_kernel(L, NP)(x, wt, b, y, table, padding[0], padding[1], OW + kw - 1, cb, s, act,
                                   _thread_buffers(elems, dt), res, residual is not None)
    return y


@kernel(parallel=True)
def _weight_grad_layout(x, g, xf, gt, top, left, Wp):
    """xf: x padded into flat planes (_pad); gt: g channels last (_channels_last), image by image.
    (A separate region from the kernel's: numba mis-ran the two loops in one parallel function.)"""
    for b in prange(x.shape[0]):
        _pad(x, xf[b:b + 1], b, top, left, Wp)
        _channels_last(g, gt[b:b + 1], b)


@functools.lru_cache(maxsize=None)
def _weight_grad_tasks_kernel(L, NT):
    """The weight gradient's tasks in one parallel region."""

    def weight_grad_tasks(xf, gf, offsets, Wp, OW, rb, dwt, tasks):
        """tasks (T, 3): an output-channel block and a run [t0, t1) of whole tap blocks each."""
        variant = (L, NT)  # noqa: F841 (closure cells: the cache key tells the variants apart)
        for k in prange(tasks.shape[0]):
            _task_kernel(xf, gf, offsets, Wp, OW, rb, dwt, tasks[k, 0], tasks[k, 1], tasks[k, 2])

    return kernel(parallel=True)(_with_globals(weight_grad_tasks, _task_kernel=_weight_grad_kernel(L, NT)))


def weight_grad(x, g, padding, kernel_size, workers):
    """conv.py's _weight_grad for a stride-1, undilated, ungrouped kernel: x (N, C, H, W), g (N, O,
    OH, OW) -> dW (O, C, kh, kw); workers: the threads the tasks are cut for."""
    N, C = x.shape[:2]
    O, OH, OW = g.shape[1:]
    kh, kw = kernel_size
    dt = x.dtype
    NT, L = weight_grad_block(O, dt)
    OB = _blocks(O, L)
    Hp, Wp = OH + kh - 1, OW + kw - 1
    xf = np.empty((N, C, Hp * Wp), dt)
    gt = _aligned_empty((N, OH * OW, OB * L), dt)
    _weight_grad_layout(x, g.reshape(N, O, OH * OW), xf, gt, -padding[0], padding[1], Wp)
    K = C * kh * kw
    Kpad = _blocks(K, NT) * NT
    c, i, j = np.unravel_index(np.arange(K), (C, kh, kw))
    offsets = np.zeros(Kpad + MAX_BLOCK, np.int64)  # padded taps read element 0: junk, dropped below
    offsets[:K] = (c * Hp + i) * Wp + j
    dwt = _aligned_empty((OB, Kpad, L), dt)
    # tasks: (o-block, a run of whole tap blocks); every sum runs over all pixels in one task
    per = _blocks(Kpad // NT, max(1, 2 * workers // OB)) * NT
    tasks = np.array([(ob, t0, min(Kpad, t0 + per)) for t0 in range(0, Kpad, per) for ob in range(OB)],
                     np.int64).reshape(-1, 3)
    rb = max(1, round((N * OH * OW) ** 0.5 / OW))  # about sqrt(terms) blocks of sqrt(terms) terms
    _weight_grad_tasks_kernel(L, NT)(xf.reshape(N, C * Hp * Wp), gt.reshape(N, OH * OW * OB * L), offsets,
                                     Wp, OW, rb, dwt, tasks)
    dw = dwt[:, :K].transpose(0, 2, 1).reshape(OB * L, C, kh, kw)[:O]
    return np.ascontiguousarray(dw)

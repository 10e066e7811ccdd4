"""The direct convolution (_direct.py) with bfloat16 operands and float32 sums: AVX512-BF16's
vdpbf16ps (_simd.vdot_bf16), for conv.py under `autocast("bf16")` (framework/precision.py).

vdpbf16ps multiplies pairs of bfloat16 and adds both products to one float32 lane, so the operands
are repacked into pairs of adjacent terms of each sum, one uint32 per pair (low half: the even term):

- forward (and the input gradient, which is the forward of the flipped kernel): pairs of input
  channels. The image side is rounded and padded into flat planes of channel pairs (nb, C/2, S),
  the weight into (o-block, C/2, kh, kw, NP); a block of NP output channels x L pixels adds, per
  channel pair and tap, one pair of weights (in every lane) times a vector of L pixels' pairs.
- weight gradient: pairs of adjacent flat output positions q = h Wp + w over the padded width
  (the junk positions w >= OW hold a zero gradient), so that a pair of the padded input at tap
  offset f + q is two adjacent elements: a vector of L output channels' gradient pairs times one
  input pair in every lane.

Each operand is rounded once per call to bfloat16 by round to nearest even (NaN to 0x7FC0), as
torch's `.to(torch.bfloat16)`. Every output is a chain in a fixed order ((sum + p_odd) + p_even per
pair, each add rounded to float32; blocks of about BLOCK_TERMS terms, each a chain from 0 added to
the running total), so results do not depend on tiles or threads. docs/numerics.md gives the bound.

    correlate(x, w, ...)    y  = act(bf16(W) * bf16(x) + b)    conv2d forward; its dL/dx (flipped)
    weight_grad(x, g, ...)  dW = sum_n bf16(g_n) * bf16(x_n)   conv2d's weight gradient
"""
from __future__ import annotations

import functools

import numba
import numpy as np

from .._jit import kernel, prange
from .._simd import vadd, vdot_bf16, vload, vsplat, vstore, wide
from ._direct import (ALIGN, BLOCK_TERMS, MAX_BLOCK, _aligned_empty, _blocks, _store, _with_globals,
                      plane_sizes)
from ._im2col import valid_range

L_FORWARD = 32  # pixels per accumulator: two zmm registers (8 x 2 of AVX-512's 32 hold the block)
NAN_BF16 = 0x7FC0  # torch's bfloat16 of every NaN


def round_bits(a):
    """float32 array -> its bfloat16 bit patterns (uint16), rounded to nearest even as torch's
    `.to(torch.bfloat16)` (NaN to 0x7FC0): the numpy reference of `_rne`."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32)
    r = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    r[np.isnan(a)] = NAN_BF16
    return r


def widen(bits):
    """bfloat16 bit patterns (uint16) -> the float32 values they stand for (exact)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


@kernel
def _rne(u):
    """The bfloat16 bits (in a uint32) of the float32 whose bits are u, as round_bits. Every step is
    cast back to 32 bits (numba computes integer arithmetic in 64, and the loops that pack pairs
    were vectorised on 64-bit lanes: half as many per instruction; a non-NaN u never overflows 32
    bits here, so the bits are unchanged), and the NaN test is a select, not a branch."""
    rounded = np.uint32(np.uint32(np.uint32(u + np.uint32(0x7FFF)) + np.uint32(np.uint32(u >> np.uint32(16))
                                                                               & np.uint32(1))) >> np.uint32(16))
    nan = np.uint32(u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.uint32(NAN_BF16) if nan else rounded


@kernel
def _pad_pairs(xu, xp, b0, top, left, Wp):
    """xp[b, k, i Wp + j] = bf16 pair (channels 2k, 2k + 1; channels past x's: 0) of
    xu[b0 + b, c, top + i, j - left] (float32 bits), 0 outside x and past the last whole row."""
    nb, K = xp.shape[:2]
    for t in range(nb * K):
        _pair_plane(xu, xp[t // K, t % K], b0 + t // K, t % K, top, left, Wp)


@kernel(inline=True)
def pack_pairs(row, lo, hi, n, odd):
    """row[t] = the bfloat16 pair (lo[t], hi[t]) of two float32 rows' bits for t < n (odd False: no
    second channel, hi unread, the pair (lo[t], 0)): a row of the AMX planes of channel pairs."""
    if odd:
        for t in range(n):
            row[t] = _rne(lo[t]) | (_rne(hi[t]) << np.uint32(16))
    else:
        for t in range(n):
            row[t] = _rne(lo[t])


@kernel
def _pair_plane(xu, plane, b, k, top, left, Wp):
    """One plane of _pad_pairs: plane[i Wp + j] = the pair of channels 2k, 2k + 1 of image b, 0 in the
    padding. Each element is written once (zeroing the whole plane first doubled a store-bound
    pass's stores)."""
    C, H, W = xu.shape[1], xu.shape[2], xu.shape[3]
    S = plane.shape[0]
    i0, i1 = valid_range(top, 1, H, S // Wp)
    j0, j1 = valid_range(-left, 1, W, Wp)
    if 2 * k >= C or i0 >= i1 or j0 >= j1:  # a pair past x's channels (AMX's blocks of 32), or no pixel
        for m in range(S):
            plane[m] = 0
        return
    odd = 2 * k + 1 < C
    for m in range(i0 * Wp + j0):  # the rows above, the first row's left padding
        plane[m] = 0
    for i in range(i0, i1):
        lo = xu[b, 2 * k, top + i, j0 - left:]
        pack_pairs(plane[i * Wp + j0:], lo, xu[b, 2 * k + 1, top + i, j0 - left:] if odd else lo, j1 - j0, odd)
        end = (i + 1) * Wp + j0 if i + 1 < i1 else S  # this row's right padding, the next one's left
        for m in range(i * Wp + j1, end):
            plane[m] = 0


@functools.lru_cache(maxsize=None)
def _correlate_kernel(L, NP):
    """The forward kernel for blocks of NP <= 8 output channels x L pixels (_direct's, over pairs)."""

    @kernel
    def correlate(xp, wt, bias, y, b0, r0, rows, Wp, cb, slope, act, acc):
        """y[b0 + b, o, r0 + h, w] = act(sum_{k, i, j} dot(wt[o // NP, k, i, j, o % NP], xp[b, k, q
        + i Wp + j]) + bias[o]) at every flat position q = h Wp + w of the band (_direct's
        correlate); the sum in blocks of cb channel pairs, each a chain from 0 (the first from the
        bias) added to the running total in acc (8 L float32)."""
        wide()
        nb, K, S = xp.shape
        OB, _, kh, kw, _ = wt.shape
        Q = (rows * Wp + L - 1) // L * L
        zero = vsplat(acc.dtype.type(0), L)
        for t in range(nb * (Q // L)):
            b, q = t // (Q // L), t % (Q // L) * L
            for ob in range(OB):
                o = ob * NP
                for k0 in range(0, K, cb):
                    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero
                    if k0 == 0:
                        a0, a1 = vsplat(bias[o], L), vsplat(bias[o + 1], L)
                        a2, a3 = vsplat(bias[o + 2], L), vsplat(bias[o + 3], L)
                        a4, a5 = vsplat(bias[o + 4], L), vsplat(bias[o + 5], L)
                        a6, a7 = vsplat(bias[o + 6], L), vsplat(bias[o + 7], L)
                    for k in range(k0, min(K, k0 + cb)):
                        xc = xp[b, k, q:]
                        for i in range(kh):
                            for j in range(kw):
                                xv = vload(xc, i * Wp + j, L)
                                wr = wt[ob, k, i, j]
                                a0 = vdot_bf16(a0, vsplat(wr[0], L), xv)
                                a1 = vdot_bf16(a1, vsplat(wr[1], L), xv)
                                a2 = vdot_bf16(a2, vsplat(wr[2], L), xv)
                                a3 = vdot_bf16(a3, vsplat(wr[3], L), xv)
                                a4 = vdot_bf16(a4, vsplat(wr[4], L), xv)
                                a5 = vdot_bf16(a5, vsplat(wr[5], L), xv)
                                a6 = vdot_bf16(a6, vsplat(wr[6], L), xv)
                                a7 = vdot_bf16(a7, vsplat(wr[7], L), xv)
                    if k0 > 0:
                        a0, a1 = vadd(vload(acc, 0, L), a0), vadd(vload(acc, L, L), a1)
                        a2, a3 = vadd(vload(acc, 2 * L, L), a2), vadd(vload(acc, 3 * L, L), a3)
                        a4, a5 = vadd(vload(acc, 4 * L, L), a4), vadd(vload(acc, 5 * L, L), a5)
                        a6, a7 = vadd(vload(acc, 6 * L, L), a6), vadd(vload(acc, 7 * L, L), a7)
                    if k0 + cb >= K:
                        _store(y, b0 + b, r0, rows, o, NP, q, Wp, L, slope, act, y, False,
                               a0, a1, a2, a3, a4, a5, a6, a7)
                        continue
                    vstore(acc, 0, a0)
                    vstore(acc, L, a1)
                    vstore(acc, 2 * L, a2)
                    vstore(acc, 3 * L, a3)
                    vstore(acc, 4 * L, a4)
                    vstore(acc, 5 * L, a5)
                    vstore(acc, 6 * L, a6)
                    vstore(acc, 7 * L, a7)

    return correlate


@functools.lru_cache(maxsize=None)
def _correlate_tiles_kernel(L, NP):
    """The forward over every tile in one parallel region (_direct's correlate_tiles)."""

    def correlate_tiles(xu, wt, bias, y, tiles, top, left, Wp, cb, slope, act, accs, bufs):
        """tiles (T, 5): b0, b1, r0, r1 and the plane length S; accs (threads, MAX_BLOCK L) float32
        running totals; bufs (threads, elems) uint32: each thread's tile planes."""
        K = wt.shape[1]
        variant = (L, NP)  # noqa: F841 (closure cells: the cache key tells the variants apart)
        for n in prange(tiles.shape[0]):
            b0, b1, r0, r1, S = tiles[n, 0], tiles[n, 1], tiles[n, 2], tiles[n, 3], tiles[n, 4]
            me = numba.get_thread_id()
            xp = bufs[me, :(b1 - b0) * K * S].reshape((b1 - b0, K, S))
            _pad_pairs(xu, xp, b0, r0 - top, left, Wp)
            _tile_kernel(xp, wt, bias, y, b0, r0, r1 - r0, Wp, cb, slope, act, accs[me])

    return kernel(parallel=True)(_with_globals(correlate_tiles, _tile_kernel=_correlate_kernel(L, NP)))


def _plane_length(tile, OW, kh, kw):
    """S of a tile's planes (_direct.plane_sizes), a whole number of ALIGN bytes."""
    slack = ALIGN // 4
    return _blocks(plane_sizes(tile[3] - tile[2], OW, kh, kw, L_FORWARD)[2], slack) * slack


def pack_weight(w, NP):
    """W (O, C, kh, kw) float32 -> (ceil(O / NP), ceil(C / 2), kh, kw, NP) uint32 bfloat16 pairs of
    channels (2k low, 2k + 1 high; the channels and outputs past W's: 0)."""
    O, C, kh, kw = w.shape
    bits = np.zeros((_blocks(O, NP) * NP, _blocks(C, 2) * 2, kh, kw), np.uint16)
    bits[:O, :C] = round_bits(w)
    pairs = bits.reshape(-1, bits.shape[1] // 2, 2, kh, kw).transpose(0, 1, 3, 4, 2)
    packed = np.ascontiguousarray(pairs).view(np.uint32)[..., 0]  # (Opad, C/2, kh, kw)
    out = _aligned_empty((bits.shape[0] // NP, bits.shape[1] // 2, kh, kw, NP), np.uint32)
    out[...] = packed.reshape(-1, NP, *packed.shape[1:]).transpose(0, 2, 3, 4, 1)
    return out


def correlate(x, w, features, padding, bias, slope, tiles):
    """_direct.correlate with bfloat16 operands: x (N, C, H, W), w (O, C, kh, kw) float32 ->
    (N, O, OH, OW) float32; tiles (b0, b1, r0, r1) over (images, output rows)."""
    N, C = x.shape[:2]
    O, _, kh, kw = w.shape
    OH, OW = features
    NP, L = MAX_BLOCK, L_FORWARD
    wt = pack_weight(w, NP)
    K = wt.shape[1]
    b = np.zeros(wt.shape[0] * NP + MAX_BLOCK, np.float32)
    if bias is not None:
        b[:O] = bias
    y = np.empty((N, O, OH, OW), np.float32)
    act, s = slope is not None, np.float32(0 if slope is None else slope)
    cb = _blocks(K, _blocks(C * kh * kw, BLOCK_TERMS))  # channel pairs per block, the blocks even
    table = np.array([(*t, _plane_length(t, OW, kh, kw)) for t in tiles], np.int64).reshape(-1, 5)
    elems = max([(t[1] - t[0]) * K * t[4] for t in table], default=0)
    threads = numba.get_num_threads()
    accs = _aligned_empty((threads, MAX_BLOCK * L), np.float32)
    bufs = _aligned_empty((threads, _blocks(elems, ALIGN // 4) * ALIGN // 4), np.uint32)
    _correlate_tiles_kernel(L, NP)(np.ascontiguousarray(x).view(np.uint32), wt, b, y, table, padding[0],
                                   padding[1], OW + kw - 1, cb, s, act, accs, bufs)
    return y


@kernel
def _pad_plane(xu, xf, b, c, top, left, Wp, Hp):
    """xf[c Hp Wp + i Wp + j] = bf16(xu[b, c, top + i, j - left]) (uint16), 0 outside x; a plane
    past x's channels (AMX's blocks of 32): zeros. One plane of an image of the weight gradient's
    input, padded, as flat planes."""
    C, H, W = xu.shape[1], xu.shape[2], xu.shape[3]
    plane = xf[c * Hp * Wp:(c + 1) * Hp * Wp]
    for m in range(plane.shape[0]):
        plane[m] = 0
    if c >= C:
        return
    i0, i1 = valid_range(top, 1, H, Hp)
    j0, j1 = valid_range(-left, 1, W, Wp)
    for i in range(i0, i1):
        row, src = plane[i * Wp + j0:], xu[b, c, top + i, j0 - left:]
        for j in range(j1 - j0):
            row[j] = np.uint16(_rne(src[j]))


@kernel
def _grad_pairs(gu, gt, b, p0, p1, Wp):
    """gt[p, o] = bf16(g[q = 2p]) | bf16(g[q + 1]) << 16 for the pairs p in [p0, p1), g[q] =
    gu[b, o, h, w] at q = h Wp + w (0 where w >= OW, h >= OH or o >= O): image b's gradient
    channels last over the padded width, in pairs of flat positions (gt (P, Opad) uint32). A pair
    is written whole, once: no zeroing pass, and a task owns whole pairs even where one straddles
    two rows. The 2 reads per pair come from O planes whose lines the next pairs reuse (L1)."""
    O, OH, OW = gu.shape[1], gu.shape[2], gu.shape[3]
    Opad = gt.shape[1]
    for p in range(p0, p1):
        h0, w0 = (2 * p) // Wp, (2 * p) % Wp
        h1, w1 = (2 * p + 1) // Wp, (2 * p + 1) % Wp
        lo, hi = h0 < OH and w0 < OW, h1 < OH and w1 < OW
        row = gt[p]
        if lo and hi:
            for o in range(O):
                row[o] = _rne(gu[b, o, h0, w0]) | (_rne(gu[b, o, h1, w1]) << np.uint32(16))
        elif lo:
            for o in range(O):
                row[o] = _rne(gu[b, o, h0, w0])
        elif hi:
            for o in range(O):
                row[o] = _rne(gu[b, o, h1, w1]) << np.uint32(16)
        else:
            for o in range(O):
                row[o] = 0
        for o in range(O, Opad):
            row[o] = 0


PAIRS_PER_TASK = 64  # of the gradient's layout: about 20 tasks per image at 48 x 48


@kernel(parallel=True)
def weight_grad_layout(xu, gu, xf, gt, planes, top, left, Wp, Hp):
    """Both operands of a bfloat16 weight gradient, a task per plane and per run of pairs (a task
    per image left one core idle at batch 1): xf (N, planes Hp Wp + tail) uint16, each image's
    input rounded and padded into `planes` flat planes (_pad_plane; the tail: 0); gt (N, P, Opad)
    uint32, its gradient in pairs of flat positions, channels last (_grad_pairs)."""
    N, P = xu.shape[0], gt.shape[1]
    runs = (P + PAIRS_PER_TASK - 1) // PAIRS_PER_TASK
    per = planes + runs + 1
    for t in prange(N * per):
        b, u = t // per, t % per
        if u < planes:
            _pad_plane(xu, xf[b], b, u, top, left, Wp, Hp)
        elif u < planes + runs:
            p0 = (u - planes) * PAIRS_PER_TASK
            _grad_pairs(gu, gt[b], b, p0, min(P, p0 + PAIRS_PER_TASK), Wp)
        else:  # xf's tail
            for m in range(planes * Hp * Wp, xf.shape[1]):
                xf[b, m] = 0


@kernel
def _pair(x, k):
    """x[k] | x[k + 1] << 16: two adjacent bfloat16 as one uint32 (a pair of vdpbf16ps)."""
    return np.uint32(np.uint32(x[k]) | (np.uint32(x[k + 1]) << np.uint32(16)))


@functools.lru_cache(maxsize=None)
def _weight_grad_kernel(L, NT):
    """The weight-gradient kernel for blocks of NT = 8 taps x L output channels."""

    @kernel
    def weight_grad(xf, gf, offsets, rb, dwt, ob, t0, t1):
        """dwt[ob, t, l] = sum_{b, p} dot(gf[b, p, ob L + l], pair(xf[b], offsets[t] + 2 p)) for the
        taps t in [t0, t1) (whole blocks of NT; offsets padded): per image, per block of rb pairs, a
        chain from 0 added to the running total. xf (nb, C Hp Wp + tail) uint16: padded flat planes;
        gf (nb, P Opad) uint32: gradient pairs channels last (_grad_pairs)."""
        wide()
        nb, Opad = gf.shape[0], dwt.shape[0] * L
        P = gf.shape[1] // Opad
        d = dwt[ob]
        zero = vsplat(dwt.dtype.type(0), L)
        for t in range(t0, t1):
            vstore(d[t], 0, zero)
        for b in range(nb):
            xb, gb = xf[b], gf[b]
            for p0 in range(0, P, rb):
                for t in range(t0, t1, NT):
                    x0, x1, x2, x3 = xb[offsets[t]:], xb[offsets[t + 1]:], xb[offsets[t + 2]:], xb[offsets[t + 3]:]
                    x4, x5, x6, x7 = xb[offsets[t + 4]:], xb[offsets[t + 5]:], xb[offsets[t + 6]:], xb[offsets[t + 7]:]
                    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero
                    for p in range(p0, min(P, p0 + rb)):
                        gv = vload(gb, p * Opad + ob * L, L)
                        k = 2 * p
                        a0 = vdot_bf16(a0, gv, vsplat(_pair(x0, k), L))
                        a1 = vdot_bf16(a1, gv, vsplat(_pair(x1, k), L))
                        a2 = vdot_bf16(a2, gv, vsplat(_pair(x2, k), L))
                        a3 = vdot_bf16(a3, gv, vsplat(_pair(x3, k), L))
                        a4 = vdot_bf16(a4, gv, vsplat(_pair(x4, k), L))
                        a5 = vdot_bf16(a5, gv, vsplat(_pair(x5, k), L))
                        a6 = vdot_bf16(a6, gv, vsplat(_pair(x6, k), L))
                        a7 = vdot_bf16(a7, gv, vsplat(_pair(x7, k), L))
                    vstore(d[t], 0, vadd(vload(d[t], 0, L), a0))
                    vstore(d[t + 1], 0, vadd(vload(d[t + 1], 0, L), a1))
                    vstore(d[t + 2], 0, vadd(vload(d[t + 2], 0, L), a2))
                    vstore(d[t + 3], 0, vadd(vload(d[t + 3], 0, L), a3))
                    vstore(d[t + 4], 0, vadd(vload(d[t + 4], 0, L), a4))
                    vstore(d[t + 5], 0, vadd(vload(d[t + 5], 0, L), a5))
                    vstore(d[t + 6], 0, vadd(vload(d[t + 6], 0, L), a6))
                    vstore(d[t + 7], 0, vadd(vload(d[t + 7], 0, L), a7))

    return weight_grad


@functools.lru_cache(maxsize=None)
def _weight_grad_tasks_kernel(L, NT):
    """The weight gradient's tasks in one parallel region."""

    def weight_grad_tasks(xf, gf, offsets, rb, dwt, tasks):
        """tasks (T, 3): an output-channel block and a run [t0, t1) of whole tap blocks each."""
        variant = (L, NT)  # noqa: F841 (closure cells: the cache key tells the variants apart)
        for k in prange(tasks.shape[0]):
            _task_kernel(xf, gf, offsets, rb, dwt, tasks[k, 0], tasks[k, 1], tasks[k, 2])

    return kernel(parallel=True)(_with_globals(weight_grad_tasks, _task_kernel=_weight_grad_kernel(L, NT)))


def weight_grad(x, g, padding, kernel_size, workers):
    """_direct.weight_grad with bfloat16 operands: x (N, C, H, W), g (N, O, OH, OW) float32 ->
    dW (O, C, kh, kw) float32; workers: the threads the tasks are cut for."""
    N, C = x.shape[:2]
    O, OH, OW = g.shape[1:]
    kh, kw = kernel_size
    NT, L = MAX_BLOCK, (16 if O <= 16 else 32)
    OB = _blocks(O, L)
    Hp, Wp = OH + kh - 1, OW + kw - 1
    P = _blocks(OH * Wp, 2)  # pairs of flat positions (the last one's second half: 0)
    xf = np.empty((N, C * Hp * Wp + Wp + 2), np.uint16)  # a tap's last pair reads up to kw past C planes
    gt = _aligned_empty((N, P, OB * L), np.uint32)
    weight_grad_layout(np.ascontiguousarray(x).view(np.uint32), np.ascontiguousarray(g).view(np.uint32),
                       xf, gt, C, -padding[0], padding[1], Wp, Hp)
    K = C * kh * kw
    Kpad = _blocks(K, NT) * NT
    c, i, j = np.unravel_index(np.arange(K), (C, kh, kw))
    offsets = np.zeros(Kpad + MAX_BLOCK, np.int64)  # padded taps read element 0: junk, dropped below
    offsets[:K] = (c * Hp + i) * Wp + j
    dwt = _aligned_empty((OB, Kpad, L), np.float32)
    per = _blocks(Kpad // NT, max(1, 2 * workers // OB)) * NT
    tasks = np.array([(ob, t0, min(Kpad, t0 + per)) for t0 in range(0, Kpad, per) for ob in range(OB)],
                     np.int64).reshape(-1, 3)
    rb = max(1, round((N * P) ** 0.5))  # as _direct's: about sqrt(terms) blocks of sqrt(terms) terms
    _weight_grad_tasks_kernel(L, NT)(xf, gt.reshape(N, P * OB * L), offsets, rb, dwt, tasks)
    dw = dwt[:, :K].transpose(0, 2, 1).reshape(OB * L, C, kh, kw)[:O]
    return np.ascontiguousarray(dw)

"""The direct convolution with bfloat16 operands on AMX tiles (tdpbf16ps, framework/_amx.py): conv.py's
route under `autocast("bf16")` where the CPU has AMX-BF16 and the correlation has at least
MIN_CHANNELS channels on its image side.

A tile product adds, for 16 x 16 float32 outputs, 32 bfloat16 terms each (16 pairs). Each kernel
keeps 2 x 2 output tiles (32 x 32) in tmm0..tmm3 and streams two tiles of each operand per step
(tmm4, tmm5 and tmm6, tmm7). The tile unit does not rename tiles (a load waits for the products
still reading its tile), so each kernel loads the next step's operands behind this step's last
products (software pipelining; the order of the products, so every bit, is unchanged):

- forward (and the input gradient, the forward of the flipped kernel): rows = output channels,
  columns = flat output positions q = h Wp + w (_direct_bf16's padded planes of channel pairs,
  which are tdpbf16ps's pair layout already: row k of a tile is channel pair k at 16 positions from
  q + i Wp + j), the weights as 16 output channels x 32 input channels per tap; one step = one tap
  of 32 channels. The 32 x 32 blocks of a chunk of positions are stored to a scratch and from there
  into y (bias, activation).
- weight gradient: per tap, rows = input channels (32 consecutive positions of a padded input
  plane from the tap's offset), columns = output channels (the gradient in pairs of flat positions,
  channels last: _direct_bf16's layout); one step = 32 positions. A task owns 32 x 32 of (input,
  output) channels for every tap and a run of images (MIN_TASKS) and visits all taps per chunk of
  positions, so the chunk's input and gradient are read from cache kh kw times (a task per tap
  streamed them from memory each time); every ~sqrt(steps) steps the blocks go onto the run's
  running totals (_direct's blocked sums), and the runs' totals are added in order.

Operands are rounded once per call (_direct_bf16's kernels); sums are float32 in the tiles, in the
order tdpbf16ps takes them (docs/numerics.md gives the bound; tests/framework/functional/test_bf16.py
measures the difference to the AVX512-BF16 route).
"""
from __future__ import annotations

import functools

import numba
import numpy as np

from .. import _amx, precision
from .._amx import (block_load, block_store, block_zero, col_last, col_load, col_operands, col_step, col_store,
                    last_step, last_step_next, operands, row_last, row_last_next, row_operands, row_step, row_store,
                    row_zero, step, tile_config, tile_release)
from .._jit import kernel, prange
from .._simd import bits32, wide
from ._direct import _aligned_empty, _blocks
from ._direct_bf16 import _pair_plane, _rne, pack_pairs, weight_grad_layout

MIN_CHANNELS = 16  # below, padding to 32 channels wastes more than half of each product
TILE = 16  # rows and float32 columns of a tile; 32 bfloat16 per row
FORWARD_CHUNK = 768  # flat positions a forward task computes for every output before their epilogue: whole
# blocks of 32 and of 48; Opad x FORWARD_CHUNK float32 (192 KB for 64 outputs) stay in L2


@kernel(inline=True)
def _pixels(p, end, Wp, OW):
    """The run of pixels at flat position p = h Wp + w (a row's junk end w >= OW skipped to the next
    row) before `end`: (p, h, w, n), n <= 0 where none is left."""
    h, w = p // Wp, p % Wp
    if w >= OW:
        p, h, w = p + Wp - w, h + 1, 0
    return p, h, w, min(OW - w, end - p)


@kernel(inline=True)
def _activate(v, slope, mode):
    """The fused activation: mode 0 none; 1 activation.rectify_'s (slope 0: relu, which sends -0
    and 0 to +0; else leaky; NaN stays); 2 PReLU's (slope v where v <= 0: _prelu_kernel's)."""
    if mode == 1:
        if slope == 0:
            if v <= 0:
                return np.float32(0)
        elif not v > 0:
            return v * slope
    elif mode == 2:
        if v <= 0:
            return slope * v
    return v


@kernel(inline=True)
def _put_shuffled(row, buf, L, e, n, o0, bias, slopes, mode, r):
    """row[t r + j] = act(buf[(o0 + j) L + e + t] + bias[o0 + j]) for t < n, j < r: one output row
    of a pixel shuffle by r, the r channels o0 + j interleaved. Written pixel by pixel for r = 2 and
    4 (the stores contiguous: 4.6-5x the channel-by-channel strided stores), else channel by channel."""
    if r == 2:
        a0, a1 = buf[o0 * L + e:], buf[(o0 + 1) * L + e:]
        b0, b1, s0, s1 = bias[o0], bias[o0 + 1], slopes[o0], slopes[o0 + 1]
        for t in range(n):
            row[2 * t] = _activate(a0[t] + b0, s0, mode)
            row[2 * t + 1] = _activate(a1[t] + b1, s1, mode)
    elif r == 4:
        a0, a1, a2, a3 = buf[o0 * L + e:], buf[(o0 + 1) * L + e:], buf[(o0 + 2) * L + e:], buf[(o0 + 3) * L + e:]
        for t in range(n):
            row[4 * t] = _activate(a0[t] + bias[o0], slopes[o0], mode)
            row[4 * t + 1] = _activate(a1[t] + bias[o0 + 1], slopes[o0 + 1], mode)
            row[4 * t + 2] = _activate(a2[t] + bias[o0 + 2], slopes[o0 + 2], mode)
            row[4 * t + 3] = _activate(a3[t] + bias[o0 + 3], slopes[o0 + 3], mode)
    else:
        for j in range(r):
            src, bk, sl = buf[(o0 + j) * L + e:], bias[o0 + j], slopes[o0 + j]
            for t in range(n):
                row[t * r + j] = _activate(src[t] + bk, sl, mode)


@kernel
def _put_rows(buf, L, bias, y, b, q0, q1, Wp, slopes, mode, res, has_res, scale, r):
    """y[b, o, h, w] = act(buf[o L + p - q0] + bias[o]) for the flat positions p = h Wp + w in [q0,
    q1) that are pixels of y (w < OW, h < OH) and every channel o of y (act: _activate's mode with
    the channel's slope); has_res 1: times scale, + res[b, o, h, w] after the activation (a residual
    add's float32 sum, of a product by a number where the add's operand was one, RRDBNet's x5 * 0.2
    + x: np.multiply's then np.add's values; a product by 1 is exact). r > 1: y is the output
    pixel-shuffled by r (N, O / r^2, OH r, OW r): channel o = c r^2 + i r + j of pixel (h, w) goes to
    y[b, c, h r + i, w r + j] (pixel_shuffle's map; the activation commutes with it), plus res[b, c, h
    r + i, w r + j] (has_res 1) or res[b, c, h, w] (has_res 2: res (N, O / r^2, OH, OW), whose
    nearest upsampling by r is added: SRVGGNetCompact's base). A run is a whole output row where the
    chunk holds one."""
    wide()
    O, OH, OW = y.shape[1] * r * r, y.shape[2] // r, y.shape[3] // r
    p = q0
    while p < q1:
        p, h, w, n = _pixels(p, q1, Wp, OW)
        if h >= OH or n <= 0:
            break
        if r > 1:
            for c in range(O // (r * r)):
                for i in range(r):
                    row = y[b, c, h * r + i, w * r:w * r + n * r]
                    _put_shuffled(row, buf, L, p - q0, n, c * r * r + i * r, bias, slopes, mode, r)
                    if has_res == 1:  # added after the activation: the fused sum's float32 value
                        add = res[b, c, h * r + i, w * r:]
                        for e in range(n * r):
                            row[e] = row[e] * scale + add[e]
                    elif has_res == 2:
                        small = res[b, c, h, w:]
                        for e in range(n * r):
                            row[e] = row[e] * scale + small[e // r]
            p += n
            continue
        for o in range(O):
            src, bk, sl = buf[o * L + p - q0:], bias[o], slopes[o]
            dst = y[b, o, h, w:]
            if has_res:
                rk = res[b, o, h, w:]
                for t in range(n):
                    dst[t] = _activate(src[t] + bk, sl, mode) * scale + rk[t]
            else:
                for t in range(n):
                    dst[t] = _activate(src[t] + bk, sl, mode)
        p += n


@kernel(inline=True)
def _activate_rows(buf, L, n, bias, slopes, mode, rows):
    """buf[o L + t] = act(buf[o L + t] + bias[o]) for t < n, o < rows, in place: the shuffled pairs'
    values before rounding (junk positions too: one run per row, never stored; a pass of its own,
    where activating in the loop that interleaves four channels was slower: docs/benchmarks.md)."""
    for o in range(rows):
        src, bk, sl = buf[o * L:o * L + n], bias[o], slopes[o]
        for t in range(n):
            src[t] = _activate(src[t] + bk, sl, mode)


@kernel(inline=True)
def _act(v, s, kind):
    """_activate for the pair epilogues, by kind (_kind): 0 none, 1 relu (activation.rectify_'s slope
    0: v <= 0 gives +0, NaN stays), 2 leaky (rectify_'s: v if v > 0 else v s), 3 PReLU
    (_prelu_kernel's: s v if v <= 0 else v). Their loops take the kind as a constant (_pair_row: the
    mode's test inside the loop kept LLVM from vectorising it); the float32 stores (_put_rows,
    _put_shuffled) keep _activate: loops per kind there made training steps 4-6% slower (rows of 16-24
    pixels), and _act with the kind tested in their one loop made MSRResNet's and RCAN's inference
    1.1-1.2x slower (separate processes, 2026-12-07)."""
    if kind == 1:
        return np.float32(0) if v <= 0 else v
    if kind == 2:
        return v if v > 0 else v * s
    if kind == 3:
        return s * v if v <= 0 else v
    return v


@kernel(inline=True)
def _kind(slopes, mode):
    """_act's kind of run's mode: 0 none, 1 rectify_ (one slope for every channel; 0: relu), 2 PReLU."""
    return 0 if mode == 0 else 3 if mode == 2 else 1 if slopes[0] == 0 else 2


@kernel(inline=True)
def _act_pair(lo, hi, blo, bhi, slo, shi, kind):
    """The bfloat16 pair (act(lo + blo), act(hi + bhi)) as a uint32 (low half: lo's): what
    _pair_plane gives from the activated float32 values, without storing them first."""
    return _rne(bits32(_act(lo + blo, slo, kind))) | (_rne(bits32(_act(hi + bhi, shi, kind))) << np.uint32(16))


@kernel(inline=True)
def _pairs_repeated(row, lo, hi, n, blo, bhi, slo, shi, kind, rw):
    """row[t rw + j] = _act_pair(lo[t], hi[t], ...) for t < n, j < rw (rw = 2: two contiguous
    stores, ESRGAN's x2 stages)."""
    if rw == 1:
        for t in range(n):
            row[t] = _act_pair(lo[t], hi[t], blo, bhi, slo, shi, kind)
    elif rw == 2:
        for t in range(n):
            v = _act_pair(lo[t], hi[t], blo, bhi, slo, shi, kind)
            row[2 * t] = v
            row[2 * t + 1] = v
    else:
        for t in range(n):
            v = _act_pair(lo[t], hi[t], blo, bhi, slo, shi, kind)
            for j in range(rw):
                row[t * rw + j] = v


@kernel(inline=True)
def _pair_row(row, lo, hi, n, blo, bhi, slo, shi, kind, rw):
    """_pairs_repeated with the kind a constant in each loop (a loop per kind)."""
    if kind == 0:
        _pairs_repeated(row, lo, hi, n, blo, bhi, slo, shi, 0, rw)
    elif kind == 1:
        _pairs_repeated(row, lo, hi, n, blo, bhi, slo, shi, 1, rw)
    elif kind == 2:
        _pairs_repeated(row, lo, hi, n, blo, bhi, slo, shi, 2, rw)
    else:
        _pairs_repeated(row, lo, hi, n, blo, bhi, slo, shi, 3, rw)


@kernel(inline=True)
def _pairs_two(row, lo, hi, lo2, hi2, n, blo, bhi, slo, shi, kind):
    """row[2 t] = _act_pair(lo[t], hi[t], ...), row[2 t + 1] = _act_pair(lo2[t], hi2[t], ...): two
    column phases of a read in phases, interleaved (contiguous stores)."""
    for t in range(n):
        row[2 * t] = _act_pair(lo[t], hi[t], blo, bhi, slo, shi, kind)
        row[2 * t + 1] = _act_pair(lo2[t], hi2[t], blo, bhi, slo, shi, kind)


@kernel(inline=True)
def _pair_row2(row, lo, hi, lo2, hi2, n, blo, bhi, slo, shi, kind):
    """_pairs_two with the kind a constant in each loop."""
    if kind == 0:
        _pairs_two(row, lo, hi, lo2, hi2, n, blo, bhi, slo, shi, 0)
    elif kind == 1:
        _pairs_two(row, lo, hi, lo2, hi2, n, blo, bhi, slo, shi, 1)
    elif kind == 2:
        _pairs_two(row, lo, hi, lo2, hi2, n, blo, bhi, slo, shi, 2)
    else:
        _pairs_two(row, lo, hi, lo2, hi2, n, blo, bhi, slo, shi, 3)


@kernel
def _put_row_pairs(buf, L, bias, dst, b, q0, q1, Wp, OH, OW, slopes, mode, dgeo, rows, rh, rw):
    """dst[b, d0 + k, (h + top) dWp + w + left] = the bfloat16 pair of channels 2k, 2k + 1 of
    act(buf + bias) at the flat positions p = h Wp + w in [q0, q1) that are pixels, for the `rows`
    channels (padding included) (dgeo = (d0, top, left, dWp)): the output written as the next
    convolution's layout, the bits _pair_plane gives from the float32 output (_put_rows' values,
    rounded to nearest even). rh, rw > 1: the planes of the output's nearest upsampling by (rh, rw),
    each pair at (h rh + i + top) dWp + w rw + j + left for i < rh, j < rw (layout's `repeat`
    bits)."""
    wide()
    d0, top, left, dWp = dgeo[0], dgeo[1], dgeo[2], dgeo[3]
    kind = _kind(slopes, mode)
    p = q0
    while p < q1:
        p, h, w, n = _pixels(p, q1, Wp, OW)
        if h >= OH or n <= 0:
            break
        for k in range(rows // 2):
            lo, hi = buf[2 * k * L + p - q0:], buf[(2 * k + 1) * L + p - q0:]
            b0, b1, s0, s1 = bias[2 * k], bias[2 * k + 1], slopes[2 * k], slopes[2 * k + 1]
            first = dst[b, d0 + k, (h * rh + top) * dWp + w * rw + left:]  # activated and rounded in one pass
            _pair_row(first, lo, hi, n, b0, b1, s0, s1, kind, rw)
            for i in range(1, rh):  # the other rows of the repeat: copies of the first
                row = dst[b, d0 + k, (h * rh + i + top) * dWp + w * rw + left:]
                for t in range(n * rw):
                    row[t] = first[t]
        p += n


@kernel
def _put_phase_pairs(buf, L, bias, dst, b, q0, q1, Wp, OH, OW, slopes, mode, dgeo, rows, rh, rw):
    """_put_row_pairs for the rh rw phases of a read in phases (run's `phases`): phase f = a rw + c
    from buf's row f `rows`, its (h, w) the output's pixel (h rh + a, w rw + c), written there once,
    each output row's phases interleaved (contiguous stores). (A kernel of its own: in _put_row_pairs'
    loop its branch made SRVGGNetCompact's inference 2% slower.)"""
    wide()
    d0, top, left, dWp = dgeo[0], dgeo[1], dgeo[2], dgeo[3]
    kind = _kind(slopes, mode)
    p = q0
    while p < q1:
        p, h, w, n = _pixels(p, q1, Wp, OW)
        if h >= OH or n <= 0:
            break
        e = p - q0
        for k in range(rows // 2):
            b0, b1, s0, s1 = bias[2 * k], bias[2 * k + 1], slopes[2 * k], slopes[2 * k + 1]
            for a in range(rh):
                row, f = dst[b, d0 + k, (h * rh + a + top) * dWp + w * rw + left:], a * rw
                if rw == 2:
                    _pair_row2(row, buf[(f * rows + 2 * k) * L + e:], buf[(f * rows + 2 * k + 1) * L + e:],
                               buf[((f + 1) * rows + 2 * k) * L + e:], buf[((f + 1) * rows + 2 * k + 1) * L + e:], n,
                               b0, b1, s0, s1, kind)
                    continue
                for c in range(rw):
                    lo, hi = buf[((f + c) * rows + 2 * k) * L + e:], buf[((f + c) * rows + 2 * k + 1) * L + e:]
                    for t in range(n):
                        row[t * rw + c] = _act_pair(lo[t], hi[t], b0, b1, s0, s1, kind)
        p += n


@kernel
def _pairs_from_rows(yu, b, q0, q1, Wp, dst, dgeo):
    """dst[b, d0 + k, (h + top) dWp + w + left] = the bfloat16 pair of channels 2k, 2k + 1 of y (yu: its
    float32 bits; an odd last channel pairs with 0) at the flat positions p = h Wp + w in [q0, q1)
    that are pixels, after _put_rows stored them: the output kept as float32 and written as the next
    convolution's layout too (_pair_plane's bits from y, without a pass of its own; dgeo = (d0,
    top, left, dWp))."""
    wide()
    C, OH, OW = yu.shape[1], yu.shape[2], yu.shape[3]
    d0, top, left, dWp = dgeo[0], dgeo[1], dgeo[2], dgeo[3]
    p = q0
    while p < q1:
        p, h, w, n = _pixels(p, q1, Wp, OW)
        if h >= OH or n <= 0:
            break
        for k in range((C + 1) // 2):
            odd, lo = 2 * k + 1 < C, yu[b, 2 * k, h, w:]
            pack_pairs(dst[b, d0 + k, (h + top) * dWp + w + left:], lo, yu[b, 2 * k + 1, h, w:] if odd else lo, n, odd)
        p += n


@kernel(parallel=True)
def _scale_add_pairs(a, s, x, out, dst, dgeo):
    """out = a * s + x (elementwise._scale_add_planes' values: the product rounded, then the sum) for a,
    x, out (N, C, H, W) and s (N or 1, C), and dst[n, d0 + k, (h + top) dWp + w + left] = the
    bfloat16 pair of out's channels 2k, 2k + 1 (an odd last channel paired with 0): the sum stored and
    laid out as its reader's planes in one pass (_pair_plane's bits from out), a task per image and
    pair of channels."""
    N, C, H, W = a.shape
    d0, top, left, dWp = dgeo[0], dgeo[1], dgeo[2], dgeo[3]
    K = (C + 1) // 2
    ou = out.view(np.uint32)
    for t in prange(N * K):
        n, k = t // K, t % K
        c0, c1 = 2 * k, min(2 * k + 1, C - 1)
        s0, s1 = s[n if s.shape[0] > 1 else 0, c0], s[n if s.shape[0] > 1 else 0, c1]
        for h in range(H):
            a0, x0, o0 = a[n, c0, h], x[n, c0, h], out[n, c0, h]
            for w in range(W):
                o0[w] = a0[w] * s0 + x0[w]
            odd = 2 * k + 1 < C
            if odd:
                a1, x1, o1 = a[n, c1, h], x[n, c1, h], out[n, c1, h]
                for w in range(W):
                    o1[w] = a1[w] * s1 + x1[w]
            pack_pairs(dst[n, d0 + k, (h + top) * dWp + left:], ou[n, c0, h], ou[n, c1, h], W, odd)


def scale_add_pairs(a, s, x, dst, dgeo):
    """elementwise.scale_add(a, s, x) (a, x (N, C, H, W) float32, s (N or 1, C, 1, 1)), whose pairs
    also go into the planes dst at dgeo = (first plane, top, left, row length): the planes its reader
    would lay out (capture/_planes.keep_planes)."""
    N, C, H, W = a.shape
    if dst.shape[0] != N or dgeo[0] + (C + 1) // 2 > dst.shape[1] or (H + dgeo[1]) * dgeo[3] > dst.shape[2] \
            or W + dgeo[2] > dgeo[3] or min(dgeo[:3]) < 0 or a.dtype != np.float32:
        raise ValueError(f"_direct_amx.scale_add_pairs: planes {dst.shape} at {tuple(dgeo)} do not hold {a.shape} "
                         f"{a.dtype}")
    out = np.empty(a.shape, np.float32)
    _scale_add_pairs(np.ascontiguousarray(a), np.ascontiguousarray(s).reshape(-1, C), np.ascontiguousarray(x), out,
                     dst, dgeo)
    return out


@kernel
def _put_shuffled_pairs(buf, L, bias, dst, b, q0, q1, Wp, OH, OW, slopes, mode, dgeo, O, r):
    """_put_row_pairs for an output pixel-shuffled by r (N, O / r^2, OH r, OW r): the pair of its
    channels 2k, 2k + 1 at (h r + i, w r + j) is (channels (2k) r^2 + i r + j, (2k + 1) r^2 + i r + j
    of pixel (h, w)), written at dst[b, d0 + k, (h r + i + top) dWp + w r + j + left]; an odd last
    channel pairs with 0 (the bits _pair_plane gives from the shuffled float32 output; the pairs past
    O / r^2 are never written: their planes stay zero)."""
    wide()
    d0, top, left, dWp = dgeo[0], dgeo[1], dgeo[2], dgeo[3]
    bits = buf.view(np.uint32)
    rr, C = r * r, O // (r * r)
    _activate_rows(buf, L, q1 - q0, bias, slopes, mode, O)
    p = q0
    while p < q1:
        p, h, w, n = _pixels(p, q1, Wp, OW)
        if h >= OH or n <= 0:
            break
        e = p - q0
        for k in range((C + 1) // 2):
            odd = 2 * k + 1 < C
            for i in range(r):
                row = dst[b, d0 + k, (h * r + i + top) * dWp + w * r + left:]
                lo = bits[(2 * k * rr + i * r) * L + e:]
                hi = bits[((2 * k + 1) * rr + i * r) * L + e:] if odd else lo
                if r == 2 and odd:  # the row's two channels interleaved: contiguous stores
                    for t in range(n):
                        row[2 * t] = _rne(lo[t]) | (_rne(hi[t]) << np.uint32(16))
                        row[2 * t + 1] = _rne(lo[L + t]) | (_rne(hi[L + t]) << np.uint32(16))
                    continue
                for j in range(r):
                    if odd:
                        for t in range(n):
                            row[t * r + j] = _rne(lo[j * L + t]) | (_rne(hi[j * L + t]) << np.uint32(16))
                    else:
                        for t in range(n):
                            row[t * r + j] = _rne(lo[j * L + t])
        p += n


@kernel(parallel=True)
def _forward_layout(xu, xp, top, left, Wp):
    """xp: each image rounded and padded into planes of channel pairs (_pad_pairs), a task per
    plane (a task per image left one core idle in one-image inference). (Its own parallel region:
    numba mis-ran two loops in one parallel function, _direct.py.)"""
    K = xp.shape[1]
    for t in prange(xp.shape[0] * K):
        _pair_plane(xu, xp[t // K, t % K], t // K, t % K, -top, left, Wp)


@kernel(parallel=True)
def _forward(xp, pin, wa, bias, y, dst, dgeo, OH, OW, cfg, Wp, slopes, mode, scratch, tasks, woff, xoff, res,
             has_res, scale, r, rep):
    """y = act(W * x + bias) on tiles. xp (N, planes, S) uint32 planes of channel pairs
    (_forward_layout), x's 16 KB of them from plane pin; wa (kh kw, KB, Opad, 32) bfloat16 (tap,
    block of 32 channels, output channel, channel); the output into y (N, O, OH, OW) float32
    (_put_rows; has_res: times scale, plus res, its rule; r > 1: pixel-shuffled), or, where dst has
    planes, as the next convolution's planes (_put_row_pairs, dgeo, rep = (rh, rw, spread): its
    nearest upsampling by (rh, rw), or with spread _put_phase_pairs: the phases of a read in phases);
    shuffled: _put_shuffled_pairs,
    O = y.shape[1]); scratch (threads, P Opad FORWARD_CHUNK) float32; tasks (T, 3): image, first and
    end flat position (multiples of the block's width); woff (steps,), xoff (P, steps): each step's
    byte offset into wa and into xp for each of the P phases of a read in phases (_steps, its
    `phase`), every block computed for each phase into the phase's Opad rows of the scratch (chunks of
    FORWARD_CHUNK / P positions, whole blocks of 96).
    Blocks of 32 outputs x 32 positions (the 2 x 2 block), or where Opad is 16 (at most 16 outputs)
    16 x 48 (the 1 x 3 block: no product on padding). The next step's operands load while this
    step's last products run (the tile unit does not rename tiles, so a load waits for the products
    still reading its tile). A task computes FORWARD_CHUNK positions of every output into the
    scratch (tile stores at its row stride), then runs the epilogue over them in runs of whole
    rows. An epilogue per block (1024 values in runs of <= 32, between two blocks' products) made
    the convolution 1.3-2.8x slower (docs/benchmarks.md): it did not overlap the products, and its
    short runs were not vectorised. Every value is the same (the same sums, the same epilogue
    arithmetic)."""
    planes, S = xp.shape[1], xp.shape[2]
    Opad = wa.shape[2]
    P, steps = xoff.shape[0], woff.shape[0]  # P phases of a read in phases, their outputs interleaved
    pairs = dst.shape[1] > 0
    narrow = Opad == TILE
    width, ob = (48, 1) if narrow else (32, Opad // 32)
    chunk = max(96, FORWARD_CHUNK // P // 96 * 96)  # the P phases' scratch about one chunk's (whole blocks)
    for n in prange(tasks.shape[0]):
        b, q0, q1 = tasks[n, 0], tasks[n, 1], tasks[n, 2]
        buf = scratch[numba.get_thread_id()]
        tile_config(cfg)
        for c0 in range(q0, q1, chunk):
            c1 = min(q1, c0 + chunk)
            per = (c1 - c0) // width * ob  # position by position, the output blocks inner; phase by phase
            for f in range(P):
                xo = xoff[f]  # this phase's offsets (a row: the steps index it as before phases)
                for j in range(per):
                    q, o0 = c0 + j // ob * width, j % ob * 32
                    xb, wb = ((b * planes + pin) * S + q) * 4, o0 * 64
                    z = ((f * Opad + (0 if narrow else o0)) * FORWARD_CHUNK + q - c0) * 4  # its place in the scratch
                    first, last = f == 0 and j == 0, f == P - 1 and j == per - 1
                    # the next block's first step (a block's last step stores it and starts the next)
                    fn, jn = (f, j + 1) if j + 1 < per else (min(f + 1, P - 1), 0)
                    xn, wn = ((b * planes + pin) * S + c0 + jn // ob * width) * 4 + xoff[fn, 0], jn % ob * 32 * 64
                    if narrow:
                        if first:
                            row_zero()
                            row_operands(wa, wb, 64, xp, xb + xo[0], S * 4)
                        for s in range(1, steps):
                            row_step(wa, wb + woff[s], 64, xp, xb + xo[s], S * 4)
                        if not last:
                            row_last_next(buf, z, FORWARD_CHUNK * 4, wa, wn, 64, xp, xn, S * 4)
                        else:
                            row_last()
                            row_store(buf, z, FORWARD_CHUNK * 4)
                    else:
                        if first:
                            block_zero()
                            operands(wa, wb, 64, xp, xb + xo[0], S * 4)
                        for s in range(1, steps):
                            step(wa, wb + woff[s], 64, xp, xb + xo[s], S * 4)
                        if not last:
                            last_step_next(buf, z, FORWARD_CHUNK * 4, wa, wn, 64, xp, xn, S * 4)
                        else:
                            last_step()
                            block_store(buf, z, FORWARD_CHUNK * 4)
            if pairs and r > 1:  # (never with y kept: run)
                _put_shuffled_pairs(buf, FORWARD_CHUNK, bias, dst, b, c0, c1, Wp, OH, OW, slopes, mode, dgeo,
                                    y.shape[1], r)
            elif pairs and y.shape[2] == 0:
                if rep[2]:
                    _put_phase_pairs(buf, FORWARD_CHUNK, bias, dst, b, c0, c1, Wp, OH, OW, slopes, mode, dgeo, Opad,
                                     rep[0], rep[1])
                else:
                    _put_row_pairs(buf, FORWARD_CHUNK, bias, dst, b, c0, c1, Wp, OH, OW, slopes, mode, dgeo, Opad,
                                   rep[0], rep[1])
            else:
                _put_rows(buf, FORWARD_CHUNK, bias, y, b, c0, c1, Wp, slopes, mode, res, has_res, scale, r)
                if pairs:  # y kept, and laid out for the next convolution from what was stored
                    _pairs_from_rows(y.view(np.uint32), b, c0, c1, Wp, dst, dgeo)
        tile_release()


@kernel
def _pair_plane_nearest(xu, plane, b, k, top, left, Wp, rh, rw):
    """_pair_plane of the nearest upsampling of image b by integer factors (rh, rw), read from the
    small image: plane[(i + top) Wp + left + j] = the pair of channels 2k, 2k + 1 at xu[b, :, i //
    rh, j // rw] for every pixel (i, j) of the upsampled image (the caller checks that all of them
    fall inside the plane), 0 elsewhere. Each source pair is rounded once and written rw times; the
    rh rows of one source row are copies of the first."""
    C, Hs, Ws = xu.shape[1], xu.shape[2], xu.shape[3]
    W = Ws * rw
    for m in range(plane.shape[0]):
        plane[m] = 0
    if 2 * k >= C:  # a pair past x's channels (AMX's blocks of 32)
        return
    odd = 2 * k + 1 < C
    for si in range(Hs):
        first = (si * rh + top) * Wp + left
        row = plane[first:first + W]
        lo = xu[b, 2 * k, si]
        for sj in range(Ws):
            v = _rne(lo[sj]) | (_rne(xu[b, 2 * k + 1, si, sj]) << np.uint32(16) if odd else np.uint32(0))
            for t in range(rw):
                row[sj * rw + t] = v
        for a in range(1, rh):
            dst = plane[first + a * Wp:first + a * Wp + W]
            for j in range(W):
                dst[j] = row[j]


@kernel(parallel=True)
def _forward_layout_nearest(xu, xp, top, left, Wp, rh, rw):
    """_forward_layout of the nearest upsampling of xu by (rh, rw) (_pair_plane_nearest)."""
    K = xp.shape[1]
    for t in prange(xp.shape[0] * K):
        _pair_plane_nearest(xu, xp[t // K, t % K], t // K, t % K, top, left, Wp, rh, rw)


@functools.lru_cache(maxsize=256)  # a graph's convolutions ask for the same few at every call
def _steps(KB, Opad, S, Wp, kh, kw, starts=None, phase=None):
    """The forward's steps, tap by tap and block by block of 32 channels (the order of every sum):
    step s = (tap t, block kb) reads wa at s Opad 64 bytes and xp at (starts[kb] S + i Wp + j) 4
    bytes (t = i kw + j) from its block's origin (starts: each block's first plane, default 16 kb).
    phase = (rh, rw, a, c): phase (a, c) of a 3x3 correlation (padding 1) reading the nearest
    upsampling by (rh, rw) of an image from that image's own planes (padding 1, rows of Wp): output
    pixel (h rh + a, w rw + c) is the phase's flat position h Wp + w, and its tap (i, j) reads the
    upsampled pixel (h rh + a + i - 1, w rw + c + j - 1), the image's ((a + i - 1) // rh + h, (c + j -
    1) // rw + w): offsets ((a + i - 1) // rh + 1) Wp + (c + j - 1) // rw + 1 in place of i Wp + j (the
    same steps, so the same sums). (Cached, as _tasks: the kernels only read them.)"""
    s = np.arange(kh * kw * KB)
    t, kb = s // KB, s % KB
    first = kb * TILE if starts is None else np.asarray(starts, np.int64)[kb]
    i, j = t // kw, t % kw
    if phase is not None:
        rh, rw, a, c = phase
        i, j = (a + i - 1) // rh + 1, (c + j - 1) // rw + 1
    return (s * Opad * 64).astype(np.int64), ((first * S + i * Wp + j) * 4).astype(np.int64)


def block_starts(span):
    """The first plane of each block of 16 planes (32 channels) a convolution reads from `span`
    planes of channel pairs, none past the span: whole blocks, the last one ending at the span's end
    (it reads again, with zero weights, planes of the block before it: a span of 8 x 3 planes reads
    (0, 8)). A span of at most 16 planes: one block from 0 (the caller keeps 16 planes readable)."""
    KB = _blocks(span, TILE)
    return tuple(TILE * k for k in range(KB - 1)) + (max(0, span - TILE),)


def block_positions(starts, pairs):
    """Where each channel lands in the packed weight of a read at block `starts`: channel c of the
    pair planes pairs[c // 2] (relative to the read's first plane) at position 32 i + 2 (plane -
    starts[i]) + c % 2 of the first block i holding that plane (pack_weight's positions)."""
    starts, pairs = np.asarray(starts, np.int64), np.asarray(pairs, np.int64)
    block = np.argmax((pairs[:, None] >= starts[None]) & (pairs[:, None] < starts[None] + TILE), axis=1)
    return np.repeat(32 * block + 2 * (pairs - starts[block]), 2) + np.tile([0, 1], len(pairs))


def out_blocks(O):
    """The forward's padded output channels: 16 for at most 16 outputs (its 1 x 3 block), else a
    multiple of 32 (the 2 x 2 block)."""
    return TILE if O <= TILE else _blocks(O, 32) * 32


@kernel
def _pack(wu, out, positions, flip):
    """out[i kw + j, p // 32, o, p % 32] = the bfloat16 bits of w[o, c, i, j] (wu: its float32 bits),
    p = positions[c]; flip: of the flipped kernel (conv._flip's: outputs and inputs swapped, the taps
    reversed) without making it: out[(kh - 1 - i) kw + kw - 1 - j, positions[o] // 32, c, ...]. out
    is zero where nothing lands (padding)."""
    O, C, kh, kw = wu.shape
    flat, src = out.reshape(-1), wu.reshape(-1)
    for v in range(flat.shape[0]):
        flat[v] = 0
    bits = np.empty(src.shape[0], np.uint16)  # rounded in one contiguous pass, then placed
    for v in range(src.shape[0]):
        bits[v] = np.uint16(_rne(src[v]))
    b = bits.reshape(O, C, kh, kw)
    for i in range(kh):  # tap by tap: the writes run along a tile row
        for j in range(kw):
            t = (kh - 1 - i) * kw + kw - 1 - j if flip else i * kw + j
            dst = out[t]
            for o in range(O):
                for c in range(C):
                    if flip:
                        dst[positions[o] // 32, c, positions[o] % 32] = b[o, c, i, j]
                    else:
                        dst[positions[c] // 32, o, positions[c] % 32] = b[o, c, i, j]


def pack_weight(w, positions=None, channels=None, flip=False):
    """W (O, C, kh, kw) float32 -> (kh kw, channels/32, Opad, 32) bfloat16 bits: tile rows of 32
    channels of one output and tap; input channel c at position positions[c] (default c) of the
    `channels` the kernel reads (default C rounded up to 32), zeros elsewhere, O padded with zeros
    to out_blocks(O). flip: the flipped kernel's (conv._flip(w, 1, C), the input gradient's
    correlation), made from w (one pass: numpy's reshapes, rounding and copies took 20-60 us a
    call, twice per convolution and step)."""
    w = np.ascontiguousarray(w, np.float32)
    O, C, kh, kw = w.shape
    if flip:
        O, C = C, O
    channels = _blocks(C, 32) * 32 if channels is None else channels
    positions = np.arange(C, dtype=np.int64) if positions is None else np.asarray(positions, np.int64)
    if positions.shape != (C,) or (C and (positions.min() < 0 or positions.max() >= channels)):
        raise ValueError(f"_direct_amx.pack_weight: positions {positions.shape} of {C} channels in {channels}")
    out = _aligned_empty((kh * kw, channels // 32, out_blocks(O), 32), np.uint16)  # tile rows on cache lines
    _pack(w.view(np.uint32), out, positions, flip)
    return out


def plane_geometry(features, kernel):
    """(Wp, Q, S) of the planes a correlation with these output sizes and kernel reads: the padded
    row length, the flat output positions (whole blocks of 96: of 32 and of 48, either block's
    width), each plane's length (32 positions past the last tap's offset)."""
    (OH, OW), (kh, kw) = features, kernel
    Wp = OW + kw - 1
    Q = _blocks(OH * Wp, 96) * 96
    return Wp, Q, Q + (kh - 1) * Wp + kw - 1 + 32


def layout(x, xp, plane0, padding, Wp, repeat=(1, 1), planes=None):
    """x (N, C, H, W) float32 rounded and padded into xp[:, plane0:plane0 + K] (uint32 planes of
    channel pairs, K = 16 per 32 channels of x rounded up, as many as xp holds, or `planes`; pairs
    past C: zeros). repeat = (rh, rw): the planes of x's nearest upsampling by these integer factors
    (N, C, H rh, W rw), read from x (the same bits as the layout of the upsampled array)."""
    K = min(_blocks(x.shape[1], 32) * TILE, xp.shape[1] - plane0) if planes is None else planes
    if K < _blocks(x.shape[1], 2) or plane0 + K > xp.shape[1]:
        raise ValueError(f"_direct_amx.layout: {K} planes from plane {plane0} of {xp.shape} for {x.shape[1]} "
                         f"channels")
    xu, dst = np.ascontiguousarray(x).view(np.uint32), xp[:, plane0:plane0 + K]
    if tuple(repeat) == (1, 1):
        _forward_layout(xu, dst, padding[0], padding[1], Wp)
        return
    (rh, rw), (H, W) = repeat, x.shape[2:]
    if (padding[0] + H * rh) * Wp > xp.shape[2] or padding[1] + W * rw > Wp or min(padding) < 0 or min(repeat) < 1:
        raise ValueError(f"_direct_amx.layout: {x.shape} upsampled by {tuple(repeat)} at padding {padding} does "
                         f"not fit planes of {xp.shape[2]} in rows of {Wp}")
    _forward_layout_nearest(xu, dst, padding[0], padding[1], Wp, rh, rw)


_NO_PLANES = np.zeros((1, 0, 1), np.uint32)
_NO_RESIDUAL = np.zeros((1, 1, 1, 1), np.float32)


def run(xp, pin, wa, bias, O, features, kernel, slope, workers, dst=None, dgeo=None, residual=None, shuffle=1,
        residual_scale=1.0, keep=False, repeat=(1, 1), starts=None, phases=(1, 1)):
    """act(W * x + bias) on tiles from the planes xp[:, pin:pin + 16 KB] (layout's; wa from
    pack_weight, bias padded with zeros to its Opad), or from the 16 planes at pin + starts[kb] for
    block kb (block_starts: a span of regions smaller than whole blocks; wa packed at block_positions):
    -> y (N, O, OH, OW) float32, or None
    after writing the output's pairs into the planes dst at dgeo = (first plane, top, left, Wp)
    (the next convolution's layout: `layout`'s bits from y; with a shuffle, from the shuffled y).
    slope: None (no activation), a number (0: relu, else leaky: activation.rectify_) or an array of
    O (PReLU's weights: _prelu_kernel).
    residual: a float32 array of y's shape added after the activation (a residual add done by the
    epilogue: np.add's values, without a pass of its own); with a shuffle by r, also (N, O / r^2, OH,
    OW): its nearest upsampling by r added, without being made. residual_scale: the activated output
    times this float32 number first (`y * s + residual`, np.multiply's then np.add's values; only with
    a residual). shuffle = r > 1: y pixel-shuffled by r, (N, O / r^2, OH r, OW r), stored so by the
    epilogue (pixel_shuffle's values, without its pass). keep: with dst, y is made too (with its
    residual) and dst gets its pairs (a value that a convolution reads and something else too: a
    residual chain's next block; not with a shuffle). repeat = (rh, rw): dst gets the planes of y's
    nearest upsampling by these integer factors (the convolution reading them: RRDBNet's conv_up2;
    the bits layout(..., repeat) gives from y; only with dst, neither shuffled nor kept).
    phases = (rh, rw): the correlation (3x3, padding 1, features (OH, OW)) of the nearest upsampling
    by (rh, rw) of the image whose planes xp holds (its own layout: (OH / rh, OW / rw), padding 1),
    read from them phase by phase (_steps' `phase`: each output pixel's taps read the pixels the
    upsampled layout repeats, so the same sums: `layout(..., repeat)`'s bits, without its planes rh
    rw times as large); only into planes dst, neither repeated, kept, shuffled nor with a residual."""
    return prepare(xp.shape, pin, wa, bias, O, features, kernel, slope, None if dst is None else dst.shape, dgeo,
                   None if residual is None else residual.shape, shuffle, residual_scale, keep, repeat,
                   starts, phases)(xp, workers, dst, residual)


def prepare(xshape, pin, wa, bias, O, features, kernel, slope, dshape=None, dgeo=None, rshape=None, shuffle=1,
            residual_scale=1.0, keep=False, repeat=(1, 1), starts=None, phases=(1, 1)):
    """run's checks and constants for planes of shape xshape (and dst's dshape, the residual's rshape,
    float32) done once: -> go(xp, workers, dst=None, residual=None), run's call on arrays of those
    shapes (a graph's convolution calls it at every replay: ~9 us of Python fewer a call)."""
    precision.require_amx("conv2d")
    if residual_scale != 1 and rshape is None:
        raise ValueError(f"_direct_amx.run: residual_scale {residual_scale} without a residual")
    (OH, OW), (kh, kw) = features, kernel
    ph, pw = (int(v) for v in phases)
    if (ph, pw) != (1, 1) and (tuple(kernel) != (3, 3) or min(ph, pw) < 1 or OH % ph or OW % pw or dshape is None
                               or keep or shuffle != 1 or rshape is not None or tuple(repeat) != (1, 1)):
        raise ValueError(f"_direct_amx.run: phases {tuple(phases)} of a {tuple(kernel)} correlation to {features}: "
                         f"only 3x3, into planes alone, of sizes their multiples")
    Wp, Q, S = plane_geometry((OH // ph, OW // pw), kernel)  # the planes read: the image's own, in phases
    if starts is not None:
        starts = tuple(int(v) for v in starts)
    last = wa.shape[1] * TILE if starts is None else max(starts, default=0) + TILE
    if xshape[2] != S or pin + last > xshape[1] or (starts is not None and (
            len(starts) != wa.shape[1] or min(starts) < 0)):
        raise ValueError(f"_direct_amx.run: planes {xshape} do not hold {wa.shape[1]} blocks of 16 planes of "
                         f"{S} from plane {pin}{'' if starts is None else f' at {starts}'}")
    N = xshape[0]
    slopes = np.zeros(wa.shape[2], np.float32)
    if isinstance(slope, np.ndarray):
        slopes[:O], mode = slope.reshape(-1), 2
    else:
        slopes[:], mode = (0 if slope is None else slope), (0 if slope is None else 1)
    if shuffle > 1 and (O % (shuffle * shuffle) or (dshape is not None and (rshape is not None or keep))):
        raise ValueError(f"_direct_amx.run: a pixel shuffle by {shuffle} of {O} channels, or with planes and a "
                         f"residual or a kept output")
    rh, rw = (int(v) for v in repeat)
    if (rh, rw) != (1, 1) and (dshape is None or keep or shuffle > 1 or min(rh, rw) < 1):
        raise ValueError(f"_direct_amx.run: a repeat {tuple(repeat)} only into planes, neither kept nor shuffled")
    if rshape is not None and dshape is not None and not keep:
        raise ValueError("_direct_amx.run: a residual with planes: only with the output kept (keep=True)")
    # with planes nothing is stored into y: its shape only carries O to the shuffled pairs' epilogue
    yshape = (N, O // (shuffle * shuffle), OH * shuffle, OW * shuffle) if dshape is None or keep else (N, O, 0, 0)
    planes = dshape is not None
    # what the epilogue writes into dst: pairs of channels at rows (h f + i + top) dWp + w f + j + left
    pairs = _blocks(O, 2) if keep else _blocks(O // (shuffle * shuffle), 2) if shuffle > 1 else wa.shape[2] // 2
    fh, fw = (rh, rw) if (rh, rw) != (1, 1) else (shuffle, shuffle)
    if not planes:
        dgeo = np.zeros(4, np.int64)
    elif len(dshape) != 3 or dshape[0] != N or dgeo[0] + pairs > dshape[1] or \
            (OH * fh + dgeo[1]) * dgeo[3] > dshape[2] or OW * fw + dgeo[2] > dgeo[3] or min(dgeo[:3]) < 0:
        raise ValueError(f"_direct_amx.run: planes {dshape} at {tuple(dgeo)} do not hold {O} channels of "
                         f"{(OH * fh, OW * fw)}")
    small = (N, O // (shuffle * shuffle), OH, OW) if shuffle > 1 else None
    rshape = None if rshape is None else tuple(rshape)
    has_res = 0 if rshape is None else 1 if rshape == yshape else 2 if rshape == small else -1
    if has_res < 0:
        raise ValueError(f"_direct_amx.run: a residual {rshape} for an output {yshape}"
                         f"{'' if small is None else f' (or its source {small})'}")
    xshape, dshape = tuple(xshape), None if dshape is None else tuple(dshape)
    dgeo, scale = np.asarray(dgeo, np.int64), np.float32(residual_scale)
    woff, xoff = _steps(wa.shape[1], wa.shape[2], S, Wp, kh, kw, starts)
    if (ph, pw) == (1, 1):
        xoff, rep = xoff[None], np.array([rh, rw, 0], np.int64)
    else:  # every phase in one pass, each into its own scratch (a chunk's pixels read once, not per phase)
        xoff = np.stack([_steps(wa.shape[1], wa.shape[2], S, Wp, kh, kw, starts, (ph, pw, a, c))[1]
                         for a in range(ph) for c in range(pw)])
        rep = np.array([ph, pw, 1], np.int64)
    OHs, OWs = OH // ph, OW // pw
    Opad, width = wa.shape[2], 48 if wa.shape[2] == TILE else 32

    def go(xp, workers, dst=None, residual=None):
        if xp.shape != xshape or (None if dst is None else dst.shape) != dshape or \
                (None if residual is None else residual.shape) != rshape or \
                (residual is not None and residual.dtype != np.float32):
            raise ValueError(f"_direct_amx.run: planes {xp.shape}, {None if dst is None else dst.shape} and a "
                             f"residual {None if residual is None else (residual.shape, residual.dtype)} where "
                             f"{xshape}, {dshape} and {rshape} float32 were prepared")
        y = np.empty(yshape, np.float32)
        scratch = _aligned_empty((numba.get_num_threads(), ph * pw * Opad * FORWARD_CHUNK), np.float32)
        _forward(xp, pin, wa, bias, y, _NO_PLANES if dst is None else dst, dgeo, OHs, OWs, _amx.CONFIG, Wp, slopes,
                 mode, scratch, _tasks(N, Q, workers, width), woff, xoff,
                 _NO_RESIDUAL if residual is None else np.ascontiguousarray(residual), has_res, scale, shuffle, rep)
        return None if planes and not keep else y
    return go


@functools.lru_cache(maxsize=256)
def _tasks(N, Q, workers, width=32):
    """(image, q0, q1) tasks: blocks of `width` flat positions, about 4 tasks per worker in all."""
    blocks = Q // width
    per = max(1, _blocks(N * blocks, 4 * workers))
    return np.array([(b, s * width, min(blocks, s + per) * width) for b in range(N) for s in range(0, blocks, per)],
                    np.int64).reshape(-1, 3)


def correlate(x, w, features, padding, bias, slope, workers, residual=None, residual_scale=1.0):
    """conv.py's direct correlate on tiles: x (N, C, H, W), w (O, C, kh, kw) float32 -> (N, O, OH, OW)
    float32, the activation fused (slope None: none, 0: relu, > 0: leaky), then `residual` added
    (run's)."""
    precision.require_amx("conv2d")
    O, _, kh, kw = w.shape
    wa = pack_weight(w)
    Wp, _, S = plane_geometry(features, (kh, kw))
    b = np.zeros(wa.shape[2], np.float32)
    if bias is not None:
        b[:O] = bias
    xp = _aligned_empty((x.shape[0], wa.shape[1] * TILE, S), np.uint32)
    layout(x, xp, 0, padding, Wp)
    return run(xp, 0, wa, b, O, features, (kh, kw), slope, workers, residual=residual,
               residual_scale=residual_scale)


CHUNK = 16  # steps of 32 positions per visit of the taps (their input and gradient stay in L2)
# The weight gradient's tasks: a 32 x 32 block of (channel, output) and a run of images. 32 -> 32
# channels is one block: without runs one thread did all the work. At least MIN_TASKS tasks (runs of
# images, at most one per image), a rule of shapes only, so that the sums' order never depends on
# the threads; the runs' totals are added in order.
MIN_TASKS = 8


@kernel
def _flush(acc, d, c0, o0, T, width):
    """d[t, c0 + c, o0 + o] += acc[t, c, o] (32 x width per tap), then acc = 0: a block's sums onto
    the running totals."""
    for t in range(T):
        for c in range(32):
            row, src = d[t, c0 + c, o0:], acc[t, c * width:]
            for o in range(width):
                row[o] += src[o]
                src[o] = 0


@kernel(parallel=True)
def _weight_grad(xf, gt, parts, cfg, offsets, plane, rb, accs, tasks):
    """parts[r, t, c, o] = sum_{b in run r, q} x[b, c, offsets[t] + q] g[b, q, o] on tiles. xf (N,
    Cpad plane + tail) bfloat16 padded planes; gt (N, P, Opad) uint32 gradient pairs (P a multiple
    of 16); accs (threads, T, 1024) float32, zero: each tap's 32 x 32 block between visits; tasks
    (T', 5): first channel and first output of a 32 x 32 block (32 x 16 where Opad is 16: the 2 x 1
    block), run r and its images [b0, b1).
    Per image, CHUNK steps at a time, every tap adds its products into its block (the chunk's data
    stays in cache for all taps); every rb steps and at the end of each image the blocks go onto
    the run's totals (_flush): chains of about sqrt(steps)."""
    N, P, Opad = gt.shape
    X, T = xf.shape[1], offsets.shape[0]
    narrow = Opad == TILE  # at most 16 outputs: the 2 x 1 block (32 x 16), no product on padding
    width = TILE if narrow else 32
    for n in prange(tasks.shape[0]):
        c0, o0, r, b0, b1 = tasks[n, 0], tasks[n, 1], tasks[n, 2], tasks[n, 3], tasks[n, 4]
        acc, dwt = accs[numba.get_thread_id()], parts[r]
        for t in range(T):
            for c in range(c0, c0 + 32):
                for o in range(o0, o0 + width):
                    dwt[t, c, o] = 0
        tile_config(cfg)
        for b in range(b0, b1):
            since = 0
            for p0 in range(0, P, 16 * CHUNK):
                p1 = min(P, p0 + 16 * CHUNK)
                for t in range(T):
                    a = acc[t]
                    x = (b * X + c0 * plane + offsets[t] + 2 * p0) * 2  # a step: 32 positions further
                    g = ((b * P + p0) * Opad + o0) * 4
                    if narrow:
                        col_load(a, 0, 64)
                        col_operands(xf, x, plane * 2, gt, g, Opad * 4)
                        for _ in range(p0 + 16, p1, 16):
                            x += 64
                            g += 16 * Opad * 4
                            col_step(xf, x, plane * 2, gt, g, Opad * 4)
                        col_last()
                        col_store(a, 0, 64)
                    else:
                        block_load(a, 0, 128)
                        operands(xf, x, plane * 2, gt, g, Opad * 4)
                        for _ in range(p0 + 16, p1, 16):
                            x += 64
                            g += 16 * Opad * 4
                            step(xf, x, plane * 2, gt, g, Opad * 4)
                        last_step()
                        block_store(a, 0, 128)
                since += (p1 - p0) // 16
                if since >= rb or p1 == P:
                    _flush(acc, dwt, c0, o0, T, width)
                    since = 0
        tile_release()


def weight_grad(x, g, padding, kernel_size):
    """conv.py's direct weight gradient on tiles: x (N, C, H, W), g (N, O, OH, OW) float32 ->
    dW (O, C, kh, kw) float32."""
    precision.require_amx("conv2d")
    O, OH, OW = g.shape[1:]
    Hp, Wp, P = _grad_geometry((OH, OW), kernel_size)
    xf = _input_planes(x, Hp, Wp, P)
    gt = _aligned_empty((x.shape[0], P, out_blocks(O)), np.uint32)
    weight_grad_layout(np.ascontiguousarray(x).view(np.uint32), np.ascontiguousarray(g).view(np.uint32),
                       xf, gt, _blocks(x.shape[1], 32) * 32, -padding[0], padding[1], Wp, Hp)
    return _weight_grad_tiles(xf, gt, x.shape[1], O, Hp, Wp, kernel_size)


def weight_grad_planes(x, gt, padding, kernel_size, features, O):
    """weight_grad from the gradient already in its layout: gt (N, P, out_blocks(O)) uint32 (_grad_pairs's
    pairs of flat positions over rows of OW + kw - 1, P from _grad_geometry; _direct_amx_grad.py)."""
    precision.require_amx("conv2d")
    Hp, Wp, P = _grad_geometry(features, kernel_size)
    if gt.shape != (x.shape[0], P, out_blocks(O)) or gt.dtype != np.uint32:
        raise ValueError(f"_direct_amx.weight_grad_planes: gt {gt.shape} {gt.dtype} is not the layout of "
                         f"{O} channels at {features} for {x.shape[0]} images")
    xf = _input_planes(x, Hp, Wp, P)
    xu = np.ascontiguousarray(x).view(np.uint32)
    weight_grad_layout(xu, xu, xf, gt[:, :0], _blocks(x.shape[1], 32) * 32, -padding[0], padding[1], Wp, Hp)
    return _weight_grad_tiles(xf, gt, x.shape[1], O, Hp, Wp, kernel_size)


def _grad_geometry(features, kernel_size):
    """(Hp, Wp, P) of the weight gradient: the padded input's sizes, and the pairs of flat output
    positions over rows of Wp (whole steps of 16; zero past the last)."""
    (OH, OW), (kh, kw) = features, kernel_size
    Wp = OW + kw - 1
    return OH + kh - 1, Wp, _blocks(_blocks(OH * Wp, 2), 16) * 16


def _input_planes(x, Hp, Wp, P):
    """The weight gradient's input buffer: (N, Cpad Hp Wp + tail) uint16 (planes past C: zeros; the
    tail: a tap's last step reads up to 2 P + Wp + 32 past the last plane's origin)."""
    return _aligned_empty((x.shape[0], _blocks(x.shape[1], 32) * 32 * Hp * Wp + 2 * P + Wp + 32), np.uint16)


def _weight_grad_tiles(xf, gt, C, O, Hp, Wp, kernel_size):
    """_weight_grad on both operands' layouts -> dW (O, C, kh, kw) float32."""
    N, P, Opad = gt.shape
    kh, kw = kernel_size
    Cpad = _blocks(C, 32) * 32
    i, j = np.unravel_index(np.arange(kh * kw), (kh, kw))
    offsets = (i * Wp + j).astype(np.int64)
    blocks = [(c0, o0) for c0 in range(0, Cpad, 32) for o0 in range(0, Opad, 32)]
    runs = max(1, min(N, _blocks(MIN_TASKS, len(blocks))))
    tasks = np.array([(c0, o0, r, N * r // runs, N * (r + 1) // runs) for r in range(runs) for c0, o0 in blocks],
                     np.int64)
    rb = max(1, round((N * P / 16) ** 0.5))  # about sqrt(steps) blocks of sqrt(steps) steps
    parts = np.empty((runs, kh * kw, Cpad, Opad), np.float32)
    accs = _aligned_empty((numba.get_num_threads(), kh * kw, 1024), np.float32)
    accs[...] = 0
    _weight_grad(xf, gt, parts, _amx.CONFIG, offsets, Hp * Wp, rb, accs, tasks)
    dwt = functools.reduce(np.add, parts[1:], parts[0])  # the runs' sums in order
    return np.ascontiguousarray(dwt[:, :C, :O].transpose(2, 1, 0).reshape(O, C, kh, kw))

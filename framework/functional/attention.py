"""Attention: multi-head softmax attention with an optional additive bias and mask, fused into one
numba pass each way, and the window machinery of Swin-style networks (SwinIR runs on it).

Layout: tokens (B, N, C) with the heads side by side along C (head h owns channels h d ... h d + d - 1),
which is what a linear layer produces and consumes: no split, permute or transpose copies.

- `attention(q, k, v, heads, scale, bias, mask)`: per head softmax(scale q k^T + bias + mask) v, with
  N query tokens and M key tokens (M may differ from N: overlapping cross-attention).
- `window_attention(qkv, heads, ...)`: the same on the packed output of one qkv linear (B, N, 3C)
  (BasicSR's WindowAttention between its two linears).
- `attention_softmax(scores, scale, bias, mask)`: only the softmax(scale s + bias + mask) part, for a
  caller that must act between the softmax and the product with v (attention dropout).
- `scale`: a number, or a Tensor of one factor per head (a learnt logit scale or temperature; it gets
  a gradient). `bias` (nH, N, M): a Tensor (a relative-position bias, gathered from its table or made
  by an MLP), or None. `mask` (nW, N, M): a constant numpy array (0 / -100 for shifted windows) or
  None; batch item b uses mask[b % nW] (window_partition's order: an image's windows in a row).
- `window_partition` / `window_reverse` (each direction's backward is the other), `shift_mask` (the
  shifted-window mask), `relative_position_index` (the bias table's row of each token pair).

How later architectures map onto it: HAT's window attention is SwinIR's; its overlapping
cross-attention is `attention` with M > N and a (nH, N, M) bias. Swin2SR's scaled cosine attention
normalises q and k per head, passes exp(clamp(logit_scale)) as the per-head `scale` and its
continuous position bias (16 sigmoid of an MLP's table) as `bias`. DAT's spatial windows may be
rectangular (window sizes are ints or (h, w) pairs); its channel attention is `attention` on
transposed tokens with the per-head temperature as `scale`.

The forward saves the attention weights (B, nH, N, M) for the backward, which is one pass too.
Under autocast("bf16") on an AMX CPU an inference forward (no weights kept) of 16 k queries and at
most 1024 keys of at most 32 channels a head (Swin windows, HAT's overlapping cross attention) runs
its two products on tiles with bfloat16 operands (_attention_amx.py); a training forward and every
other shape stay float32 here.
Every Function here has an ONNX converter (framework/onnx/ops/attention.py); the partition and the
mask hold for one input size (fixed-size graphs).
"""
from __future__ import annotations

import functools

import numba
import numpy as np

from .. import precision
from .._check import float_array, int_arg, number, pair
from .._jit import kernel, launch, prange
from .._simd import vadd, vhmax, vhsum, vload, vload_part, vmax, vmul, vpast, vsplat, vstore, vstore_part, vsub, vwiden
from .._simd_math import vexp_lanes
from ..autograd import Function, is_grad_enabled
from ..tensor import Tensor
from . import _attention_amx
from .rows import SERIAL_ELEMS, like, row_dot, row_max, row_max2, row_sum16, softmax_rows_grad, vexp
from .shape import cat, getitem, reshape

__all__ = ["attention", "window_attention", "attention_softmax", "window_partition",
           "window_reverse", "shift_mask", "relative_position_index", "AttentionFunction",
           "WindowAttentionFunction", "AttentionSoftmaxFunction", "WindowPartitionFunction"]


# -- windows ---------------------------------------------------------------------------------------
def _partition(x: np.ndarray, wh: int, ww: int) -> np.ndarray:
    b, h, w, c = x.shape
    t = x.reshape(b, h // wh, wh, w // ww, ww, c).transpose(0, 1, 3, 2, 4, 5)
    return np.ascontiguousarray(t).reshape(-1, wh * ww, c)


def _reverse(windows: np.ndarray, wh: int, ww: int, h: int, w: int) -> np.ndarray:
    c = windows.shape[-1]
    t = windows.reshape(-1, h // wh, w // ww, wh, ww, c).transpose(0, 1, 3, 2, 4, 5)
    return np.ascontiguousarray(t).reshape(-1, h, w, c)


class WindowPartitionFunction(Function):
    """(B, H, W, C) <-> (B * H/wh * W/ww, wh * ww, C): windows in raster order, tokens row-major
    (`reverse` goes back). One copy each way."""

    @staticmethod
    def forward(ctx, x, *, window, reverse, hw):
        ctx.meta = (window, reverse, hw)
        return _reverse(x, *window, *hw) if reverse else _partition(x, *window)

    @staticmethod
    def backward(ctx, g):  # dL/dx = the inverse rearrangement of g
        window, reverse, hw = ctx.meta
        return _partition(g, *window) if reverse else _reverse(g, *window, *hw)


def window_partition(x, window_size):
    """(B, H, W, C) -> (B * H/wh * W/ww, wh * ww, C) for window_size wh x ww (an int: square); H
    and W multiples of the window. Windows in raster order, each window's tokens row-major."""
    wh, ww = pair("window_partition", "window_size", window_size, minimum=1)
    shape = float_array("window_partition", "x", x).shape
    if len(shape) != 4 or shape[1] % wh or shape[2] % ww:
        raise ValueError(f"window_partition: expected (B, H, W, C) with H a multiple of {wh} and W "
                         f"of {ww}, got {shape}")
    return WindowPartitionFunction.apply(x, window=(wh, ww), reverse=False, hw=tuple(shape[1:3]))


def window_reverse(windows, window_size, h: int, w: int):
    """window_partition's inverse: (B * nW, wh * ww, C) -> (B, H, W, C)."""
    wh, ww = pair("window_reverse", "window_size", window_size, minimum=1)
    h, w = int_arg("window_reverse", "h", h), int_arg("window_reverse", "w", w)
    shape = float_array("window_reverse", "windows", windows).shape
    if (len(shape) != 3 or shape[1] != wh * ww or h % wh or w % ww
            or shape[0] % ((h // wh) * (w // ww))):
        raise ValueError(f"window_reverse: {shape} are not windows of {wh}x{ww} tokens of "
                         f"(B, {h}, {w}, C)")
    return WindowPartitionFunction.apply(windows, window=(wh, ww), reverse=True, hw=(h, w))


@functools.lru_cache(maxsize=16)
def _shift_mask(h, w, wh, ww, sh, sw, dtype):
    region = np.zeros((h, w))
    rows = (slice(0, -wh), slice(-wh, -sh), slice(-sh, None))
    cols = (slice(0, -ww), slice(-ww, -sw), slice(-sw, None))
    for i, hs in enumerate(rows):
        for j, wsl in enumerate(cols):
            region[hs, wsl] = 3 * i + j
    win = region.reshape(h // wh, wh, w // ww, ww).transpose(0, 2, 1, 3).reshape(-1, wh * ww)
    mask = np.where(win[:, None, :] != win[:, :, None], -100.0, 0.0).astype(dtype)
    mask.flags.writeable = False
    return mask


def shift_mask(h: int, w: int, window_size, shift_size, dtype=np.float32) -> np.ndarray:
    """The (nW, wh ww, wh ww) mask of shifted-window attention on an (h, w) token grid (BasicSR's
    calculate_mask): after the cyclic shift a window may hold tokens from up to 4 regions that were
    not neighbours; a pair from different regions gets -100 (exp(-100) ~ 0 after the softmax),
    others 0. window_size and shift_size (0 < shift < window) are ints or (h, w) pairs. Read-only
    and cached: every shifted block at this size shares it."""
    wh, ww = pair("shift_mask", "window_size", window_size, minimum=1)
    sh, sw = pair("shift_mask", "shift_size", shift_size, minimum=1)
    if sh >= wh or sw >= ww or h % wh or w % ww:
        raise ValueError(f"shift_mask: the shift ({sh}, {sw}) must be smaller than the window "
                         f"({wh}, {ww}), which must divide the grid ({h}, {w})")
    return _shift_mask(int(h), int(w), wh, ww, sh, sw, np.dtype(dtype))


def relative_position_index(wh: int, ww: int) -> np.ndarray:
    """(wh ww, wh ww) int64: for tokens p, q of a window, the row of the bias table for their offset
    (dy + wh - 1) (2 ww - 1) + (dx + ww - 1)."""
    ys, xs = np.meshgrid(np.arange(wh), np.arange(ww), indexing="ij")
    ys, xs = ys.ravel(), xs.ravel()
    dy = ys[:, None] - ys[None, :] + wh - 1
    dx = xs[:, None] - xs[None, :] + ww - 1
    return (dy * (2 * ww - 1) + dx).astype(np.int64)


# -- the attention's softmax -----------------------------------------------------------------------
@kernel(parallel=True)
def _attention_softmax_kernel(s, bias, mask, scale, heads, n, y):
    """Rows r of s (R, M), R = B * heads * n: y = softmax(scale s + bias[h, i] + mask[w, i]),
    with h = (r // n) % heads, i = r % n, w = (r // (heads n)) % nW (no bias / mask: (0, M))."""
    R, M = s.shape
    nb = bias.shape[0]
    nw = mask.shape[0] // n
    sc = like(scale, s[0, 0])
    for r in prange(R):
        i = r % n
        if nb > 0:
            brow = ((r // n) % heads) * n + i
            for j in range(M):
                y[r, j] = sc * s[r, j] + bias[brow, j]
        else:
            for j in range(M):
                y[r, j] = sc * s[r, j]
        if nw > 0:
            mrow = ((r // (heads * n)) % nw) * n + i
            for j in range(M):
                y[r, j] += mask[mrow, j]
        m = row_max(y, r)
        for j in range(M):
            y[r, j] = vexp(y[r, j] - m)
        inv = like(1.0 / row_sum16(y[r], M), s[r, 0])
        for j in range(M):
            y[r, j] = y[r, j] * inv


class AttentionSoftmaxFunction(Function):
    """s (B, nH, N, M), bias (nH, N, M) or None -> softmax(scale s + bias (+ mask)) along the last
    axis; mask (nW, N, M) of the input's dtype or None."""

    @staticmethod
    def forward(ctx, s, bias, *, scale, mask):
        _, heads, n, m = s.shape
        s2 = np.ascontiguousarray(s).reshape(-1, m)
        b2 = np.zeros((0, m), s.dtype) if bias is None else np.ascontiguousarray(bias).reshape(-1, m)
        m2 = np.zeros((0, m), s.dtype) if mask is None else mask.reshape(-1, m)
        y = np.empty(s2.shape, s.dtype)
        launch(_attention_softmax_kernel, s.size < SERIAL_ELEMS, s2, b2, m2, float(scale), heads, n, y)
        ctx.save_for_backward(y)
        ctx.meta = (s.shape, scale)
        return y.reshape(s.shape)

    @staticmethod
    def backward(ctx, g):  # t = softmax grad y (g - sum(g y)); dL/ds = scale t, dL/dbias = sum_batch t
        (y,) = ctx.saved_tensors
        shape, scale = ctx.meta
        t = np.empty_like(y)
        launch(softmax_rows_grad, y.size < SERIAL_ELEMS,
               np.ascontiguousarray(g, y.dtype).reshape(y.shape), y, t, False)
        t = t.reshape(shape)
        gbias = t.sum(axis=0) if ctx.needs_input_grad[1] else None
        if ctx.needs_input_grad[0]:
            t *= t.dtype.type(scale)
            return t, gbias
        return None, gbias


def attention_softmax(scores, scale=1.0, bias=None, mask=None):
    """softmax(scale * scores + bias (+ mask per window)) along the last axis, one pass: scores
    (B, nH, N, M) (q k^T) -> the attention weights, same shape. scale, bias (nH, N, M) and mask
    (nW, N, M) as in `attention`. In BasicSR's form: softmax((q scale) k^T + bias + mask)."""
    owner = "attention_softmax"
    shape = float_array(owner, "scores", scores).shape
    if len(shape) != 4 or 0 in shape:
        raise ValueError(f"{owner}: scores must be (B, nH, N, M) (non-empty), got {shape}")
    b_, heads, n, m = shape
    _check_bias(owner, "scores", scores, bias, heads, n, m)
    mask = _check_mask(owner, mask, scores.dtype, b_, n, m)
    scores, scale = _scale(owner, scores, scale, heads)
    return AttentionSoftmaxFunction.apply(scores, bias, scale=scale, mask=mask)


# -- the fused attention ---------------------------------------------------------------------------
# Batch items per task of the backward: the bias gradient is a sum of per-task partials in task
# order, so it does not depend on the thread count.
_CHUNK = 8


LANES = 16  # a vector of the forward's rows (one zmm of float32, two of float64)
SCORE_VECTORS = 4  # score vectors per register block: 64 keys of a query row at a time
PV_ROWS = 8  # query rows whose outputs are summed side by side (8 chains hide an add's latency)


@kernel(inline=True)
def _logits(a, scv, bias, mask, h, i, w, j, M):
    """scale a + bias[h, i, j:] + mask[w, i, j:] on the LANES keys from j (the lanes past M: as
    they come; no bias / mask: (0, ...) arrays)."""
    n = max(0, min(LANES, M - j))
    a = vmul(scv, a)
    if bias.shape[0] > 0:
        a = vadd(a, vload_part(bias[h, i], j, a, 0, n))
    if mask.shape[0] > 0:
        a = vadd(a, vload_part(mask[w, i], j, a, 0, n))
    return a


@kernel(inline=True)
def _softmax_block(row, a0, a1, a2, a3, M):
    """row[:M] = softmax of a row's M <= 4 LANES logits held in a0..a3 (key j in vector j // LANES,
    lane j % LANES): the max (row_max's value: a max is exact in any order), exp (rows.vexp's
    bits per lane), their float64 sum in row_sum16's order (lane l: keys l, l + 16, ... in order,
    then vhsum's tree), each exp times the float32 inverse of the sum; the row stored once."""
    ninf = like(-np.inf, row[0])
    a0, a1 = vpast(a0, M, ninf), vpast(a1, M - LANES, ninf)
    a2, a3 = vpast(a2, M - 2 * LANES, ninf), vpast(a3, M - 3 * LANES, ninf)
    mv = vsplat(vhmax(vmax(vmax(a0, a1), vmax(a2, a3))), LANES)
    e0, e1 = vexp_lanes(vsub(a0, mv)), vexp_lanes(vsub(a1, mv))  # past M: exp(-inf) = 0
    e2, e3 = vexp_lanes(vsub(a2, mv)), vexp_lanes(vsub(a3, mv))
    total = vadd(vadd(vadd(vwiden(e0), vwiden(e1)), vwiden(e2)), vwiden(e3))
    inv = vsplat(like(1.0 / vhsum(total), row[0]), LANES)
    for t, e in ((0, e0), (1, e1), (2, e2), (3, e3)):
        j = t * LANES
        if j + LANES <= M:
            vstore(row, j, vmul(e, inv))
        elif j < M:
            vstore_part(row, j, vmul(e, inv), 0, M - j)


@kernel(parallel=True)
def _attention_kernel(q, k, v, offsets, heads, bias, mask, scale, p, out):
    """Per batch item b and head h (q: q[b, :, oq + h d + c], N x d; k: k[b, :, ok + h d + c],
    M x d; v: v[b, :, ov + h dv + c], M x dv; offsets = (oq, ok, ov, d, dv): q, k, v may be one
    packed array): p[b, h] = softmax(scale q k^T + bias[h] + mask[b % nW]),
    out[b, :, h dv + c] = (p v)[:, c]. No bias / mask: (0, N, M) arrays. p (B, heads, N, M), or
    (threads, heads, N, M): each thread's scratch, where no backward needs the weights.
    Each score is a chain over the channels c in order from 0 (q_c k_c rounded, then added), kept
    in a register block of SCORE_VECTORS x LANES keys of one query row (k transposed into a local
    buffer once per head); each output a chain over the keys j in order from 0 (p_ij v_jc), a
    vector of LANES channels of v per step for PV_ROWS query rows side by side: explicit vectors
    (_simd) where LLVM's own loops stored and reloaded the rows at every channel, and p's transpose
    and the output's are gone. A row's softmax sums its exps in row_sum16's order (as
    attention_softmax); up to SCORE_VECTORS x LANES keys it runs on the registers that hold the
    logits (_softmax_block), longer rows are stored first."""
    B, N = q.shape[0], q.shape[1]
    M = k.shape[1]
    oq, ok, ov, d, dv = offsets
    nw = mask.shape[0]
    sc = like(scale, q[0, 0, 0])
    W = -(-M // (SCORE_VECTORS * LANES)) * SCORE_VECTORS * LANES  # keys padded to whole blocks
    for b in prange(B):
        kt = np.zeros((d, W), q.dtype)
        zero = vsplat(like(0.0, sc), LANES)
        scv = vsplat(sc, LANES)
        for h in range(heads):
            q0, k0, v0 = oq + h * d, ok + h * d, ov + h * dv
            for c in range(d):
                for j in range(M):
                    kt[c, j] = k[b, j, k0 + c]
            s = p[b, h] if p.shape[0] == B else p[numba.get_thread_id(), h]  # the weights kept, or the
            # thread's scratch
            for i in range(N):
                row, qi = s[i], q[b, i]
                for j0 in range(0, M, SCORE_VECTORS * LANES):
                    a0 = a1 = a2 = a3 = zero
                    for c in range(d):
                        qc, kr = vsplat(qi[q0 + c], LANES), kt[c]
                        a0 = vadd(a0, vmul(qc, vload(kr, j0, LANES)))
                        a1 = vadd(a1, vmul(qc, vload(kr, j0 + LANES, LANES)))
                        a2 = vadd(a2, vmul(qc, vload(kr, j0 + 2 * LANES, LANES)))
                        a3 = vadd(a3, vmul(qc, vload(kr, j0 + 3 * LANES, LANES)))
                    a0 = _logits(a0, scv, bias, mask, h, i, b % max(nw, 1), j0, M)
                    a1 = _logits(a1, scv, bias, mask, h, i, b % max(nw, 1), j0 + LANES, M)
                    a2 = _logits(a2, scv, bias, mask, h, i, b % max(nw, 1), j0 + 2 * LANES, M)
                    a3 = _logits(a3, scv, bias, mask, h, i, b % max(nw, 1), j0 + 3 * LANES, M)
                    if M <= SCORE_VECTORS * LANES:  # the whole row in registers: its softmax here
                        _softmax_block(row, a0, a1, a2, a3, M)
                    else:
                        for t, a in ((0, a0), (1, a1), (2, a2), (3, a3)):
                            j = j0 + t * LANES
                            if j + LANES <= M:  # whole: a masked store stalls the scalar loads after it
                                vstore(row, j, a)
                            elif j < M:
                                vstore_part(row, j, a, 0, M - j)
            for i in range(0, N if M > SCORE_VECTORS * LANES else 0, 2):  # longer rows: stored first
                # (loads right behind their stores stalled), two at a time (row_max2)
                u = min(i + 1, N - 1)
                ma, mb = row_max2(s[i], s[u], M)
                for r in range(i, u + 1):
                    row, m = s[r], ma if r == i else mb
                    for j in range(M):
                        row[j] = vexp(row[j] - m)
                    inv = like(1.0 / row_sum16(row, M), sc)
                    for j in range(M):
                        row[j] = row[j] * inv
            for i0 in range(0, N, PV_ROWS):  # PV_ROWS rows' chains side by side (one would wait on each add)
                r1, r2, r3 = min(i0 + 1, N - 1), min(i0 + 2, N - 1), min(i0 + 3, N - 1)
                r4, r5, r6, r7 = min(i0 + 4, N - 1), min(i0 + 5, N - 1), min(i0 + 6, N - 1), min(i0 + 7, N - 1)
                for c0 in range(0, dv, LANES):
                    n = min(LANES, dv - c0)
                    e0 = e1 = e2 = e3 = e4 = e5 = e6 = e7 = zero
                    for j in range(M):
                        vj = vload_part(v[b, j], v0 + c0, zero, 0, n)
                        e0 = vadd(e0, vmul(vsplat(s[i0, j], LANES), vj))
                        e1 = vadd(e1, vmul(vsplat(s[r1, j], LANES), vj))
                        e2 = vadd(e2, vmul(vsplat(s[r2, j], LANES), vj))
                        e3 = vadd(e3, vmul(vsplat(s[r3, j], LANES), vj))
                        e4 = vadd(e4, vmul(vsplat(s[r4, j], LANES), vj))
                        e5 = vadd(e5, vmul(vsplat(s[r5, j], LANES), vj))
                        e6 = vadd(e6, vmul(vsplat(s[r6, j], LANES), vj))
                        e7 = vadd(e7, vmul(vsplat(s[r7, j], LANES), vj))
                    for t, e in ((0, e0), (1, e1), (2, e2), (3, e3), (4, e4), (5, e5), (6, e6), (7, e7)):
                        if i0 + t < N:
                            vstore_part(out[b, i0 + t], h * dv + c0, e, 0, n)


@kernel(parallel=True)
def _attention_grad_kernel(g, q, k, v, offsets, heads, p, scale, chunk, gq, gk, gv, gbias_parts):
    """Tasks t of `chunk` batch items each; per item and head, with G = g[b, :, h dv + c]:
    dP = G v^T, t = P (dP - rowsum(P dP)) (softmax's adjoint), gbias_parts[t, h] += t,
    dS = scale t, dq = dS k, dk = dS^T q, dv = P^T G; gq, gk, gv at the offsets of q, k, v."""
    B, N = q.shape[0], q.shape[1]
    M = k.shape[1]
    oq, ok, ov, d, dv = offsets
    sc = like(scale, q[0, 0, 0])
    for t in prange(gbias_parts.shape[0]):
        gb = gbias_parts[t]
        for h in range(heads):
            for i in range(N):
                for j in range(M):
                    gb[h, i, j] = 0
        vt = np.empty((dv, M), q.dtype)
        dp = np.empty((N, M), q.dtype)
        dst = np.empty((M, N), q.dtype)
        gqt = np.empty((d, N), q.dtype)
        gkt = np.empty((d, M), q.dtype)
        gvt = np.empty((dv, M), q.dtype)
        for b in range(t * chunk, min(B, (t + 1) * chunk)):
            for h in range(heads):
                q0, k0, v0 = oq + h * d, ok + h * d, ov + h * dv
                P = p[b, h]
                for c in range(dv):
                    for j in range(M):
                        vt[c, j] = v[b, j, v0 + c]
                        gvt[c, j] = 0
                for c in range(d):
                    for i in range(N):
                        gqt[c, i] = 0
                    for j in range(M):
                        gkt[c, j] = 0
                for i in range(N):
                    row = dp[i]
                    for j in range(M):
                        row[j] = 0
                    for c in range(dv):
                        a = g[b, i, h * dv + c]
                        vrow = vt[c]
                        for j in range(M):
                            row[j] += a * vrow[j]
                    r = like(row_dot(P, dp, i, True), sc)
                    prow = P[i]
                    gbrow = gb[h, i]
                    for j in range(M):
                        tij = prow[j] * (row[j] - r)
                        gbrow[j] += tij
                        row[j] = sc * tij
                        dst[j, i] = row[j]
                    for c in range(d):  # dk^T[c, :] += q[i, c] dS[i, :]
                        a = q[b, i, q0 + c]
                        krow = gkt[c]
                        for j in range(M):
                            krow[j] += a * row[j]
                    for c in range(dv):  # dv^T[c, :] += G[i, c] P[i, :]
                        gg = g[b, i, h * dv + c]
                        vrow = gvt[c]
                        for j in range(M):
                            vrow[j] += gg * prow[j]
                for j in range(M):  # dq^T[c, :] += k[j, c] dS^T[j, :]
                    srow = dst[j]
                    for c in range(d):
                        a = k[b, j, k0 + c]
                        qrow = gqt[c]
                        for i in range(N):
                            qrow[i] += a * srow[i]
                for i in range(N):
                    for c in range(d):
                        gq[b, i, q0 + c] = gqt[c, i]
                for j in range(M):
                    for c in range(d):
                        gk[b, j, k0 + c] = gkt[c, j]
                    for c in range(dv):
                        gv[b, j, v0 + c] = gvt[c, j]


def _attend(ctx, q, k, v, offsets, bias, heads, scale, mask):
    """The forward of both Functions: out (B, N, heads dv); saves the weights in ctx.weights where
    a backward will need them."""
    b_, n, m = q.shape[0], q.shape[1], k.shape[1]
    empty = np.zeros((0, n, m), q.dtype)
    keep = is_grad_enabled() and any(ctx.needs_input_grad)  # else the weights stay in the threads'
    # caches (inference: SwinIR-light wrote 6.3 MB of them per call that nothing read)
    bias = empty if bias is None else np.ascontiguousarray(bias)
    mask = empty if mask is None else np.ascontiguousarray(mask)
    out = np.empty((b_, n, heads * offsets[4]), q.dtype)
    if not keep and precision.bf16_active(q.dtype) and precision.support().amx_bf16 and \
            _attention_amx.fits(n, m, offsets[3], offsets[4]):  # bfloat16 tile products: inference only
        ctx.weights, ctx.meta = None, (offsets, heads, scale)
        return _attention_amx.attend(q, k, v, offsets, heads, bias, mask, scale, out)
    p = np.empty((b_ if keep else min(b_, numba.get_num_threads()), heads, n, m), q.dtype)
    launch(_attention_kernel, b_ * heads * n * m < SERIAL_ELEMS, q, k, v, offsets, heads, bias, mask,
           float(scale), p, out)
    ctx.weights, ctx.meta = (p if keep else None), (offsets, heads, scale)
    return out


def _attend_grad(ctx, g, q, k, v, gq, gk, gv):
    """The backward of both Functions into gq, gk, gv (at q, k, v's offsets); returns the bias
    gradient (or None)."""
    p, (offsets, heads, scale) = ctx.weights, ctx.meta
    parts = np.empty((-(-q.shape[0] // _CHUNK),) + p.shape[1:], q.dtype)
    launch(_attention_grad_kernel, p.size < SERIAL_ELEMS, np.ascontiguousarray(g, q.dtype), q, k, v,
           offsets, heads, p, float(scale), _CHUNK, gq, gk, gv, parts)
    return parts.sum(axis=0) if ctx.needs_input_grad[-1] else None


class AttentionFunction(Function):
    """q (B, N, C), k (B, M, C), v (B, M, Cv), bias (nH, N, M) or None -> (B, N, Cv): every head's
    softmax(scale q k^T + bias + mask) v in one pass, heads side by side. mask (nW, N, M) of q's
    dtype or None. Saves the attention weights."""

    @staticmethod
    def forward(ctx, q, k, v, bias, *, heads, scale, mask):
        q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))
        ctx.save_for_backward(q, k, v)
        offsets = (0, 0, 0, q.shape[2] // heads, v.shape[2] // heads)
        return _attend(ctx, q, k, v, offsets, bias, heads, scale, mask)

    @staticmethod
    def backward(ctx, g):  # t = P (G v^T - rowsum), dbias = sum_batch t, dq = s t k, dk = s t^T q, dv = P^T G
        q, k, v = ctx.saved_tensors
        gq, gk, gv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
        gbias = _attend_grad(ctx, g, q, k, v, gq, gk, gv)
        return gq, gk, gv, gbias


class WindowAttentionFunction(Function):
    """AttentionFunction on qkv (B, N, 3C), the packed output of one qkv linear ([q | k | v] along
    the channels), bias (nH, N, N) or None -> (B, N, C); the gradient is one (B, N, 3C) array."""

    @staticmethod
    def forward(ctx, qkv, bias, *, heads, scale, mask):
        qkv = np.ascontiguousarray(qkv)
        ctx.save_for_backward(qkv)
        c = qkv.shape[2] // 3
        return _attend(ctx, qkv, qkv, qkv, (0, c, 2 * c, c // heads, c // heads), bias, heads,
                       scale, mask)

    @staticmethod
    def backward(ctx, g):  # AttentionFunction's, written into the three parts of one array
        (qkv,) = ctx.saved_tensors
        gqkv = np.empty_like(qkv)
        gbias = _attend_grad(ctx, g, qkv, qkv, qkv, gqkv, gqkv, gqkv)
        return gqkv, gbias


# -- the wrappers ----------------------------------------------------------------------------------
def _check_bias(owner, what, x, bias, heads, n, m):
    if bias is None:
        return
    if float_array(owner, "bias", bias).shape != (heads, n, m):
        raise ValueError(f"{owner}: bias {tuple(bias.shape)} is not ({heads}, {n}, {m}) (nH, N, M) "
                         f"for {what} {tuple(x.shape)}")
    if bias.dtype != x.dtype:
        raise TypeError(f"{owner}: bias dtype {bias.dtype} differs from {what} {x.dtype}")


def _check_mask(owner, mask, dtype, b_, n, m):
    """mask as a (nW, n, m) array of dtype (nW dividing the batch b_), or None."""
    if mask is None:
        return None
    if isinstance(mask, Tensor):
        raise TypeError(f"{owner}: mask must be a numpy array (a constant; a learnt term goes in "
                        f"bias), got a Tensor")
    mask = np.ascontiguousarray(np.asarray(mask).astype(dtype, copy=False))
    if mask.ndim != 3 or mask.shape[1:] != (n, m) or mask.shape[0] == 0 or b_ % mask.shape[0]:
        raise ValueError(f"{owner}: mask {mask.shape} is not (nW, {n}, {m}) with nW dividing {b_}")
    return mask


def _scale(owner, x, scale, heads, per_head_channels=None):
    """(x, scale) for the Function: a number scale checked; a Tensor one, (heads,) of x's dtype,
    multiplied into x (into each head's `per_head_channels` channels of the last axis and the rest
    by 1, or along axis 1 of scores (B, nH, N, M) when None), leaving the scale 1."""
    if not isinstance(scale, Tensor):
        return x, number(owner, "scale", scale)
    if scale.shape != (heads,) or scale.dtype != x.dtype:
        raise ValueError(f"{owner}: a Tensor scale has one factor per head, shape ({heads},) and "
                         f"dtype {x.dtype}, got {tuple(scale.shape)} {scale.dtype}")
    if per_head_channels is None:
        return x * reshape(scale, (heads, 1, 1)), 1.0
    rest = x.shape[-1] - heads * per_head_channels
    if not rest:  # heads side by side: a broadcast over (..., heads, channels), no index array
        # (whose length would follow the image when the "channels" are tokens: DAT's channel
        # attention; an exported graph then holds at every size)
        shape = tuple(x.shape)
        y = reshape(x, shape[:-1] + (heads, per_head_channels)) * reshape(scale, (heads, 1))
        return reshape(y, shape), 1.0
    factors = getitem(scale, np.repeat(np.arange(heads), per_head_channels))
    factors = cat([factors, Tensor(np.ones(rest, x.dtype))])
    return x * factors, 1.0


def _heads(owner, heads, *channels):
    heads = int_arg(owner, "heads", heads)
    for what, c in channels:
        if c % heads:
            raise ValueError(f"{owner}: {what} has {c} channels, not a multiple of {heads} heads")
    return heads


def attention(q, k, v, heads: int, scale=1.0, bias=None, mask=None):
    """Multi-head attention between linears, fused: q (B, N, C), k (B, M, C), v (B, M, Cv), each
    head's channels side by side (C and Cv multiples of `heads`) -> (B, N, Cv), per head h
    softmax(scale q_h k_h^T + bias[h] + mask[b % nW]) v_h.

    scale: a number (default 1; d^-0.5 is the usual choice) or a Tensor (heads,) of per-head factors
        (it gets a gradient: a learnt logit scale or temperature).
    bias: (nH, N, M) Tensor (it gets a gradient) or None (default).
    mask: (nW, N, M) numpy array or None (default); batch item b takes mask[b % nW].
    No dropout on the attention weights (use attention_softmax, then dropout, for that)."""
    owner = "attention"
    qs, ks, vs = (float_array(owner, name, a).shape for name, a in (("q", q), ("k", k), ("v", v)))
    if (len(qs) != 3 or len(ks) != 3 or len(vs) != 3 or qs[0] != ks[0] or ks[:2] != vs[:2]
            or qs[2] != ks[2] or 0 in qs + ks + vs):
        raise ValueError(f"{owner}: q {qs}, k {ks}, v {vs} are not (B, N, C), (B, M, C), (B, M, Cv) "
                         f"(non-empty)")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"{owner}: q, k, v dtypes differ ({q.dtype}, {k.dtype}, {v.dtype})")
    heads = _heads(owner, heads, ("q", qs[2]), ("v", vs[2]))
    _check_bias(owner, "q", q, bias, heads, qs[1], ks[1])
    mask = _check_mask(owner, mask, q.dtype, qs[0], qs[1], ks[1])
    q, scale = _scale(owner, q, scale, heads, qs[2] // heads)
    return AttentionFunction.apply(q, k, v, bias, heads=heads, scale=scale, mask=mask)


def window_attention(qkv, heads: int, scale=1.0, bias=None, mask=None):
    """`attention` on the packed output of one qkv linear, BasicSR's WindowAttention between its
    two linears: qkv (B, N, 3C) = [q | k | v] along the channels -> (B, N, C), per head
    softmax(scale q k^T + bias + mask) v. scale, bias (nH, N, N) and mask (nW, N, N) as in
    `attention`."""
    owner = "window_attention"
    shape = float_array(owner, "qkv", qkv).shape
    if len(shape) != 3 or shape[2] % 3 or 0 in shape:
        raise ValueError(f"{owner}: qkv must be (B, N, 3C) (non-empty), got {shape}")
    b_, n, c3 = shape
    heads = _heads(owner, heads, ("each of q, k, v", c3 // 3))
    _check_bias(owner, "qkv", qkv, bias, heads, n, n)
    mask = _check_mask(owner, mask, qkv.dtype, b_, n, n)
    qkv, scale = _scale(owner, qkv, scale, heads, c3 // 3 // heads)  # q's channels only
    return WindowAttentionFunction.apply(qkv, bias, heads=heads, scale=scale, mask=mask)

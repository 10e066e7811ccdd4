"""The Swin window ops SwinIR runs on (models/swinir.py): window partition / reverse as one
Function (each direction's backward is the other), the shifted-window mask, the relative-position
index, and the attention's softmax fused with its scale, relative-position bias and mask.

`attention_softmax` is softmax(scale * s + bias + mask) over the last axis in one numba pass per row
(the unfused form is a scale, two broadcast adds and a softmax over the largest tensor of the model,
each a full pass); its backward is softmax's, then the bias gradient summed over the windows. It
reuses framework/functional/softmax.py's row helpers.

`window_attention` fuses the whole attention between the qkv and proj linears: per window and head
q k^T, that softmax, and the product with v in one numba pass that reads q, k, v straight from the
qkv linear's output and writes the heads side by side (no split, permute or transpose copies, no
scores array); its backward is one pass too. SwinIR trains through it unless attention dropout is on.
Every Function here has an ONNX converter; the partition's window counts and the mask hold for one
input size (fixed-size graphs).
"""
from __future__ import annotations

import functools

import numpy as np

from framework._jit import kernel, launch, prange
from framework.autograd import Function
from framework.functional.normalization import _like
from framework.functional.softmax import _SERIAL_ELEMS, _exp, _row_dot, _row_max, _softmax_grad_kernel
from framework.onnx.graph import register_converter

__all__ = ["window_partition", "window_reverse", "shift_mask", "relative_position_index",
           "attention_softmax", "window_attention", "WindowPartition", "AttentionSoftmax",
           "WindowAttentionFunction"]

_FIXED_SIZE = "SwinIR's window partition and shifted-window attention mask are computed for the input size"


# -- windows ---------------------------------------------------------------------------------------
def _partition(x: np.ndarray, ws: int) -> np.ndarray:
    b, h, w, c = x.shape
    t = x.reshape(b, h // ws, ws, w // ws, ws, c).transpose(0, 1, 3, 2, 4, 5)
    return np.ascontiguousarray(t).reshape(-1, ws * ws, c)


def _reverse(windows: np.ndarray, ws: int, h: int, w: int) -> np.ndarray:
    c = windows.shape[-1]
    t = windows.reshape(-1, h // ws, w // ws, ws, ws, c).transpose(0, 1, 3, 2, 4, 5)
    return np.ascontiguousarray(t).reshape(-1, h, w, c)


class WindowPartition(Function):
    """(B, H, W, C) <-> (B * H/ws * W/ws, ws * ws, C): windows in raster order, tokens row-major
    (`reverse` goes back). One copy each way."""

    @staticmethod
    def forward(ctx, x, *, ws, reverse, hw):
        ctx.meta = (ws, reverse, hw)
        return _reverse(x, ws, *hw) if reverse else _partition(x, ws)

    @staticmethod
    def backward(ctx, g):  # dL/dx = the inverse rearrangement of g
        ws, reverse, hw = ctx.meta
        return _partition(g, ws) if reverse else _reverse(g, ws, *hw)


@register_converter(WindowPartition)
def _window_partition_onnx(g, call):
    g.require_static(_FIXED_SIZE)  # the reshapes below hold this size's window counts
    ws, reverse, (h, w) = call.options["ws"], call.options["reverse"], call.options["hw"]
    c = g.shape(0)[-1]
    split = (-1, h // ws, w // ws, ws, ws, c) if reverse else (-1, h // ws, ws, w // ws, ws, c)
    y = g.node("Reshape", [g.input(0), g.const(np.asarray(split, np.int64))])
    y = g.node("Transpose", [y], perm=[0, 1, 3, 2, 4, 5])
    out = (-1, h, w, c) if reverse else (-1, ws * ws, c)
    return g.node("Reshape", [y, g.const(np.asarray(out, np.int64))])


def window_partition(x, ws: int):
    """(B, H, W, C) -> (B * H/ws * W/ws, ws * ws, C); H and W multiples of ws."""
    if x.ndim != 4 or x.shape[1] % ws or x.shape[2] % ws:
        raise ValueError(f"window_partition: expected (B, H, W, C) with H, W multiples of {ws}, got "
                         f"{tuple(x.shape)}")
    return WindowPartition.apply(x, ws=ws, reverse=False, hw=tuple(x.shape[1:3]))


def window_reverse(windows, ws: int, h: int, w: int):
    """window_partition's inverse: (B * nW, ws * ws, C) -> (B, H, W, C)."""
    if windows.ndim != 3 or windows.shape[1] != ws * ws or windows.shape[0] % ((h // ws) * (w // ws)):
        raise ValueError(f"window_reverse: {tuple(windows.shape)} are not windows of {ws}x{ws} tokens "
                         f"of (B, {h}, {w}, C)")
    return WindowPartition.apply(windows, ws=ws, reverse=True, hw=(h, w))


@functools.lru_cache(maxsize=16)
def shift_mask(h: int, w: int, ws: int, shift: int, dtype=np.float32) -> np.ndarray:
    """The (nW, ws^2, ws^2) mask of shifted-window attention on an (h, w) token grid (BasicSR's
    calculate_mask): after the cyclic shift a window may hold tokens from up to 4 regions that were
    not neighbours; a pair from different regions gets -100 (exp(-100) ~ 0 after the softmax),
    others 0. Read-only and cached: every shifted block at this size shares it."""
    region = np.zeros((h, w))
    cuts = (slice(0, -ws), slice(-ws, -shift), slice(-shift, None))
    for i, hs in enumerate(cuts):
        for j, wsl in enumerate(cuts):
            region[hs, wsl] = 3 * i + j
    win = region.reshape(h // ws, ws, w // ws, ws).transpose(0, 2, 1, 3).reshape(-1, ws * ws)
    mask = np.where(win[:, None, :] != win[:, :, None], -100.0, 0.0).astype(dtype)
    mask.flags.writeable = False
    return mask


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
    """Rows r of s (R, n), R = B * nW * heads * n: y = softmax(scale s + bias[h, i] + mask[w, i]),
    with h = (r // n) % heads, i = r % n, w = (r // (heads n)) % nW (no mask: mask is (0, n))."""
    R = s.shape[0]
    nw = mask.shape[0] // n
    sc = _like(scale, s[0, 0])
    for r in prange(R):
        i = r % n
        brow = ((r // n) % heads) * n + i
        for j in range(n):
            y[r, j] = sc * s[r, j] + bias[brow, j]
        if nw > 0:
            mrow = ((r // (heads * n)) % nw) * n + i
            for j in range(n):
                y[r, j] += mask[mrow, j]
        m = _row_max(y, r)
        for j in range(n):
            y[r, j] = _exp(y[r, j] - m)
        inv = _like(1.0 / _row_dot(y, y, r, False), s[r, 0])
        for j in range(n):
            y[r, j] = y[r, j] * inv


class AttentionSoftmax(Function):
    """s (B*nW, nH, N, N), bias (nH, N, N) -> softmax(scale s + bias (+ mask)) along the last axis;
    mask (nW, N, N) of the input's dtype or None."""

    @staticmethod
    def forward(ctx, s, bias, *, scale, mask):
        b_, heads, n, _ = s.shape
        s2 = np.ascontiguousarray(s).reshape(-1, n)
        m2 = np.zeros((0, n), s.dtype) if mask is None else mask.reshape(-1, n)
        y = np.empty(s2.shape, s.dtype)
        launch(_attention_softmax_kernel, s.size < _SERIAL_ELEMS, s2,
               np.ascontiguousarray(bias).reshape(-1, n), m2, float(scale), heads, n, y)
        ctx.save_for_backward(y)
        ctx.meta = (s.shape, scale)
        return y.reshape(s.shape)

    @staticmethod
    def backward(ctx, g):  # t = softmax grad y (g - sum(g y)); dL/ds = scale t, dL/dbias = sum_windows t
        (y,) = ctx.saved_tensors
        shape, scale = ctx.meta
        t = np.empty_like(y)
        launch(_softmax_grad_kernel, y.size < _SERIAL_ELEMS,
               np.ascontiguousarray(g, y.dtype).reshape(y.shape), y, t, False)
        t = t.reshape(shape)
        gbias = t.sum(axis=0) if ctx.needs_input_grad[1] else None
        if ctx.needs_input_grad[0]:
            t *= t.dtype.type(scale)
            return t, gbias
        return None, gbias


@register_converter(AttentionSoftmax)
def _attention_softmax_onnx(g, call):
    b_, heads, n, _ = g.shape(0)
    x = _onnx_scores(g, g.input(0), g.input(1), call.options["scale"], call.options["mask"], b_, heads, n)
    return g.node("Softmax", [x], axis=-1)


def attention_softmax(scores, bias, scale: float, mask=None):
    """softmax(scale * scores + bias (+ mask per window)) along the last axis: scores (B*nW, nH, N, N)
    (q k^T), bias (nH, N, N) (a Tensor: it gets a gradient), mask (nW, N, N) numpy array or None.
    In BasicSR's form: softmax((q scale) k^T + bias + mask), here one pass."""
    b_, heads, n, n2 = scores.shape
    if bias.shape != (heads, n, n) or n2 != n:
        raise ValueError(f"attention_softmax: scores {tuple(scores.shape)} and bias {tuple(bias.shape)} "
                         f"are not (B*nW, nH, N, N) and (nH, N, N)")
    if bias.dtype != scores.dtype:
        raise TypeError(f"attention_softmax: bias dtype {bias.dtype} differs from scores {scores.dtype}")
    if mask is not None:
        mask = np.asarray(mask).astype(scores.dtype, copy=False)
        if mask.ndim != 3 or mask.shape[1:] != (n, n) or b_ % mask.shape[0]:
            raise ValueError(f"attention_softmax: mask {mask.shape} is not (nW, {n}, {n}) with nW "
                             f"dividing {b_}")
    return AttentionSoftmax.apply(scores, bias, scale=float(scale), mask=mask)


# -- the fused window attention --------------------------------------------------------------------
# Windows per task of the backward: the bias gradient is a sum of per-task partials in task order,
# so it does not depend on the thread count.
_WINDOW_CHUNK = 8


@kernel(parallel=True)
def _window_attention_kernel(qkv, bias, mask, scale, heads, p, out):
    """Per window b and head h (q, k, v: qkv[b, :, h d + (0, C, 2C) + c], N x d each):
    p[b, h] = softmax(scale q k^T + bias[h] + mask[b % nW]), out[b, :, h d + c] = (p v)[:, c].
    Every inner loop runs over a row of N (k and p^T are transposed into local buffers): axpy form,
    which LLVM vectorises without reassociating a sum."""
    B_, N, C3 = qkv.shape
    C = C3 // 3
    d = C // heads
    nw = mask.shape[0]
    sc = _like(scale, qkv[0, 0, 0])
    for b in prange(B_):
        kt = np.empty((d, N), qkv.dtype)
        pt = np.empty((N, N), qkv.dtype)
        ot = np.empty((d, N), qkv.dtype)
        for h in range(heads):
            q0, k0, v0 = h * d, C + h * d, 2 * C + h * d
            for c in range(d):
                for j in range(N):
                    kt[c, j] = qkv[b, j, k0 + c]
            s = p[b, h]
            for i in range(N):
                row = s[i]
                for j in range(N):
                    row[j] = 0
                for c in range(d):
                    a = qkv[b, i, q0 + c]
                    krow = kt[c]
                    for j in range(N):
                        row[j] += a * krow[j]
                brow = bias[h, i]
                for j in range(N):
                    row[j] = sc * row[j] + brow[j]
                if nw > 0:
                    mrow = mask[b % nw, i]
                    for j in range(N):
                        row[j] += mrow[j]
                m = _row_max(s, i)
                for j in range(N):
                    row[j] = _exp(row[j] - m)
                inv = _like(1.0 / _row_dot(s, s, i, False), sc)
                for j in range(N):
                    row[j] = row[j] * inv
                for j in range(N):
                    pt[j, i] = row[j]
            for c in range(d):
                for i in range(N):
                    ot[c, i] = 0
            for j in range(N):  # out^T[c, :] += v[j, c] p^T[j, :]
                prow = pt[j]
                for c in range(d):
                    a = qkv[b, j, v0 + c]
                    orow = ot[c]
                    for i in range(N):
                        orow[i] += a * prow[i]
            for i in range(N):
                for c in range(d):
                    out[b, i, q0 + c] = ot[c, i]


@kernel(parallel=True)
def _window_attention_grad_kernel(g, qkv, p, scale, heads, chunk, gqkv, gbias_parts):
    """Tasks t of `chunk` windows each; per window and head, with G = g[b, :, h d + c]:
    dP = G v^T, t = P (dP - rowsum(P dP)) (softmax's adjoint), gbias_parts[t, h] += t,
    dS = scale t, and into gqkv: dq = dS k, dk = dS^T q, dv = P^T G."""
    B_, N, C3 = qkv.shape
    C = C3 // 3
    d = C // heads
    sc = _like(scale, qkv[0, 0, 0])
    for t in prange(gbias_parts.shape[0]):
        gb = gbias_parts[t]
        for h in range(heads):
            for i in range(N):
                for j in range(N):
                    gb[h, i, j] = 0
        vt = np.empty((d, N), qkv.dtype)
        dp = np.empty((N, N), qkv.dtype)
        dst = np.empty((N, N), qkv.dtype)
        gqt = np.empty((d, N), qkv.dtype)
        gkt = np.empty((d, N), qkv.dtype)
        gvt = np.empty((d, N), qkv.dtype)
        for b in range(t * chunk, min(B_, (t + 1) * chunk)):
            for h in range(heads):
                q0, k0, v0 = h * d, C + h * d, 2 * C + h * d
                P = p[b, h]
                for c in range(d):
                    for j in range(N):
                        vt[c, j] = qkv[b, j, v0 + c]
                        gqt[c, j] = 0
                        gkt[c, j] = 0
                        gvt[c, j] = 0
                for i in range(N):
                    row = dp[i]
                    for j in range(N):
                        row[j] = 0
                    for c in range(d):
                        a = g[b, i, q0 + c]
                        vrow = vt[c]
                        for j in range(N):
                            row[j] += a * vrow[j]
                    r = _like(_row_dot(P, dp, i, True), sc)
                    prow = P[i]
                    gbrow = gb[h, i]
                    for j in range(N):
                        tij = prow[j] * (row[j] - r)
                        gbrow[j] += tij
                        row[j] = sc * tij
                        dst[j, i] = row[j]
                    for c in range(d):  # dk^T[c, :] += q[i, c] dS[i, :];  dv^T[c, :] += G[i, c] P[i, :]
                        a = qkv[b, i, q0 + c]
                        gg = g[b, i, q0 + c]
                        krow = gkt[c]
                        vrow = gvt[c]
                        for j in range(N):
                            krow[j] += a * row[j]
                            vrow[j] += gg * prow[j]
                for j in range(N):  # dq^T[c, :] += k[j, c] dS^T[j, :]
                    srow = dst[j]
                    for c in range(d):
                        a = qkv[b, j, k0 + c]
                        qrow = gqt[c]
                        for i in range(N):
                            qrow[i] += a * srow[i]
                for i in range(N):
                    for c in range(d):
                        gqkv[b, i, q0 + c] = gqt[c, i]
                        gqkv[b, i, k0 + c] = gkt[c, i]
                        gqkv[b, i, v0 + c] = gvt[c, i]


class WindowAttentionFunction(Function):
    """qkv (B*nW, N, 3C) (the qkv linear's output), bias (nH, N, N) -> (B*nW, N, C): every head's
    softmax(scale q k^T + bias + mask) v in one pass, heads side by side as BasicSR's transpose +
    reshape leaves them. mask (nW, N, N) of qkv's dtype or None. Saves the attention weights."""

    @staticmethod
    def forward(ctx, qkv, bias, *, heads, scale, mask):
        b_, n, c3 = qkv.shape
        qkv = np.ascontiguousarray(qkv)
        m = np.zeros((0, n, n), qkv.dtype) if mask is None else np.ascontiguousarray(mask)
        p = np.empty((b_, heads, n, n), qkv.dtype)
        out = np.empty((b_, n, c3 // 3), qkv.dtype)
        launch(_window_attention_kernel, p.size < _SERIAL_ELEMS, qkv, np.ascontiguousarray(bias), m,
               float(scale), heads, p, out)
        ctx.save_for_backward(qkv, p)
        ctx.meta = (heads, scale)
        return out

    @staticmethod
    def backward(ctx, g):  # t = P (G v^T - rowsum), dbias = sum_windows t, dq = s t k, dk = s t^T q, dv = P^T G
        qkv, p = ctx.saved_tensors
        heads, scale = ctx.meta
        gqkv = np.empty_like(qkv)
        parts = np.empty((-(-qkv.shape[0] // _WINDOW_CHUNK),) + p.shape[1:], qkv.dtype)
        launch(_window_attention_grad_kernel, p.size < _SERIAL_ELEMS,
               np.ascontiguousarray(g, qkv.dtype), qkv, p, float(scale), heads, _WINDOW_CHUNK, gqkv, parts)
        gbias = parts.sum(axis=0) if ctx.needs_input_grad[1] else None
        return gqkv, gbias


def _onnx_scores(g, s, bias, scale, mask, b_, heads, n):
    """scale s + bias (+ mask per window) as ONNX nodes; s (B*nW, nH, N, N)."""
    x = g.node("Mul", [s, g.const(np.asarray(scale))])
    x = g.node("Add", [x, bias])
    if mask is not None:
        g.require_static(_FIXED_SIZE)
        nw = mask.shape[0]
        x = g.node("Reshape", [x, g.const(np.asarray([b_ // nw, nw, heads, n, n], np.int64))])
        x = g.node("Add", [x, g.const(mask[:, None])])
        x = g.node("Reshape", [x, g.const(np.asarray([b_, heads, n, n], np.int64))])
    return x


@register_converter(WindowAttentionFunction)
def _window_attention_onnx(g, call):
    b_, n, c3 = g.shape(0)
    heads, c = call.options["heads"], c3 // 3
    x = g.node("Reshape", [g.input(0), g.const(np.asarray([-1, n, 3, heads, c // heads], np.int64))])
    x = g.node("Transpose", [x], perm=[2, 0, 3, 1, 4])  # (3, B*nW, nH, N, d)
    each = g.const(np.asarray([-1, heads, n, c // heads], np.int64))  # drops Gather's kept axis
    q, k, v = (g.node("Reshape", [g.node("Gather", [x, g.const(np.asarray([i], np.int64))], axis=0), each])
               for i in range(3))
    s = g.node("MatMul", [q, g.node("Transpose", [k], perm=[0, 1, 3, 2])])
    s = _onnx_scores(g, s, g.input(1), call.options["scale"], call.options["mask"], b_, heads, n)
    y = g.node("MatMul", [g.node("Softmax", [s], axis=-1), v])
    y = g.node("Transpose", [y], perm=[0, 2, 1, 3])
    return g.node("Reshape", [y, g.const(np.asarray([-1, n, c], np.int64))])


def window_attention(qkv, bias, heads: int, scale: float, mask=None):
    """BasicSR's WindowAttention between its two linears, fused: qkv (B*nW, N, 3C) -> (B*nW, N, C),
    softmax((q scale) k^T + bias + mask) v per head; bias (nH, N, N) (a Tensor: it gets a gradient),
    mask (nW, N, N) numpy array or None. No dropout on the attention weights (the caller keeps the
    unfused path for that)."""
    b_, n, c3 = qkv.shape
    if c3 % (3 * heads) or bias.shape != (heads, n, n):
        raise ValueError(f"window_attention: qkv {tuple(qkv.shape)} and bias {tuple(bias.shape)} are not "
                         f"(B*nW, N, 3C) with C a multiple of {heads} heads and ({heads}, N, N)")
    if bias.dtype != qkv.dtype:
        raise TypeError(f"window_attention: bias dtype {bias.dtype} differs from qkv {qkv.dtype}")
    if mask is not None:
        mask = np.asarray(mask).astype(qkv.dtype, copy=False)
        if mask.ndim != 3 or mask.shape[1:] != (n, n) or b_ % mask.shape[0]:
            raise ValueError(f"window_attention: mask {mask.shape} is not (nW, {n}, {n}) with nW "
                             f"dividing {b_}")
    return WindowAttentionFunction.apply(qkv, bias, heads=int(heads), scale=float(scale), mask=mask)

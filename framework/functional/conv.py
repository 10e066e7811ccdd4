"""conv2d and conv_transpose2d: each one's input gradient is the other's forward.

A correlation links an "image side" X (N, C, H, W) and a "feature side" Y (N, O, OH, OW) through a weight
W (O, C/groups, kh, kw). Three routines carry all the arithmetic:

    _correlate(X, W)          Y  = W @ im2col(X)            conv2d forward, conv_transpose2d's dL/dx
    _correlate_adjoint(Y, W)  X  = col2im(W^T @ Y)          conv_transpose2d forward, conv2d's dL/dx
    _weight_grad(X, Y)        dW = sum_n Y_n @ im2col(X_n)^T  both weight gradients

For conv2d, X is the input and Y the output; for conv_transpose2d the roles swap (its input is the feature
side), which is why torch's transposed weight layout (in, out/groups, kh, kw) is the same matrix. With
stride 1 each routine is also the other form on the flipped kernel (`_Geometry.flipped`), and takes the
form whose column matrix has (fewer channels) x kh x kw rows: 64->3 builds 27 rows, not 576. A 3x3
stride-1 correlation between two sides of 16+ channels takes Winograd F(2x2, 3x3) instead of im2col
(forward, and the weight gradient as its adjoint in W).

The work is cut into tiles (some whole images, or a band of output rows of one image), each an im2col
or col2im (serial numba kernels) and a product (np.matmul, BLAS). Tiles run on a pool of Python threads
(numba.get_num_threads() of them), each with single-threaded BLAS: one fork/join per call. Per-tile
multithreaded BLAS calls between kernels stalled on this shared 2-core machine (measured: 16 per-image
tiles of a 3x3 64->64 conv, 380 ms with 2-thread BLAS, 42 ms with 2 worker threads of 1-thread BLAS).
The column buffers of all threads together never exceed COL_BUFFER_BYTES.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numba
import numpy as np

from .._jit import kernel
from ..autograd import Function
from ._util import data_of

__all__ = ["conv2d", "conv_transpose2d"]

# Column buffers of all worker threads together (bytes). Besides bounding memory, small tiles keep
# each column matrix in the caches between im2col and the product that reads it.
COL_BUFFER_BYTES = 16 * 2**20


class _Geometry(NamedTuple):
    """Everything the kernels need; padding is (top, left): bottom/right follow from the sizes."""

    kernel: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int
    image: tuple  # (H, W) of the image side
    features: tuple  # (OH, OW) of the feature side

    def flat(self):
        return (*self.kernel, *self.stride, *self.padding, *self.dilation)

    def flipped(self):
        """With stride 1 a correlation's adjoint is itself a correlation, with the roles of the two
        sides swapped and the kernel flipped: this geometry (None for a stride, or a padding beyond the
        dilated kernel). Used to build the shorter column matrix: (fewer channels) x kh x kw rows."""
        (kh, kw), (dh, dw), (ph, pw) = self.kernel, self.dilation, self.padding
        if self.stride != (1, 1) or ph > dh * (kh - 1) or pw > dw * (kw - 1):
            return None
        return _Geometry(self.kernel, (1, 1), (dh * (kh - 1) - ph, dw * (kw - 1) - pw), self.dilation,
                         self.groups, self.features, self.image)

    def is_pointwise(self):
        """1x1, stride 1, no padding: im2col is the identity and the convolution a plain matmul."""
        return (self.kernel == (1, 1) and self.stride == (1, 1) and self.padding == (0, 0)
                and self.image == self.features)


# -- kernels -------------------------------------------------------------------------------------------

@kernel
def _valid_range(off, step, size, count):
    """The indices i in [i0, i1) of [0, count) whose source i * step + off lies inside [0, size)."""
    i0 = min(count, 0 if off >= 0 else (-off + step - 1) // step)
    i1 = max(i0, min(count, (size - off + step - 1) // step))
    return i0, i1


@kernel
def _im2col(x, col, b0, r0, OW, kh, kw, sh, sw, ph, pw, dh, dw):
    """col[b, (c, p, q), (i, j)] = x[b0 + b, c, (r0 + i) sh + p dh - ph, j sw + q dw - pw] (0 outside)."""
    nb, K, n = col.shape
    nr = n // OW
    H, W = x.shape[2], x.shape[3]
    for t in range(nb * K):
        b, k = t // K, t % K
        c, p, q = k // (kh * kw), (k // kw) % kh, k % kw
        dst, src = col[b, k], x[b0 + b, c]
        yoff, xoff = r0 * sh + p * dh - ph, q * dw - pw
        i0, i1 = _valid_range(yoff, sh, H, nr)
        j0, j1 = _valid_range(xoff, sw, W, OW)
        dst[:i0 * OW] = 0
        dst[i1 * OW:] = 0
        if sh == 1 and sw == 1 and OW == W and i1 > i0:
            # Consecutive output rows read consecutive input rows: one flat copy of the band; what it
            # takes from beyond a row's ends lands in the padding columns, zeroed below.
            a = (yoff + i0) * W + xoff
            lo, hi = max(a, 0), min(a + (i1 - i0) * W, H * W)
            d = i0 * OW - a
            if hi > lo:  # else the band's every column is padding
                dst[d + lo:d + hi] = src.reshape(H * W)[lo:hi]
            for i in range(i0, i1):
                dst[i * OW:i * OW + j0] = 0
                dst[i * OW + j1:(i + 1) * OW] = 0
            continue
        for i in range(i0, i1):
            row, srow = dst[i * OW:(i + 1) * OW], src[i * sh + yoff]
            row[:j0] = 0
            for j in range(j0, j1):
                row[j] = srow[j * sw + xoff]
            row[j1:] = 0


@kernel
def _col2im(col, x, b0, r0, OW, kh, kw, sh, sw, ph, pw, dh, dw):
    """The adjoint of _im2col: x[b0 + b, c, ...] += every column entry im2col copied from there.
    `col` is scratch: its padding entries are zeroed."""
    nb, K, n = col.shape
    nr = n // OW
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    for t in range(nb * C):
        b, c = t // C, t % C
        dst = x[b0 + b, c]
        for p in range(kh):
            for q in range(kw):
                src = col[b, (c * kh + p) * kw + q]
                yoff, xoff = r0 * sh + p * dh - ph, q * dw - pw
                i0, i1 = _valid_range(yoff, sh, H, nr)
                j0, j1 = _valid_range(xoff, sw, W, OW)
                if sh == 1 and sw == 1 and OW == W:
                    # The flat band add of _im2col's fast path; padding columns add zero.
                    for i in range(i0, i1):
                        src[i * OW:i * OW + j0] = 0
                        src[i * OW + j1:(i + 1) * OW] = 0
                    a = (yoff + i0) * W + xoff
                    lo, hi = max(a, 0), min(a + (i1 - i0) * W, H * W)
                    d = i0 * OW - a
                    flat = dst.reshape(H * W)
                    for m in range(lo, hi):
                        flat[m] += src[d + m]
                    continue
                for i in range(i0, i1):
                    row, drow = src[i * OW:(i + 1) * OW], dst[i * sh + yoff]
                    for j in range(j0, j1):
                        drow[j * sw + xoff] += row[j]


@kernel
def _winograd_input(x, v, b0, tr0, ph, pw, TW):
    """v[b, 4 i + j, c, t] = (B^T d B)[i, j] for the 4x4 patch d of x[b0 + b, c] (zero outside) under
    each 2x2 output tile t of tile rows tr0... (TW tiles a row): Winograd F(2x2, 3x3)'s input transform."""
    nb, _, C, T = v.shape
    H, W = x.shape[2], x.shape[3]
    nt = T // TW
    Wp = 2 * TW + 2
    R = np.zeros((4, Wp), x.dtype)
    Q = np.empty((4, Wp), x.dtype)
    u0, u1 = max(0, pw), min(Wp, W + pw)  # patch-row columns u whose source u - pw is inside [0, W)
    for b in range(nb):
        for c in range(C):
            for tl in range(nt):
                y0 = 2 * (tr0 + tl) - ph
                for i in range(4):
                    yy = y0 + i
                    if 0 <= yy < H and u1 > u0:
                        R[i, :u0] = 0
                        R[i, u0:u1] = x[b0 + b, c, yy, u0 - pw:u1 - pw]
                        R[i, u1:] = 0
                    else:
                        R[i, :] = 0
                for u in range(Wp):  # B^T along the patch rows
                    a0, a1, a2, a3 = R[0, u], R[1, u], R[2, u], R[3, u]
                    Q[0, u] = a0 - a2
                    Q[1, u] = a1 + a2
                    Q[2, u] = a2 - a1
                    Q[3, u] = a1 - a3
                base = tl * TW
                for k in range(4):  # B along the patch columns, tile by tile
                    for tj in range(TW):
                        a0, a1, a2, a3 = Q[k, 2 * tj], Q[k, 2 * tj + 1], Q[k, 2 * tj + 2], Q[k, 2 * tj + 3]
                        v[b, 4 * k, c, base + tj] = a0 - a2
                        v[b, 4 * k + 1, c, base + tj] = a1 + a2
                        v[b, 4 * k + 2, c, base + tj] = a2 - a1
                        v[b, 4 * k + 3, c, base + tj] = a1 - a3


@kernel
def _winograd_output(m, y, b0, tr0, TW):
    """y[b0 + b, o, 2 ti + a, 2 tj + c] = (A^T M A)[a, c] for the 4x4 product M of each tile (tiles that
    hang past the output are clipped): Winograd F(2x2, 3x3)'s output transform."""
    nb, _, O, T = m.shape
    OH, OW = y.shape[2], y.shape[3]
    nt = T // TW
    full = OW // 2
    for b in range(nb):
        for o in range(O):
            for tl in range(nt):
                base = tl * TW
                yy = 2 * (tr0 + tl)
                two = yy + 1 < OH
                for tj in range(TW):
                    t = base + tj
                    s00 = m[b, 0, o, t] + m[b, 4, o, t] + m[b, 8, o, t]
                    s01 = m[b, 1, o, t] + m[b, 5, o, t] + m[b, 9, o, t]
                    s02 = m[b, 2, o, t] + m[b, 6, o, t] + m[b, 10, o, t]
                    s03 = m[b, 3, o, t] + m[b, 7, o, t] + m[b, 11, o, t]
                    s10 = m[b, 4, o, t] - m[b, 8, o, t] - m[b, 12, o, t]
                    s11 = m[b, 5, o, t] - m[b, 9, o, t] - m[b, 13, o, t]
                    s12 = m[b, 6, o, t] - m[b, 10, o, t] - m[b, 14, o, t]
                    s13 = m[b, 7, o, t] - m[b, 11, o, t] - m[b, 15, o, t]
                    xx = 2 * tj
                    y[b0 + b, o, yy, xx] = s00 + s01 + s02
                    if two:
                        y[b0 + b, o, yy + 1, xx] = s10 + s11 + s12
                    if tj < full:
                        y[b0 + b, o, yy, xx + 1] = s01 - s02 - s03
                        if two:
                            y[b0 + b, o, yy + 1, xx + 1] = s11 - s12 - s13


@kernel
def _winograd_output_adjoint(y, m, b0, tr0, TW):
    """The adjoint of _winograd_output: m[b, 4 i + j, o, t] = (A g A^T)[i, j] for the 2x2 tile g of
    y[b0 + b, o] (zero past the edges) under each tile t."""
    nb, _, O, T = m.shape
    OH, OW = y.shape[2], y.shape[3]
    nt = T // TW
    band = np.zeros((2 * nt, 2 * TW), y.dtype)  # the tiles' rows of y, zero past the edges
    rows = min(2 * nt, OH - 2 * tr0)
    for b in range(nb):
        for o in range(O):
            band[:rows, :OW] = y[b0 + b, o, 2 * tr0:2 * tr0 + rows, :]
            for tl in range(nt):
                r0, r1 = band[2 * tl], band[2 * tl + 1]
                for k in range(4):  # row k of A g (g0, g1: the tile's two rows): g0, g0 + g1, g0 - g1, -g1
                    row = r0 if k == 0 else r0 + r1 if k == 1 else r0 - r1 if k == 2 else -r1
                    p0, p1 = m[b, 4 * k, o], m[b, 4 * k + 1, o]
                    p2, p3 = m[b, 4 * k + 2, o], m[b, 4 * k + 3, o]
                    for tj in range(TW):  # columns of (A g) A^T: a, a + c, a - c, -c
                        t = tl * TW + tj
                        a, c = row[2 * tj], row[2 * tj + 1]
                        p0[t], p1[t], p2[t], p3[t] = a, a + c, a - c, -c


# -- tiles and threads --------------------------------------------------------------------------------

def _find_blas_threads():
    """(get, set) of the thread count of the OpenBLAS bundled with numpy, or None (another BLAS)."""
    for path in glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*openblas*")):
        lib = ctypes.CDLL(path)  # already loaded by numpy: the same handle
        for stem in ("scipy_openblas_", "openblas_"):
            for suffix in ("64_", ""):
                get = getattr(lib, f"{stem}get_num_threads{suffix}", None)
                put = getattr(lib, f"{stem}set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    return get, put
    return None


_BLAS_THREADS = _find_blas_threads()
_POOL = {"size": 0, "pid": 0, "executor": None, "active": 0, "blas_before": 0, "lock": threading.Lock()}


def _workers():
    """Worker threads for tiles: numba's thread count, or 1 when BLAS threads cannot be limited."""
    return numba.get_num_threads() if _BLAS_THREADS is not None else 1


def _enter(n):
    """The executor of n threads (a new one after a change of thread count or a fork: a forked child
    has no worker threads), with BLAS single-threaded until the last concurrent call leaves."""
    with _POOL["lock"]:
        if _POOL["size"] != n or _POOL["pid"] != os.getpid():
            if _POOL["executor"] is not None and _POOL["pid"] == os.getpid():
                _POOL["executor"].shutdown(wait=False)
            _POOL.update(executor=ThreadPoolExecutor(n, thread_name_prefix="srgrad-conv"), size=n,
                         pid=os.getpid(), active=0)
        get, put = _BLAS_THREADS
        if _POOL["active"] == 0:
            _POOL["blas_before"] = get()
            put(1)
        _POOL["active"] += 1
        return _POOL["executor"]


def _leave():
    with _POOL["lock"]:
        _POOL["active"] -= 1
        if _POOL["active"] == 0:
            _BLAS_THREADS[1](_POOL["blas_before"])


# Column buffers kept between calls: a fresh one costs a page fault per 4 kB on first touch (measured
# ~1 ms per 5 MB buffer, as much as its im2col). At most one per worker thread, so they stay within
# COL_BUFFER_BYTES.
_SPARE = {"buffers": [], "lock": threading.Lock()}


def _take_buffer(nbytes):
    with _SPARE["lock"]:
        spare = _SPARE["buffers"]
        for i, buf in enumerate(spare):
            if buf.nbytes >= nbytes:
                return spare.pop(i)
        if spare:
            spare.pop()  # too small: let it go, its replacement is larger
    return np.empty(nbytes, np.uint8)


def _give_buffer(buf):
    with _SPARE["lock"]:
        if len(_SPARE["buffers"]) < _workers():
            _SPARE["buffers"].append(buf)


def _run(tasks, work, buffer_elems, dtype):
    """[work(task, buffer) for task in tasks] on the worker threads, each with its own column buffer
    and single-threaded BLAS; results in task order. One task (or one worker) runs inline with BLAS
    threaded as usual."""
    n = min(_workers(), len(tasks))
    nbytes = buffer_elems * np.dtype(dtype).itemsize
    raw = [_take_buffer(nbytes) for _ in range(max(n, 1))]
    try:
        if n <= 1:
            return [work(t, raw[0][:nbytes].view(dtype)) for t in tasks]
        buffers = queue.SimpleQueue()
        for buf in raw:
            buffers.put(buf[:nbytes].view(dtype))

        def job(task):
            buf = buffers.get()
            try:
                return work(task, buf)
            finally:
                buffers.put(buf)

        executor = _enter(_workers())
        try:
            return list(executor.map(job, tasks))
        finally:
            _leave()
    finally:
        for buf in raw:
            _give_buffer(buf)


def _tiles(n_images, out_rows, row_bytes, workers=1):
    """Split (images, output rows) into tiles whose column matrix fits COL_BUFFER_BYTES / workers:
    whole images when one fits (at most half a worker's share of the batch per tile, for balance),
    else bands of rows of one image (at least one row). Returns (tiles, bytes per buffer), each tile
    (b0, b1, r0, r1)."""
    cap = COL_BUFFER_BYTES // workers
    image_bytes = out_rows * row_bytes
    if image_bytes <= cap:
        step = max(1, min(cap // max(image_bytes, 1), -(-n_images // (2 * workers))))
        tiles = [(b, min(n_images, b + step), 0, out_rows) for b in range(0, n_images, step)]
        return tiles, min(step, n_images) * image_bytes
    rows = max(1, cap // row_bytes)
    tiles = [(b, b + 1, r, min(out_rows, r + rows))
             for b in range(n_images) for r in range(0, out_rows, rows)]
    return tiles, min(rows, out_rows) * row_bytes


def _column_tiles(x_side, geo):
    """Tiles over the feature side, elements per column buffer and the column height K, for an image
    side of shape (N, C, ...) and dtype x_side = (N, C, dtype)."""
    N, C, dtype = x_side
    OH, OW = geo.features
    K = C * geo.kernel[0] * geo.kernel[1]
    itemsize = np.dtype(dtype).itemsize
    tiles, nbytes = _tiles(N, OH, K * OW * itemsize, _workers())
    return tiles, nbytes // itemsize, K


# -- the three routines ------------------------------------------------------------------------------

def _columns(x, tile, buf, K, geo):
    """The column matrix of one tile as (nb, groups, K/groups, n): a view of x for a pointwise conv,
    else im2col into buf."""
    b0, b1, r0, r1 = tile
    g, OW = geo.groups, geo.features[1]
    if geo.is_pointwise():
        return x.reshape(x.shape[0], g, K // g, -1)[b0:b1, :, :, r0 * OW:r1 * OW]
    nb, n = b1 - b0, (r1 - r0) * OW
    col = buf[:nb * K * n].reshape(nb, K, n)
    _im2col(x, col, b0, r0, OW, *geo.flat())
    return col.reshape(nb, g, K // g, n)


def _flip(w, groups, c):
    """W (O, C/g, kh, kw) -> the flipped, transposed kernel (C, O/g, kh, kw) of the flipped geometry."""
    O, _, kh, kw = w.shape
    wf = w.reshape(groups, O // groups, c // groups, kh, kw)[:, :, :, ::-1, ::-1].transpose(0, 2, 1, 3, 4)
    return np.ascontiguousarray(wf).reshape(c, O // groups, kh, kw)


# Winograd F(2x2, 3x3) does a 3x3 stride-1 correlation with 16 products per 2x2 outputs instead of 36:
# 2.25x fewer multiply-adds, at the price of two transforms (measured on (16, 64, 48, 48), 64->64, one
# thread: 1.5 ms per image against 2.5 ms by im2col). Below this many channels the transforms dominate.
_WINOGRAD_MIN_CHANNELS = 16
# G (4x3): U = G w G^T turns each 3x3 kernel into its 4x4 Winograd form.
_WINOGRAD_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])


def _winograd_applies(geo, c, o):
    return (geo.kernel == (3, 3) and geo.stride == (1, 1) and geo.dilation == (1, 1) and geo.groups == 1
            and min(c, o) >= _WINOGRAD_MIN_CHANNELS)


def _winograd_tiles(n, c, o, geo, dtype):
    """Tiles over (images, rows of 2x2 output tiles), elements per buffer (V and M) and tiles per row."""
    OH, OW = geo.features
    TH, TW = -(-OH // 2), -(-OW // 2)
    itemsize = np.dtype(dtype).itemsize
    tiles, nbytes = _tiles(n, TH, 16 * (c + o) * TW * itemsize, _workers())
    return tiles, nbytes // itemsize, TW


def _winograd(x, w, geo, bias=None):
    """_correlate for a 3x3 stride-1 kernel: per tile, V = B^T d B (numba), M = U V over the 16 Winograd
    planes (BLAS, U = G W G^T), Y = A^T M A (numba)."""
    N, C, O = x.shape[0], x.shape[1], w.shape[0]
    OH, OW = geo.features
    G = _WINOGRAD_G.astype(w.dtype)
    # tensordot, not a broadcast matmul: O C separate 4x3 products cost ~1 ms
    u = np.tensordot(np.tensordot(G, w, axes=(1, 2)), G, axes=(3, 1))  # (4, O, C, 4)
    u = np.ascontiguousarray(u.transpose(0, 3, 1, 2)).reshape(16, O, C)
    y = np.empty((N, O, OH, OW), x.dtype)
    tiles, elems, TW = _winograd_tiles(N, C, O, geo, x.dtype)

    def work(tile, buf):
        b0, b1, r0, r1 = tile
        nb, T = b1 - b0, (r1 - r0) * TW
        v = buf[:nb * 16 * C * T].reshape(nb, 16, C, T)
        m = buf[nb * 16 * C * T:nb * 16 * (C + O) * T].reshape(nb, 16, O, T)
        _winograd_input(x, v, b0, r0, *geo.padding, TW)
        np.matmul(u, v, out=m)
        _winograd_output(m, y, b0, r0, TW)
        if bias is not None:
            y[b0:b1, :, 2 * r0:2 * r1] += bias.reshape(O, 1, 1)

    _run(tiles, work, elems, x.dtype)
    return y


def _winograd_weight_grad(x, y, geo):
    """_weight_grad for a 3x3 stride-1 kernel, the adjoint of _winograd in W: per tile dU = sum_t
    (A g A^T) (B^T d B)^T over the 16 planes, then dW = G^T dU G."""
    N, C, O = x.shape[0], x.shape[1], y.shape[1]
    tiles, elems, TW = _winograd_tiles(N, C, O, geo, x.dtype)

    def work(tile, buf):  # dU^T = V M^T: BLAS's faster orientation, as in _weight_grad
        b0, b1, r0, r1 = tile
        nb, T = b1 - b0, (r1 - r0) * TW
        v = buf[:nb * 16 * C * T].reshape(nb, 16, C, T)
        m = buf[nb * 16 * C * T:nb * 16 * (C + O) * T].reshape(nb, 16, O, T)
        _winograd_input(x, v, b0, r0, *geo.padding, TW)
        _winograd_output_adjoint(y, m, b0, r0, TW)
        return np.matmul(v, m.transpose(0, 1, 3, 2)).sum(axis=0)

    du = functools.reduce(np.add, _run(tiles, work, elems, x.dtype), np.zeros((16, C, O), x.dtype))
    du = du.reshape(4, 4, C, O)
    G = _WINOGRAD_G.astype(x.dtype)
    dw = np.tensordot(np.tensordot(G, du, axes=(0, 0)), G, axes=(1, 0))  # (3, C, O, 3)
    return np.ascontiguousarray(dw.transpose(2, 1, 0, 3))


def _correlate(x, w, geo, bias=None):
    """Y = W @ im2col(X) (+ bias): X (N, C, H, W), W (O, C/g, kh, kw) -> Y (N, O, OH, OW)."""
    N, g, O = x.shape[0], geo.groups, w.shape[0]
    flipped = geo.flipped()
    if flipped is not None and O < x.shape[1]:  # the flipped adjoint builds O kh kw rows, not C kh kw
        return _correlate_adjoint(x, _flip(w, g, x.shape[1]), flipped, O, bias)
    if _winograd_applies(geo, x.shape[1], O):
        return _winograd(x, w, geo, bias)
    OH, OW = geo.features
    y = np.empty((N, O, OH, OW), x.dtype)
    wm = w.reshape(g, O // g, -1)
    yv = y.reshape(N, g, O // g, OH * OW)
    tiles, elems, K = _column_tiles((N, x.shape[1], x.dtype), geo)

    def work(tile, buf):
        b0, b1, r0, r1 = tile
        out = yv[b0:b1, :, :, r0 * OW:r1 * OW]
        np.matmul(wm, _columns(x, tile, buf, K, geo), out=out)
        if bias is not None:  # while the tile is still in cache
            out += bias.reshape(g, O // g, 1)

    _run(tiles, work, elems, x.dtype)
    return y


def _correlate_adjoint(y, w, geo, c_out, bias=None):
    """X = col2im(W^T @ Y) (+ bias): Y (N, O, OH, OW), W (O, C/g, kh, kw) -> X (N, C, H, W)."""
    N, g, O = y.shape[0], geo.groups, w.shape[0]
    flipped = geo.flipped()
    if flipped is not None and O <= c_out:  # a correlation with O kh kw rows and no col2im
        return _correlate(y, _flip(w, g, c_out), flipped, bias)
    H, W = geo.image
    OH, OW = geo.features
    wt = w.reshape(g, O // g, -1).transpose(0, 2, 1)  # (g, C/g * kh * kw, O/g)
    yv = y.reshape(N, g, O // g, OH * OW)
    x = np.zeros((N, c_out, H, W), y.dtype)
    xv = x.reshape(N, g, c_out // g, H * W)
    tiles, elems, K = _column_tiles((N, c_out, y.dtype), geo)
    # Bands of one image add into overlapping rows of x: one task per image runs them in turn.
    tasks = [[t for t in tiles if t[0] == b] for b in sorted({t[0] for t in tiles})]

    def work(task, buf):
        for b0, b1, r0, r1 in task:
            nb, n = b1 - b0, (r1 - r0) * OW
            src = yv[b0:b1, :, :, r0 * OW:r1 * OW]
            if geo.is_pointwise():  # col2im is the identity
                np.matmul(wt, src, out=xv[b0:b1, :, :, r0 * OW:r1 * OW])
                continue
            col = buf[:nb * K * n].reshape(nb, K, n)
            np.matmul(wt, src, out=col.reshape(nb, g, K // g, n))
            _col2im(col, x, b0, r0, OW, *geo.flat())

    _run(tasks, work, elems, y.dtype)
    if bias is not None:
        x += bias.reshape(1, c_out, 1, 1)
    return x


def _weight_grad(x, y, geo, w_shape):
    """dW = sum_n Y_n @ im2col(X_n)^T: X (N, C, H, W), Y (N, O, OH, OW) -> dW (O, C/g, kh, kw)."""
    N, g, O = x.shape[0], geo.groups, y.shape[1]
    C, (kh, kw) = x.shape[1], geo.kernel
    flipped = geo.flipped()
    if flipped is not None and O < C:  # im2col of Y (O kh kw rows): the flipped kernel's gradient
        dwf = _weight_grad(y, x, flipped, (C, O // g, kh, kw))
        return _flip(dwf, g, O)
    if _winograd_applies(geo, C, O):
        return _winograd_weight_grad(x, y, geo)
    OH, OW = geo.features
    yv = y.reshape(N, g, O // g, OH * OW)
    tiles, elems, K = _column_tiles((N, x.shape[1], x.dtype), geo)

    def work(tile, buf):  # dW^T = im2col(X) @ Y^T: BLAS is faster in this orientation (measured)
        b0, b1, r0, r1 = tile
        gt = yv[b0:b1, :, :, r0 * OW:r1 * OW].transpose(0, 1, 3, 2)
        return np.matmul(_columns(x, tile, buf, K, geo), gt).sum(axis=0)

    # Partial sums added in tile order, whatever thread made them: the result is deterministic.
    dwt = functools.reduce(np.add, _run(tiles, work, elems, x.dtype),
                           np.zeros((g, K // g, O // g), x.dtype))  # (g, C/g kh kw, O/g)
    return np.ascontiguousarray(dwt.transpose(0, 2, 1)).reshape(w_shape)


# -- Functions ---------------------------------------------------------------------------------------

class Conv2d(Function):
    @staticmethod
    def forward(ctx, x, w, b=None, *, geo):
        x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
        ctx.save_for_backward(x, w)
        ctx.geo = geo
        return _correlate(x, w, geo, b)

    @staticmethod
    def backward(ctx, g):  # dL/dx = col2im(W^T g), dL/dW = sum_n g_n im2col(x_n)^T, dL/db = sum g
        x, w = ctx.saved_tensors
        nx, nw, nb = ctx.needs_input_grad
        g = np.ascontiguousarray(g)
        gx = _correlate_adjoint(g, w, ctx.geo, x.shape[1]) if nx else None
        gw = _weight_grad(x, g, ctx.geo, w.shape) if nw else None
        gb = g.sum(axis=(0, 2, 3)) if nb else None
        return gx, gw, gb


class ConvTranspose2d(Function):
    @staticmethod
    def forward(ctx, x, w, b=None, *, geo):
        x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
        ctx.save_for_backward(x, w)
        ctx.geo = geo
        return _correlate_adjoint(x, w, geo, w.shape[1] * geo.groups, b)

    @staticmethod
    def backward(ctx, g):  # dL/dx = W im2col(g) (= conv2d), dL/dW = sum_n x_n im2col(g_n)^T, dL/db = sum g
        x, w = ctx.saved_tensors
        nx, nw, nb = ctx.needs_input_grad
        g = np.ascontiguousarray(g)
        gx = _correlate(g, w, ctx.geo) if nx else None
        gw = _weight_grad(g, x, ctx.geo, w.shape) if nw else None
        gb = g.sum(axis=(0, 2, 3)) if nb else None
        return gx, gw, gb


# -- validation and the public wrappers ---------------------------------------------------------------

def _pair(name, arg, value, minimum):
    """An int or a pair of ints, each >= minimum, as a tuple of two Python ints."""
    items = (value, value) if isinstance(value, (int, np.integer)) else value
    if (not isinstance(items, (tuple, list)) or len(items) != 2
            or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items)):
        raise ValueError(f"{name}: {arg} must be an int or a pair of ints, got {value!r}")
    if isinstance(value, bool) or any(v < minimum for v in items):
        raise ValueError(f"{name}: {arg} must be >= {minimum}, got {value!r}")
    return int(items[0]), int(items[1])


def _check_operands(name, x, w, b):
    """4-D float input and weight of one dtype; bias 1-D of that dtype. Returns the three arrays."""
    xa, wa = data_of(x), data_of(w)
    ba = None if b is None else data_of(b)
    for arg, a in (("input", xa), ("weight", wa), ("bias", ba)):
        if a is not None and a.dtype not in (np.float32, np.float64):
            raise TypeError(f"{name}: {arg} must be float32 or float64, got dtype {a.dtype}")
    if xa.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D input (N, C, H, W), got input of shape {xa.shape} "
                         f"(weight {wa.shape})")
    if wa.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D weight, got weight of shape {wa.shape} "
                         f"(input {xa.shape})")
    for arg, a in (("weight", wa), ("bias", ba)):
        if a is not None and a.dtype != xa.dtype:
            raise TypeError(f"{name}: {arg} dtype {a.dtype} differs from input dtype {xa.dtype}")
    return xa, wa, ba


def _check_bias(name, ba, channels, wa):
    if ba is not None and ba.shape != (channels,):
        raise ValueError(f"{name}: bias of shape {ba.shape} must have shape ({channels},) to match "
                         f"weight {wa.shape}")


def _check_groups(name, groups, xa, wa, dividend, what):
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"{name}: groups must be a positive int, got {groups!r}")
    if dividend % groups:
        raise ValueError(f"{name}: groups={groups} does not divide the {dividend} {what} of weight "
                         f"{wa.shape} (input {xa.shape})")


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation, as torch.nn.functional.conv2d.

    x (N, C, H, W); weight (O, C/groups, kh, kw); bias (O,) or None -> (N, O, OH, OW) with
    OH = floor((H + 2 ph - dh (kh - 1) - 1) / sh) + 1. stride, dilation: int or (h, w), default 1;
    padding: int or (h, w) (zeros, default 0), "valid" (= 0) or "same" (output size = input size,
    stride 1 only; an odd total padding puts the extra pixel at the bottom/right, as torch)."""
    name = "conv2d"
    xa, wa, ba = _check_operands(name, x, weight, bias)
    stride = _pair(name, "stride", stride, 1)
    dilation = _pair(name, "dilation", dilation, 1)
    kernel = wa.shape[2:]
    _check_groups(name, groups, xa, wa, wa.shape[0], "output channels")
    if xa.shape[1] != wa.shape[1] * groups:
        raise ValueError(f"{name}: input {xa.shape} has {xa.shape[1]} channels but weight {wa.shape} "
                         f"with groups={groups} expects {wa.shape[1] * groups}")
    _check_bias(name, ba, wa.shape[0], wa)
    H, W = xa.shape[2:]
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"{name}: padding must be an int, a pair, 'same' or 'valid', got {padding!r}")
        if padding == "same" and stride != (1, 1):
            raise ValueError(f"{name}: padding='same' is not supported for strided convolutions "
                             f"(stride={stride})")
        # "same": total padding d (k - 1), top/left total // 2, the odd pixel at the bottom/right (torch)
        total = [d * (k - 1) if padding == "same" else 0 for k, d in zip(kernel, dilation)]
        pad = (total[0] // 2, total[1] // 2)
    else:
        pad = _pair(name, "padding", padding, 0)
        total = [2 * p for p in pad]
    padded = (H + total[0], W + total[1])
    extent = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    if padded[0] < extent[0] or padded[1] < extent[1]:
        raise ValueError(f"{name}: kernel {tuple(kernel)} with dilation {dilation} spans {extent}, larger "
                         f"than the padded input {padded} (input {xa.shape}, weight {wa.shape})")
    out = tuple((p - e) // s + 1 for p, e, s in zip(padded, extent, stride))
    geo = _Geometry(tuple(kernel), stride, pad, dilation, int(groups), (H, W), out)
    return Conv2d.apply(x, weight, bias, geo=geo)


def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-D transposed convolution (the adjoint of conv2d in its input), as torch's conv_transpose2d.

    x (N, C, H, W); weight (C, O/groups, kh, kw); bias (O,) or None -> (N, O, OH, OW) with
    OH = (H - 1) sh - 2 ph + dh (kh - 1) + oph + 1. stride, dilation: int or (h, w), default 1;
    padding: int or (h, w), default 0; output_padding (default 0) must be smaller than stride or
    dilation."""
    name = "conv_transpose2d"
    xa, wa, ba = _check_operands(name, x, weight, bias)
    stride = _pair(name, "stride", stride, 1)
    dilation = _pair(name, "dilation", dilation, 1)
    pad = _pair(name, "padding", padding, 0)
    out_pad = _pair(name, "output_padding", output_padding, 0)
    kernel = wa.shape[2:]
    _check_groups(name, groups, xa, wa, wa.shape[0], "input channels")
    if xa.shape[1] != wa.shape[0]:
        raise ValueError(f"{name}: input {xa.shape} has {xa.shape[1]} channels but weight {wa.shape} "
                         f"expects {wa.shape[0]}")
    c_out = wa.shape[1] * groups
    _check_bias(name, ba, c_out, wa)
    for op, s, d in zip(out_pad, stride, dilation):
        if op >= max(s, d):
            raise ValueError(f"{name}: output_padding {out_pad} must be smaller than stride {stride} "
                             f"or dilation {dilation}")
    H, W = xa.shape[2:]
    out = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1
                for i, s, p, d, k, op in zip((H, W), stride, pad, dilation, kernel, out_pad))
    if out[0] < 1 or out[1] < 1:
        raise ValueError(f"{name}: output size {out} is below 1 (input {xa.shape}, weight {wa.shape}, "
                         f"stride {stride}, padding {pad}, dilation {dilation})")
    geo = _Geometry(tuple(kernel), stride, pad, dilation, int(groups), out, (H, W))
    return ConvTranspose2d.apply(x, weight, bias, geo=geo)

"""Winograd F(2x2, 3x3) for conv.py's 3x3 stride-1 correlations: the input, output and output-adjoint
transforms (numba) and the two tile routines built on them, the forward correlation and the weight
gradient (its adjoint in W). conv.py decides when Winograd applies and how the work is tiled; these
routines take the tiles and the runner as arguments.

Winograd F(2x2, 3x3) does a 3x3 stride-1 correlation with 16 products per 2x2 outputs instead of 36:
2.25x fewer multiply-adds, at the price of two transforms (the measured gain: docs/benchmarks.md).
"""
from __future__ import annotations

import functools

import numpy as np

from .._jit import kernel

# G (4x3): U = G w G^T turns each 3x3 kernel into its 4x4 Winograd form.
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])


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



def correlate(x, w, features, padding, bias, tiles, elems, TW, run):
    """conv.py's _correlate for a 3x3 stride-1 kernel: per tile, V = B^T d B (numba), M = U V over the
    16 Winograd planes (BLAS, U = G W G^T), Y = A^T M A (numba). x (N, C, H, W), w (O, C, 3, 3) ->
    (N, O, OH, OW) with features = (OH, OW); `run(tiles, work, elems, dtype)` runs the tiles."""
    N, C, O = x.shape[0], x.shape[1], w.shape[0]
    OH, OW = features
    Gw = G.astype(w.dtype)
    # tensordot, not a broadcast matmul of O C separate 4x3 products (slower)
    u = np.tensordot(np.tensordot(Gw, w, axes=(1, 2)), Gw, axes=(3, 1))  # (4, O, C, 4)
    u = np.ascontiguousarray(u.transpose(0, 3, 1, 2)).reshape(16, O, C)
    y = np.empty((N, O, OH, OW), x.dtype)

    def work(tile, buf):
        b0, b1, r0, r1 = tile
        nb, T = b1 - b0, (r1 - r0) * TW
        v = buf[:nb * 16 * C * T].reshape(nb, 16, C, T)
        m = buf[nb * 16 * C * T:nb * 16 * (C + O) * T].reshape(nb, 16, O, T)
        _winograd_input(x, v, b0, r0, *padding, TW)
        np.matmul(u, v, out=m)
        _winograd_output(m, y, b0, r0, TW)
        if bias is not None:
            y[b0:b1, :, 2 * r0:2 * r1] += bias.reshape(O, 1, 1)

    run(tiles, work, elems, x.dtype)
    return y


def weight_grad(x, y, padding, tiles, elems, TW, run):
    """conv.py's _weight_grad for a 3x3 stride-1 kernel, the adjoint of `correlate` in W: per tile
    dU = sum_t (A g A^T) (B^T d B)^T over the 16 planes, then dW = G^T dU G. x (N, C, H, W),
    y (N, O, OH, OW) -> dW (O, C, 3, 3)."""
    C, O = x.shape[1], y.shape[1]

    def work(tile, buf):  # dU^T = V M^T: BLAS's faster orientation, as in conv's _weight_grad
        b0, b1, r0, r1 = tile
        nb, T = b1 - b0, (r1 - r0) * TW
        v = buf[:nb * 16 * C * T].reshape(nb, 16, C, T)
        m = buf[nb * 16 * C * T:nb * 16 * (C + O) * T].reshape(nb, 16, O, T)
        _winograd_input(x, v, b0, r0, *padding, TW)
        _winograd_output_adjoint(y, m, b0, r0, TW)
        return np.matmul(v, m.transpose(0, 1, 3, 2)).sum(axis=0)

    du = functools.reduce(np.add, run(tiles, work, elems, x.dtype), np.zeros((16, C, O), x.dtype))
    du = du.reshape(4, 4, C, O)
    Gx = G.astype(x.dtype)
    dw = np.tensordot(np.tensordot(Gx, du, axes=(0, 0)), Gx, axes=(1, 0))  # (3, C, O, 3)
    return np.ascontiguousarray(dw.transpose(2, 1, 0, 3))

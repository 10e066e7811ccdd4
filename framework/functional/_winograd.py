"""Winograd F(m x m, r x r) for conv.py's stride-1 correlations: the transforms as data (one
Toom-Cook table per (m, r)), three numba kernels that apply any table (input, output and
output-adjoint transforms) and the two tile routines built on them, the forward correlation and the
weight gradient (its adjoint in W). conv.py decides when Winograd applies, which table and how the
work is tiled; these routines take the table, the tiles and the runner as arguments.

F(m, r) computes an m x m block of outputs of an r x r correlation from an a x a input patch
(a = m + r - 1) with a^2 products instead of m^2 r^2: F(2, 3) 2.25x fewer multiply-adds, F(4, 3) 4x,
F(2, 5) 2.8x, at the price of the transforms (measured: docs/benchmarks.md). Per tile of the work:

    V = B^T d B  (every a x a patch d, every channel)     _input
    M = U V      (a^2 GEMMs, U = G W G^T)                 BLAS
    Y = A^T M A  (+ bias)                                 _output

The kernels keep each patch row as m phases (columns u = m t + phase), so that every sum over a
table's row reads and writes contiguous runs of tiles, which LLVM vectorises; the strided gather
and scatter happen once per element.
"""
from __future__ import annotations

import functools
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from .._jit import kernel
from ._im2col import valid_range


class Transform(NamedTuple):
    """The tables of F(m, r): BT (a, a) input, G (a, r) kernel, AT (m, a) output (float64, exact)."""

    m: int
    r: int
    BT: np.ndarray
    G: np.ndarray
    AT: np.ndarray


def _poly(roots):
    """Ascending coefficients of prod (x - z) over `roots`."""
    c = [Fraction(1)]
    for z in roots:
        c = [(c[i - 1] if i else 0) - z * (c[i] if i < len(c) else 0) for i in range(len(c) + 1)]
    return c


def toom_cook(m, r, points):
    """F(m, r) from the a - 1 finite interpolation points (and infinity), a = m + r - 1: A^T
    evaluates at the points, G interpolates (Lagrange weights), B^T's rows are the polynomials that
    vanish on all points but one (the last on all of them)."""
    a = m + r - 1
    p = [Fraction(z) for z in points]
    assert len(p) == a - 1 and len(set(p)) == a - 1
    AT = [[z ** i for z in p] + [int(i == m - 1)] for i in range(m)]
    f = [np.prod([p[t] - p[s] for s in range(a - 1) if s != t]) for t in range(a - 1)]
    G = [[p[t] ** k / f[t] for k in range(r)] for t in range(a - 1)] + [[int(k == r - 1) for k in range(r)]]
    BT = [_poly(p[:t] + p[t + 1:]) + [0] for t in range(a - 1)] + [_poly(p)]
    as_float = lambda rows: np.array([[float(v) for v in row] for row in rows])  # noqa: E731
    return Transform(m, r, as_float(BT), as_float(G), as_float(AT))


# Points 0, +-1, +-2 (and +-1/2): small table entries keep float32's error near a direct sum's
# (Lavin & Gray's F(4, 3); measured: docs/benchmarks.md).
TRANSFORMS = {(2, 3): toom_cook(2, 3, (0, 1, -1)),
              (4, 3): toom_cook(4, 3, (0, 1, -1, 2, -2)),
              (2, 5): toom_cook(2, 5, (0, 1, -1, 2, -2)),
              (4, 5): toom_cook(4, 5, (0, 1, -1, 2, -2, 0.5, -0.5))}


def row_length(tf, OW):
    """Tiles per row of the tile grid, TW = ceil(OW / m), and the grid's row length E = TW +
    (a - 1) // m: E - TW junk tiles pad each row, so that the phases of a patch row line up with
    the next row's and every table sum runs over a whole band of tile rows in one loop."""
    TW = -(-OW // tf.m)
    return TW, TW + (tf.m + tf.r - 2) // tf.m


@kernel
def _lincomb(dst, coefs, src, step, shift):
    """dst = sum_k coefs[k] src[k step + shift] over the nonzero coefs, in k order (src 2-D: rows)."""
    first = True
    for k in range(coefs.shape[0]):
        c = coefs[k]
        if c != 0:
            s = src[k * step + shift]
            if first:
                for t in range(dst.shape[0]):
                    dst[t] = c * s[t]
                first = False
            else:
                for t in range(dst.shape[0]):
                    dst[t] += c * s[t]


@kernel
def _input(x, v, b0, tr0, nt, ph, pw, TW, BT, m):
    """v[i a + j, c, (b nt + tl) E + tj] = (B^T d B)[i, j] for the a x a patch d of x[b0 + b, c]
    (zero outside) at rows m (tr0 + tl) - ph..., columns m tj - pw...: the input transform of nt
    tile rows of E tiles (row_length), for every image b and channel c."""
    a = BT.shape[0]
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    E = TW + (a - 1) // m
    L = nt * E  # tiles per image
    S = nt + (a - 1) // m  # rows per row phase
    T = v.shape[2]  # tiles of all nb images
    # P[f, g, (s, t)] = x[m (tr0 + s) + g - ph, m t + f - pw]: one image's band split into m x m
    # phases, so that patch row k of all tile rows is one run P[f, k % m, k // m ...] of nt E
    P = np.zeros((m, m, S * E), v.dtype)  # entries outside x stay 0: the same for every (b, c)
    Q = np.empty((a, m, T), v.dtype)  # Q[i, f, (b, tl, t)] = sum_k BT[i, k] P_b[f, k % m, (k // m + tl, t)]
    r0, r1 = valid_range(m * tr0 - ph, 1, H, m * S)  # the band's rows inside x
    for c in range(C):
        for b in range(T // L):
            for f in range(m):
                t0, t1 = valid_range(f - pw, m, W, E)
                for r in range(r0, r1):
                    dst = P[f, r % m, (r // m) * E + t0:(r // m) * E + t1]
                    src = x[b0 + b, c, m * tr0 - ph + r, m * t0 + f - pw:]
                    for t in range(dst.shape[0]):
                        dst[t] = src[m * t]
            for i in range(a):  # Q = B^T d along the patch rows
                for f in range(m):
                    q, first = Q[i, f, b * L:(b + 1) * L], True
                    for k in range(a):
                        coef = BT[i, k]
                        if coef != 0:
                            src = P[f, k % m, (k // m) * E:(k // m) * E + L]
                            if first:
                                for t in range(L):
                                    q[t] = coef * src[t]
                                first = False
                            else:
                                for t in range(L):
                                    q[t] += coef * src[t]
        for i in range(a):  # V = Q B along the columns: column l of tile t is phase l % m, tile t + l // m
            for j in range(a):
                out, first = v[i * a + j, c], True
                for l in range(a):
                    coef = BT[j, l]
                    if coef != 0:
                        # tiles past TW of a row (junk) read into the next: the last l // m read 0
                        n, src = T - l // m, Q[i, l % m, l // m:]
                        if first:
                            for t in range(n):
                                out[t] = coef * src[t]
                            for t in range(n, T):
                                out[t] = 0
                            first = False
                        else:
                            for t in range(n):
                                out[t] += coef * src[t]


@kernel
def _output(mm, y, bias, b0, tr0, nt, TW, AT):
    """y[b0 + b, o, m (tr0 + tl) + e, m tj + f] = (A^T M A)[e, f] + bias[o] for the a x a product M
    of each tile (column (b nt + tl) E + tj of mm (a^2, O, T)); junk tiles and the parts of tiles
    hanging past y are dropped."""
    m, a = AT.shape
    O, OH, OW = y.shape[1], y.shape[2], y.shape[3]
    E = TW + (a - 1) // m
    L, T = nt * E, mm.shape[2]
    S = np.empty((a, T), mm.dtype)  # row e of A^T M
    Z = np.empty((m, T), mm.dtype)  # row e of A^T M A
    rows = min(nt * m, OH - m * tr0)
    for o in range(O):
        bv = bias[o]
        for e in range(m):
            for j in range(a):  # S[j] = sum_i AT[e, i] M[i, j] (M's planes: rows of mm[:, o], which
                s, first = S[j], True  # numba types as a strided view, so indexed one by one here)
                for i in range(a):
                    coef = AT[e, i]
                    if coef != 0:
                        src = mm[i * a + j, o]
                        if first:
                            for t in range(T):
                                s[t] = coef * src[t]
                            first = False
                        else:
                            for t in range(T):
                                s[t] += coef * src[t]
            for f in range(m):
                _lincomb(Z[f], AT[f], S, 1, 0)
            for b in range(T // L):
                for tl in range((rows - e + m - 1) // m):  # rows m (tr0 + tl) + e < OH
                    yrow = y[b0 + b, o, m * (tr0 + tl) + e]
                    for f in range(m):
                        z, dst = Z[f, b * L + tl * E:b * L + tl * E + TW], yrow[f:]
                        for t in range(min(TW, (OW - f + m - 1) // m)):
                            dst[m * t] = z[t] + bv


@kernel
def _output_adjoint(y, mm, b0, tr0, nt, TW, A):
    """The adjoint of _output (without bias): mm[i a + j, o, (b nt + tl) E + tj] = (A G A^T)[i, j]
    for the m x m block G of y[b0 + b, o] (zero past the edges) under each tile (junk tiles: 0);
    A = (A^T)^T, (a, m)."""
    a, m = A.shape
    O, OH, OW = y.shape[1], y.shape[2], y.shape[3]
    E = TW + (a - 1) // m
    L, T = nt * E, mm.shape[2]
    Z = np.zeros((m, m, T), y.dtype)  # Z[e, f, (b, tl, t)] = y[m (tr0 + tl) + e, m t + f]; junk stays 0
    S = np.empty((a, m, T), y.dtype)  # S[j, e] = sum_f A[j, f] Z[e, f]
    rows = min(nt * m, OH - m * tr0)
    for o in range(O):
        for e in range(m):
            for b in range(T // L):
                for tl in range((rows - e + m - 1) // m):
                    for f in range(m):
                        src, d = y[b0 + b, o, m * (tr0 + tl) + e, f:], Z[e, f, b * L + tl * E:]
                        for t in range(min(TW, (OW - f + m - 1) // m)):
                            d[t] = src[m * t]
            for j in range(a):
                _lincomb(S[j, e], A[j], Z[e], 1, 0)
        for i in range(a):
            for j in range(a):
                _lincomb(mm[i * a + j, o], A[i], S[j], 1, 0)


@kernel
def _kernel_transform(w, G, u):
    """u[i a + j, o, c] = (G w[o, c] G^T)[i, j], summed in float64: the weights' transform U in one
    pass (numpy's einsum took a fifth of a small-map conv: docs/benchmarks.md)."""
    a, r = G.shape
    t = np.empty((a, r))  # G w[o, c], float64
    for o in range(w.shape[0]):
        for c in range(w.shape[1]):
            for i in range(a):
                for l in range(r):
                    s = 0.0
                    for k in range(r):
                        s += G[i, k] * w[o, c, k, l]
                    t[i, l] = s
            for i in range(a):
                for j in range(a):
                    s = 0.0
                    for l in range(r):
                        s += t[i, l] * G[j, l]
                    u[i * a + j, o, c] = s


@kernel
def _kernel_transform_adjoint(du, G, dw):
    """dw[o, c] = G^T dU[:, :, c, o] G for du (a^2, C, O), summed in float64: the adjoint of
    _kernel_transform, the weight gradient's last step. Its own kernel over contiguous layouts: one
    shared L x L^T kernel over strided views of u and du took twice as long."""
    a, r = G.shape
    t = np.empty((a, r))  # dU G, float64
    for c in range(du.shape[1]):
        for o in range(du.shape[2]):
            for i in range(a):
                for l in range(r):
                    s = 0.0
                    for j in range(a):
                        s += du[i * a + j, c, o] * G[j, l]
                    t[i, l] = s
            for k in range(r):
                for l in range(r):
                    s = 0.0
                    for i in range(a):
                        s += G[i, k] * t[i, l]
                    dw[o, c, k, l] = s


def _buffers(buf, tile, E, a2, C, O):
    """The tile's V (a^2, C, T) and M (a^2, O, T) in its column buffer, T = images x tiles."""
    b0, b1, r0, r1 = tile
    T = (b1 - b0) * (r1 - r0) * E
    v = buf[:a2 * C * T].reshape(a2, C, T)
    return v, buf[a2 * C * T:a2 * (C + O) * T].reshape(a2, O, T)


def correlate(x, w, tf, features, padding, bias, tiles, elems, TW, run):
    """conv.py's _correlate for an r x r stride-1 kernel by the table tf: per tile, V = B^T d B
    (numba), M = U V over the a^2 planes (BLAS, U = G W G^T), Y = A^T M A + bias (numba).
    x (N, C, H, W), w (O, C, r, r) -> (N, O, OH, OW) with features = (OH, OW); `run(tiles, work,
    elems, dtype)` runs the tiles."""
    N, C, O = x.shape[0], x.shape[1], w.shape[0]
    a2, dt = (tf.m + tf.r - 1) ** 2, x.dtype
    u = np.empty((a2, O, C), dt)  # in float64, then rounded once: G's fractions are inexact in float32
    _kernel_transform(np.ascontiguousarray(w), tf.G, u)
    BT, AT = tf.BT.astype(dt), tf.AT.astype(dt)
    b = np.zeros(O, dt) if bias is None else np.ascontiguousarray(bias, dt)
    y = np.empty((N, O, *features), dt)
    E = row_length(tf, features[1])[1]

    def work(tile, buf):
        b0, b1, r0, r1 = tile
        v, m = _buffers(buf, tile, E, a2, C, O)
        _input(x, v, b0, r0, r1 - r0, *padding, TW, BT, tf.m)
        np.matmul(u, v, out=m)
        _output(m, y, b, b0, r0, r1 - r0, TW, AT)

    run(tiles, work, elems, dt)
    return y


def weight_grad(x, y, tf, padding, tiles, elems, TW, run):
    """conv.py's _weight_grad for an r x r stride-1 kernel, the adjoint of `correlate` in W: per tile
    dU = sum_t (A g A^T) (B^T d B)^T over the a^2 planes, then dW = G^T dU G. x (N, C, H, W),
    y (N, O, OH, OW) -> dW (O, C, r, r)."""
    C, O = x.shape[1], y.shape[1]
    a, dt = tf.m + tf.r - 1, x.dtype
    BT, A = tf.BT.astype(dt), np.ascontiguousarray(tf.AT.T, dt)
    E = row_length(tf, y.shape[3])[1]

    def work(tile, buf):  # dU^T = V M^T: BLAS's faster orientation, as in conv's _weight_grad
        b0, b1, r0, r1 = tile
        v, m = _buffers(buf, tile, E, a * a, C, O)
        _input(x, v, b0, r0, r1 - r0, *padding, TW, BT, tf.m)
        _output_adjoint(y, m, b0, r0, r1 - r0, TW, A)
        return np.matmul(v, m.transpose(0, 2, 1))

    # partial sums added in tile order, whatever thread made them: deterministic
    du = functools.reduce(np.add, run(tiles, work, elems, dt), np.zeros((a * a, C, O), dt))
    dw = np.empty((O, C, tf.r, tf.r), dt)
    _kernel_transform_adjoint(du, tf.G, dw)
    return dw

"""Row building blocks shared by the row-wise op families (softmax.py, normalization.py's layer_norm,
attention.py) and open to a user's own kernels: an array is viewed as rows (R, D) and each row is
reduced and rewritten in one numba pass.

Scalar helpers, usable inside any kernel (`@kernel` functions inline them):
- `like(v, ref)`: v in ref's float type (a float32 row computes in float32 once its float64
  statistics are known: twice the vector lanes).
- `vexp(t)`: exp for t <= 88; math.exp in float64, and in float32 `exp32`, an exp in plain
  arithmetic (~1.3 ulp) that LLVM vectorises (numba compiles math.exp to a scalar libm call unless
  Intel's SVML is installed).
Row reductions, float64 with four accumulators (without fastmath LLVM keeps one accumulator's
dependent adds in order; four run side by side): `row_dot`, `row_max`, `row_moments`,
`row_grad_sums`; and `row_max2`: row_max of two rows side by side (each row's chains row_max's; one
row's four chains still wait on their compares, two rows' eight do not: attention's softmax).
`row_sum16`: a row's float64 sum in 16 explicit vector lanes and a fixed tree of them, and
`layer_norm_stats2`: two rows' mean and rstd from such sums (attention's softmax and layer_norm: their
own order, documented in docs/numerics.md).
Row kernels: `softmax_rows` and its adjoint `softmax_rows_grad` (parallel over rows).

`SERIAL_ELEMS`: below this many elements a row kernel runs on one thread (`_jit.launch`).
"""
from __future__ import annotations

import math

import numpy as np
from numba import types
from numba.extending import overload

from .._jit import kernel, prange
from .._simd import vadd, vhsum, vload_part, vmul, vpast, vsplat, vsub, vwiden

__all__ = ["SERIAL_ELEMS", "like", "exp32", "vexp", "row_dot", "row_max", "row_moments", "row_sum16",
           "layer_norm_stats2", "layer_norm_value", "row_max2", "row_grad_sums", "softmax_rows",
           "softmax_rows_grad"]

SERIAL_ELEMS = 1 << 15


# -- scalars -------------------------------------------------------------------------------------
def like(v, ref):
    """v in ref's float type (inside kernels): a float32 row is normalised in float32 arithmetic,
    which vectorises twice as wide, once its statistics are known (in float64)."""
    return v


@overload(like, inline="always")
def _like_overload(v, ref):
    if isinstance(ref, types.Float) and ref.bitwidth == 32:
        return lambda v, ref: np.float32(v)
    return lambda v, ref: v


def exp32(t):
    """float32 exp by Cody-Waite reduction t = n ln2 + r, |r| <= ln2 / 2, Cephes' degree-7 expf
    polynomial for e^r, and 2^n written into the exponent bits; below -87 (where float32 leaves
    its normal range) the result is 0. A NaN stays NaN. Plain Python here: `vexp` inlines it,
    `kernel(exp32)` makes it a callable kernel."""
    f = np.float32
    under = t < f(-87.0)
    t = f(-87.0) if under else t  # this order keeps a NaN (max() would drop it)
    n = np.floor(t * f(1.4426950408889634) + f(0.5))
    r = t - n * f(0.693359375) + n * f(2.12194440e-4)  # ln 2 in two parts: r stays exact
    p = ((((f(1.9875691500e-4) * r + f(1.3981999507e-3)) * r + f(8.3334519073e-3)) * r
          + f(4.1665795894e-2)) * r + f(1.6666665459e-1)) * r + f(5.0000001201e-1)
    p = p * (r * r) + r + f(1.0)
    scale = np.int32((np.int32(n) + np.int32(127)) << np.int32(23)).view(np.float32)
    return f(0.0) if under else p * scale


def vexp(t):
    """exp(t) for t <= 88 (softmax: always t <= 0): math.exp in float64, `exp32` in float32."""
    return math.exp(t)


@overload(vexp, inline="always")
def _vexp_overload(t):
    if isinstance(t, types.Float) and t.bitwidth == 32:
        return exp32
    return lambda t: math.exp(t)


# -- row reductions ------------------------------------------------------------------------------
@kernel
def row_dot(a, b, r, use_b):
    """sum_j a[r, j] (b[r, j] if use_b), in float64 with four accumulators (no serial chain)."""
    D = a.shape[1]
    s0 = s1 = s2 = s3 = 0.0
    j = 0
    while j + 4 <= D:
        if use_b:
            s0 += a[r, j] * b[r, j]
            s1 += a[r, j + 1] * b[r, j + 1]
            s2 += a[r, j + 2] * b[r, j + 2]
            s3 += a[r, j + 3] * b[r, j + 3]
        else:
            s0 += a[r, j]
            s1 += a[r, j + 1]
            s2 += a[r, j + 2]
            s3 += a[r, j + 3]
        j += 4
    while j < D:
        s0 += a[r, j] * b[r, j] if use_b else a[r, j]
        j += 1
    return (s0 + s1) + (s2 + s3)


@kernel
def row_max(x, r):
    """max_j x[r, j] with four running maxima (NaN never wins here; it spreads through exp)."""
    D = x.shape[1]
    m0 = m1 = m2 = m3 = x[r, 0]
    j = 1
    while j + 4 <= D:
        m0 = x[r, j] if x[r, j] > m0 else m0
        m1 = x[r, j + 1] if x[r, j + 1] > m1 else m1
        m2 = x[r, j + 2] if x[r, j + 2] > m2 else m2
        m3 = x[r, j + 3] if x[r, j + 3] > m3 else m3
        j += 4
    while j < D:
        m0 = x[r, j] if x[r, j] > m0 else m0
        j += 1
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    return m2 if m2 > m0 else m0


@kernel
def row_moments(x, r, mu):
    """sum_j (x[r, j] - mu) and sum_j (x[r, j] - mu)^2 in float64, four accumulators each."""
    D = x.shape[1]
    a0 = a1 = a2 = a3 = 0.0
    q0 = q1 = q2 = q3 = 0.0
    j = 0
    while j + 4 <= D:
        d0, d1, d2, d3 = x[r, j] - mu, x[r, j + 1] - mu, x[r, j + 2] - mu, x[r, j + 3] - mu
        a0 += d0
        a1 += d1
        a2 += d2
        a3 += d3
        q0 += d0 * d0
        q1 += d1 * d1
        q2 += d2 * d2
        q3 += d3 * d3
        j += 4
    while j < D:
        d0 = x[r, j] - mu
        a0 += d0
        q0 += d0 * d0
        j += 1
    return (a0 + a1) + (a2 + a3), (q0 + q1) + (q2 + q3)


@kernel
def row_max2(a, b, M):
    """(row_max of a, of b) over their first M (rows as 1-D arrays): the same four chains each, two
    rows side by side (one row's chains wait on their compares)."""
    m0 = m1 = m2 = m3 = a[0]
    n0 = n1 = n2 = n3 = b[0]
    j = 1
    while j + 4 <= M:
        m0 = a[j] if a[j] > m0 else m0
        n0 = b[j] if b[j] > n0 else n0
        m1 = a[j + 1] if a[j + 1] > m1 else m1
        n1 = b[j + 1] if b[j + 1] > n1 else n1
        m2 = a[j + 2] if a[j + 2] > m2 else m2
        n2 = b[j + 2] if b[j + 2] > n2 else n2
        m3 = a[j + 3] if a[j + 3] > m3 else m3
        n3 = b[j + 3] if b[j + 3] > n3 else n3
        j += 4
    while j < M:
        m0 = a[j] if a[j] > m0 else m0
        n0 = b[j] if b[j] > n0 else n0
        j += 1
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    n0 = n1 if n1 > n0 else n0
    n2 = n3 if n3 > n2 else n2
    return (m2 if m2 > m0 else m0), (n2 if n2 > n0 else n0)


SUM_LANES = 16  # row_sum16's lanes (two zmm of float64)


@kernel(inline=True)
def row_sum16(row, M):
    """sum_j row[j] over j < M (a 1-D row) in float64, in SUM_LANES lanes: lane l the keys j = l,
    l + 16, ... in order, then the lanes in _simd.vhsum's tree ((l0 + l8) + (l4 + l12)) + ...: the
    attention's softmax order, vectors where row_dot's four scalar chains waited on their adds."""
    acc = vsplat(0.0, SUM_LANES)
    zero = vsplat(like(0.0, row[0]), SUM_LANES)
    for j in range(0, M, SUM_LANES):
        acc = vadd(acc, vwiden(vload_part(row, j, zero, 0, min(SUM_LANES, M - j))))
    return vhsum(acc)


@kernel(inline=True)
def _lane_moments2(a, b, ma, mb, D):
    """(sum (a - ma), sum (a - ma)^2, the same of b) over the first D values of rows a and b, in
    float64: row_sum16's lanes (lane l: values l, l + 16, ... in order; vhsum's tree)."""
    zero, none = vsplat(like(0.0, a[0]), SUM_LANES), vsplat(0.0, SUM_LANES)
    mav, mbv = vsplat(ma, SUM_LANES), vsplat(mb, SUM_LANES)
    sa = qa = sb = qb = none
    for j in range(0, D, SUM_LANES):
        n = min(SUM_LANES, D - j)
        da = vpast(vsub(vwiden(vload_part(a, j, zero, 0, n)), mav), n, 0.0)  # lanes past D: 0
        db = vpast(vsub(vwiden(vload_part(b, j, zero, 0, n)), mbv), n, 0.0)
        sa, qa = vadd(sa, da), vadd(qa, vmul(da, da))
        sb, qb = vadd(sb, db), vadd(qb, vmul(db, db))
    return vhsum(sa), vhsum(qa), vhsum(sb), vhsum(qb)


@kernel(inline=True)
def layer_norm_stats2(a, b, eps):
    """(mean, rstd) of row a and of row b (1-D, D values each), float64: the mean of the row's sum
    in row_sum16's order, then the corrected two-pass variance about it (sum (x - mean)^2 - (sum
    (x - mean))^2 / D: the second term corrects for the mean's rounding), summed in the same lanes,
    and rstd = 1 / sqrt(var + eps); two rows side by side. layer_norm's statistics."""
    D = a.shape[0]
    ma, mb = row_sum16(a, D) / D, row_sum16(b, D) / D
    s1, q, s2, p = _lane_moments2(a, b, ma, mb, D)
    return ma, 1.0 / math.sqrt((q - s1 * s1 / D) / D + eps), mb, 1.0 / math.sqrt((p - s2 * s2 / D) / D + eps)


@kernel(inline=True)
def layer_norm_value(v, m, s, w, b):
    """One normalised value, ((v - mean) rstd) w + b in v's type (m, s: the row's statistics in it):
    layer_norm's, and a linear's that normalises the rows it reads (_gemm_bf16.matmul_rows)."""
    return (v - m) * s * w + b


@kernel
def row_grad_sums(g, x, w, r, mu):
    """sum_j g w and sum_j g w (x - mu) over row r, float64, four accumulators each."""
    D = x.shape[1]
    a0 = a1 = a2 = a3 = 0.0
    b0 = b1 = b2 = b3 = 0.0
    j = 0
    while j + 4 <= D:
        h0, h1, h2, h3 = g[r, j] * w[j], g[r, j + 1] * w[j + 1], g[r, j + 2] * w[j + 2], g[r, j + 3] * w[j + 3]
        a0 += h0
        a1 += h1
        a2 += h2
        a3 += h3
        b0 += h0 * (x[r, j] - mu)
        b1 += h1 * (x[r, j + 1] - mu)
        b2 += h2 * (x[r, j + 2] - mu)
        b3 += h3 * (x[r, j + 3] - mu)
        j += 4
    while j < D:
        h0 = g[r, j] * w[j]
        a0 += h0
        b0 += h0 * (x[r, j] - mu)
        j += 1
    return (a0 + a1) + (a2 + a3), (b0 + b1) + (b2 + b3)


# -- row kernels ---------------------------------------------------------------------------------
@kernel(parallel=True)
def softmax_rows(x, y, log):
    """Rows of x (R, D): y = exp(x - m) / s, or with `log` y = x - m - log(s), where m is the row
    maximum and s = sum exp(x - m)."""
    R, D = x.shape
    for r in prange(R):
        m = row_max(x, r)
        for j in range(D):
            y[r, j] = vexp(x[r, j] - m)
        s = row_dot(y, y, r, False)
        if log:
            ls = like(math.log(s), x[r, 0])
            for j in range(D):
                y[r, j] = (x[r, j] - m) - ls  # not x - (m + ls): m may dwarf ls
        else:
            inv = like(1.0 / s, x[r, 0])  # float32 rows scale in float32 (twice the lanes)
            for j in range(D):
                y[r, j] = y[r, j] * inv


@kernel(parallel=True)
def softmax_rows_grad(g, y, gx, log):
    """Rows: gx = y (g - sum(g y)) for softmax, gx = g - exp(y) sum(g) for log_softmax (y the
    forward's output)."""
    R, D = y.shape
    for r in prange(R):
        if log:
            s = like(row_dot(g, g, r, False), y[r, 0])
            for j in range(D):
                gx[r, j] = g[r, j] - vexp(y[r, j]) * s
        else:
            s = like(row_dot(g, y, r, True), y[r, 0])
            for j in range(D):
                gx[r, j] = y[r, j] * (g[r, j] - s)

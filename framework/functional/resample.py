"""Resampling: `interpolate` (PyTorch 2.13's F.interpolate, every mode, differentiable) and `imresize`
(MATLAB's imresize, the SR degradation).

Modes are data. Every mode is separable and linear: along an axis of input size n and output size m,
y = W x with a sparse m x n matrix W. `weight_table` builds W as a padded table
(indices[m, taps], weights[m, taps]) from a filter, a tap window per output, a coordinate and a border
rule; the modes below differ only in what they hand it. One numba kernel applies a table along H and
another along W (both inside one parallel loop over planes); backward applies the transposed tables
(`dL/dx = W_h^T g W_w`) with the very same kernel, so it is race-free and the exact adjoint.
A mode is a record (`MODES`: its table rule, its filters from `FILTERS`, which options it takes);
MATLAB's table rule and `imresize` live in imresize.py and reuse the filters, builder and kernels.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

import numpy as np

from .._check import flag, float_array, pair
from .._jit import kernel, launch, prange
from ..autograd import Function
from ..tensor import Tensor
from . import _tiles

__all__ = ["interpolate"]


# -- filters: weight of an input pixel at offset d from the source coordinate (in input pixels) ----
def _triangle(d):
    return np.maximum(1.0 - np.abs(d), 0.0)


def _cubic(a):
    """Keys' cubic convolution kernel with parameter `a` (-0.75 torch, -0.5 Pillow/MATLAB)."""
    def f(d):
        s = np.abs(d)
        near = ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0
        far = ((a * s - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a
        return np.where(s <= 1.0, near, np.where(s < 2.0, far, 0.0))
    return f


def _sinc(d):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(d == 0.0, 1.0, np.sin(np.pi * d) / (np.pi * d))


def _lanczos3(d):
    """Lanczos-3: sinc(d) sinc(d / 3) for |d| < 3 (Pillow's window is [-3, 3); at -3 it is 1e-33)."""
    return np.where(np.abs(d) < 3.0, _sinc(d) * _sinc(d / 3.0), 0.0)


_EPS = np.finfo(np.float64).eps


def _matlab_lanczos(a):
    def f(d):  # MATLAB's own formula, eps terms included (they make f(0) = 1 without a branch)
        return ((np.sin(np.pi * d) * np.sin(np.pi * d / a) + _EPS)
                / (np.pi ** 2 * d * d / a + _EPS) * (np.abs(d) < a))
    return f


def _box(d):
    # MATLAB's box is 1 on -0.5 <= x < 0.5 with x = u - j, i.e. -d
    return ((d > -0.5) & (d <= 0.5)).astype(np.float64)


def _ones(d):
    return np.ones_like(d)


class Filter(NamedTuple):
    """A resampling filter: `fn(d)` weighs an input pixel at offset d; zero for |d| >= `support`
    (half the window, in input pixels, before any antialias stretch)."""

    fn: Callable
    support: float


# Every filter srgrad resamples with, torch's and MATLAB's, in one table (imresize reads it too).
FILTERS = {
    "triangle": Filter(_triangle, 1.0),            # bilinear; MATLAB "triangle"
    "cubic_torch": Filter(_cubic(-0.75), 2.0),     # torch's bicubic
    "cubic": Filter(_cubic(-0.5), 2.0),            # Keys a=-0.5: antialiased bicubic, Pillow, MATLAB
    "lanczos3": Filter(_lanczos3, 3.0),            # Pillow's LANCZOS, burn's Lanczos-3
    "box": Filter(_box, 0.5),                      # MATLAB "box"
    "matlab_lanczos2": Filter(_matlab_lanczos(2.0), 2.0),
    "matlab_lanczos3": Filter(_matlab_lanczos(3.0), 3.0),
}


# -- the one table builder -----------------------------------------------------------------------
class Table:
    """One axis of a resampling: output o = sum_t weight[o, t] * input[index[o, t]] (n inputs).
    Zero-weight taps are dropped and duplicate indices merged, so `taps` is as small as it can be."""

    def __init__(self, index: np.ndarray, weight: np.ndarray, n: int):
        self.index, self.weight, self.n = index, weight, n
        self._cast, self._t, self._x2 = {}, None, None
        index.flags.writeable = weight.flags.writeable = False

    @property
    def m(self) -> int:
        return self.index.shape[0]

    def weights_as(self, dtype) -> np.ndarray:
        """The weights in the data's dtype (float32 data accumulates in float32)."""
        dtype = np.dtype(dtype)
        if dtype not in self._cast:
            self._cast[dtype] = self.weight.astype(dtype)
        return self._cast[dtype]

    def transposed(self) -> "Table":
        """W^T as a table of its own: the backward gathers with the forward's kernel."""
        if self._t is None:
            rows = np.repeat(np.arange(self.m), self.index.shape[1])
            self._t = _pack(self.index.ravel(), rows, self.weight.ravel(), self.n, self.m)
        return self._t

    def dense(self) -> np.ndarray:
        """W as an (m, n) matrix (tests and debugging)."""
        out = np.zeros((self.m, self.n))
        np.add.at(out, (np.repeat(np.arange(self.m), self.index.shape[1]), self.index.ravel()),
                  self.weight.ravel())
        return out


def _pack(rows, cols, vals, nrows, ncols) -> Table:
    """COO triplets -> padded Table: duplicates summed, zeros dropped, rows padded with weight 0."""
    key = rows.astype(np.int64) * ncols + cols
    keys, inverse = np.unique(key, return_inverse=True)
    sums = np.bincount(inverse.ravel(), weights=vals, minlength=keys.size)
    keep = sums != 0.0
    keys, sums = keys[keep], sums[keep]
    r, c = keys // ncols, keys % ncols
    counts = np.bincount(r, minlength=nrows)
    taps = max(int(counts.max(initial=0)), 1)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.arange(keys.size) - starts[r]
    index = np.zeros((nrows, taps), np.int64)
    weight = np.zeros((nrows, taps), np.float64)
    index[r, slot], weight[r, slot] = c, sums
    # Padding taps re-read a pixel the row already uses (weight 0), never an unrelated one.
    pad = np.arange(taps)[None, :] >= counts[:, None]
    index[pad] = np.broadcast_to(index[:, :1], index.shape)[pad]
    return Table(index, weight, ncols)


def weight_table(n, centre, lo, hi, taps, filt, border, normalize) -> Table:
    """THE table builder. Output o reads input taps j = lo[o] + 0..taps-1 that lie below hi[o], with
    weight filt(j - centre[o]); `border` says what a tap outside [0, n) does: "clamp" (reads the edge
    pixel: torch's non-antialiased modes), "skip" (dropped) or "mirror" (MATLAB's symmetric fold).
    `normalize` rescales each row to sum 1 (antialias, area, lanczos, MATLAB)."""
    j = lo[:, None] + np.arange(taps)[None, :]
    w = filt(j - centre[:, None]) * (j < hi[:, None])
    if border == "clamp":
        j = np.clip(j, 0, n - 1)
    elif border == "skip":
        w = w * ((j >= 0) & (j < n))
        j = np.clip(j, 0, n - 1)
    else:  # mirror: ... 1 0 | 0 1 ... n-1 | n-1 n-2 ...
        j = np.mod(j, 2 * n)
        j = np.where(j < n, j, 2 * n - 1 - j)
    if normalize:
        total = w.sum(axis=1, keepdims=True)
        w = np.divide(w, total, out=np.zeros_like(w), where=total != 0.0)
    m = j.shape[0]
    return _pack(np.repeat(np.arange(m), taps), j.ravel(), w.ravel(), m, n)


# -- interpolate's modes as data: a table rule and its filters per mode ----------------------------
def _coordinate_scale(n, m, sf, align_corners):
    """ATen's area_pixel_compute_scale: input pixels per output pixel."""
    if align_corners:
        return (n - 1) / (m - 1) if m > 1 else 0.0
    return 1.0 / sf if sf else n / m


def _identity(n):
    i = np.arange(n)
    return weight_table(n, i.astype(np.float64), i, i + 1, 1, _ones, "clamp", False)


def _nearest_indices(n, m, sf, exact, large):
    # torch computes these indices in float32. While the output's height + width is at most 128:
    # legacy nearest as floor(float32(i) * scale) with the shortcuts m == n and m == 2n (whatever
    # the factor), nearest-exact as floorf((i + 0.5) * scale), a double product rounded to float32.
    # Above that (`large`) torch's forward takes another kernel: floor(float32((i + off) / factor)),
    # a double division, no shortcuts (its backward keeps the first rule; srgrad's backward is the
    # transpose of whichever table the forward used).
    i = np.arange(m)
    scale = np.float32(1.0 / sf) if sf else np.float32(n) / np.float32(m)
    if large:
        v = (i + (0.5 if exact else 0.0)) / sf if sf else (i + (0.5 if exact else 0.0)) * n / m
        src = np.floor(v.astype(np.float32))
    elif exact:
        src = np.floor(((i + 0.5) * np.float64(scale)).astype(np.float32))
    elif m == n:
        src = i
    elif m == 2 * n:
        src = i >> 1
    else:
        src = np.floor(i.astype(np.float32) * scale)
    src = np.minimum(src.astype(np.int64), n - 1)
    return weight_table(n, src.astype(np.float64), src, src + 1, 1, _ones, "clamp", False)


def _nearest(n, m, sf, align_corners, filt, border, large=False):
    return _nearest_indices(n, m, sf, False, large)


def _nearest_exact(n, m, sf, align_corners, filt, border, large=False):
    return _nearest_indices(n, m, sf, True, large)


def _interpolating(n, m, sf, align_corners, filt, border):
    """torch's bilinear/bicubic without antialias: taps floor(x)-support+1 .. floor(x)+support around
    the source coordinate, fraction clamped to [0, 1], border taps clamped (edge replicated)."""
    support = int(filt.support)
    scale = _coordinate_scale(n, m, sf, align_corners)
    i = np.arange(m, dtype=np.float64)
    real = scale * i if align_corners else scale * (i + 0.5) - 0.5
    if support == 1 and not align_corners:  # ATen clamps only the linear modes' source index at 0
        real = np.maximum(real, 0.0)
    i0 = np.minimum(np.floor(real).astype(np.int64), n - 1)
    centre = i0 + np.clip(real - i0, 0.0, 1.0)
    lo = i0 - support + 1
    return weight_table(n, centre, lo, lo + 2 * support, 2 * support, filt.fn, border, False)


def _antialiased(n, m, sf, align_corners, filt):
    """torch's antialias=True (Pillow's resampling): the filter is stretched by the downscale factor,
    its window clipped to the image and the weights renormalised."""
    scale = _coordinate_scale(n, m, sf, align_corners)
    stretch = scale if scale >= 1.0 else 1.0
    width = filt.support * stretch
    taps = math.ceil(width) * 2 + 1
    centre = scale * (np.arange(m) + 0.5)
    lo = np.maximum(np.trunc(centre - width + 0.5).astype(np.int64), 0)
    hi = np.minimum(np.trunc(centre + width + 0.5).astype(np.int64), n)
    hi = np.minimum(hi, lo + taps)  # torch clips a window one tap too wide by rounding
    return weight_table(n, centre - 0.5, lo, hi, taps, lambda d: filt.fn(d / stretch), "skip", True)


def _lanczos_burn(n, m, sf, align_corners, filt, border):
    """burn's Lanczos-3 (where torch refuses lanczos): taps floor(x)-2 .. floor(x)+3, taps outside the
    image skipped, weights renormalised, support never stretched."""
    scale = _coordinate_scale(n, m, sf, align_corners)
    i = np.arange(m, dtype=np.float64)
    real = scale * i if align_corners else scale * (i + 0.5) - 0.5
    lo = np.floor(real).astype(np.int64) - 2
    return weight_table(n, real, lo, lo + 6, 6, filt.fn, border, True)


def window_table(n, lo, hi, row_weight) -> Table:
    """Output i = row_weight[i] * sum(input[lo[i]:hi[i]]): the table of a window sum (area
    resampling, and the average pools of pool.py, whose divisors are per-axis products)."""
    m = len(lo)
    rows = np.repeat(np.arange(m), hi - lo)
    cols = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi)]) if m else np.zeros(0, np.int64)
    return _pack(rows, cols, np.repeat(np.asarray(row_weight, np.float64), hi - lo), m, n)


def area_windows(n, m):
    """adaptive average pooling's windows: output i averages inputs [floor(i n / m), ceil((i + 1) n / m))."""
    i = np.arange(m)
    return (i * n) // m, -((-(i + 1) * n) // m)


def _area(n, m, sf, align_corners, filt, border):
    lo, hi = area_windows(n, m)
    return window_table(n, lo, hi, 1.0 / (hi - lo))


class Mode(NamedTuple):
    """One interpolate mode. `rule(n, m, sf, align_corners, filter, border)` builds an axis Table with
    `filter` and the `border` rule for taps outside the image; `antialias` is the filter used with
    antialias=True (None: the mode refuses antialias), `antialias_aligns` whether that path also
    takes align_corners (else align_corners falls back to `rule`); `alignable`: the mode takes
    align_corners at all; `copies_same_size`: torch copies an axis whose size does not change
    (whatever the scale factor)."""

    rule: Callable
    filter: Filter | None = None
    antialias: Filter | None = None
    alignable: bool = False
    antialias_aligns: bool = False
    copies_same_size: bool = False
    border: str = "clamp"


MODES = {
    "nearest": Mode(_nearest),
    "nearest-exact": Mode(_nearest_exact),
    "bilinear": Mode(_interpolating, FILTERS["triangle"], FILTERS["triangle"], True, True, True),
    "bicubic": Mode(_interpolating, FILTERS["cubic_torch"], FILTERS["cubic"], True, True),
    "area": Mode(_area),
    # torch's lanczos is antialiased only and never aligned; elsewhere burn's rule (srgrad's choice)
    "lanczos": Mode(_lanczos_burn, FILTERS["lanczos3"], FILTERS["lanczos3"], True, border="skip"),
}
MODES["lanczos3"] = MODES["lanczos"]


# torch's nearest forward switches index rule when output height + width > this (see _nearest_indices)
_NEAREST_LARGE = 128


def names_where(field: str) -> list:
    """The modes whose record has `field` set (messages list them; lanczos3 is lanczos's alias)."""
    return [name for name, rec in MODES.items() if getattr(rec, field) and name != "lanczos3"]


@functools.lru_cache(maxsize=512)
def axis_table(mode, n, m, sf, align_corners, antialias, large=False) -> Table:
    """The table of one axis for interpolate's (validated) arguments; `sf` is None unless a scale
    factor drives the coordinate mapping; `large`: the output's height + width exceed 128 (the
    nearest modes' index rule changes there, as torch's forward does)."""
    rec = MODES[mode]
    if large:
        return rec.rule(n, m, sf, align_corners, rec.filter, rec.border, large=True)
    if antialias and (rec.antialias_aligns or not align_corners):
        return _identity(n) if m == n else _antialiased(n, m, sf, align_corners, rec.antialias)
    if m == n and rec.copies_same_size:
        return _identity(n)
    return rec.rule(n, m, sf, align_corners, rec.filter, rec.border)


# -- the kernels: one gather along each axis of a plane, both inside one parallel loop ------------
@kernel
def _rows_pass(src, index, weight, dst):
    """dst[o, :] = sum_t weight[o, t] * src[index[o, t], :]: contiguous inner loops, two taps per
    sweep over the row (half the sweeps of one tap per sweep: docs/benchmarks.md)."""
    taps = index.shape[1]
    for o in range(dst.shape[0]):
        row = dst[o]
        a, c = src[index[o, 0]], weight[o, 0]
        if taps == 1:
            for k in range(row.shape[0]):
                row[k] = c * a[k]
            continue
        b, d = src[index[o, 1]], weight[o, 1]
        for k in range(row.shape[0]):
            row[k] = c * a[k] + d * b[k]
        for t in range(2, taps - 1, 2):
            a, c = src[index[o, t]], weight[o, t]
            b, d = src[index[o, t + 1]], weight[o, t + 1]
            for k in range(row.shape[0]):
                row[k] += c * a[k] + d * b[k]
        if taps % 2 == 1:
            a, c = src[index[o, taps - 1]], weight[o, taps - 1]
            for k in range(row.shape[0]):
                row[k] += c * a[k]


@kernel
def _cols_pass(src, index, weight, dst):
    """dst[:, o] = sum_t weight[o, t] * src[:, index[o, t]], four rows at a time: each (index, weight)
    pair is loaded once for four independent accumulators (faster than one row at a time:
    docs/benchmarks.md).
    The last group re-reads and rewrites the last row instead of a remainder loop."""
    taps = index.shape[1]
    last = src.shape[0] - 1
    for r in range(0, src.shape[0], 4):
        s0, s1, s2, s3 = src[r], src[min(r + 1, last)], src[min(r + 2, last)], src[min(r + 3, last)]
        d0, d1, d2, d3 = dst[r], dst[min(r + 1, last)], dst[min(r + 2, last)], dst[min(r + 3, last)]
        for o in range(dst.shape[1]):
            j = index[o, 0]
            c = weight[o, 0]
            a0, a1, a2, a3 = c * s0[j], c * s1[j], c * s2[j], c * s3[j]
            for t in range(1, taps):
                j = index[o, t]
                c = weight[o, t]
                a0 += c * s0[j]
                a1 += c * s1[j]
                a2 += c * s2[j]
                a3 += c * s3[j]
            d0[o], d1[o], d2[o], d3[o] = a0, a1, a2, a3


@kernel(inline=True)
def _resample_plane(plane, h_index, h_weight, w_index, w_weight, h_first, out):
    """out = W_h @ plane @ W_w^T for one plane (H, W) -> (Ho, Wo), the cheaper pass first."""
    if h_first:
        tmp = np.empty((out.shape[0], plane.shape[1]), plane.dtype)
        _rows_pass(plane, h_index, h_weight, tmp)
        _cols_pass(tmp, w_index, w_weight, out)
    else:
        tmp = np.empty((plane.shape[0], out.shape[1]), plane.dtype)
        _cols_pass(plane, w_index, w_weight, tmp)
        _rows_pass(tmp, h_index, h_weight, out)


@kernel
def _resample_planes(x, h_index, h_weight, w_index, w_weight, h_first, out):
    """out[p] = W_h @ x[p] @ W_w^T for every plane p of x (P, H, W) -> out (P, Ho, Wo). Serial:
    `resample` runs ranges of planes on the pool threads (a numba prange here cost ~2 s more to
    compile on every fresh cache, for the same plane-per-thread split)."""
    for p in range(x.shape[0]):
        _resample_plane(x[p], h_index, h_weight, w_index, w_weight, h_first, out[p])


@kernel(parallel=True)
def _resample_planes_parallel(x, h_index, h_weight, w_index, w_weight, h_first, out):
    """_resample_planes in a numba parallel loop over the planes (the same values): for the global
    pools and their adjoints (a table of one output or one input on both axes), whose small
    kernels the pool's tasks cost several times over (RCAN's channel attention)."""
    for p in prange(x.shape[0]):
        _resample_plane(x[p], h_index, h_weight, w_index, w_weight, h_first, out[p])


# A one-output row pass (a global pool's, whose sum runs over every row) in tasks of this many rows,
# every plane in each: the op before it (a convolution, by position) left each core the rows it
# wrote, and tasks of planes read half of every plane from the other core (RCAN's channel attention:
# 0.11 ms against 0.035 alone; by rows 0.033, docs/benchmarks.md). The blocks' sums are added in
# order, so the result never depends on the threads; up to _POOL_ROWS rows it is _rows_pass's.
_POOL_ROWS = 32


@kernel(parallel=True)
def _pool_rows(x, h_index, h_weight, parts):
    """parts[b, p] = the row pass (_rows_pass) of plane p of x (P, H, W) over the taps [b R, (b + 1) R)
    of a one-output table (R = _POOL_ROWS), a task per block of taps: (B, P, W)."""
    for b in prange(parts.shape[0]):
        t0, t1 = b * _POOL_ROWS, min(h_index.shape[1], (b + 1) * _POOL_ROWS)
        for p in range(x.shape[0]):
            _rows_pass(x[p], h_index[:, t0:t1], h_weight[:, t0:t1], parts[b, p:p + 1])


@kernel
def _pool_cols(parts, w_index, w_weight, out):
    """out[p] (1, Wo) = the column pass (_cols_pass) of the blocks' row sums of plane p added in order,
    ((parts[0, p] + parts[1, p]) + parts[2, p]) + ..."""
    col = np.empty((1, parts.shape[2]), parts.dtype)
    for p in range(parts.shape[1]):
        for k in range(col.shape[1]):
            col[0, k] = parts[0, p, k]
        for b in range(1, parts.shape[0]):
            for k in range(col.shape[1]):
                col[0, k] += parts[b, p, k]
        _cols_pass(col, w_index, w_weight, out[p])


@kernel(parallel=True)
def _repeat2(x, out):
    """out[p, 2h + i, 2w + j] = x[p, h, w] (i, j in 0, 1): nearest x2 on both axes, the values
    _resample_planes gives through its one-tap tables of weight 1 (a product by 1 is exact). A
    numba parallel loop over the planes: the pool's eight tasks cost 3-5x these memory passes
    (ESRGAN's training upsamplings)."""
    for p in prange(x.shape[0]):
        for h in range(x.shape[1]):
            src, d0, d1 = x[p, h], out[p, 2 * h], out[p, 2 * h + 1]
            for w in range(src.shape[0]):
                d0[2 * w] = d0[2 * w + 1] = src[w]
            for w in range(d1.shape[0]):
                d1[w] = d0[w]


@kernel(parallel=True)
def _pairs2(g, out, h_first):
    """out[p, h, w] = the sum of g[p, 2h + i, 2w + j] over i, j in 0, 1: nearest x2's adjoint, in
    _resample_planes's order (h_first: the row pass first, (g00 + g10) + (g01 + g11); else the
    column pass first, (g00 + g01) + (g10 + g11); each table's weight 1, its products exact).
    Parallel over the planes, as _repeat2."""
    for p in prange(out.shape[0]):
        for h in range(out.shape[1]):
            a, b, o = g[p, 2 * h], g[p, 2 * h + 1], out[p, h]
            if h_first:
                for w in range(o.shape[0]):
                    o[w] = (a[2 * w] + b[2 * w]) + (a[2 * w + 1] + b[2 * w + 1])
            else:
                for w in range(o.shape[0]):
                    o[w] = (a[2 * w] + a[2 * w + 1]) + (b[2 * w] + b[2 * w + 1])


def _x2(table):
    """'repeat' where the table is nearest x2 (output o = input o // 2, weight 1), 'pairs' where it is
    its transpose (output o = input 2o + input 2o + 1, weights 1), else None."""
    if table._x2 is None:
        i, wt, m = table.index, table.weight, table.m
        if i.shape[1] == 1 and m == 2 * table.n and (wt == 1).all() and (i[:, 0] == np.arange(m) // 2).all():
            table._x2 = "repeat"
        elif i.shape[1] == 2 and table.n == 2 * m and (wt == 1).all() and \
                (np.sort(i, axis=1) == 2 * np.arange(m)[:, None] + np.arange(2)).all():
            table._x2 = "pairs"
        else:
            table._x2 = ""
    return table._x2 or None


# Below this much work (units of the cost model in `resample`) one thread is faster: a parallel
# region waits for its slowest thread (_jit.launch; the measurement is in docs/benchmarks.md).
_SERIAL_WORK = 1 << 20
_SERIAL_GLOBAL = 1 << 16  # the same for a numba parallel loop (a global pool), whose fork costs ~10 us


def resample(x: np.ndarray, th: Table, tw: Table) -> np.ndarray:
    """Apply table `th` along axis -2 and `tw` along axis -1 of `x` (..., H, W) -> (..., Ho, Wo)."""
    lead = x.shape[:-2]
    planes = np.ascontiguousarray(x).reshape((-1, th.n, tw.n))
    out = np.empty((planes.shape[0], th.m, tw.m), x.dtype)
    # Multiply-adds of each pass order, the in-row gather (_cols_pass) counted twice: it is about
    # twice as slow per tap as the contiguous row pass. Upsampling goes W first, downsampling H first.
    h_cost = th.m * tw.n * th.index.shape[1] + 2 * th.m * tw.m * tw.index.shape[1]
    w_cost = 2 * th.n * tw.m * tw.index.shape[1] + th.m * tw.m * th.index.shape[1]
    tables = (th.index, th.weights_as(x.dtype), tw.index, tw.weights_as(x.dtype), h_cost < w_cost)
    P = planes.shape[0]
    workers = 1 if P * min(h_cost, w_cost) < _SERIAL_WORK else _tiles.default_workers()
    x2 = _x2(th) if _x2(th) == _x2(tw) else None  # nearest x2 and its adjoint: one pass, the same values
    if x2 == "repeat":
        launch(_repeat2, workers == 1, planes, out)
    elif x2 == "pairs":
        launch(_pairs2, workers == 1, planes, out, tables[-1])
    elif th.m == 1 and tables[-1]:  # a global pool's row pass (the cheaper first): in tasks of rows
        parts = np.empty((-(-th.index.shape[1] // _POOL_ROWS), P, tw.n), x.dtype)
        launch(_pool_rows, P * h_cost < _SERIAL_GLOBAL, planes, tables[0], tables[1], parts)
        _pool_cols(parts, tables[2], tables[3], out)
    elif (th.m == tw.m == 1 or th.n == tw.n == 1) and P > 1:  # a global pool, or its adjoint
        launch(_resample_planes_parallel, P * min(h_cost, w_cost) < _SERIAL_GLOBAL, planes, *tables, out)
    else:  # each task owns its planes of `out`: no races; a few tasks per worker for balance
        bounds = np.linspace(0, P, min(P, 4 * workers) + 1).astype(np.int64)
        tasks = [(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]
        _tiles.run(tasks, lambda t, _: _resample_planes(planes[t[0]:t[1]], *tables, out[t[0]:t[1]]), 0, x.dtype,
                   workers)
    return out.reshape(lead + (th.m, tw.m))


class ResampleFunction(Function):
    """y = W_h x W_w^T per plane, for any pair of axis Tables (every interpolate mode, imresize, the
    average pools). `call` = (op name, its checked arguments as a dict) says which public call built
    the tables; the computation reads only the tables (the ONNX exporter reads `call`)."""

    @staticmethod
    def forward(ctx, x, *, tables, call=None):
        ctx.tables = tables
        return resample(x, *tables)

    @staticmethod
    def backward(ctx, g):
        # dL/dx = W_h^T g W_w: the transposed tables through the same kernel (the exact adjoint).
        th, tw = ctx.tables
        return resample(g, th.transposed(), tw.transposed())


# -- public wrappers: validate everything before a kernel runs --------------------------------------
def image_input(x, op, ndims=(4,)):
    """`x` as a float Tensor of `ndims` dimensions with positive height and width, else an error
    naming `op` (shared by interpolate and imresize)."""
    x = x if isinstance(x, Tensor) else Tensor(x)
    if x.ndim not in ndims:
        want = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"{op}: expected a {want} input (N, C, H, W), got shape {tuple(x.shape)}")
    float_array(op, "input", x)
    if min(x.shape[-2:]) < 1:
        raise ValueError(f"{op}: input height and width must be positive, got shape {tuple(x.shape)}")
    return x


def output_geometry(in_hw, size, scale_factor, op, out_size):
    """(output sizes, scale factors) from exactly one of size / scale_factor; `out_size(n, s)` is
    the op's rounding (floor for interpolate, ceil for imresize)."""
    if size is not None and scale_factor is not None:
        raise ValueError(f"{op}: only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError(f"{op}: either size or scale_factor should be defined")
    if size is not None:
        return pair(op, "size", size, int, positive=True), (None, None)
    sfs = pair(op, "scale_factor", scale_factor, float, positive=True)
    out = tuple(out_size(n, s) for n, s in zip(in_hw, sfs))
    if min(out) < 1:
        raise ValueError(f"{op}: scale_factor {scale_factor!r} gives output size {out} for input "
                         f"size {tuple(in_hw)}; every output size must be at least 1")
    return out, sfs


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize (N, C, H, W) -> (N, C, H_out, W_out), exactly as PyTorch 2.13's F.interpolate.

    size: int or (H_out, W_out); or scale_factor: float or (sh, sw), H_out = floor(H * sh), and the
    factor (not H_out / H) drives the coordinate mapping unless recompute_scale_factor=True.
    mode: "nearest" (legacy floor), "nearest-exact", "bilinear", "bicubic" (A=-0.75, antialiased
    A=-0.5), "area" (adaptive average pooling), "lanczos"/"lanczos3". align_corners: bilinear,
    bicubic, lanczos only (default False). antialias: bilinear, bicubic, lanczos.
    lanczos with antialias=True and align_corners=False is torch's (Pillow's LANCZOS); every other
    lanczos call (which torch refuses) uses burn's Lanczos-3: taps floor(x)-2..floor(x)+3, taps
    outside the image skipped, weights renormalised, support never widened.
    Differentiable with respect to `input`; the dtype (float32 or float64) is kept."""
    x = image_input(input, "interpolate")
    if mode not in MODES:
        raise ValueError(f"interpolate: unknown mode {mode!r}; known modes: {', '.join(MODES)}")
    rec = MODES[mode]
    if align_corners is not None:
        if not rec.alignable:
            raise ValueError(f"interpolate: align_corners can only be set with the interpolating "
                             f"modes {', '.join(names_where('alignable'))}; got "
                             f"align_corners={align_corners!r} with mode {mode!r}")
        flag("interpolate", "align_corners", align_corners)
    flag("interpolate", "antialias", antialias)
    if antialias and rec.antialias is None:
        raise ValueError(f"interpolate: antialias=True is only for modes "
                         f"{', '.join(names_where('antialias'))}; got mode {mode!r}")
    if recompute_scale_factor and size is not None:
        raise ValueError("interpolate: recompute_scale_factor is not meaningful with an explicit "
                         f"size (size={size!r})")
    in_hw = x.shape[2:]
    out_hw, sfs = output_geometry(in_hw, size, scale_factor, "interpolate", lambda n, s: int(n * s))
    if recompute_scale_factor or mode == "area":  # the output size alone drives the mapping
        sfs = (None, None)
    large = rec.rule in (_nearest, _nearest_exact) and sum(out_hw) > _NEAREST_LARGE
    tables = tuple(axis_table(mode, n, m, sf, bool(align_corners), antialias, large)
                   for n, m, sf in zip(in_hw, out_hw, sfs))
    call = ("interpolate", dict(mode="lanczos" if mode == "lanczos3" else mode,
                                align_corners=bool(align_corners), antialias=antialias,
                                scale_factors=sfs, large=large))
    return ResampleFunction.apply(x, tables=tables, call=call)


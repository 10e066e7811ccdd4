"""C = A B with bfloat16 operands and float32 sums on AMX tiles (framework/_amx.py): linear's three
products and matmul's (batched: `matmul_batched`) under `autocast("bf16")` where the CPU has
AMX-BF16 (linear.py).

A (M, K) is rounded into rows of K bfloat16 (a tile: 16 rows x 32 terms) by each task for its own 32
rows, B (K, N) once into tdpbf16ps's pair layout (K/2, N, 2) (a tile: 16 pairs of rows x 16 columns),
both zero-padded to multiples of 32. A task owns 32 rows of C; per 32 x 32 block (tmm0..tmm3) it runs
over K in steps of 32 (two tiles of each operand, four products per step; the next step's tiles load
while this step's last products run: the tile unit does not rename tiles, so a load waits for the
products still reading its tile);
every max(4, ~sqrt(K/32)) steps the tiles go onto the block's running total (blocked sums, as
_direct.py's), so the order of every sum is fixed: the result depends neither on threads nor on the
machine, only on the route. The block's total goes from a scratch into C (M, N) itself, with the bias
added (linear's `+ b`, one float32 add after the sum): no padded C, no pass of its own for the bias
(numpy's add of a bias to a (4096, 180) view of the padded C took twice the product's time), and
a residual after it where one is given. `matmul_rows` reads A's rows through a gather (and a layer
norm) and stores C's through a permutation: an inference graph's linear between a transformer
block's row moves (capture/_rows.py).
"""
from __future__ import annotations

import numba
import numpy as np

from .. import _amx, precision
from .._amx import block_store, block_zero, last_step, operands, step, tile_config, tile_release
from .._jit import kernel, prange
from .._simd import bits32, vadd, vload, vload_part, vsplat, vstore, vstore_part, wide
from ._direct import _aligned_empty, _blocks
from ._direct_bf16 import _rne
from .rows import layer_norm_stats2, layer_norm_value, like



@kernel
def _rows(a, b, c, m0, rb, buf, bias, has_bias, res, has_res, dst, has_dst):
    """c[m0:m0 + 32] = a b (+ bias) (+ res) on tiles (the thread's tiles configured): a (32, Kp)
    bfloat16 bits (rows m0.. of A), b (Kp/2, Np, 2) bfloat16 pairs, c (M, N) float32 (rows and
    columns past it: not stored); buf (2048,) float32: a block's running total, then the next
    block's tiles; bias (N,) float32, added where has_bias; res (M, N) float32, added after the bias
    where has_res (a residual add done as the output is stored); where has_dst, A's row m goes to
    c's (and is added to res's) row dst[m] instead (a permutation of c's rows). The totals go into
    c 16 columns at a time (masked stores past N: LLVM's loop over a block's columns ran at half
    the speed)."""
    wide()
    Kp = a.shape[1]
    Np = b.shape[1]
    M, N = c.shape
    rows = min(32, M - m0)
    zero = vsplat(np.float32(0), 16)
    for n0 in range(0, Np, 32):
        for k0 in range(0, Kp, 32 * rb):
            block_zero()
            x = k0 * 2  # a step: 32 terms further
            y = ((k0 // 2) * Np + n0) * 4
            operands(a, x, Kp * 2, b, y, Np * 4)
            for _ in range(k0 + 32, min(Kp, k0 + 32 * rb), 32):
                x += 64
                y += 16 * Np * 4
                step(a, x, Kp * 2, b, y, Np * 4)
            last_step()
            if k0 == 0:  # the first block is the running total, the others added onto it in order
                block_store(buf, 0, 128)
                continue
            block_store(buf, 4096, 128)
            for e in range(0, 1024, 16):
                vstore(buf, e, vadd(vload(buf, e, 16), vload(buf, 1024 + e, 16)))
        cols = min(32, N - n0)
        lo, hi = min(16, cols), max(0, cols - 16)  # the block's two vectors of columns: lanes stored
        b0 = vload_part(bias, n0, zero, 0, lo) if has_bias else zero
        b1 = vload_part(bias, n0 + 16, zero, 0, hi) if has_bias else zero
        for m in range(rows):
            i = dst[m0 + m] if has_dst else m0 + m
            row = c[i]
            v0, v1 = vload(buf, m * 32, 16), vload(buf, m * 32 + 16, 16)
            if has_bias:
                v0, v1 = vadd(v0, b0), vadd(v1, b1)
            if has_res:
                r = res[i]
                v0, v1 = vadd(v0, vload_part(r, n0, zero, 0, lo)), vadd(v1, vload_part(r, n0 + 16, zero, 0, hi))
            vstore_part(row, n0, v0, 0, lo)
            vstore_part(row, n0 + 16, v1, 0, hi)


@kernel(inline=True)
def _pack_rows(au, i, m0, out):
    """out[m, k] = bf16(a[i, m0 + m, k]) (au: a's float32 bits, any strides), 0 past a: the task's 32
    rows of A's terms, rounded where they are used (in the thread's cache, no pass of their own)."""
    M, K = au.shape[1], au.shape[2]
    for m in range(out.shape[0]):
        row = out[m]
        if m0 + m < M:
            src = au[i, m0 + m]
            for k in range(K):
                row[k] = np.uint16(_rne(src[k]))
            for k in range(K, row.shape[0]):
                row[k] = 0
        else:
            for k in range(row.shape[0]):
                row[k] = 0


@kernel(parallel=True)
def _gemm_batched(apack, b, c, au, cfg, rb, scratch, bias, has_bias, res, has_res):
    """c[i] = a[i] b[i] (+ bias) (+ res[i]) for each product i: au (B, M, K) a's float32 bits (any
    strides), b (B, Kp/2, Np, 2) bfloat16 pairs, c (B, M, N) float32 (written whole); apack (threads,
    32, Kp) uint16 and scratch (threads, 2048) float32: each thread's rounded rows and block sums;
    bias (N,) float32, added where has_bias; res (B, M, N) float32, added last where has_res. A
    task: 32 rows of one product (attention's thousands of small products share the threads),
    rounded into apack first."""
    MB = -(-au.shape[1] // 32)
    for t in prange(au.shape[0] * MB):
        i, m0 = t // MB, (t % MB) * 32
        ab = apack[numba.get_thread_id()]
        _pack_rows(au, i, m0, ab)
        tile_config(cfg)
        _rows(ab, b[i], c[i], m0, rb, scratch[numba.get_thread_id()], bias, has_bias,
              res[i if has_res else 0], has_res, _NO_ROWS, False)
        tile_release()


@kernel(inline=True)
def _pack_gathered(x, src, m0, w, b, eps, has_norm, out):
    """out[m, k] = bf16(x[src[m0 + m], k]) for the task's 32 rows (0 past src's end and past K);
    where has_norm, of that row's layer_norm first: (x - mean) rstd w + b in float32 with
    layer_norm's float64 statistics (rows.layer_norm_stats2), the value layer_norm would store."""
    M, K = src.shape[0], x.shape[1]
    for m in range(0, out.shape[0], 2):
        if m0 + m >= M:  # past A: zero rows
            for t in range(m, out.shape[0]):
                for k in range(out.shape[1]):
                    out[t, k] = 0
            break
        ia, ib = src[m0 + m], src[min(m0 + m + 1, M - 1)]  # an odd last row: itself twice, stored once
        ma = ra = mb = rb = 0.0
        if has_norm:
            ma, ra, mb, rb = layer_norm_stats2(x[ia], x[ib], eps)
        for t in range(2):
            row, xr = out[m + t], x[ia if t == 0 else ib]
            if m0 + m + t >= M:
                for k in range(row.shape[0]):
                    row[k] = 0
                continue
            if has_norm:
                mu, s = like(ma if t == 0 else mb, xr[0]), like(ra if t == 0 else rb, xr[0])
                for k in range(K):
                    row[k] = np.uint16(_rne(bits32(layer_norm_value(xr[k], mu, s, w[k], b[k]))))
            else:
                for k in range(K):
                    row[k] = np.uint16(_rne(bits32(xr[k])))
            for k in range(K, row.shape[0]):
                row[k] = 0


@kernel(parallel=True)
def _gemm_rows(apack, b, c, x, src, dst, has_dst, cfg, rb, scratch, bias, has_bias, res, has_res,
               w, bn, eps, has_norm):
    """c = A b (+ bias) (+ res), A's row m = x[src[m]] (layer-normalised with w, bn, eps where
    has_norm: _pack_gathered), its product stored at c's row dst[m] where has_dst: `_rows` per 32
    rows of A, each task rounding its own rows into apack (threads, 32, Kp) first."""
    for t in prange(-(-src.shape[0] // 32)):
        wide()
        ab = apack[numba.get_thread_id()]
        _pack_gathered(x, src, t * 32, w, bn, eps, has_norm, ab)
        tile_config(cfg)
        _rows(ab, b, c, t * 32, rb, scratch[numba.get_thread_id()], bias, has_bias, res, has_res, dst, has_dst)
        tile_release()


@kernel(parallel=True)
def _pack_b_batched(bu, out):
    """out[i, p, n] = bf16(b[i, 2 p, n]) | bf16(b[i, 2 p + 1, n]) << 16 (bu: b's float32 bits), 0
    past b: tdpbf16ps's pairs as one uint32 each (little-endian: the (K/2, N, 2) uint16 layout),
    stored contiguously so that the loop vectorises."""
    B, P = out.shape[0], out.shape[1]
    K, N = bu.shape[1], bu.shape[2]
    for t in prange(B * P):
        i, p = t // P, t % P
        row = out[i, p]
        k = 2 * p
        for n in range(N, out.shape[2]):
            row[n] = 0
        if k >= K:
            for n in range(N):
                row[n] = 0
        elif k + 1 < K:
            lo, hi = bu[i, k], bu[i, k + 1]
            for n in range(N):
                row[n] = _rne(lo[n]) | (_rne(hi[n]) << np.uint32(16))
        else:
            lo = bu[i, k]
            for n in range(N):
                row[n] = _rne(lo[n])


def available() -> bool:
    return precision.support().amx_bf16


def matmul(a, b, bias=None, residual=None):
    """a (M, K) @ b (K, N) float32 (arrays or views) (+ bias (N,) float32) (+ residual (M, N)
    float32) -> (M, N) float32, bfloat16 operands rounded to nearest even, float32 sums: one product
    of `matmul_batched`."""
    return matmul_batched(a[None], b[None], bias, None if residual is None else residual[None])[0]


_NO_BIAS = np.zeros(0, np.float32)
_NO_RESIDUAL = np.zeros((1, 0, 0), np.float32)
_NO_ROWS = np.zeros(0, np.int64)


def matmul_batched(a, b, bias=None, residual=None):
    """a (B, M, K) @ b (B, K, N) float32 (arrays or views, any strides) (+ bias (N,) float32, added
    to every row: the float32 sum, then one add) (+ residual (B, M, N) float32, added after the
    bias: np.add's value, the output's pass of its own gone) -> (B, M, N) float32 (contiguous),
    bfloat16 operands rounded to nearest even, float32 sums (each product as `matmul`'s)."""
    precision.require_amx("matmul")
    (B, M, K), N = a.shape, b.shape[2]
    if bias is not None and (bias.shape != (N,) or bias.dtype != np.float32):
        raise ValueError(f"_gemm_bf16.matmul: bias {bias.shape} {bias.dtype} is not ({N},) float32")
    if residual is not None and (residual.shape != (B, M, N) or residual.dtype != np.float32):
        raise ValueError(f"_gemm_bf16.matmul: residual {residual.shape} {residual.dtype} is not "
                         f"{(B, M, N)} float32")
    Kp, Np = _blocks(K, 32) * 32, _blocks(N, 32) * 32
    bb = _aligned_empty((B, Kp // 2, Np, 2), np.uint16)
    _pack_b_batched(b.view(np.uint32), bb.view(np.uint32)[..., 0])  # rounded once (views read in place)
    c = np.empty((B, M, N), np.float32)
    rb = max(4, round((Kp / 32) ** 0.5))  # blocks of at least 128 terms, about sqrt(K) for long sums
    threads = numba.get_num_threads()
    _gemm_batched(_aligned_empty((threads, 32, Kp), np.uint16), bb, c, a.view(np.uint32), _amx.CONFIG, rb,
                  _aligned_empty((threads, 2048), np.float32),
                  _NO_BIAS if bias is None else np.ascontiguousarray(bias), bias is not None,
                  _NO_RESIDUAL if residual is None else np.ascontiguousarray(residual), residual is not None)
    return c


def matmul_rows(x, b, bias=None, *, src, dst=None, norm=None, residual=None):
    """C (M, N) float32 = A b (+ bias (N,)) (+ residual (M, N), added last), A's row m being
    x[src[m]] (x (R, K) float32 rows, src (M,) int64 in [0, R): a gather), first layer-normalised
    where norm = (w (K,), b (K,), eps) (layer_norm's values, then rounded), and A's row m's product
    stored as C's row dst[m] where dst (M,) (a permutation of range(M)) is given. An inference
    graph's linear that reads a layer norm through a row permutation (a transformer block's
    norm -> roll -> window partition -> qkv) and writes through one to a residual add (proj ->
    window reverse -> roll -> x + ...): capture/_rows.py. Each row's sums as matmul's."""
    precision.require_amx("matmul")
    M, (K, N) = src.shape[0], b.shape
    if x.ndim != 2 or x.shape[1] != K or x.dtype != np.float32 or not x.flags.c_contiguous:
        raise ValueError(f"_gemm_bf16.matmul_rows: x {x.shape} {x.dtype} is not C-contiguous (R, {K}) float32")
    if src.dtype != np.int64 or (M and (src.min() < 0 or src.max() >= x.shape[0])):
        raise ValueError(f"_gemm_bf16.matmul_rows: src must be int64 rows of x in [0, {x.shape[0]})")
    if dst is not None and (dst.shape != (M,) or dst.dtype != np.int64 or (M and (
            dst.min() < 0 or dst.max() >= M or np.bincount(dst, minlength=M).max() != 1))):  # every row once
        raise ValueError(f"_gemm_bf16.matmul_rows: dst must be a permutation of range({M}), int64")
    for name, v, shape in (("bias", bias, (N,)), ("residual", residual, (M, N)),
                           *((("norm weight", norm[0], (K,)), ("norm bias", norm[1], (K,))) if norm else ())):
        if v is not None and (v.shape != shape or v.dtype != np.float32):
            raise ValueError(f"_gemm_bf16.matmul_rows: {name} {v.shape} {v.dtype} is not {shape} float32")
    Kp, Np = _blocks(K, 32) * 32, _blocks(N, 32) * 32
    bb = _aligned_empty((1, Kp // 2, Np, 2), np.uint16)
    _pack_b_batched(b[None].view(np.uint32), bb.view(np.uint32)[..., 0])
    c = np.empty((M, N), np.float32)
    rb = max(4, round((Kp / 32) ** 0.5))
    threads = numba.get_num_threads()
    w, bn, eps = norm if norm is not None else (_NO_BIAS, _NO_BIAS, 0.0)
    _gemm_rows(_aligned_empty((threads, 32, Kp), np.uint16), bb[0], c, x, src,
               _NO_ROWS if dst is None else dst, dst is not None, _amx.CONFIG, rb,
               _aligned_empty((threads, 2048), np.float32),
               _NO_BIAS if bias is None else np.ascontiguousarray(bias), bias is not None,
               _NO_RESIDUAL[0] if residual is None else np.ascontiguousarray(residual), residual is not None,
               np.ascontiguousarray(w), np.ascontiguousarray(bn), float(eps), norm is not None)
    return c

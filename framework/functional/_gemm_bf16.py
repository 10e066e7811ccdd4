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
(numpy's add of a bias to a (4096, 180) view of the padded C took twice the product's time).
"""
from __future__ import annotations

import numba
import numpy as np

from .. import _amx, precision
from .._amx import block_store, block_zero, last_step, operands, step, tile_config, tile_release
from .._jit import kernel, prange
from .._simd import vadd, vload, vload_part, vsplat, vstore, vstore_part, wide
from ._direct import _aligned_empty, _blocks
from ._direct_bf16 import _rne



@kernel
def _rows(a, b, c, m0, rb, buf, bias, has_bias, res, has_res):
    """c[m0:m0 + 32] = a b (+ bias) (+ res) on tiles (the thread's tiles configured): a (32, Kp)
    bfloat16 bits (rows m0.. of A), b (Kp/2, Np, 2) bfloat16 pairs, c (M, N) float32 (rows and
    columns past it: not stored); buf (2048,) float32: a block's running total, then the next
    block's tiles; bias (N,) float32, added where has_bias; res (M, N) float32, added after the bias
    where has_res (a residual add done as the output is stored). The totals go into c 16 columns at
    a time (masked stores past N: LLVM's loop over a block's columns ran at half the speed)."""
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
            row = c[m0 + m]
            v0, v1 = vload(buf, m * 32, 16), vload(buf, m * 32 + 16, 16)
            if has_bias:
                v0, v1 = vadd(v0, b0), vadd(v1, b1)
            if has_res:
                r = res[m0 + m]
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
              res[i if has_res else 0], has_res)
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

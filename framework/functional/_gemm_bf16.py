"""C = A B with bfloat16 operands and float32 sums on AMX tiles (framework/_amx.py): linear's three
products under `autocast("bf16")` where the CPU has AMX-BF16 (linear.py).

A (M, K) is rounded into rows of K bfloat16 (a tile: 16 rows x 32 terms), B (K, N) into tdpbf16ps's
pair layout (K/2, N, 2) (a tile: 16 pairs of rows x 16 columns), both zero-padded to multiples of
32. A task owns a 32 x 32 block of C in tmm0..tmm3 and runs over K in steps of 32 (two tiles of each
operand, four products per step); every ~sqrt(K/32) steps its tiles are added onto the block's
running total and zeroed (blocked sums, as _direct.py's), so the order of every sum is fixed: the
result depends neither on threads nor on the machine, only on the route.
"""
from __future__ import annotations

import numba
import numpy as np

from .. import _amx, precision
from .._amx import tile_config, tile_dot, tile_load, tile_release, tile_store, tile_zero
from .._jit import kernel, prange
from ._direct import _aligned_empty, _blocks
from ._direct_bf16 import round_bits

TILE = 16


@kernel(parallel=True)
def _gemm(a, b, c, cfg, rb, scratch):
    """c[m, n] = sum_k a[m, k] b[k, n]: a (Mp, Kp) bfloat16 bits, b (Kp/2, Np, 2) bfloat16 pairs,
    c (Mp, Np) float32 (written whole); scratch (threads, 1024) float32."""
    Mp, Kp = a.shape
    Np = c.shape[1]
    NB = Np // 32
    for task in prange((Mp // 32) * NB):
        m0, n0 = task // NB * 32, task % NB * 32
        buf = scratch[numba.get_thread_id()]
        for m in range(m0, m0 + 32):
            for n in range(n0, n0 + 32):
                c[m, n] = 0
        tile_config(cfg)
        for k0 in range(0, Kp, 32 * rb):
            tile_zero(0)
            tile_zero(1)
            tile_zero(2)
            tile_zero(3)
            for k in range(k0, min(Kp, k0 + 32 * rb), 32):
                x = (m0 * Kp + k) * 2
                tile_load(a, x, Kp * 2, 4)
                tile_load(a, x + TILE * Kp * 2, Kp * 2, 5)
                y = ((k // 2) * Np + n0) * 4
                tile_load(b, y, Np * 4, 6)
                tile_load(b, y + 64, Np * 4, 7)
                tile_dot(0, 4, 6)
                tile_dot(1, 4, 7)
                tile_dot(2, 5, 6)
                tile_dot(3, 5, 7)
            tile_store(buf, 0, 128, 0)
            tile_store(buf, 64, 128, 1)
            tile_store(buf, TILE * 128, 128, 2)
            tile_store(buf, TILE * 128 + 64, 128, 3)
            for m in range(32):
                row, src = c[m0 + m, n0:], buf[m * 32:]
                for n in range(32):
                    row[n] += src[n]
        tile_release()


def _padded_bits(x, rows, cols):
    """round_bits(x) (a 2-D float32 array or view) zero-padded to (rows, cols)."""
    out = np.zeros((rows, cols), np.uint16)
    out[:x.shape[0], :x.shape[1]] = round_bits(x)
    return out


def available() -> bool:
    return precision.support().amx_bf16


def matmul(a, b):
    """a (M, K) @ b (K, N) float32 (arrays or views) -> (M, N) float32, bfloat16 operands rounded to
    nearest even, float32 sums."""
    precision.require_amx("linear")
    (M, K), N = a.shape, b.shape[1]
    Mp, Kp, Np = (_blocks(n, 32) * 32 for n in (M, K, N))
    ab = _padded_bits(a, Mp, Kp)
    bb = np.ascontiguousarray(_padded_bits(b, Kp, Np).reshape(Kp // 2, 2, Np).transpose(0, 2, 1))
    c = np.empty((Mp, Np), np.float32)
    rb = max(1, round((Kp / 32) ** 0.5))
    _gemm(ab, bb, c, _amx.CONFIG, rb, _aligned_empty((numba.get_num_threads(), 1024), np.float32))
    return c[:M, :N]

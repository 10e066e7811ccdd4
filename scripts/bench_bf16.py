"""bfloat16 kernels (issue 41): srgrad's AMX and AVX512-BF16 routes against torch's bf16 on the same
product, with srgrad's own float32 in the note; and the two instructions' throughput.

    python scripts/benchmark.py --only bf16 --threads 2

Rows (milliseconds, the median of --repeat after a warm-up; ours and torch's interleaved):
- the direct convolution 64 -> 64, 3x3, 16 images of 32 x 32 (EDSR's body at the issue's patches):
  forward, and weight gradient, each by the AMX and the AVX512-BF16 route;
- linear 4096 x 180 -> 180 (SwinIR-light's MLP), forward, on AMX;
- register-only loops of 16 independent chains: vdpbf16ps (32 multiply-adds per instruction) and
  vfmadd (16), in G instructions per second per core (a note; no torch column).

`tile_rates()` (also in benchmark.py's header where the CPU has AMX): the tile unit's throughput on
each logical CPU now, a 2 x 2 block of tdpbf16ps on L1-resident tiles with the loads behind the
products, pinned to each CPU in turn, its operands on 64-byte boundaries as the kernels' are. Its
peak is 512 multiply-adds a cycle (16 x 16 x 32 in 16 cycles). Earlier sessions read 440-540 GMAC/s
at most starts and 1550-1930 at a few and took it for the host's other tenant on the tile unit: it
was this probe's own operands, an np.zeros of 16-byte alignment (a tile row that crosses a cache
line loads ~7x slower, so only the runs whose array fell on a 64-byte boundary read the unit's rate;
docs/benchmarks.md, 2026-12-07).
"""
from __future__ import annotations

import time

import numpy as np

from benchmark import Row, time_pair

TITLE = "bfloat16 kernels: srgrad's routes vs torch bf16 (srgrad float32 in the notes)"


def _chains(kind):
    """A kernel running n rounds of 16 independent vdot_bf16 or vfma on registers."""
    from framework._jit import kernel
    from framework._simd import vadd, vdot_bf16, vfma, vload, vsplat, vstore, wide

    if kind == "dp":
        @kernel
        def loop(n, x, out):
            wide()
            a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = vsplat(np.float32(0), 32)
            v, s = vload(x, 0, 32), vsplat(x[3], 32)
            for _ in range(n):
                a0, a1, a2, a3 = vdot_bf16(a0, v, s), vdot_bf16(a1, v, s), vdot_bf16(a2, v, s), vdot_bf16(a3, v, s)
                a4, a5, a6, a7 = vdot_bf16(a4, v, s), vdot_bf16(a5, v, s), vdot_bf16(a6, v, s), vdot_bf16(a7, v, s)
            vstore(out, 0, vadd(vadd(vadd(a0, a1), vadd(a2, a3)), vadd(vadd(a4, a5), vadd(a6, a7))))
    else:
        @kernel
        def loop(n, x, out):
            wide()
            a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = vsplat(np.float32(0), 32)
            v, s = vload(x, 0, 32), vsplat(x[3], 32)
            for _ in range(n):
                a0, a1, a2, a3 = vfma(v, s, a0), vfma(v, s, a1), vfma(v, s, a2), vfma(v, s, a3)
                a4, a5, a6, a7 = vfma(v, s, a4), vfma(v, s, a5), vfma(v, s, a6), vfma(v, s, a7)
            vstore(out, 0, vadd(vadd(vadd(a0, a1), vadd(a2, a3)), vadd(vadd(a4, a5), vadd(a6, a7))))
    return loop


def _throughput(kind, n=10 ** 7, repeat=5):
    """G instructions per second of one core (16 zmm instructions per round), best of `repeat`."""
    import numba
    loop = _chains(kind)
    x = np.zeros(64, np.uint32 if kind == "dp" else np.float32)
    out = np.zeros(64, np.float32)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        loop(10, x, out)
        best = min(_timed(lambda: loop(n, x, out)) for _ in range(repeat))
    finally:
        numba.set_num_threads(threads)
    return 16 * n / best / 1e9


def _tile_loop():
    from framework._amx import block_zero, operands, step, tile_config, tile_release
    from framework._jit import kernel

    @kernel
    def loop(a, cfg, n):
        """n steps of the kernels' 2 x 2 block on the same 4 KB of operands (L1)."""
        tile_config(cfg)
        block_zero()
        operands(a, 0, 64, a, 2048, 64)
        for _ in range(n):
            step(a, 0, 64, a, 2048, 64)
        tile_release()
    return loop


def tile_rates(n=20000, repeat=3, offset=0) -> dict:
    """{logical CPU: GMAC/s of its tile unit now} (best of `repeat` runs of n steps of four
    tdpbf16ps, the calling thread pinned to each CPU in turn); {} without AMX. offset: the operands
    that many bytes past a 64-byte boundary (16: where np.empty often puts them; ~3x slower)."""
    import os

    from framework import _amx, precision
    if not precision.support().amx_bf16 or not hasattr(os, "sched_setaffinity"):
        return {}
    precision.require_amx("tile_rates")
    from framework.functional._direct import _aligned_empty
    # on cache lines, as the kernels' operands: a tile row across two lines loads ~7x slower (the
    # 440-540 "slow state" earlier sessions read was np.zeros's 16-byte alignment; docs/benchmarks.md)
    loop, a = _tile_loop(), _aligned_empty(4096 + 64, np.uint8)[offset % 64:][:4096]
    a[:] = 0x3f  # bfloat16 pairs of ~0.75, written (not the zero page)
    cpus = sorted(os.sched_getaffinity(0))
    rates = {}
    try:
        for cpu in cpus:
            os.sched_setaffinity(0, {cpu})
            loop(a, _amx.CONFIG, 10)
            best = min(_timed(lambda: loop(a, _amx.CONFIG, n)) for _ in range(repeat))
            rates[cpu] = 4 * n * 16 * 16 * 32 / best / 1e9
    finally:
        os.sched_setaffinity(0, cpus)
    return rates


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def run(args) -> list:
    import torch
    from framework import precision
    from framework.functional import _direct, _direct_amx, _direct_bf16, _gemm_bf16, conv
    s = precision.support()
    if not s.avx512_bf16:
        return [Row("bfloat16 kernels", 0.0, None, note=f"skipped: {s.reason}")]
    rng = np.random.default_rng(0)
    N, C, O, H, W = 16, 64, 64, 32, 32
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((O, C, 3, 3)) * 0.05).astype(np.float32)
    g = rng.standard_normal((N, O, H, W)).astype(np.float32)
    b = np.zeros(O, np.float32)
    geo = conv._Geometry((3, 3), (1, 1), (1, 1), (1, 1), 1, (H, W), (H, W))
    tiles, elems = conv._direct_tiles((N, C, np.float32), geo)
    workers = conv._workers()
    tx, tw, tg = (torch.from_numpy(a).bfloat16() for a in (x, w, g))

    def torch_fwd():
        torch.nn.functional.conv2d(tx, tw, padding=1)

    def torch_wg():
        torch.nn.grad.conv2d_weight(tx, tw.shape, tg, padding=1)

    own_fwd = time_pair(lambda: _direct.correlate(x, w, (H, W), (1, 1), b, None, tiles, elems), None,
                        args.repeat)[0]
    own_wg = time_pair(lambda: _direct.weight_grad(x, g, (1, 1), (3, 3), workers), None, args.repeat)[0]
    shape = f"({N},{C},{H},{W}) -> {O}, 3x3"
    cases = [("AVX512-BF16 forward", lambda: _direct_bf16.correlate(x, w, (H, W), (1, 1), b, None, tiles),
              torch_fwd, own_fwd),
             ("AVX512-BF16 weight grad", lambda: _direct_bf16.weight_grad(x, g, (1, 1), (3, 3), workers),
              torch_wg, own_wg)]
    if s.amx_bf16:
        cases += [("AMX forward", lambda: _direct_amx.correlate(x, w, (H, W), (1, 1), b, None, workers),
                   torch_fwd, own_fwd),
                  ("AMX weight grad", lambda: _direct_amx.weight_grad(x, g, (1, 1), (3, 3)), torch_wg, own_wg)]
    rows = []
    for name, ours, theirs, own in cases:
        a, t = time_pair(ours, theirs, args.repeat)
        rows.append(Row(f"direct conv {name} {shape}", a, t,
                        note=f"srgrad fp32 {own:.1f} ms: bf16 {own / a:.2f}x faster"))
    if s.amx_bf16:
        xl = rng.standard_normal((4096, 180)).astype(np.float32)
        wl = (rng.standard_normal((180, 180)) * 0.1).astype(np.float32)
        txl, twl = torch.from_numpy(xl).bfloat16(), torch.from_numpy(wl).bfloat16()
        own = time_pair(lambda: xl @ wl.T, None, args.repeat)[0]
        a, t = time_pair(lambda: _gemm_bf16.matmul(xl, wl.T), lambda: txl @ twl.T, args.repeat)
        rows.append(Row("linear AMX 4096 x 180 -> 180", a, t, note=f"numpy float32 {own:.2f} ms: bf16 "
                                                               f"{own / a:.2f}x faster"))
    rates = tile_rates()
    if rates:
        rows.append(Row("tile unit, each CPU (GMAC/s)", max(rates.values()), None,
                        note=", ".join(f"cpu{c} {r:.0f}" for c, r in rates.items()) + " (peak 512 MAC a cycle)"))
    dp, fma = _throughput("dp"), _throughput("fma")
    rows.append(Row("instruction throughput, one core (G instr/s)", dp, None,
                    note=f"vdpbf16ps {dp:.2f} (32 MAC each) vs vfmadd231ps {fma:.2f} (16 MAC each): "
                         f"per multiply-add bf16 {2 * dp / fma:.2f}x float32's"))
    return rows

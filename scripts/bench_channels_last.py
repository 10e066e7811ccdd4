"""The next layout of the AMX convolution, measured before it is built (issue 41): channels last.

srgrad's AMX forward (framework/functional/_direct_amx.py) multiplies weights (tile rows = output
channels) by planes of channel pairs (tile rows = one pair at 16 flat positions q + i Wp + j): each
row of an input tile starts wherever the tap's offset puts it, so most rows straddle two cache lines,
and its 32 x 32 blocks go to a chunk's scratch whose epilogue reads them an output row at a time.
oneDNN's brgconv (OpenVINO) keeps activations channels last: an input tile row is one pixel's 32
channels, 64 contiguous bytes whatever the tap, and a 32 x 32 block's epilogue writes 32 whole pixels.
This script's kernel is that layout for a 3x3 convolution, bfloat16 in and out (the next conv's
padded channels-last input, as the graph's planes are), with the same steps in the same order
(tap by tap, blocks of 32 channels inside) and the same tile block (tmm0..3 += tmm4..5 x tmm6..7):

- it checks that every output is the planes kernel's bits (`_direct_amx.correlate`'s float32
  output with its bias and ReLU, rounded to nearest even as its planes epilogue rounds it): the
  tile products sum the same pairs in the same order, so a port keeps a graph's eager bits;
- it times, per shape, the planes kernel writing its reader's planes (`run(..., dst=...)`) and this
  kernel whole, its products and tile stores alone, and its epilogue alone.

    python scripts/bench_channels_last.py                   # 32 -> 32 and 64 -> 64 at 128^2, 32 -> 32 at 512^2
    python scripts/bench_channels_last.py --shapes 64x64x128 --repeat 100

Unset OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE first, as for any benchmark. Needs AMX-BF16.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numba
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from framework import _amx, precision  # noqa: E402
from framework._amx import block_store, block_zero, last_step, operands, step, tile_config, tile_release  # noqa: E402
from framework._jit import kernel, prange  # noqa: E402
from framework._simd import bits32, wide  # noqa: E402
from framework.functional import _direct_amx  # noqa: E402
from framework.functional._direct import _aligned_empty  # noqa: E402
from framework.functional._direct_bf16 import _rne, round_bits  # noqa: E402


@kernel(inline=True)
def _epilogue(buf, bias, dst, b, ob, q, Wp, OH, OW):
    """The 32 x 32 block at flat position q (scratch rows = pixels): relu(block + bias) rounded into
    the 32 pixels' rows of dst[b, ob] at q + Wp + 1 (the next 3x3 conv's padded input), zero where a
    position is a row's junk end or past the image (the reader's padding)."""
    out = dst[b, ob].reshape(-1)[(q + Wp + 1) * 32:(q + Wp + 1) * 32 + 1024]
    bb = bias[ob * 32:ob * 32 + 32]
    for i in range(32):
        for c in range(32):
            v = buf[i * 32 + c] + bb[c]
            if v <= 0:
                v = np.float32(0)
            out[i * 32 + c] = np.uint16(_rne(bits32(v)))
    if q % Wp + 32 > OW or q + 32 > OH * Wp:
        for i in range(32):
            if (q + i) % Wp >= OW or q + i >= OH * Wp:
                for c in range(32):
                    out[i * 32 + c] = 0


@kernel(parallel=True)
def forward(xs, wb, bias, dst, scratch, cfg, OH, OW, Wp, tasks, offsets, mode):
    """xs (N, KB, S, 32) uint16: blocks of 32 channels, pixel (h, w) at flat (h + 1) Wp + w + 1; wb
    (taps, KB, OB, 16, 64) uint16: per tap, input block and output block, 16 channel pairs x 32 outputs
    (tdpbf16ps's pair layout); dst (N, OB, S, 32) uint16. mode 0: all; 1: products and tile stores
    only; 2: epilogue only; 3: all, each block's epilogue run behind the next block's products (two
    scratch blocks). tasks (T, 3): image, first and end flat position (multiples of 32)."""
    wide()
    KB, S, T, OB = xs.shape[1], xs.shape[2], wb.shape[0], wb.shape[2]
    for n in prange(tasks.shape[0]):
        b, q0, q1 = tasks[n, 0], tasks[n, 1], tasks[n, 2]
        scr = scratch[numba.get_thread_id()]
        tile_config(cfg)
        i = 0
        pq, pob = -1, 0
        for q in range(q0, q1, 32):
            for ob in range(OB):
                buf = scr[(i % 2) * 1024:(i % 2) * 1024 + 1024]
                if mode != 2:
                    block_zero()
                    for s in range(T * KB):
                        t, kb = s // KB, s % KB
                        xo, wo = ((b * KB + kb) * S + q + offsets[t]) * 64, ((t * KB + kb) * OB + ob) * 16 * 128
                        if s == 0:
                            operands(xs, xo, 64, wb, wo, 128)
                        else:
                            step(xs, xo, 64, wb, wo, 128)
                    if mode == 3 and pq >= 0:  # the previous block's, while these products run
                        _epilogue(scr[((i + 1) % 2) * 1024:((i + 1) % 2) * 1024 + 1024], bias, dst, b, pob, pq,
                                  Wp, OH, OW)
                    last_step()
                    block_store(buf, 0, 128)
                if mode == 0 or mode == 2:
                    _epilogue(buf, bias, dst, b, ob, q, Wp, OH, OW)
                pq, pob = q, ob
                i += 1
        if mode == 3 and pq >= 0:
            _epilogue(scr[((i + 1) % 2) * 1024:((i + 1) % 2) * 1024 + 1024], bias, dst, b, pob, pq, Wp, OH, OW)
        tile_release()


def case(C, O, H, W, rng):
    """The operands of a C -> O 3x3 conv (padding 1, ReLU) on one H x W image, in both layouts."""
    spread = np.exp(np.linspace(-3, 3, C))[None, :, None, None]  # channels of magnitudes e^-3..e^3
    x = (rng.standard_normal((1, C, H, W)) * spread).astype(np.float32)
    w = (rng.standard_normal((O, C, 3, 3)) * 0.05).astype(np.float32)
    bias = (rng.standard_normal(O) * 0.1).astype(np.float32)
    Wp, Q, S = _direct_amx.plane_geometry((H, W), (3, 3))
    KB, OB = C // 32, O // 32
    xs = _aligned_empty((1, KB, S, 32), np.uint16)
    xs[...] = 0
    xb = round_bits(x)
    for h in range(H):
        xs[0, :, (h + 1) * Wp + 1:(h + 1) * Wp + 1 + W] = xb[0, :, h].reshape(KB, 32, W).transpose(0, 2, 1)
    wb = _aligned_empty((9, KB, OB, 16, 64), np.uint16)
    for t in range(9):
        blocks = round_bits(w[:, :, t // 3, t % 3]).reshape(OB, 32, KB, 16, 2)  # (ob, o, kb, pair, half)
        wb[t] = blocks.transpose(2, 0, 3, 1, 4).reshape(KB, OB, 16, 64)
    dst = _aligned_empty((1, OB, S, 32), np.uint16)
    dst[...] = 0
    offsets = np.array([i * Wp + j for i in range(3) for j in range(3)], np.int64)
    return x, w, bias, xs, wb, dst, offsets, Wp, Q


def same_bits(C, O, H, W, seed=0, mode=0):
    """Whether this kernel's outputs are the planes kernel's bits (its float32 output, rounded)."""
    precision.require_amx("scripts/bench_channels_last.py")
    x, w, bias, xs, wb, dst, offsets, Wp, Q = case(C, O, H, W, np.random.default_rng(seed))
    scratch = _aligned_empty((numba.get_num_threads(), 2048), np.float32)
    forward(xs, wb, bias, dst, scratch, _amx.CONFIG, H, W, Wp, _direct_amx._tasks(1, Q, 2), offsets, mode)
    ref = round_bits(_direct_amx.correlate(x, w, (H, W), (1, 1), bias, 0.0, 2))
    got = np.stack([dst[0, :, (h + 1) * Wp + 1:(h + 1) * Wp + 1 + W].transpose(0, 2, 1).reshape(O, W)
                    for h in range(H)], axis=1)[None]
    return np.array_equal(got, ref)


def _median_ms(f, repeat):
    f()
    f()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e3


def timings(C, O, H, repeat, workers):
    """{what: ms} for a C -> O 3x3 conv on one H x H image, `workers` threads."""
    x, w, bias, xs, wb, dst, offsets, Wp, Q = case(C, O, H, H, np.random.default_rng(0))
    scratch = _aligned_empty((numba.get_num_threads(), 2048), np.float32)
    tasks = _direct_amx._tasks(1, Q, workers)
    wa = _direct_amx.pack_weight(w)
    _, _, S = _direct_amx.plane_geometry((H, H), (3, 3))
    xp = _aligned_empty((1, wa.shape[1] * 16, S), np.uint32)
    _direct_amx.layout(x, xp, 0, (1, 1), Wp)
    planes = _aligned_empty((1, _direct_amx.out_blocks(O) // 2, S), np.uint32)
    planes[...] = 0
    dgeo = np.array([0, 1, 1, Wp], np.int64)
    go = _direct_amx.prepare(xp.shape, 0, wa, np.resize(bias, wa.shape[2]), O, (H, H), (3, 3), 0.0, planes.shape, dgeo)
    out = {"planes kernel, writing planes": _median_ms(lambda: go(xp, workers, planes), repeat)}
    for mode, what in ((0, "channels last, whole"), (3, "channels last, epilogue behind next block"),
                       (1, "channels last, products + tile stores"), (2, "channels last, epilogue alone")):
        out[what] = _median_ms(lambda: forward(xs, wb, bias, dst, scratch, _amx.CONFIG, H, H, Wp, tasks, offsets,
                                               mode), repeat)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", nargs="+", default=["32x32x128", "64x64x128", "32x32x512"],
                   help="CxOxH: channels in and out (multiples of 32) and the image side")
    p.add_argument("--repeat", type=int, default=60)
    args = p.parse_args(argv)
    precision.require_amx("scripts/bench_channels_last.py")
    from benchmark import machine
    print("\n".join(machine()))
    workers = numba.get_num_threads()
    for C, O in ((32, 32), (64, 64), (64, 32)):
        for mode in (0, 3):
            print(f"bits {C} -> {O} (mode {mode}): {'the planes kernel' if same_bits(C, O, 13, 37, mode=mode) else 'DIFFERENT'}")
    for shape in args.shapes:
        C, O, H = (int(v) for v in shape.split("x"))
        for what, ms in timings(C, O, H, args.repeat, workers).items():
            print(f"{C} -> {O} at {H}^2, {workers} threads: {what:40s} {ms:.3f} ms")


if __name__ == "__main__":
    main()

"""Convolutions and pixel shuffle: srgrad vs torch.nn.functional, forward and forward+backward, float32.

Run through the harness: `python scripts/benchmark.py --only conv --threads 2`. The note column gives
each side's GFLOP/s (2 x multiply-adds of the forward; forward+backward counts three products, or two
when the input needs no gradient) and, in its own row, this machine's float32 matmul (2048^3,
np.matmul) for scale. A last row reports the
largest column buffers a conv on (16, 64, 96, 96) allocates.

The small-map layers (the dominant conv of each model whose training step misses issue 19's target)
get a third row, "BLAS alone": the three im2col products of forward + backward (Y = W cols, dcols =
W^T dY, dW^T = cols dY^T), one per image, with single-threaded OpenBLAS on the conv's worker threads
and nothing else: no im2col, no col2im, no transforms (a fourth row: one GEMM per tile of images,
columns side by side, the shape a batched layout would give). Its GFLOP/s is the ceiling of any route that
feeds these GEMMs to OpenBLAS; where torch's rate is above it, oneDNN's direct convolution beats what
OpenBLAS does on these shapes.
"""
from __future__ import annotations

import numpy as np

from benchmark import Row, time_pair

import framework as sg
import framework.functional as F
from framework.functional import conv as conv_module

TITLE = "Convolutions and pixel shuffle, float32"

# (label, op, input shape, weight shape, options, input needs grad, target for fwd+bwd)
CASES = [
    ("conv2d 3x3 64->64 (16,64,48,48)", "conv2d", (16, 64, 48, 48), (64, 64, 3, 3), dict(padding=1), True,
     1.5),
    ("conv2d 3x3 3->64 (16,3,96,96)", "conv2d", (16, 3, 96, 96), (64, 3, 3, 3), dict(padding=1), False, 1.5),
    ("conv2d 3x3 64->3 (16,64,96,96)", "conv2d", (16, 64, 96, 96), (3, 64, 3, 3), dict(padding=1), True, 1.5),
    ("conv2d 1x1 64->64 (16,64,48,48)", "conv2d", (16, 64, 48, 48), (64, 64, 1, 1), dict(), True, 1.5),
    ("conv_transpose2d 9x9 s2 56->3 (16,56,48,48) (FSRCNN)", "conv_transpose2d", (16, 56, 48, 48),
     (56, 3, 9, 9), dict(stride=2, padding=4, output_padding=1), True, 1.5),
    # one wide image: bands of one image on several workers (issue 11's race was on this path)
    ("conv2d 3x3 40->32 (1,40,300,4000) one image", "conv2d", (1, 40, 300, 4000), (32, 40, 3, 3),
     dict(padding=1), True, 1.5),
    # the large-kernel route (_depthwise.py): depthwise convolutions (SAFMN, OmniSR); PLKSR's partial
    # large kernel (dense 17x17 on 16 of its 64 channels) takes the direct route (_direct.py)
    ("conv2d depthwise 3x3 64 (16,64,64,64)", "conv2d", (16, 64, 64, 64), (64, 1, 3, 3),
     dict(padding=1, groups=64), True, 1.0),
    ("conv2d depthwise 7x7 64 (4,64,64,64)", "conv2d", (4, 64, 64, 64), (64, 1, 7, 7),
     dict(padding=3, groups=64), True, 1.0),
    ("conv2d depthwise 17x17 64 (4,64,64,64)", "conv2d", (4, 64, 64, 64), (64, 1, 17, 17),
     dict(padding=8, groups=64), True, 1.0),
    ("conv2d 17x17 16->16 (4,16,64,64) (PLKSR)", "conv2d", (4, 16, 64, 64), (16, 16, 17, 17),
     dict(padding=8), True, 1.0),
]

# (label, input shape, weight shape): the dominant layer of the small-map models (3x3, padding 1)
SMALL_MAPS = [
    ("conv2d 3x3 64->64 (16,64,16,16) (SRVGGNetCompact)", (16, 64, 16, 16), (64, 64, 3, 3)),
    ("conv2d 3x3 32->32 (16,32,24,24) (MSRResNet, RCAN)", (16, 32, 24, 24), (32, 32, 3, 3)),
    ("conv2d 3x3 64->32 (16,64,32,32) (ESPCN)", (16, 64, 32, 32), (32, 64, 3, 3)),
    ("conv2d 3x3 64->64 (16,64,24,24)", (16, 64, 24, 24), (64, 64, 3, 3)),
]


def _conv_flops(op, x_shape, w_shape, options):
    """2 x multiply-adds of the forward."""
    if op == "conv2d":
        with sg.no_grad():
            out = F.conv2d(sg.zeros(1, *x_shape[1:]), sg.zeros(*w_shape), **options).shape
        return 2.0 * x_shape[0] * np.prod(out[1:]) * np.prod(w_shape[1:])
    return 2.0 * np.prod(x_shape) * np.prod(w_shape[1:])  # each input pixel stamps its kernel


def _blas_alone(x_shape, w_shape, repeat, rng, per_tile=False):
    """Median ms of the three im2col GEMMs of a 3x3 same-size conv's forward + backward on the conv's
    worker threads with single-threaded BLAS (conv_module's own pool): one image per GEMM, as the conv
    routes issue them, or (per_tile) one GEMM over the images of a tile (the split conv.py makes),
    columns side by side."""
    (N, C, H, W), O = x_shape, w_shape[0]
    K, n = C * 9, H * W
    step = max(1, -(-N // (2 * conv_module._workers()))) if per_tile else 1
    w = rng.standard_normal((O, K), dtype=np.float32)
    cols = rng.standard_normal((N // step, K, step * n), dtype=np.float32)
    dy = rng.standard_normal((N // step, O, step * n), dtype=np.float32)
    y, dcols, dwt = np.empty_like(dy), np.empty_like(cols), np.empty((N // step, K, O), np.float32)

    def work(b, buf):
        np.matmul(w, cols[b], out=y[b])
        np.matmul(w.T, dy[b], out=dcols[b])
        np.matmul(cols[b], dy[b].T, out=dwt[b])

    def go():
        conv_module._tiles.run(list(range(N // step)), work, 1, np.float32, conv_module._workers())

    return time_pair(go, None, repeat)[0]


def _peak_matmul(repeat):
    a = np.random.default_rng(0).standard_normal((2048, 2048), dtype=np.float32)
    ours, _ = time_pair(lambda: a @ a, None, repeat)
    return Row("np.matmul float32 2048^3 (machine reference)", ours, None,
               note=f"{2 * 2048 ** 3 / ours / 1e6:.0f} GFLOP/s")


def _column_buffer_row():
    """Largest buffers of a 3x3 conv on (16, 64, 96, 96) float32, by im2col and by the direct route
    (the one this conv takes), all worker threads together."""
    geo = conv_module._Geometry((3, 3), (1, 1), (1, 1), (1, 1), 1, (96, 96), (96, 96))
    workers = conv_module._workers()
    im2col = 4 * conv_module._column_tiles((16, 64, np.float32), geo, 64)[1] * workers
    direct = 4 * conv_module._direct_tiles((16, 64, np.float32), geo)[1] * workers
    full = 16 * 64 * 9 * 96 * 96 * 4
    return Row("conv2d 3x3 64->64 (16,64,96,96): column buffers", 0.0, None,
               note=f"peak over {workers} threads: im2col {im2col / 2**20:.1f} MB, direct "
                    f"{direct / 2**20:.1f} MB (untiled im2col: {full / 2**20:.0f} MB; cap COL_BUFFER_BYTES "
                    f"{conv_module.COL_BUFFER_BYTES / 2**20:.0f} MB)")


def run(args) -> list[Row]:
    try:
        import torch
        import torch.nn.functional as TF
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    rows = [_peak_matmul(args.repeat)]
    small = [(label, "conv2d", x, w, dict(padding=1), True, 1.0) for label, x, w in SMALL_MAPS]
    for label, op, x_shape, w_shape, options, x_grad, target in CASES + small:
        x = rng.standard_normal(x_shape, dtype=np.float32)
        w = (rng.standard_normal(w_shape, dtype=np.float32) * 0.05).astype(np.float32)
        b = np.zeros(w_shape[1] if op == "conv_transpose2d" else w_shape[0], np.float32)
        X = sg.Tensor(x, requires_grad=x_grad)
        W, B = sg.Tensor(w, requires_grad=True), sg.Tensor(b, requires_grad=True)
        fn = getattr(F, op)
        g = rng.standard_normal(fn(X, W, B, **options).shape, dtype=np.float32)
        flops = _conv_flops(op, x_shape, w_shape, options)

        def ours_fwd():
            with sg.no_grad():
                fn(X, W, B, **options)

        def ours_both():
            X.grad = W.grad = B.grad = None
            fn(X, W, B, **options).backward(g)

        theirs_fwd = theirs_both = None
        if torch is not None:
            tfn = getattr(TF, op)
            tx = torch.from_numpy(x).requires_grad_(x_grad)
            tw, tb = torch.from_numpy(w).requires_grad_(), torch.from_numpy(b).requires_grad_()
            tg = torch.from_numpy(g)

            def theirs_fwd():
                with torch.no_grad():
                    tfn(tx, tw, tb, **options)

            def theirs_both():
                tx.grad = tw.grad = tb.grad = None
                tfn(tx, tw, tb, **options).backward(tg)

        both_flops = flops * (3 if x_grad else 2)
        for suffix, ours, theirs, work, tgt in (("fwd", ours_fwd, theirs_fwd, flops, None),
                                               ("fwd+bwd", ours_both, theirs_both, both_flops, target)):
            a, t = time_pair(ours, theirs, args.repeat)
            note = f"{work / a / 1e6:.0f} GFLOP/s" + ("" if t is None else f" vs {work / t / 1e6:.0f}")
            rows.append(Row(f"{label} {suffix}", a, t, tgt, note))
        if (label, x_shape, w_shape) in SMALL_MAPS:
            for per_tile, how in ((False, "one image per GEMM"), (True, "one GEMM per tile of images")):
                ceiling = _blas_alone(x_shape, w_shape, args.repeat, rng, per_tile)
                rows.append(Row(f"{label} BLAS alone, {how}", ceiling, t, None,
                                f"{both_flops / ceiling / 1e6:.0f} GFLOP/s, im2col's three GEMMs only"))
    rows.append(_pixel_shuffle_row(args, rng, torch))
    rows.append(_column_buffer_row())
    return rows


def _pixel_shuffle_row(args, rng, torch):
    """pixel_shuffle x2 (16, 256, 48, 48) -> (16, 64, 96, 96), forward+backward."""
    x = rng.standard_normal((16, 256, 48, 48), dtype=np.float32)
    g = rng.standard_normal((16, 64, 96, 96), dtype=np.float32)
    X = sg.Tensor(x, requires_grad=True)

    def ours():
        X.grad = None
        F.pixel_shuffle(X, 2).backward(g)

    theirs = None
    if torch is not None:
        tx, tg = torch.from_numpy(x).requires_grad_(), torch.from_numpy(g)

        def theirs():
            tx.grad = None
            torch.nn.functional.pixel_shuffle(tx, 2).backward(tg)

    a, t = time_pair(ours, theirs, args.repeat)
    return Row("pixel_shuffle x2 (16,256,48,48) fwd+bwd", a, t, None)

"""conv2d's backward on AMX tiles from one pass over the output gradient (conv.py's route under
`autocast("bf16")` where both gradients take _direct_amx.py: at least MIN_CHANNELS channels on each
side, stride 1, undilated, ungrouped).

The eager backward reads the gradient g (N, O, OH, OW) four times before any tile product: the
fused activation's derivative (rectify_grad: a new array), the bias gradient (a sum), the input
gradient's layout (bfloat16 pair planes of the flipped correlation) and the weight gradient's (pairs
of flat positions, channels last). Here one parallel pass, a task per image and 16 channels, reads
g and the saved output y once into a per-thread scratch (the activation's derivative applied, the
bias partial sums taken) and writes both layouts from it while it is in cache; then the two tile
kernels run as before:

    backward(x, g, y, slope, w, ...)    dx = flipped correlation of g' (_direct_amx.run)
                                        dW = sum_n g'_n * x_n          (_direct_amx.weight_grad_planes)
                                        db = sum g'                    (float64 partial sums)

with g' = g where y > 0, else 0 (relu) or slope g (leaky relu), or g without a fused activation:
activation.rectify_grad's values, so both layouts hold the bits the unfused route gives. The bias
gradient is summed in float64 per image and channel, then over the images in order (the unfused
route's np.sum in float32 differs from it in the last bits; docs/numerics.md).
"""
from __future__ import annotations

import numba
import numpy as np

from .. import precision
from .._jit import kernel, prange
from ._direct import _aligned_empty, _blocks
from ._direct_amx import MIN_CHANNELS, out_blocks, pack_weight, plane_geometry, run, weight_grad_planes
from ._direct_bf16 import _rne

BLOCK = 16  # gradient channels per task: one 64-byte line of a row of the weight gradient's layout


@kernel(inline=True)
def _derivative(v, s, slope, mode):
    """g' of one element (rectify_grad's formula): mode 0 none, 1 relu, 2 leaky relu by slope."""
    if mode == 1:
        return v if s > 0 else np.float32(0)
    if mode == 2:
        return v if s > 0 else v * slope
    return v


@kernel(inline=True)
def _row_sum(a, n):
    """sum(a[:n]) in float64, in 8 chains (a[w] onto chain w % 8) added pairwise at the end: a fixed
    order (one chain through the row would run at one add per latency, the pass's bound)."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    end = n - n % 8
    for w in range(0, end, 8):
        s0 += a[w]
        s1 += a[w + 1]
        s2 += a[w + 2]
        s3 += a[w + 3]
        s4 += a[w + 4]
        s5 += a[w + 5]
        s6 += a[w + 6]
        s7 += a[w + 7]
    for w in range(end, n):
        s0 += a[w]
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))


@kernel(parallel=True)
def _layouts(g, y, slope, mode, gp, top, left, pWp, gt, Wp, sums, scratch, bits, pairs):
    """For every image b and block of BLOCK channels o0 (past g's O: zeros): scratch = g' of the
    block over rows of Wp (_derivative; y: the saved output, read where mode > 0; zeros past each
    row's OW and past the last row); sums[b, o] = its float64 sum per channel (_row_sum's rows in
    order); gt[b, p, o0:o0 +
    BLOCK] = its bfloat16 at flat positions 2p, 2p + 1 (the weight gradient's operand, as
    _grad_pairs); gp[b, o0 / 2 + k] = its pair planes, row i at (i + top) pWp + left (the flipped
    correlation's input, as _pair_plane). scratch (threads, BLOCK, 2 P) float32, bits: the same
    memory as uint32; pairs (threads, BLOCK, P) uint32."""
    N, O, OH, OW = g.shape
    P, S = gt.shape[1], gp.shape[2]
    tasks = gp.shape[1] * 2 // BLOCK
    for t in prange(N * tasks):
        b, o0 = t // tasks, t % tasks * BLOCK  # gt may have fewer columns (16 for 16 outputs) than planes
        s, u, pr = scratch[numba.get_thread_id()], bits[numba.get_thread_id()], pairs[numba.get_thread_id()]
        for c in range(BLOCK):
            o, row, acc = o0 + c, s[c], 0.0
            if o < O:
                for h in range(OH):
                    src, sy, dst = g[b, o, h], y[b, o if mode > 0 else 0, h], row[h * Wp:]
                    for w in range(OW):
                        dst[w] = _derivative(src[w], sy[w], slope, mode)
                    acc += _row_sum(dst, OW)
                    for w in range(OW, Wp):
                        dst[w] = 0
            else:
                for q in range(OH * Wp):
                    row[q] = 0
            for q in range(OH * Wp, row.shape[0]):
                row[q] = 0
            sums[b, o] = acc
            ub, pc = u[c], pr[c]
            for p in range(P):
                pc[p] = _rne(ub[2 * p]) | (_rne(ub[2 * p + 1]) << np.uint32(16))
        for p in range(P if o0 < gt.shape[2] else 0):
            dst = gt[b, p, o0:]
            for c in range(BLOCK):
                dst[c] = pr[c, p]
        for k in range(BLOCK // 2):
            plane, lo, hi = gp[b, o0 // 2 + k], u[2 * k], u[2 * k + 1]
            m = 0  # the padding between the rows: zeros, each element written once
            for i in range(OH):
                start = (i + top) * pWp + left
                for e in range(m, start):
                    plane[e] = 0
                dst, a, z = plane[start:], lo[i * Wp:], hi[i * Wp:]
                for j in range(OW):
                    dst[j] = _rne(a[j]) | (_rne(z[j]) << np.uint32(16))
                m = start + OW
            for e in range(m, S):
                plane[e] = 0


def applies(c, o, needs):
    """Whether conv2d's backward with c input and o output channels takes this route (the caller
    has checked that both gradients take the direct route): under bf16 on AMX, both sides at least
    MIN_CHANNELS, and both the input and the weight gradient wanted."""
    return (needs[0] and needs[1] and min(c, o) >= MIN_CHANNELS
            and precision.bf16_active(np.float32) and precision.support().amx_bf16)


def backward(x, g, y, slope, w, padding, flipped_padding, workers):
    """(dx, dW, db) of conv2d on tiles: x (N, C, H, W), g (N, O, OH, OW) float32; y: the saved output
    of a fused activation (None: none) of `slope` (0: relu, else leaky); w (O, C, kh, kw): the
    forward's kernel (dx takes its flip, pack_weight's `flip`); padding: the forward's,
    flipped_padding: the flipped correlation's."""
    precision.require_amx("conv2d")
    N, C, H, W = x.shape
    O, OH, OW = g.shape[1:]
    kh, kw = w.shape[2:]
    Opad = _blocks(O, 32) * 32  # the flipped correlation's input channels (its pair planes)
    pWp, _, pS = plane_geometry((H, W), (kh, kw))
    Wp = OW + kw - 1
    P = _blocks(_blocks(OH * Wp, 2), 16) * 16  # _direct_amx.weight_grad's pairs
    if flipped_padding[0] + OH > pS // pWp or flipped_padding[1] + OW > pWp or 2 * P < OH * Wp:
        raise ValueError(f"_direct_amx_grad.backward: the gradient {g.shape} does not fit the flipped "
                         f"correlation's planes ({pS} of rows of {pWp}, padding {flipped_padding})")
    gp = _aligned_empty((N, Opad // 2, pS), np.uint32)
    gt = _aligned_empty((N, P, out_blocks(O)), np.uint32)  # the weight gradient's output columns
    sums = np.empty((N, Opad), np.float64)
    threads = numba.get_num_threads()
    scratch = _aligned_empty((threads, BLOCK, 2 * P), np.float32)
    mode = 0 if y is None else (1 if slope == 0 else 2)
    g = np.ascontiguousarray(g)
    _layouts(g, g if y is None else y, np.float32(slope or 0), mode, gp, flipped_padding[0], flipped_padding[1],
             pWp, gt, Wp, sums, scratch, scratch.view(np.uint32), _aligned_empty((threads, BLOCK, P), np.uint32))
    wa = pack_weight(w, flip=True)  # the flipped kernel's layout, made from w
    dx = run(gp, 0, wa, np.zeros(wa.shape[2], np.float32), C, (H, W), (kh, kw), None, workers)
    dw = weight_grad_planes(x, gt, padding, (kh, kw), (OH, OW), O)
    return dx, dw, sums[:, :O].sum(axis=0).astype(np.float32)

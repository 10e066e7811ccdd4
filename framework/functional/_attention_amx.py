"""The fused attention's forward (attention._attention_kernel) with its two products on AMX tiles:
bfloat16 operands, float32 sums, for attention.py under autocast("bf16") on an AMX CPU where no
backward needs the weights (inference; a training forward keeps float32, as its backward is).

Per batch item and head (q, k, v rounded into tile operands once: _simd.vbf16_pairs, vbf16_zip),
16 query rows at a time:

- scores: tdpbf16ps of the rows' channel pairs (A: 16 rows x ceil(d / 2) pairs, one instruction's
  depth, so d <= 32) by k's pairs transposed (B: pairs x 16 keys), a 16 x 16 tile of sums per 16
  keys, stored into the thread's scratch;
- softmax, four rows side by side: scale s + bias + mask in float32 (attention.py's), the row's max,
  exp by exp32's steps with fused multiply-adds (_simd_math.vexp_fused: within an ulp of exp), their
  float32 sum in 16 lanes (lane l: ((e_l + e_l+16) + e_l+32) + e_l+48, then vhsum's tree), each exp
  times the float32 inverse of the sum, rounded to bfloat16 as it leaves the registers, in pairs of
  keys (A of the next product). Where the float32 route (attention.py) sums in float64 and exp32 is
  unfused, this one rounds every weight to 8 significant bits after them: their few ulp do not show;
- outputs: tdpbf16ps of the weights (32 keys a step) by v's key pairs (B: 16 pairs x up to 16
  channels), the steps in order on one accumulator tile, stored into the output's rows.

Other key counts (HAT's overlapping cross attention, 144 or 576 keys; 16 x 16 windows, 256; DAT's
8 x 32) take two rows at a time through the thread's scratch: each row's logits stored, their max,
exps stored and summed in 16 lanes in order (lane l: e_l + e_l+16 + ... from the first), the weights
rounded into pairs; keys padded to a multiple of 32 with zero operands and weight 0.

The shapes it takes (`fits`): N a multiple of 16 query rows, 1 <= M <= MAX_KEYS keys, d <= 32
channels a head; any dv (16 channels a tile, the last one narrower). q, k, v and the weights are
each rounded once to bfloat16 by round to nearest even (NaN to 0x7FC0), as torch's
`.to(torch.bfloat16)`; inside one tdpbf16ps the order of the pairs' sum is the hardware's
(docs/numerics.md), between instructions a chain in order. Nothing depends on the threads. The
bound: docs/numerics.md, tests/framework/functional/test_attention_amx.py.

    fits(n, m, d, dv)                                          whether these shapes run here
    attend(q, k, v, offsets, heads, bias, mask, scale, out)    attention._attend's forward, AMX
"""
from __future__ import annotations

import numpy as np

from .._amx import tile_config, tile_dot, tile_load, tile_release, tile_store, tile_zero
from .._jit import kernel, launch, prange
from .._simd import (vadd, vbf16_pairs, vbf16_zip, vhmax, vhsum, vload, vload_part, vmax, vmul, vpast, vsplat, vstore,
                     vsub, wide)
from .._simd_math import vexp_fused
from .rows import SERIAL_ELEMS

ROWS = 16  # query rows per tile
MAX_KEYS = 1024  # the 16 rows' scores (64 KB at 1024 keys) and k's pairs stay in the thread's L2
LANES = 16  # float32 lanes of a vector (AVX-512's: every AMX CPU has it)
# tiles: the scores' A (q pairs), B (k pairs), C (sums); the outputs' A (weight pairs), B (v pairs)
# and C for 16 channels, and B and C for the last, narrower group of channels
QA, KB, SC, PA, VB, OC, VB2, OC2 = 0, 1, 2, 3, 4, 5, 6, 7


def fits(n, m, d, dv) -> bool:
    """Whether N queries, M keys, d and dv channels a head run on this route (the docstring)."""
    return n % ROWS == 0 and 1 <= m <= MAX_KEYS and 1 <= d <= 32 and dv >= 1


def _config(d, dv):
    """ldtilecfg's 64 bytes for these head sizes (palette 1; rows and bytes per row of each tile)."""
    cfg = np.zeros(64, np.uint8)
    cfg[0] = 1
    colsb, rows = cfg[16:32].view(np.uint16), cfg[48:56]
    pairs, last = (d + 1) // 2, dv % LANES or LANES
    for t, (r, c) in enumerate([(ROWS, 4 * pairs), (pairs, 64), (ROWS, 64), (ROWS, 64),
                                (ROWS, 4 * LANES), (ROWS, 4 * LANES), (ROWS, 4 * last), (ROWS, 4 * last)]):
        rows[t], colsb[t] = r, c
    return cfg


@kernel(inline=True)
def _logits(row, scv, bias, bi, mask, mi, M):
    """A row's logits scale s + bias[bi:] + mask[mi:] as four vectors of LANES keys (flat bias and
    mask, the offsets of the row's key 0; empty arrays: none; M = 32 keys: the last two vectors
    -inf)."""
    ninf = vsplat(np.float32(-np.inf), LANES)
    a0, a1 = vmul(scv, vload(row, 0, LANES)), vmul(scv, vload(row, LANES, LANES))
    a2 = vmul(scv, vload(row, 2 * LANES, LANES)) if M > 2 * LANES else ninf
    a3 = vmul(scv, vload(row, 3 * LANES, LANES)) if M > 2 * LANES else ninf
    if bias.shape[0] > 0:
        a0, a1 = vadd(a0, vload(bias, bi, LANES)), vadd(a1, vload(bias, bi + LANES, LANES))
        if M > 2 * LANES:
            a2, a3 = vadd(a2, vload(bias, bi + 2 * LANES, LANES)), vadd(a3, vload(bias, bi + 3 * LANES, LANES))
    if mask.shape[0] > 0:
        a0, a1 = vadd(a0, vload(mask, mi, LANES)), vadd(a1, vload(mask, mi + LANES, LANES))
        if M > 2 * LANES:
            a2, a3 = vadd(a2, vload(mask, mi + 2 * LANES, LANES)), vadd(a3, vload(mask, mi + 3 * LANES, LANES))
    return a0, a1, a2, a3


@kernel(inline=True)
def _exps(a0, a1, a2, a3):
    """exp(a - max a) of one row's four vectors (_simd_math.vexp_fused: exp32's steps, fused)."""
    mv = vsplat(vhmax(vmax(vmax(a0, a1), vmax(a2, a3))), LANES)
    return (vexp_fused(vsub(a0, mv)), vexp_fused(vsub(a1, mv)), vexp_fused(vsub(a2, mv)),
            vexp_fused(vsub(a3, mv)))


@kernel(inline=True)
def _inverse(e0, e1, e2, e3):
    """1 / (the float32 sum of a row's exps: lane l = ((e_l + e_l+16) + e_l+32) + e_l+48, then
    vhsum's tree), in every lane."""
    return vsplat(np.float32(1.0) / vhsum(vadd(vadd(vadd(e0, e1), e2), e3)), LANES)


@kernel(inline=True)
def _put_pairs(row, e0, e1, e2, e3, inv):
    """row[:32] = the bfloat16 pairs of the weights e inv (a row of the outputs' A tile)."""
    vstore(row, 0, vbf16_pairs(vmul(e0, inv)))
    vstore(row, LANES // 2, vbf16_pairs(vmul(e1, inv)))
    vstore(row, LANES, vbf16_pairs(vmul(e2, inv)))
    vstore(row, 3 * LANES // 2, vbf16_pairs(vmul(e3, inv)))


@kernel(inline=True)
def _logit(row, t, scv, bias, bi, mask, mi, M):
    """Keys t..t + 15 of a row's logits (as _logits; keys past M -inf), stored over its scores."""
    a = vsplat(np.float32(-np.inf), LANES)
    if t < M:
        n, zero = min(LANES, M - t), vsplat(np.float32(0.0), LANES)
        a = vmul(scv, vload(row, t, LANES))
        if bias.shape[0] > 0:
            a = vadd(a, vload_part(bias, bi + t, zero, 0, n))
        if mask.shape[0] > 0:
            a = vadd(a, vload_part(mask, mi + t, zero, 0, n))
        a = vpast(a, n, np.float32(-np.inf))
    vstore(row, t, a)
    return a


@kernel(inline=True)
def _exp_at(row, t, mv):
    """exp(logit - max) of keys t..t + 15 (vexp_fused), stored over the logits."""
    e = vexp_fused(vsub(vload(row, t, LANES), mv))
    vstore(row, t, e)
    return e


@kernel(inline=True)
def _softmax_rows(ra, rb, pa, pb, scale, bias, bi, mask, mi, M):
    """The weights of two rows of any M keys (their scores in ra, rb[:Mp], Mp a multiple of 32) into
    pa's and pb's Mp / 2 bfloat16 pairs, the rows side by side (one row's chain of passes left the
    core idle): per row the logits stored over its scores, their max, exp(logit - max) stored over
    them and summed in 16 lanes in order (lane l: e_l + e_l+16 + ...), each exp times the float32
    inverse of the sum (vhsum of the lanes), rounded. bi, mi: row a's bias and mask offsets (row b's
    M further)."""
    scv, mxa = vsplat(scale, LANES), vsplat(np.float32(-np.inf), LANES)
    mxb = mxa
    for t in range(0, ra.shape[0], LANES):
        mxa = vmax(mxa, _logit(ra, t, scv, bias, bi, mask, mi, M))
        mxb = vmax(mxb, _logit(rb, t, scv, bias, bi + M, mask, mi + M, M))
    mva, mvb = vsplat(vhmax(mxa), LANES), vsplat(vhmax(mxb), LANES)
    acca, accb = _exp_at(ra, 0, mva), _exp_at(rb, 0, mvb)
    for t in range(LANES, ra.shape[0], LANES):
        acca, accb = vadd(acca, _exp_at(ra, t, mva)), vadd(accb, _exp_at(rb, t, mvb))
    inva = vsplat(np.float32(1.0) / vhsum(acca), LANES)
    invb = vsplat(np.float32(1.0) / vhsum(accb), LANES)
    for t in range(0, ra.shape[0], LANES):
        vstore(pa, t // 2, vbf16_pairs(vmul(vload(ra, t, LANES), inva)))
        vstore(pb, t // 2, vbf16_pairs(vmul(vload(rb, t, LANES), invb)))


@kernel(parallel=True)
def _kernel(q, k, v, offsets, heads, bias, mask, scale, cfg, out):
    """out[b, :, h dv:(h + 1) dv] = head h's attention of batch item b (the module docstring); q, k, v
    float32 in attention._attention_kernel's layout and offsets (oq, ok, ov, d, dv)."""
    B, N = q.shape[0], q.shape[1]
    M = k.shape[1]
    oq, ok, ov, d, dv = offsets
    nw = mask.shape[0]
    bias1, mask1 = bias.reshape(-1), mask.reshape(-1)
    q1, k1, v1 = q.reshape(-1), k.reshape(-1), v.reshape(-1)  # flat: q's row i at (b N + i) cq
    cq, ck, cv = q.shape[2], k.shape[2], v.shape[2]
    sc = np.float32(scale)
    DV = -(-dv // LANES) * LANES
    Mp = -(-M // 32) * 32  # keys padded to whole steps of the outputs' product (zero operands)
    PW = max(32, Mp // 2)  # a row of weight pairs: 128 bytes at least (the four-row softmax's 64 keys)
    row_bytes = out.shape[2] * 4
    for b in prange(B):
        wide()
        qa1 = np.zeros(N * LANES, np.uint32)  # q's pairs, a row of 64 bytes per query
        kb = np.zeros((LANES, Mp), np.uint32)  # k's pairs transposed: row t = pair t of every key
        vb1 = np.zeros(Mp // 2 * DV, np.uint32)  # v's key pairs: row m = keys 2m, 2m + 1
        s = np.empty((ROWS, Mp), np.float32)  # 16 rows' scores
        pa = np.zeros((ROWS, PW), np.uint32)  # their weights' key pairs
        tmp = np.zeros(LANES, np.uint32)
        zero = vsplat(np.float32(0.0), LANES)
        scv = vsplat(sc, LANES)
        w = b % max(nw, 1)
        tile_config(cfg)
        for h in range(heads):
            q0, k0, v0 = oq + h * d, ok + h * d, ov + h * dv
            # the head's operands as tile pairs (flat offsets into q, k, v)
            for i in range(N):
                at = (b * N + i) * cq + q0
                for c in range(0, d, LANES):
                    vstore(qa1, i * LANES + c // 2, vbf16_pairs(vload_part(q1, at + c, zero, 0, min(LANES, d - c))))
            for j in range(M):
                at = (b * M + j) * ck + k0
                for c in range(0, d, LANES):
                    vstore(tmp, c // 2, vbf16_pairs(vload_part(k1, at + c, zero, 0, min(LANES, d - c))))
                for t in range((d + 1) // 2):
                    kb[t, j] = tmp[t]
            for m in range((M + 1) // 2):
                lo, hi = (b * M + 2 * m) * cv + v0, (b * M + 2 * m + 1) * cv + v0
                for c in range(0, dv, LANES):
                    n = min(LANES, dv - c)
                    odd = vload_part(v1, hi + c, zero, 0, n) if 2 * m + 1 < M else zero  # (M odd: key M is 0)
                    vstore(vb1, m * DV + c, vbf16_zip(vload_part(v1, lo + c, zero, 0, n), odd))
            for i0 in range(0, N, ROWS):
                tile_load(qa1, i0 * 64, 64, QA)
                for j0 in range(0, Mp, LANES):
                    tile_zero(SC)
                    tile_load(kb, j0 * 4, Mp * 4, KB)
                    tile_dot(SC, QA, KB)
                    tile_store(s, j0 * 4, Mp * 4, SC)
                if M != 32 and M != 64:  # two rows at a time through the scratch
                    for r in range(0, ROWS, 2):
                        _softmax_rows(s[r], s[r + 1], pa[r], pa[r + 1], sc, bias1, (h * N + i0 + r) * M, mask1,
                                      (w * N + i0 + r) * M, M)
                else:
                    for r in range(0, ROWS, 4):  # four rows' softmax side by side: one row's chain
                        # (max, exp, sum, inverse) left the core idle (docs/benchmarks.md)
                        bi, mi = (h * N + i0 + r) * M, (w * N + i0 + r) * M
                        a0, a1, a2, a3 = _logits(s[r], scv, bias1, bi, mask1, mi, M)
                        b0, b1, b2, b3 = _logits(s[r + 1], scv, bias1, bi + M, mask1, mi + M, M)
                        c0, c1, c2, c3 = _logits(s[r + 2], scv, bias1, bi + 2 * M, mask1, mi + 2 * M, M)
                        d0, d1, d2, d3 = _logits(s[r + 3], scv, bias1, bi + 3 * M, mask1, mi + 3 * M, M)
                        a0, a1, a2, a3 = _exps(a0, a1, a2, a3)
                        b0, b1, b2, b3 = _exps(b0, b1, b2, b3)
                        c0, c1, c2, c3 = _exps(c0, c1, c2, c3)
                        d0, d1, d2, d3 = _exps(d0, d1, d2, d3)
                        _put_pairs(pa[r], a0, a1, a2, a3, _inverse(a0, a1, a2, a3))
                        _put_pairs(pa[r + 1], b0, b1, b2, b3, _inverse(b0, b1, b2, b3))
                        _put_pairs(pa[r + 2], c0, c1, c2, c3, _inverse(c0, c1, c2, c3))
                        _put_pairs(pa[r + 3], d0, d1, d2, d3, _inverse(d0, d1, d2, d3))
                base = ((b * N + i0) * out.shape[2] + h * dv) * 4
                for c in range(0, dv, LANES):
                    whole = c + LANES <= dv
                    if whole:
                        tile_zero(OC)
                    else:
                        tile_zero(OC2)
                    for s0 in range(0, Mp, 32):
                        tile_load(pa, s0 * 2, PW * 4, PA)
                        if whole:
                            tile_load(vb1, (s0 // 2 * DV + c) * 4, DV * 4, VB)
                            tile_dot(OC, PA, VB)
                        else:
                            tile_load(vb1, (s0 // 2 * DV + c) * 4, DV * 4, VB2)
                            tile_dot(OC2, PA, VB2)
                    if whole:
                        tile_store(out, base + c * 4, row_bytes, OC)
                    else:
                        tile_store(out, base + c * 4, row_bytes, OC2)
        tile_release()


def attend(q, k, v, offsets, heads, bias, mask, scale, out):
    """out (B, N, heads dv) = every head's attention of float32 q, k, v (attention._attend's
    arguments: bias and mask (0, N, M) arrays when absent; shapes that `fit`) on AMX tiles."""
    b_, n, m = q.shape[0], q.shape[1], k.shape[1]
    launch(_kernel, b_ * heads * n * m < SERIAL_ELEMS, q, k, v, offsets, heads, bias, mask, float(scale),
           _config(offsets[3], offsets[4]), out)
    return out

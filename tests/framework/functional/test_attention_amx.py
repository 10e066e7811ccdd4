"""The fused attention's AMX route (functional/_attention_amx.py: under autocast('bf16'), inference,
shapes that fit): within its bound of the float64 attention of the bfloat16-rounded operands,
taken only where documented, independent of the threads, and the same bits in a captured graph.

The bound (docs/numerics.md, "bfloat16"), per output o = sum_j p_j v_j of a row: q, k, v rounded to
bfloat16 are the reference's operands, so what is left is the logits' float32 sums (each within
e = (d + 3) u (|scale| sum_c |q_c k_c| + |bias| + |mask|) of the exact logit, u = 2^-24), which move
a weight by at most 2 max e relatively; the weight's float32 exp, sum, inverse and product (a few
hundred u at most: 2^-16 covers them); its rounding to bfloat16 (u_b = 2^-8); and the output's
float32 sum of M products, gamma_M. So |o - ref| <= (u_b + 2 max e + 2^-16 + gamma_M) sum_j p_j |v_j|.
"""
import importlib

import numba
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework import precision
from framework.capture import Capture
from framework.functional._direct_bf16 import round_bits, widen

A = importlib.import_module("framework.functional.attention")
needs_amx = pytest.mark.skipif(not precision.support().amx_bf16, reason="AMX-BF16: this CPU or OS has no AMX tiles")
U, UB = 2.0 ** -24, 2.0 ** -8


def _inputs(b_, heads, n, m, d, dv, nw, bias=True, seed=0):
    rng = np.random.default_rng(seed)
    q, k = (rng.standard_normal((b_, t, heads * d)).astype(np.float32) for t in (n, m))
    v = rng.standard_normal((b_, m, heads * dv)).astype(np.float32)
    bias = (rng.standard_normal((heads, n, m)) * 0.5).astype(np.float32) if bias else None
    mask = np.where(rng.uniform(size=(nw, n, m)) < 0.3, -100.0, 0.0).astype(np.float32) if nw else None
    return q, k, v, bias, mask


def _attend(q, k, v, heads, scale, bias, mask, needs=(False,), precision_="bf16"):
    ctx = type("Ctx", (), {"needs_input_grad": needs})()
    with sg.autocast(precision_):
        out = A._attend(ctx, q, k, v, (0, 0, 0, q.shape[2] // heads, v.shape[2] // heads), bias, heads,
                        scale, mask)
    return out, ctx


def _bound_check(q, k, v, heads, scale, bias, mask, out):
    """max |out - ref| / bound over the outputs (<= 1 within the bound)."""
    b_, n, _ = q.shape
    m, d, dv = k.shape[1], q.shape[2] // heads, v.shape[2] // heads
    qb, kb, vb = (widen(round_bits(a)).astype(np.float64) for a in (q, k, v))
    worst = 0.0
    for b in range(b_):
        for h in range(heads):
            qh, kh, vh = qb[b, :, h * d:(h + 1) * d], kb[b, :, h * d:(h + 1) * d], vb[b, :, h * dv:(h + 1) * dv]
            extra = (0 if bias is None else bias[h].astype(np.float64)) + \
                (0 if mask is None else mask[b % mask.shape[0]].astype(np.float64))
            logits = scale * (qh @ kh.T) + extra
            e = (d + 3) * U * (abs(scale) * (np.abs(qh) @ np.abs(kh).T) + np.abs(extra))
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            ref = p @ vh
            bound = (UB + 2 * e.max(axis=1, keepdims=True) + 2.0 ** -16 + m * U / (1 - m * U)) * (p @ np.abs(vh))
            worst = max(worst, (np.abs(out[b, :, h * dv:(h + 1) * dv] - ref) / bound).max())
    return worst


@needs_amx
@pytest.mark.parametrize("b_,heads,n,m,d,dv,nw,bias", [
    (4, 6, 64, 64, 10, 10, 2, True),    # SwinIR-light's windows: 8 x 8 tokens, 10 channels a head
    (3, 2, 32, 32, 32, 20, 3, True),    # the deepest head (16 pairs); 16 + 4 output channels
    (2, 1, 16, 64, 7, 33, 0, False),    # odd channels, 16 queries against 64 keys, 2 x 16 + 1 outputs
    (2, 3, 48, 32, 1, 1, 1, True),      # one channel a head
    # other key counts, two rows at a time through the scratch:
    (2, 2, 64, 144, 8, 8, 0, True),     # HAT's overlapping cross attention (8 x 8 queries, 12 x 12 keys)
    (1, 3, 32, 256, 30, 30, 2, True),   # 16 x 16 windows with a mask, 30 channels a head
    (2, 1, 16, 45, 7, 33, 1, False),    # an odd key count (the last pair's second key padding)
    (1, 2, 16, 1, 4, 4, 0, True)])      # one key: every weight 1
def test_amx_attention_is_within_its_bound(b_, heads, n, m, d, dv, nw, bias):
    q, k, v, bias_, mask = _inputs(b_, heads, n, m, d, dv, nw, bias)
    out, ctx = _attend(q, k, v, heads, 0.3, bias_, mask)
    assert ctx.weights is None and np.isfinite(out).all()
    assert _bound_check(q, k, v, heads, 0.3, bias_, mask, out) <= 1.0
    f32, _ = _attend(q, k, v, heads, 0.3, bias_, mask, precision_="fp32")
    assert (out != f32).mean() > 0.5  # the route ran: bfloat16 weights, not float32's


@needs_amx
def test_amx_attention_is_taken_only_where_documented():
    q, k, v, bias, mask = _inputs(2, 2, 32, 32, 8, 8, 2)
    f32, _ = _attend(q, k, v, 2, 0.3, bias, mask, precision_="fp32")
    amx, _ = _attend(q, k, v, 2, 0.3, bias, mask)
    assert not np.array_equal(amx, f32)
    # a training forward (the weights kept for a backward) stays float32, its bits and weights
    with sg.enable_grad():
        kept, ctx = _attend(q, k, v, 2, 0.3, bias, mask, needs=(True,))
    np.testing.assert_array_equal(kept.view(np.uint32), f32.view(np.uint32))
    assert ctx.weights is not None
    # shapes that do not fit (12 queries; more keys than MAX_KEYS; 34 channels a head) and float64:
    # float32's route
    for n, m, d in ((12, 32, 8), (16, A._attention_amx.MAX_KEYS + 1, 8), (32, 32, 34)):
        q, k, v, bias, mask = _inputs(2, 1, n, m, d, 8, 0)
        with sg.no_grad():
            got, _ = _attend(q, k, v, 1, 0.3, bias, mask)
            want, _ = _attend(q, k, v, 1, 0.3, bias, mask, precision_="fp32")
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    q, k, v, bias, mask = (None if a is None else a.astype(np.float64) for a in _inputs(2, 2, 32, 32, 8, 8, 2))
    got, _ = _attend(q, k, v, 2, 0.3, bias, mask)
    want, _ = _attend(q, k, v, 2, 0.3, bias, mask, precision_="fp32")
    np.testing.assert_array_equal(got, want)


@needs_amx
def test_amx_attention_does_not_depend_on_the_threads():
    q, k, v, bias, mask = _inputs(40, 3, 64, 64, 10, 10, 4, seed=3)  # above SERIAL_ELEMS
    before, got = numba.get_num_threads(), []
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        try:
            got.append(_attend(q, k, v, 3, 0.3, bias, mask)[0])
        finally:
            numba.set_num_threads(before)
    np.testing.assert_array_equal(got[0].view(np.uint32), got[1].view(np.uint32))


@needs_amx
def test_a_captured_window_attention_replays_the_eager_bits():
    """The graph of qkv -> window_attention -> proj under bf16 (its linears reading and writing
    through their rows) replays the eager forward bit for bit, the AMX route in both."""
    rng = np.random.default_rng(5)
    C, heads = 40, 4
    qkv, proj = sg.nn.Linear(C, 3 * C), sg.nn.Linear(C, C)
    bias = sg.tensor((rng.standard_normal((heads, 32, 32)) * 0.5).astype(np.float32))
    mask = np.where(rng.uniform(size=(2, 32, 32)) < 0.3, -100.0, 0.0).astype(np.float32)

    class Block(sg.nn.Module):
        def forward(self, x):
            return proj(F.window_attention(qkv(x), heads, 0.25, bias, mask)) + x

    x = sg.tensor(rng.standard_normal((4, 32, C)).astype(np.float32))
    model = Block()
    cap = Capture([model], train=False)
    with sg.no_grad(), sg.autocast("bf16"):
        eager = model(x).data.copy()
        for _ in range(3):
            got = cap(lambda x: {"y": model(x)}, x)["y"].data
    assert cap.graphs and cap.replays >= 1
    np.testing.assert_array_equal(got.view(np.uint32), eager.view(np.uint32))
    with sg.no_grad():
        f32 = model(x).data
    assert not np.array_equal(eager, f32)

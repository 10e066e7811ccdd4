"""attention.py: the relative-position index and the shift mask worked by hand (square and
rectangular windows), window partition / reverse (round trip, gradcheck), and attention_softmax,
window_attention and attention: float64 gradcheck (bias or none, mask or none, M != N query / key
tokens, a per-head Tensor scale), torch parity of values and every gradient in BasicSR's unfused
form (float64 and float32), the packed and the split forms agreeing, thread-count independence,
errors."""
from __future__ import annotations

import importlib

import numba
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.gradcheck import gradcheck

A = importlib.import_module("framework.functional.attention")  # F.attention is the function

TOLERANCE = {np.float64: 1e-10, np.float32: 1e-5}  # relative to the largest |value| of each array


def assert_close(ours, theirs, dtype, what):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype == dtype and ours.shape == theirs.shape, what
    err, bound = np.abs(ours - theirs).max(), TOLERANCE[dtype] * max(np.abs(theirs).max(), 1e-30)
    assert err <= bound, f"{what}: max |ours - torch| {err:.3g} > {bound:.3g}"


def T(a, grad=True):
    return sg.tensor(a, requires_grad=grad)


# -- windows ---------------------------------------------------------------------------------------
def test_relative_position_index_by_hand():
    """A 2x2 window: tokens (0,0), (0,1), (1,0), (1,1); row (dy + 1) * 3 + (dx + 1) of a 3x3 table."""
    want = [[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]
    np.testing.assert_array_equal(A.relative_position_index(2, 2), want)
    assert A.relative_position_index(2, 3).max() == 3 * 5 - 1  # wh x ww: (2*2-1) x (2*3-1) rows


def test_shift_mask_by_hand():
    """4x4 tokens, window 2, shift 1: rows {0,1}, {2}, {3} (and columns alike) are the regions.
    Window 0 (top left) is one region; window 1 (top right) splits by column; window 3 (bottom
    right) holds four regions: only a token with itself is unmasked."""
    m = A.shift_mask(4, 4, 2, 1)
    assert m.shape == (4, 4, 4) and m.dtype == np.float32 and not m.flags.writeable
    np.testing.assert_array_equal(m[0], 0)
    col = np.array([0, 1, 0, 1])  # tokens (0,2), (0,3), (1,2), (1,3): their column region
    np.testing.assert_array_equal(m[1], np.where(col[:, None] == col[None, :], 0, -100))
    np.testing.assert_array_equal(m[3], np.where(np.eye(4, dtype=bool), 0, -100))
    assert A.shift_mask(4, 4, 2, 1) is m  # cached: the shifted blocks share it


def test_shift_mask_of_a_rectangular_window_by_hand():
    """A 2x8 grid, window (2, 4) shifted by (1, 2): row regions {0}, {1}, column regions {0..3},
    {4, 5}, {6, 7}. Window 0 splits by row only; window 1 (columns 4..7) by row and by c < 6."""
    m = A.shift_mask(2, 8, (2, 4), (1, 2), np.float64)
    assert m.shape == (2, 8, 8) and m.dtype == np.float64
    np.testing.assert_array_equal(m[0], np.where(np.repeat([0, 1], 4)[:, None] == np.repeat(
        [0, 1], 4)[None, :], 0, -100))  # window 0: one column region, two row regions
    region = np.array([0, 0, 1, 1, 2, 2, 3, 3])  # row-major tokens of window 1: (row, c < 6)
    np.testing.assert_array_equal(m[1], np.where(region[:, None] == region[None, :], 0, -100))


@pytest.mark.parametrize("shape,ws", [((2, 4, 6, 3), 2), ((1, 3, 3, 1), 3), ((1, 1, 1, 2), 1),
                                      ((2, 4, 6, 2), (2, 3)), ((1, 2, 8, 1), (1, 4))])
def test_window_partition_round_trip_and_gradcheck(shape, ws):
    x = sg.tensor(np.random.default_rng(0).standard_normal(shape), requires_grad=True)
    b, h, w, c = shape
    wh, ww = (ws, ws) if isinstance(ws, int) else ws
    win = F.window_partition(x, ws)
    assert win.shape == (b * (h // wh) * (w // ww), wh * ww, c)
    # window 0 holds the top-left wh x ww tokens, row-major; the last window the bottom-right ones
    np.testing.assert_array_equal(win.data[0], x.data[0, :wh, :ww].reshape(-1, c))
    np.testing.assert_array_equal(win.data[-1], x.data[-1, h - wh:, w - ww:].reshape(-1, c))
    if w // ww > 1:  # window 1 is the next one to the right
        np.testing.assert_array_equal(win.data[1], x.data[0, :wh, ww:2 * ww].reshape(-1, c))
    np.testing.assert_array_equal(F.window_reverse(win, ws, h, w).data, x.data)
    assert gradcheck(lambda t: F.window_partition(t, ws) * 1.5, (x,))
    assert gradcheck(lambda t: F.window_reverse(t, ws, h, w) * 1.5, (T(win.data),))


def test_window_errors():
    with pytest.raises(ValueError, match=r"window_partition: expected \(B, H, W, C\) with H a "
                                         r"multiple of 2 and W of 3, got \(1, 2, 4, 1\)"):
        F.window_partition(sg.tensor(np.zeros((1, 2, 4, 1))), (2, 3))
    with pytest.raises(ValueError, match="window_partition: expected"):
        F.window_partition(sg.tensor(np.zeros((1, 2, 2))), 1)
    with pytest.raises(ValueError, match=r"window_reverse: \(3, 4, 1\) are not windows of 2x2"):
        F.window_reverse(sg.tensor(np.zeros((3, 4, 1))), 2, 4, 4)
    with pytest.raises(ValueError, match="window_partition: window_size"):
        F.window_partition(sg.tensor(np.zeros((1, 2, 2, 1))), 0)
    with pytest.raises(ValueError, match=r"shift_mask: the shift \(2, 2\) must be smaller"):
        A.shift_mask(4, 4, 2, 2)


# -- attention_softmax -----------------------------------------------------------------------------
def _softmax_inputs(b_, heads, n, m, nw, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    s = T(rng.standard_normal((b_, heads, n, m)).astype(dtype))
    bias = T((rng.standard_normal((heads, n, m)) * 0.5).astype(dtype))
    mask = np.where(rng.uniform(size=(nw, n, m)) < 0.3, -100.0, 0.0).astype(dtype) if nw else None
    return s, bias, mask


@pytest.mark.parametrize("b_,heads,n,m,nw", [(4, 2, 3, 3, 2), (1, 1, 1, 1, 1), (6, 3, 5, 5, 0),
                                             (3, 1, 4, 4, 3), (2, 2, 3, 5, 2)])
def test_attention_softmax_gradcheck(b_, heads, n, m, nw):
    s, bias, mask = _softmax_inputs(b_, heads, n, m, nw)
    w = sg.tensor(np.random.default_rng(9).standard_normal((b_, heads, n, m)))
    assert gradcheck(lambda a, b: F.attention_softmax(a, 0.7, b, mask) * w, (s, bias))
    assert gradcheck(lambda a: F.attention_softmax(a, 0.7, None, mask) * w, (s,))


def test_attention_softmax_per_head_scale_gradcheck():
    s, bias, mask = _softmax_inputs(4, 2, 3, 3, 2)
    scale = T(np.array([0.7, -1.3]))
    w = sg.tensor(np.random.default_rng(9).standard_normal(s.shape))
    assert gradcheck(lambda a, b, c: F.attention_softmax(a, c, b, mask) * w, (s, bias, scale))


def _torch_scores(torch, s, scale, bias, mask):
    """BasicSR's unfused form: scale s + bias + mask per window, (B, nH, N, M)."""
    b_, heads, n, m = s.shape
    t = s * scale
    if bias is not None:
        t = t + bias.unsqueeze(0)
    if mask is not None:
        nw = mask.shape[0]
        t = (t.view(b_ // nw, nw, heads, n, m) + torch.from_numpy(mask).unsqueeze(1)).view(b_, heads, n, m)
    return t


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("nw,m", [(0, 16), (2, 16), (2, 7)])
def test_attention_softmax_matches_torch(nw, m, dtype):
    """softmax((q scale) k^T + bias + mask) as BasicSR writes it; float32 keeps float32."""
    torch = pytest.importorskip("torch")
    b_, heads, n = 4, 3, 16
    s, bias, mask = _softmax_inputs(b_, heads, n, m, nw, seed=1, dtype=dtype)
    g = np.random.default_rng(2).standard_normal((b_, heads, n, m)).astype(dtype)
    y = F.attention_softmax(s, 0.3, bias, mask)
    y.backward(g)
    ts, tb = (torch.from_numpy(a.data.copy()).requires_grad_(True) for a in (s, bias))
    ty = torch.softmax(_torch_scores(torch, ts, 0.3, tb, mask), -1)
    ty.backward(torch.from_numpy(g))
    for ours, theirs, what in ((y.data, ty.detach().numpy(), "output"), (s.grad.data, ts.grad.numpy(), "ds"),
                               (bias.grad.data, tb.grad.numpy(), "dbias")):
        assert_close(ours, theirs, dtype, what)


def test_attention_softmax_errors():
    s, bias, _ = _softmax_inputs(2, 2, 3, 3, 0)
    with pytest.raises(ValueError, match=r"attention_softmax: bias \(2, 3, 4\) is not \(2, 3, 3\)"):
        F.attention_softmax(s, 1.0, sg.tensor(np.zeros((2, 3, 4))))
    with pytest.raises(ValueError, match=r"attention_softmax: mask \(3, 3, 3\) is not \(nW, 3, 3\)"):
        F.attention_softmax(s, 1.0, bias, np.zeros((3, 3, 3)))
    with pytest.raises(TypeError, match="bias dtype float32 differs"):
        F.attention_softmax(s, 1.0, sg.tensor(np.zeros((2, 3, 3), np.float32)))
    with pytest.raises(TypeError, match="mask must be a numpy array"):
        F.attention_softmax(s, 1.0, bias, sg.tensor(np.zeros((1, 3, 3))))
    with pytest.raises(ValueError, match=r"a Tensor scale has one factor per head, shape \(2,\)"):
        F.attention_softmax(s, sg.tensor(np.ones(3)))
    with pytest.raises(ValueError, match=r"scores must be \(B, nH, N, M\)"):
        F.attention_softmax(sg.tensor(np.zeros((2, 3, 3))), 1.0)


# -- the fused attention ---------------------------------------------------------------------------
def _attention_inputs(b_, heads, n, m, d, dv, nw, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    q, k = (T(rng.standard_normal((b_, t, heads * d)).astype(dtype)) for t in (n, m))
    v = T(rng.standard_normal((b_, m, heads * dv)).astype(dtype))
    bias = T((rng.standard_normal((heads, n, m)) * 0.5).astype(dtype))
    mask = np.where(rng.uniform(size=(nw, n, m)) < 0.3, -100.0, 0.0).astype(dtype) if nw else None
    return q, k, v, bias, mask


def _torch_attention(torch, q, k, v, heads, scale, bias, mask):
    """BasicSR's WindowAttention between its linears, q, k, v given apart; scale a number or a
    (heads,) tensor."""
    b_, n, c = q.shape
    m, cv = k.shape[1], v.shape[2]
    qh, kh = (t.reshape(b_, -1, heads, c // heads).transpose(1, 2) for t in (q, k))
    vh = v.reshape(b_, m, heads, cv // heads).transpose(1, 2)
    if torch.is_tensor(scale):
        scale = scale.view(1, heads, 1, 1)
    attn = _torch_scores(torch, qh @ kh.transpose(-2, -1), scale, bias, mask)
    return (torch.softmax(attn, -1) @ vh).transpose(1, 2).reshape(b_, n, cv)


@pytest.mark.parametrize("b_,heads,n,m,d,dv,nw", [(4, 2, 3, 3, 2, 2, 2), (1, 1, 1, 1, 1, 1, 1),
                                                  (3, 3, 5, 5, 1, 1, 0), (2, 1, 4, 4, 3, 3, 2),
                                                  (2, 2, 3, 5, 2, 3, 1)])
def test_attention_gradcheck(b_, heads, n, m, d, dv, nw):
    q, k, v, bias, mask = _attention_inputs(b_, heads, n, m, d, dv, nw)
    w = sg.tensor(np.random.default_rng(9).standard_normal((b_, n, heads * dv)))
    assert gradcheck(lambda *a: F.attention(*a[:3], heads, 0.7, a[3], mask) * w, (q, k, v, bias))
    assert gradcheck(lambda *a: F.attention(*a, heads, 0.7, None, mask) * w, (q, k, v))
    if n == m and d == dv:
        qkv = T(np.concatenate([q.data, k.data, v.data], axis=2))
        assert gradcheck(lambda a, b: F.window_attention(a, heads, 0.7, b, mask) * w, (qkv, bias))


def test_per_head_scale_gradcheck():
    q, k, v, bias, mask = _attention_inputs(2, 2, 3, 4, 2, 1, 2)
    scale = T(np.array([0.7, 1.9]))
    w = sg.tensor(np.random.default_rng(9).standard_normal((2, 3, 2)))
    assert gradcheck(lambda *a: F.attention(*a[:3], 2, a[4], a[3], mask) * w, (q, k, v, bias, scale))
    qkv = T(np.random.default_rng(3).standard_normal((2, 3, 12)))
    w = sg.tensor(np.random.default_rng(9).standard_normal((2, 3, 4)))
    assert gradcheck(lambda a, c: F.window_attention(a, 2, c, None, mask[:, :, :3]) * w, (qkv, scale))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("b_,heads,n,m,d,dv,nw", [(4, 3, 16, 16, 5, 5, 0), (18, 2, 9, 9, 3, 3, 2),
                                                  (10, 1, 1, 1, 2, 2, 5), (9, 2, 4, 9, 3, 2, 3)])
def test_attention_matches_torch(b_, heads, n, m, d, dv, nw, dtype):
    """Values, dq, dk, dv and dbias against BasicSR's unfused form; b_ > 8 spans several of the
    backward's chunks (the bias gradient's partials). Where N = M and d = dv also the packed form,
    with its one gradient for qkv."""
    torch = pytest.importorskip("torch")
    q, k, v, bias, mask = _attention_inputs(b_, heads, n, m, d, dv, nw, dtype, seed=1)
    g = np.random.default_rng(2).standard_normal((b_, n, heads * dv)).astype(dtype)
    y = F.attention(q, k, v, heads, 0.3, bias, mask)
    y.backward(g)
    tq, tk, tv, tb = (torch.from_numpy(a.data.copy()).requires_grad_(True) for a in (q, k, v, bias))
    ty = _torch_attention(torch, tq, tk, tv, heads, 0.3, tb, mask)
    ty.backward(torch.from_numpy(g))
    assert y.dtype == q.grad.dtype == bias.grad.dtype == dtype
    for ours, theirs, what in ((y.data, ty.detach().numpy(), "output"), (q.grad.data, tq.grad.numpy(), "dq"),
                               (k.grad.data, tk.grad.numpy(), "dk"), (v.grad.data, tv.grad.numpy(), "dv"),
                               (bias.grad.data, tb.grad.numpy(), "dbias")):
        assert_close(ours, theirs, dtype, what)
    if n == m and d == dv:  # the packed form: the same kernel on views, the same numbers
        qkv = T(np.concatenate([q.data, k.data, v.data], axis=2))
        b2 = T(bias.data)
        y2 = F.window_attention(qkv, heads, 0.3, b2, mask)
        y2.backward(g)
        np.testing.assert_array_equal(y2.data, y.data)
        np.testing.assert_array_equal(qkv.grad.data, np.concatenate(
            [q.grad.data, k.grad.data, v.grad.data], axis=2))
        np.testing.assert_array_equal(b2.grad.data, bias.grad.data)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_per_head_scale_matches_torch(dtype):
    """A learnt per-head scale (Swin2SR's logit scale, DAT's temperature): values and its gradient."""
    torch = pytest.importorskip("torch")
    q, k, v, bias, mask = _attention_inputs(4, 2, 6, 6, 3, 3, 2, dtype, seed=4)
    scale = T(np.array([0.4, 2.5], dtype))
    g = np.random.default_rng(2).standard_normal((4, 6, 6)).astype(dtype)
    y = F.attention(q, k, v, 2, scale, bias, mask)
    y.backward(g)
    tq, tk, tv, tb, ts = (torch.from_numpy(a.data.copy()).requires_grad_(True)
                          for a in (q, k, v, bias, scale))
    ty = _torch_attention(torch, tq, tk, tv, 2, ts, tb, mask)
    ty.backward(torch.from_numpy(g))
    for ours, theirs, what in ((y.data, ty.detach().numpy(), "output"), (q.grad.data, tq.grad.numpy(), "dq"),
                               (scale.grad.data, ts.grad.numpy(), "dscale")):
        assert_close(ours, theirs, dtype, what)


@numba.njit(cache=True)
def _vexp_each(t, out):
    for i in range(t.size):
        out.flat[i] = A.vexp(t.flat[i])  # the kernel's own exp (exp32 for float32)


def _attention_chains(q, k, v, heads, scale, bias, mask):
    """The fused forward's documented order in numpy (float32 products rounded, then added, which
    numpy's elementwise arithmetic gives exactly): each score a chain over the head's channels from
    0, times the scale, plus the bias, plus the mask; the row's max, the kernel's exp, the sum in
    float64 in 16 lanes (rows.row_sum16's: lane l the keys j = l mod 16 in order, then the upper
    half of the lanes onto the lower until one is left), the row times its inverse in q's dtype;
    each output a chain over the keys from 0."""
    b_, n, _ = q.shape
    m, d, dv = k.shape[1], q.shape[2] // heads, v.shape[2] // heads
    out, weights = np.empty((b_, n, heads * dv), q.dtype), np.empty((b_, heads, n, m), q.dtype)
    for b in range(b_):
        for h in range(heads):
            qh, kh, vh = q[b, :, h * d:(h + 1) * d], k[b, :, h * d:(h + 1) * d], v[b, :, h * dv:(h + 1) * dv]
            s = np.zeros((n, m), q.dtype)
            for c in range(d):
                s = s + qh[:, c:c + 1] * kh[None, :, c]
            s = q.dtype.type(scale) * s + bias[h]
            if mask is not None:
                s = s + mask[b % mask.shape[0]]
            e = np.empty_like(s)
            _vexp_each(s - s.max(axis=1, keepdims=True), e)
            e64 = e.astype(np.float64)  # lane l: keys l, l + 16, ... in order; then the lanes' tree
            lanes = np.stack([np.cumsum(e64[:, r::16], axis=1)[:, -1] if m > r else np.zeros(n)
                              for r in range(16)], axis=1)
            while lanes.shape[1] > 1:
                lanes = lanes[:, :lanes.shape[1] // 2] + lanes[:, lanes.shape[1] // 2:]
            p = e * (1.0 / lanes[:, 0]).astype(q.dtype)[:, None]
            o = np.zeros((n, dv), q.dtype)
            for j in range(m):
                o = o + p[:, j:j + 1] * vh[j][None, :]
            out[b, :, h * dv:(h + 1) * dv], weights[b, h] = o, p
    return out, weights


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("b_,heads,n,m,d,dv,nw", [(3, 2, 70, 70, 10, 20, 3), (2, 1, 9, 100, 16, 33, 0),
                                                  (2, 6, 64, 64, 10, 10, 2), (9, 2, 16, 16, 4, 4, 3),
                                                  (2, 2, 12, 37, 6, 6, 2)])
def test_the_fused_forward_is_its_chains_bit_for_bit(b_, heads, n, m, d, dv, nw, dtype):
    # register blocks of 64 keys (a partial last vector, two blocks; up to 64 keys the softmax on
    # the registers, else on the stored row), outputs over one to three vectors of channels and
    # eight query rows at a time (n not a multiple of 8): each value the documented chain's bits
    # (float64: the sums' order shows in the bits)
    q, k, v, bias, mask = _attention_inputs(b_, heads, n, m, d, dv, nw, dtype, seed=5)
    want, weights = _attention_chains(q.data, k.data, v.data, heads, 0.3, bias.data, mask)
    for needs in ((True,), (False,)):  # weights kept for a backward, or only in the threads' scratch
        ctx = type("Ctx", (), {"needs_input_grad": needs})()
        out = A._attend(ctx, q.data, k.data, v.data, (0, 0, 0, d, dv), bias.data, heads, 0.3, mask)
        np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))
        if needs[0]:
            np.testing.assert_array_equal(ctx.weights.view(np.uint32), weights.view(np.uint32))
        else:
            assert ctx.weights is None


def test_the_bias_gradient_does_not_depend_on_the_thread_count():
    q, k, v, bias, mask = _attention_inputs(40, 2, 16, 16, 8, 8, 4, seed=5)  # above SERIAL_ELEMS
    g = np.random.default_rng(2).standard_normal((40, 16, 16))
    before, got = numba.get_num_threads(), []
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        try:
            bias.grad = q.grad = None
            F.attention(q, k, v, 2, 0.3, bias, mask).backward(g)
            got.append((bias.grad.data, q.grad.data))
        finally:
            numba.set_num_threads(before)
    np.testing.assert_array_equal(got[0][0], got[1][0])
    np.testing.assert_array_equal(got[0][1], got[1][1])


def test_attention_errors():
    q, k, v, bias, _ = _attention_inputs(2, 2, 3, 3, 2, 2, 0)
    qkv = T(np.zeros((2, 3, 12)))
    with pytest.raises(ValueError, match=r"window_attention: bias \(2, 3, 4\) is not \(2, 3, 3\)"):
        F.window_attention(qkv, 2, 1.0, sg.tensor(np.zeros((2, 3, 4))))
    with pytest.raises(ValueError, match=r"each of q, k, v has 4 channels, not a multiple of 3 heads"):
        F.window_attention(qkv, 3, 1.0)
    with pytest.raises(ValueError, match=r"window_attention: mask \(3, 3, 3\) is not \(nW, 3, 3\)"):
        F.window_attention(qkv, 2, 1.0, bias, np.zeros((3, 3, 3)))
    with pytest.raises(TypeError, match="bias dtype float32 differs"):
        F.window_attention(qkv, 2, 1.0, sg.tensor(np.zeros((2, 3, 3), np.float32)))
    with pytest.raises(ValueError, match=r"qkv must be \(B, N, 3C\) \(non-empty\), got \(2, 3, 10\)"):
        F.window_attention(sg.tensor(np.zeros((2, 3, 10))), 2)
    with pytest.raises(ValueError, match=r"attention: q \(2, 3, 4\), k \(2, 4, 4\), v \(2, 3, 4\) are "
                                         r"not"):
        F.attention(q, T(np.zeros((2, 4, 4))), v, 2)
    with pytest.raises(ValueError, match="attention: v has 3 channels, not a multiple of 2 heads"):
        F.attention(q, k, T(np.zeros((2, 3, 3))), 2)
    with pytest.raises(TypeError, match="q, k, v dtypes differ"):
        F.attention(q, k, T(np.zeros((2, 3, 4), np.float32)), 2)
    with pytest.raises(ValueError, match="attention: heads"):
        F.attention(q, k, v, 0)
    with pytest.raises(ValueError, match=r"non-empty"):
        F.attention(T(np.zeros((0, 3, 4))), T(np.zeros((0, 3, 4))), T(np.zeros((0, 3, 4))), 2)

"""bfloat16 under framework.autocast('bf16'): rounding, the kernels' sums, the bounds of docs/numerics.md.

The bound (docs/numerics.md, "bfloat16"): operands rounded to bfloat16 (relative error <= u_b = 2^-8
each) multiply exactly in float32 (8 x 8 significant bits), and any float32 summation of n terms is
within gamma_n = n u / (1 - n u), u = 2^-24, of their exact sum, times sum |terms|. So against the
float64 result of the ROUNDED operands |y - ref| <= gamma_n sum|t| (which float32 operands would
break: their rounding error is up to 2^-8), and against the float64 result of the original operands
|y - ref| <= (2 u_b + u_b^2 + gamma_n (1 + u_b)^2) sum|x w|.
"""
import numba
import numpy as np
import pytest
import torch

import framework as sg
import framework.functional as F
from framework import precision
from framework.functional import _direct_amx, _direct_amx_grad, _direct_bf16, conv

U, UB = 2.0 ** -24, 2.0 ** -8
HAS_BF16 = precision.support().avx512_bf16
HAS_AMX = precision.support().amx_bf16
needs_bf16 = pytest.mark.skipif(not HAS_BF16, reason=f"bfloat16 kernels: {precision.support().reason}")
needs_amx = pytest.mark.skipif(not HAS_AMX, reason="AMX-BF16: this CPU or OS has no AMX tiles")


def gamma(n):
    return n * U / (1 - n * U)


def bf(a):
    """The float64 values of a's bfloat16 rounding."""
    return torch.from_numpy(_direct_bf16.widen(_direct_bf16.round_bits(np.asarray(a, np.float32))).astype(np.float64))


def test_round_bits_is_torchs_bfloat16():
    # ties both ways, the largest finite, overflow to inf, denormals, signed zeros, inf and NaN
    rng = np.random.default_rng(0)
    special = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, 3.3895314e38, 3.4028235e38,
                        1e-40, -1e-40, 0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan], np.float32)
    a = np.concatenate([special, rng.standard_normal(4000).astype(np.float32) * 10.0 ** rng.integers(-40, 38, 4000)])
    a = a.astype(np.float32)
    theirs = torch.from_numpy(a).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    ours, nan = _direct_bf16.round_bits(a), np.isnan(a)
    np.testing.assert_array_equal(ours[~nan], theirs[~nan])
    assert (ours[nan] == 0x7FC0).all()  # torch's NaN bits depend on its kernel (0x7FC0 or 0xFFFF)
    # the kernels' _rne (32-bit steps, the NaN test a select), also on NaNs with payloads and signs
    payloads = np.array([0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F7FFFFF, 0xFF7FFFFF], np.uint32)
    u = np.concatenate([a.view(np.uint32), payloads])
    np.testing.assert_array_equal(_rne_all(u), _direct_bf16.round_bits(u.view(np.float32)))


@numba.njit
def _rne_all(u):
    out = np.empty(u.shape[0], np.uint16)
    for i in range(u.shape[0]):
        out[i] = np.uint16(_direct_bf16._rne(u[i]))
    return out


def test_autocast_refuses_without_instructions(monkeypatch):
    monkeypatch.setattr(precision, "support", lambda: precision.Support(False, False, "this CPU has no AVX512-BF16"))
    with pytest.raises(precision.PrecisionError, match="autocast.*this CPU has no AVX512-BF16"):
        with sg.autocast("bf16"):
            pass
    with sg.autocast("fp32"), sg.autocast("bf16", enabled=False):  # fp32 asks for nothing
        assert precision.current() == "fp32"


def test_support_sees_the_compile_target(monkeypatch):
    from framework import _simd
    monkeypatch.setattr(_simd, "target", lambda: ("haswell", "+avx2,+fma,-avx512bf16"))
    precision.support.cache_clear()
    try:
        s = precision.support()
        assert not s.avx512_bf16 and (not precision._host_features().get("avx512bf16") or "haswell" in s.reason)
    finally:
        precision.support.cache_clear()


def test_precision_names():
    assert precision.normalise("bfloat16") == "bf16" and precision.normalise("float32") == "fp32"
    with sg.autocast("cpu", dtype=torch.float32):  # torch's spelling
        assert precision.current() == "fp32"
    with pytest.raises(precision.PrecisionError, match="float16"):
        with sg.autocast("cpu", dtype=torch.float16):
            pass
    with pytest.raises(precision.PrecisionError, match="fp16"):
        precision.normalise("fp16", "train.precision")


def _conv_case(rng, N, C, O, H, W, k):
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((O, C, k, k)) * 0.2).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    r = rng.standard_normal((N, O, H, W)).astype(np.float32)  # dL/dy of L = sum(y r)
    return x, w, b, r


def _bf16_conv(x, w, b, r, p):
    xt, wt, bt = (sg.tensor(a, requires_grad=True) for a in (x, w, b))
    with sg.autocast("bf16"):
        y = F.conv2d(xt, wt, bt, padding=p)
    (y * sg.tensor(r)).sum().backward()  # outside autocast: backward in the forward's precision
    return y.numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()


@needs_bf16
@pytest.mark.parametrize("C, O", [(12, 13), (32, 40)])  # AVX512-BF16 (< 16 channels), AMX where present
def test_conv2d_bf16_within_the_bound(C, O):
    rng = np.random.default_rng(C)
    N, H, W, k, p = 2, 6, 9, 3, 1
    x, w, b, r = _conv_case(rng, N, C, O, H, W, k)
    y, dx, dw, db = _bf16_conv(x, w, b, r, p)
    conv, T = torch.nn.functional.conv2d, torch.from_numpy
    X, Wt, R, B = bf(x), bf(w), bf(r), T(b.astype(np.float64))
    checks = [  # (value, float64 of the rounded operands, sum of |terms|, terms per output)
        (y, conv(X, Wt, B, padding=p), conv(X.abs(), Wt.abs(), B.abs(), padding=p), C * k * k + 1),
        (dx, torch.nn.grad.conv2d_input(x.shape, Wt, R, padding=p),
         torch.nn.grad.conv2d_input(x.shape, Wt.abs(), R.abs(), padding=p), O * k * k),
        (dw, torch.nn.grad.conv2d_weight(X, w.shape, R, padding=p),
         torch.nn.grad.conv2d_weight(X.abs(), w.shape, R.abs(), padding=p), N * H * W)]
    for value, ref, size, n in checks:
        err = np.abs(value - ref.numpy())
        assert (err <= gamma(n) * size.numpy() + 1e-30).all(), (err / size.numpy()).max() / gamma(n)
    # against the unrounded operands: the bfloat16 rounding dominates, and stays within its bound
    exact = conv(T(x.astype(np.float64)), T(w.astype(np.float64)), B, padding=p).numpy()
    size = conv(T(np.abs(x).astype(np.float64)), T(np.abs(w).astype(np.float64)), B.abs(), padding=p).numpy()
    bound = (2 * UB + UB ** 2 + gamma(C * k * k + 1) * (1 + UB) ** 2) * size
    assert (np.abs(y - exact) <= bound).all()
    assert (np.abs(y - exact) / size).max() > 30 * gamma(C * k * k + 1)  # the operands were rounded
    # the bias gradient is not rounded: a float32 sum (float64 on AMX's fused backward)
    exact, size = r.astype(np.float64).sum(axis=(0, 2, 3)), np.abs(r).astype(np.float64).sum(axis=(0, 2, 3))
    assert (np.abs(db - exact) <= gamma(N * H * W) * size).all()


@needs_bf16
def test_avx512_bf16_forward_is_its_chain_bit_for_bit():
    # one block (C kh kw <= BLOCK_TERMS): each output is bias, then per channel pair and tap
    # (acc + x_odd w_odd) + x_even w_even, each add rounded to float32: numpy's float32 adds, exactly
    rng = np.random.default_rng(3)
    N, C, O, H, W, k = 1, 8, 12, 5, 7, 3
    x, w, b, _ = _conv_case(rng, N, C, O, H, W, k)
    y = _direct_bf16.correlate(x, w, (H, W), (1, 1), b, None, [(0, N, 0, H)])
    xb = np.pad(bf(x).numpy().astype(np.float32), ((0, 0), (0, 0), (1, 1), (1, 1)))
    wb = bf(w).numpy().astype(np.float32)
    acc = np.broadcast_to(b[None, :, None, None], y.shape).astype(np.float32)
    for c in range(0, C, 2):
        for i in range(k):
            for j in range(k):
                for cc in (c + 1, c):
                    acc = acc + xb[:, None, cc, i:i + H, j:j + W] * wb[None, :, cc, i, j, None, None]
    np.testing.assert_array_equal(y, acc)


@needs_amx
def test_amx_and_avx512_bf16_routes_agree_within_the_bound():
    # the same rounded operands, sums in different orders: each within gamma_n sum|t| of the exact
    # sum, so within twice that of each other (both relu-fused: the activation is the same code)
    rng = np.random.default_rng(5)
    N, C, O, H, W, k = 2, 32, 24, 7, 10, 3
    x, w, b, r = _conv_case(rng, N, C, O, H, W, k)
    tiles = [(0, 1, 0, 4), (0, 1, 4, H), (1, 2, 0, H)]
    a = _direct_amx.correlate(x, w, (H, W), (1, 1), b, 0.1, 2)
    v = _direct_bf16.correlate(x, w, (H, W), (1, 1), b, 0.1, tiles)
    size = torch.nn.functional.conv2d(bf(x).abs(), bf(w).abs(), torch.from_numpy(np.abs(b).astype(np.float64)),
                                      padding=1).numpy()
    assert (np.abs(a - v) <= 2 * gamma(C * k * k + 1) * size).all()
    ga = _direct_amx.weight_grad(x, r, (1, 1), (k, k))
    gv = _direct_bf16.weight_grad(x, r, (1, 1), (k, k), 2)
    size = torch.nn.grad.conv2d_weight(bf(x).abs(), w.shape, bf(r).abs(), padding=1).numpy()
    assert (np.abs(ga - gv) <= 2 * gamma(N * H * W) * size).all()


def _relu_conv(x, w, b, r, p, slope, frozen=False):
    """conv2d with a fused activation under bf16, L = sum(y r): (dx, dW or None, db)."""
    xt, bt = sg.tensor(x, requires_grad=True), sg.tensor(b, requires_grad=True)
    wt = sg.tensor(w, requires_grad=not frozen)
    with sg.autocast("bf16"):
        y = F.conv2d(xt, wt, bt, padding=p, relu_slope=slope)
    (y * sg.tensor(r[:, :, :y.shape[2], :y.shape[3]])).sum().backward()
    return xt.grad.numpy(), None if frozen else wt.grad.numpy(), bt.grad.numpy()


@needs_amx
@pytest.mark.parametrize("N, C, O, H, W, k, p, slope", [
    (2, 64, 64, 12, 12, 3, 1, 0),  # EDSR's body: relu fused
    (3, 48, 16, 9, 11, 3, 1, 0.2),  # RRDBNet's dense conv: 16 outputs, leaky; odd width (pairs straddle rows)
    (1, 32, 40, 7, 13, 5, 2, None),  # no activation, 5 x 5
    (2, 16, 96, 10, 9, 3, 0, 0),  # no padding: the flipped correlation pads 2
])
def test_fused_amx_backward_is_the_unfused_bits(monkeypatch, N, C, O, H, W, k, p, slope):
    # one pass over the gradient (_direct_amx_grad.py) lays out what the unfused route's rectify_grad and
    # two layouts give: the same tile products, the same bits; the bias sum float64 (within the bound)
    rng = np.random.default_rng(N * C + O)
    x, w, b, r = _conv_case(rng, N, C, O, H, W, k)
    calls = []
    fused = _direct_amx_grad.backward
    monkeypatch.setattr(_direct_amx_grad, "backward", lambda *a: calls.append(1) or fused(*a))
    dx, dw, db = _relu_conv(x, w, b, r, p, slope)
    assert calls == [1]
    monkeypatch.setattr(conv, "_fused_backward", lambda *a: False)
    ux, uw, ub = _relu_conv(x, w, b, r, p, slope)
    np.testing.assert_array_equal(dx, ux)
    np.testing.assert_array_equal(dw, uw)
    with sg.autocast("bf16"):
        y = F.conv2d(sg.tensor(x), sg.tensor(w), sg.tensor(b), padding=p).numpy()
    rr = r[:, :, :y.shape[2], :y.shape[3]].astype(np.float64)
    g = rr if slope is None else np.where(y > 0, rr, slope * rr)  # the activation's derivative
    exact, size = g.sum(axis=(0, 2, 3)), np.abs(g).sum(axis=(0, 2, 3))
    assert (np.abs(db - exact) <= 4 * U * size).all()  # float64 sums: one float32 rounding
    assert (np.abs(ub - exact) <= gamma(N * H * W) * size).all()


@pytest.mark.parametrize("O, C, k", [(32, 32, 3), (16, 96, 3), (3, 64, 3), (40, 20, 5), (7, 50, 1)])
def test_pack_weight_is_the_rounded_kernel_in_tile_rows(O, C, k):
    # the one-pass kernel against numpy's rounding and transposes: plain, at a Cat's channel
    # positions, and the flipped kernel made from w (conv._flip's, the input gradient's)
    rng = np.random.default_rng(O + C)
    w = rng.standard_normal((O, C, k, k)).astype(np.float32)
    w.flat[:4] = [np.nan, np.inf, -0.0, 3.4e38]

    def reference(w, positions=None, channels=None):
        o, c, kh, kw = w.shape
        channels = -(-c // 32) * 32 if channels is None else channels
        bits = np.zeros((_direct_amx.out_blocks(o), channels, kh, kw), np.uint16)
        bits[:o, np.arange(c) if positions is None else positions] = _direct_bf16.round_bits(w)
        return bits.reshape(bits.shape[0], -1, 32, kh * kw).transpose(3, 1, 0, 2)

    np.testing.assert_array_equal(_direct_amx.pack_weight(w), reference(w))
    np.testing.assert_array_equal(_direct_amx.pack_weight(w, flip=True), reference(conv._flip(w, 1, C)))
    positions = rng.permutation(128)[:C]
    np.testing.assert_array_equal(_direct_amx.pack_weight(w, positions, 128), reference(w, positions, 128))
    with pytest.raises(ValueError, match="positions"):
        _direct_amx.pack_weight(w, positions + 128, 128)


def test_tile_operands_lie_on_cache_lines(monkeypatch):
    # a tile row that crosses a 64-byte line loads ~7x slower (docs/benchmarks.md): every array the
    # kernels read whole tile rows from starts on a line, whatever the allocator returned
    from framework.capture import _planes
    from framework.functional import _gemm_bf16

    empty = np.empty

    def shifted(shape, dtype=float):  # an allocator that never returns a 64-byte boundary
        n, skip = int(np.prod(shape)), 64 // np.dtype(dtype).itemsize
        a = empty(n + 2 * skip, dtype)
        a = a[(-a.ctypes.data % 64) // a.itemsize + 16 // a.itemsize:]
        return a[:n].reshape(shape)
    monkeypatch.setattr(np, "empty", shifted)
    w = np.ones((40, 20, 3, 3), np.float32)
    arrays = [_direct_amx.pack_weight(w), _direct_amx.pack_weight(w, flip=True),
              _direct_amx._input_planes(np.ones((2, 20, 5, 5), np.float32), 7, 7, 32),
              _planes._Arena((2, 16, 100), 10).get()]
    assert [a.ctypes.data % 64 for a in arrays] == [0, 0, 0, 0]
    assert not arrays[3].any()  # an arena's planes start zero (their borders are never written)
    seen = []
    monkeypatch.setattr(_gemm_bf16, "_gemm_batched", lambda a, b, c, *rest: seen.extend([a, b, c]))
    if _gemm_bf16.available():
        _gemm_bf16.matmul(np.ones((40, 50), np.float32), np.ones((50, 60), np.float32))
        assert [a.ctypes.data % 64 for a in seen[:2]] == [0, 0]  # A's rounded rows, B; C: vector stores


@pytest.mark.parametrize("C, H, W, top, left, Wp, rows", [
    (5, 4, 6, 1, 1, 8, 7),  # a 3x3 conv's padding; an odd channel count (the last pair's high half 0)
    (32, 3, 5, 2, 0, 9, 8),  # rows and columns of padding on one side only, spare rows at the end
    (3, 6, 4, -2, 1, 6, 4),  # rows cropped off the top and the bottom (a band of the AVX512-BF16 route)
    (4, 2, 3, 5, 1, 5, 4),  # every row of the image below the planes: all padding
])
def test_pair_planes_write_every_element_once_over_garbage(C, H, W, top, left, Wp, rows):
    # each element of the planes is written once (the padding without zeroing the whole plane
    # first): the numpy reference of the rounded pairs at (i + top) Wp + j + left, zeros elsewhere,
    # whatever the buffer held; pairs past the channels (blocks of 32) all zeros
    x = np.random.default_rng(C + H).standard_normal((1, C, H, W)).astype(np.float32)
    S = rows * Wp + 3  # a tail past the last whole row
    xp = np.full((1, 16 * -(-C // 32), S), 0xDEADBEEF, np.uint32)
    if top >= 0:
        _direct_amx.layout(x, xp, 0, (top, left), Wp)
    else:  # a band starting inside the image: the AVX512-BF16 route's call
        _direct_bf16._pad_pairs(x.view(np.uint32), xp, 0, -top, left, Wp)
    bits = np.zeros((xp.shape[1] * 2, H, W), np.uint32)
    bits[:C] = _direct_bf16.round_bits(x[0])
    want = np.zeros((xp.shape[1], rows * Wp), np.uint32)
    for i in range(H):
        if 0 <= i + top < rows:
            want[:, (i + top) * Wp + left:(i + top) * Wp + left + W] = bits[0::2, i] | (bits[1::2, i] << 16)
    np.testing.assert_array_equal(xp[0, :, :rows * Wp], want)
    np.testing.assert_array_equal(xp[0, :, rows * Wp:], 0)


@needs_amx
@pytest.mark.parametrize("O, slope", [(40, 0.1), (12, 0.0), (36, None), (16, 0.2)])
def test_amx_forward_over_several_chunks_of_positions(O, slope):
    # one image whose tasks span several FORWARD_CHUNKs (the epilogue runs per chunk over runs of
    # rows): every output within the bound of the exact sum of the rounded operands, and the
    # residual, pixel-shuffle and planes epilogues the plain output's bits added, shuffled, laid out
    rng = np.random.default_rng(O)
    N, C, H, W, k = 1, 32, 96, 127, 3
    x, w, b, r = _conv_case(rng, N, C, O, H, W, k)
    Wp, Q, S = _direct_amx.plane_geometry((H, W), (k, k))
    assert Q // _direct_amx.FORWARD_CHUNK >= 8 * 2  # 8 tasks on 2 workers: at least two chunks each
    xp = np.empty((N, 16, S), np.uint32)
    _direct_amx.layout(x, xp, 0, (1, 1), Wp)
    wa = _direct_amx.pack_weight(w)
    bias = np.zeros(wa.shape[2], np.float32)
    bias[:O] = b
    y = _direct_amx.run(xp, 0, wa, bias, O, (H, W), (k, k), slope, 2)
    exact = torch.nn.functional.conv2d(bf(x), bf(w), torch.from_numpy(b.astype(np.float64)), padding=1).numpy()
    exact = exact if slope is None else np.where(exact > 0, exact, slope * exact)
    size = torch.nn.functional.conv2d(bf(x).abs(), bf(w).abs(), torch.from_numpy(np.abs(b).astype(np.float64)),
                                      padding=1).numpy()
    assert (np.abs(y - exact) <= gamma(C * k * k + 1) * size).all()
    added = _direct_amx.run(xp, 0, wa, bias, O, (H, W), (k, k), slope, 2, residual=r)
    np.testing.assert_array_equal(added.view(np.uint32), (y + r).view(np.uint32))
    for s in (2, 3, 4):  # pixel by pixel for 2 and 4, channel by channel else; with residuals
        if O % (s * s):
            continue
        shuffled = _direct_amx.run(xp, 0, wa, bias, O, (H, W), (k, k), slope, 2, shuffle=s)
        want = y.reshape(N, O // s ** 2, s, s, H, W).transpose(0, 1, 4, 2, 5, 3).reshape(N, -1, s * H, s * W)
        np.testing.assert_array_equal(shuffled.view(np.uint32), want.view(np.uint32))
        full = rng.standard_normal(want.shape).astype(np.float32)
        added = _direct_amx.run(xp, 0, wa, bias, O, (H, W), (k, k), slope, 2, residual=full, shuffle=s)
        np.testing.assert_array_equal(added.view(np.uint32), (want + full).view(np.uint32))
        small = rng.standard_normal((N, O // s ** 2, H, W)).astype(np.float32)  # added where it repeats
        added = _direct_amx.run(xp, 0, wa, bias, O, (H, W), (k, k), slope, 2, residual=small, shuffle=s)
        np.testing.assert_array_equal(added.view(np.uint32), (want + small.repeat(s, 2).repeat(s, 3)).view(np.uint32))
        with pytest.raises(ValueError, match="residual"):
            _direct_amx.run(xp, 0, wa, bias, O, (H, W), (k, k), slope, 2, residual=small[:, :, :-1], shuffle=s)
    dst = np.zeros((N, 2 + wa.shape[2] // 2, S), np.uint32)
    _direct_amx.run(xp, 0, wa, bias, O, (H, W), (k, k), slope, 2, dst, np.array([2, 1, 1, Wp], np.int64))
    laid = np.zeros_like(dst)
    _direct_amx.layout(y, laid, 2, (1, 1), Wp)
    np.testing.assert_array_equal(dst, laid)


@needs_amx
@pytest.mark.parametrize("C, O, slope", [(32, 16, 0.2), (48, 3, None), (16, 1, 0.0), (80, 9, None)])
def test_amx_narrow_block_is_the_wide_blocks_bits(C, O, slope):
    # at most 16 outputs take the 1 x 3 block (16 outputs x 48 positions); the same weights padded to
    # 17 outputs take the 2 x 2 block (32 x 32, half on padding): the same products in the same order
    rng = np.random.default_rng(C + O)
    N, H, W, k = 2, 9, 13, 3
    x, w, b, _ = _conv_case(rng, N, C, O, H, W, k)
    Wp, _, S = _direct_amx.plane_geometry((H, W), (k, k))
    xp = np.empty((N, -(-C // 32) * 16, S), np.uint32)
    _direct_amx.layout(x, xp, 0, (1, 1), Wp)
    wide = _direct_amx.pack_weight(np.concatenate([w, np.zeros((17 - O, C, k, k), np.float32)]))
    narrow = _direct_amx.pack_weight(w)
    assert narrow.shape[2] == 16 and wide.shape[2] == 32
    bias = np.zeros(32, np.float32)
    bias[:O] = b
    outs = [_direct_amx.run(xp, 0, wa, bias, O, (H, W), (k, k), slope, 2) for wa in (narrow, wide)]
    np.testing.assert_array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
    planes = []  # the pair epilogue: the next convolution's planes
    for wa in (narrow, wide):
        dst = np.zeros((N, 3 + 16, S), np.uint32)
        _direct_amx.run(xp, 0, wa, bias, O, (H, W), (k, k), slope, 2, dst, np.array([3, 1, 1, Wp], np.int64))
        planes.append(dst)
    np.testing.assert_array_equal(planes[0], planes[1])
    want = np.zeros_like(planes[0])
    _direct_amx.layout(outs[0], want, 3, (1, 1), Wp)
    np.testing.assert_array_equal(planes[0], want)


@needs_amx
@pytest.mark.parametrize("N, C, O, H, W", [(3, 32, 16, 9, 13), (2, 80, 5, 7, 6), (17, 48, 16, 4, 5)])
def test_amx_narrow_weight_gradient_is_the_wide_blocks_bits(N, C, O, H, W):
    # at most 16 outputs: the gradient's layout has 16 columns and the weight gradient the 2 x 1 block
    # (32 channels x 16 outputs); the same layout padded to 32 columns takes the 2 x 2 block (half its
    # products on zeros): the same products in the same order (the same runs of images)
    rng = np.random.default_rng(N + C + O)
    x, _, _, g = _conv_case(rng, N, C, O, H, W, 3)
    Hp, Wp, P = _direct_amx._grad_geometry((H, W), (3, 3))
    xf = _direct_amx._input_planes(x, Hp, Wp, P)
    dws = []
    for cols in (16, 32):
        gt = np.empty((N, P, cols), np.uint32)
        _direct_bf16.weight_grad_layout(x.view(np.uint32), g.view(np.uint32), xf, gt, -(-C // 32) * 32, -1, 1, Wp, Hp)
        dws.append(_direct_amx._weight_grad_tiles(xf, gt, C, O, Hp, Wp, (3, 3)))
    np.testing.assert_array_equal(dws[0].view(np.uint32), dws[1].view(np.uint32))
    np.testing.assert_array_equal(_direct_amx.weight_grad(x, g, (1, 1), (3, 3)), dws[0])
    size = torch.nn.grad.conv2d_weight(bf(x).abs(), (O, C, 3, 3), bf(g).abs(), padding=1).numpy()
    ref = torch.nn.grad.conv2d_weight(bf(x), (O, C, 3, 3), bf(g), padding=1).numpy()
    assert (np.abs(dws[0] - ref) <= gamma(N * H * W) * size).all()


@needs_amx
def test_a_last_conv_to_few_outputs_runs_on_tiles():
    # 32 -> 3 (a network's last conv): im2col in float32 elsewhere, on AMX under bf16 (the forward's
    # operands rounded: within the bound, beyond float32's); its input gradient stays float32 (the
    # direct route from 3 channels: 27 products), its weight gradient on tiles too (the 2 x 1 block)
    rng = np.random.default_rng(11)
    N, C, O, H, W, k = 2, 32, 3, 7, 11, 3
    x, w, b, r = _conv_case(rng, N, C, O, H, W, k)
    y, dx, dw, db = _bf16_conv(x, w, b, r, 1)
    conv2d, T = torch.nn.functional.conv2d, torch.from_numpy
    ref = conv2d(bf(x), bf(w), T(b.astype(np.float64)), padding=1).numpy()
    size = conv2d(bf(x).abs(), bf(w).abs(), T(np.abs(b).astype(np.float64)), padding=1).numpy()
    assert (np.abs(y - ref) <= gamma(C * k * k + 1) * size).all()
    exact = conv2d(T(x.astype(np.float64)), T(w.astype(np.float64)), T(b.astype(np.float64)), padding=1).numpy()
    assert (np.abs(y - exact) / size).max() > 30 * gamma(C * k * k + 1)  # the operands were rounded
    xt, wt, bt = (sg.tensor(a, requires_grad=True) for a in (x, w, b))
    (F.conv2d(xt, wt, bt, padding=1) * sg.tensor(r[:, :O])).sum().backward()
    np.testing.assert_array_equal(dx, xt.grad.numpy())
    size = torch.nn.grad.conv2d_weight(bf(x).abs(), w.shape, bf(r[:, :O]).abs(), padding=1).numpy()
    ref = torch.nn.grad.conv2d_weight(bf(x), w.shape, bf(r[:, :O]), padding=1).numpy()
    assert (np.abs(dw - ref) <= gamma(N * H * W) * size).all()
    np.testing.assert_array_equal(dw, _direct_amx.weight_grad(x, r[:, :O], (1, 1), (k, k)))


@needs_amx
def test_fused_amx_backward_only_where_both_gradients_are_wanted(monkeypatch):
    rng = np.random.default_rng(9)
    x, w, b, r = _conv_case(rng, 2, 32, 32, 6, 7, 3)
    calls = []
    fused = _direct_amx_grad.backward
    monkeypatch.setattr(_direct_amx_grad, "backward", lambda *a: calls.append(1) or fused(*a))
    dx, _, _ = _relu_conv(x, w, b, r, 1, 0, frozen=True)  # a frozen weight: the unfused route
    assert calls == []
    np.testing.assert_array_equal(dx, _relu_conv(x, w, b, r, 1, 0)[0])
    assert calls == [1]
    with pytest.raises(ValueError, match="not the layout"):
        _direct_amx.weight_grad_planes(x, np.zeros((2, 16, 32), np.uint32), (1, 1), (3, 3), (6, 7), 32)


@needs_bf16
@pytest.mark.parametrize("C, k", [(3, 3), (1, 5), (3, 5), (4, 7)])
def test_a_first_layer_stays_float32(C, k):
    # an image's channels (at most conv._IMAGE_CHANNELS; 3 x 5 x 5, 4 x 7 x 7: past _BF16_MIN_TAPS
    # products) or fewer than 32 products per output: the float32 direct forward under autocast too
    # (bfloat16 operands would round the input image), eager and in an inference graph
    from framework.capture import Capture
    rng = np.random.default_rng(C)
    x = sg.tensor(rng.random((2, C, 9, 11)).astype(np.float32))
    layer = sg.nn.Conv2d(C, 24, k, padding=k // 2)
    w, b = layer.weight, layer.bias
    with sg.no_grad():
        want = layer(x).numpy()
        cap = Capture([layer], train=False)
        with sg.autocast("bf16"):
            eager = layer(x).numpy()
            graph = [cap(lambda x: {"y": layer(x)}, x)["y"].numpy() for _ in range(3)]
    exact = F.conv2d(*(sg.tensor(a.numpy().astype(np.float64)) for a in (x, w, b)), padding=k // 2).numpy()
    assert np.abs(want - exact).max() <= gamma(C * k * k + 1) * np.abs(exact).max()
    for y in (eager, *graph):
        np.testing.assert_array_equal(y.view(np.uint32), want.view(np.uint32))


@needs_bf16
def test_float64_ignores_autocast():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 16, 6, 6))
    w = rng.standard_normal((16, 16, 3, 3)) * 0.1
    with sg.autocast("bf16"):
        y64 = F.conv2d(sg.tensor(x), sg.tensor(w), padding=1).numpy()
    np.testing.assert_array_equal(y64, F.conv2d(sg.tensor(x), sg.tensor(w), padding=1).numpy())


@needs_bf16
def test_precision_is_the_forwards_and_nests():
    rng = np.random.default_rng(2)
    x, w, b, r = _conv_case(rng, 1, 16, 16, 5, 5, 3)
    inside = _bf16_conv(x, w, b, r, 1)
    xt, wt = sg.tensor(x, requires_grad=True), sg.tensor(w, requires_grad=True)
    with sg.autocast("bf16"):
        with sg.autocast("fp32"):
            y32 = F.conv2d(xt, wt, padding=1)
        assert precision.current() == "bf16"
    (y32 * sg.tensor(r)).sum().backward()
    assert precision.current() == "fp32"
    np.testing.assert_array_equal(y32.numpy(), F.conv2d(sg.tensor(x), sg.tensor(w), padding=1).numpy())
    assert np.abs(xt.grad.numpy() - inside[1]).max() > 0  # fp32's gradient, not bf16's


@needs_amx
@pytest.mark.parametrize("B, M, K, N", [(1, 4096 // 64 + 3, 60, 180), (3, 33, 300, 47), (2, 32, 32, 32)])
def test_gemm_writes_exact_rows_and_adds_the_bias_as_it_stores(B, M, K, N):
    # C (B, M, N) written from each block's scratch (rows and columns past M, N never stored, K in
    # several blocks of 128 terms): the padded product's values, and with a bias the bits of the sum
    # plus the bias (linear's `+ b`, numpy's float32 add), within the bound of the rounded operands
    from framework.functional import _gemm_bf16
    rng = np.random.default_rng(M + K)
    a = rng.standard_normal((B, M, K)).astype(np.float32)
    b = (rng.standard_normal((B, K, N)) * 0.2).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    c = _gemm_bf16.matmul_batched(a, b)
    assert c.shape == (B, M, N) and c.flags.c_contiguous
    A, Bm = bf(a).numpy(), bf(b).numpy()
    assert (np.abs(c - A @ Bm) <= gamma(K) * (np.abs(A) @ np.abs(Bm))).all()
    with_bias = _gemm_bf16.matmul_batched(a, b, bias)
    np.testing.assert_array_equal(with_bias.view(np.uint32), (c + bias).view(np.uint32))
    np.testing.assert_array_equal(_gemm_bf16.matmul(a[0], b[0], bias), with_bias[0])
    with pytest.raises(ValueError, match="bias"):
        _gemm_bf16.matmul(a[0], b[0], bias[:-1])
    # a residual added after the bias as each row is stored: the bits of np.add's sum after it
    res = rng.standard_normal((B, M, N)).astype(np.float32)
    for bb in (bias, None):
        fused = _gemm_bf16.matmul_batched(a, b, bb, res)
        base = with_bias if bb is not None else c
        np.testing.assert_array_equal(fused.view(np.uint32), (base + res).view(np.uint32))
    np.testing.assert_array_equal(_gemm_bf16.matmul(a[0], b[0], bias, res[0]), (with_bias + res)[0])
    with pytest.raises(ValueError, match="residual"):
        _gemm_bf16.matmul(a[0], b[0], bias, res[0, :, :-1])


@needs_amx
@pytest.mark.parametrize("M, K, N", [(67, 60, 180), (32, 33, 16), (5, 120, 60)])
def test_matmul_rows_is_the_norm_the_gather_the_product_and_the_scatter(M, K, N):
    # matmul_rows against the ops it replaces in an inference graph: layer_norm's output (its own
    # kernel), rows gathered, _gemm_bf16.matmul with the bias, rows scattered, np.add of a residual:
    # the same bits (rows past 32 and odd counts: a task's last row alone)
    from framework.autograd import Context
    from framework.functional import _gemm_bf16
    from framework.functional.normalization import LayerNormFunction
    rng = np.random.default_rng(M + K)
    x = (rng.standard_normal((M + 3, K)) * 2 + 0.5).astype(np.float32)  # 3 rows never read
    lw, lb = rng.uniform(0.5, 1.5, K).astype(np.float32), rng.standard_normal(K).astype(np.float32)
    w = (rng.standard_normal((K, N)) * 0.2).astype(np.float32)
    bias, res = rng.standard_normal(N).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
    src, dst = rng.permutation(M + 3)[:M].astype(np.int64), rng.permutation(M).astype(np.int64)
    normed = LayerNormFunction.forward(Context((False,) * 3), x, lw, lb, normalized_shape=(K,), eps=1e-5)
    plain = _gemm_bf16.matmul(normed[src], w, bias)
    scattered = np.empty_like(plain)
    scattered[dst] = plain
    got = _gemm_bf16.matmul_rows(x, w, bias, src=src, norm=(lw, lb, 1e-5))
    np.testing.assert_array_equal(got.view(np.uint32), plain.view(np.uint32))
    got = _gemm_bf16.matmul_rows(x, w, bias, src=src, dst=dst, norm=(lw, lb, 1e-5), residual=res)
    np.testing.assert_array_equal(got.view(np.uint32), (scattered + res).view(np.uint32))
    got = _gemm_bf16.matmul_rows(x, w, None, src=src)
    np.testing.assert_array_equal(got.view(np.uint32), _gemm_bf16.matmul(x[src], w).view(np.uint32))
    for kwargs, match in (({"src": np.full(M, M + 3)}, "src"), ({"src": src.astype(np.int32)}, "src"),
                          ({"src": src, "dst": dst[::-1] + 1}, "dst"),
                          ({"src": src, "dst": np.where(dst == 0, 1, dst)}, "dst"),  # a row twice, one never
                          ({"src": src, "residual": res[:-1]}, "residual"),
                          ({"src": src, "norm": (lw[:-1], lb, 1e-5)}, "norm weight")):
        with pytest.raises(ValueError, match=match):
            _gemm_bf16.matmul_rows(x, w, bias, **kwargs)


@needs_amx
def test_linear_bf16_within_the_bound():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 37, 45)).astype(np.float32)  # 111 rows: not whole tiles
    w = (rng.standard_normal((50, 45)) * 0.2).astype(np.float32)
    b = rng.standard_normal(50).astype(np.float32)
    r = rng.standard_normal((3, 37, 50)).astype(np.float32)
    xt, wt, bt = (sg.tensor(a, requires_grad=True) for a in (x, w, b))
    with sg.autocast("bf16"):
        y = F.linear(xt, wt, bt)
    (y * sg.tensor(r)).sum().backward()
    X, Wt, R = (bf(a).numpy() for a in (x.reshape(-1, 45), w, r.reshape(-1, 50)))
    checks = [(y.numpy().reshape(-1, 50), X @ Wt.T + b, np.abs(X) @ np.abs(Wt.T) + np.abs(b), 46),
              (xt.grad.numpy().reshape(-1, 45), R @ Wt, np.abs(R) @ np.abs(Wt), 50),
              (wt.grad.numpy(), R.T @ X, np.abs(R.T) @ np.abs(X), 111)]
    for value, ref, size, n in checks:
        err = np.abs(value - ref)
        assert (err <= gamma(n) * size).all(), (err / size).max() / gamma(n)
    exact = x.reshape(-1, 45).astype(np.float64) @ w.T.astype(np.float64) + b
    assert (np.abs(y.numpy().reshape(-1, 50) - exact) / checks[0][2]).max() > 30 * gamma(46)  # rounded
    np.testing.assert_array_equal(bt.grad.numpy(), r.reshape(-1, 50).sum(axis=0))


@needs_amx
@pytest.mark.parametrize("b_shape", [(3, 33, 29), (33, 29)])  # batched, and one shared matrix
def test_matmul_bf16_within_the_bound(b_shape):
    """matmul's products with both sides >= BF16_MIN_SIDE take bfloat16 operands, forward and
    both gradients, each within gamma_n sum|t| of the float64 product of the rounded operands."""
    rng = np.random.default_rng(6)
    a = rng.standard_normal((3, 40, 33)).astype(np.float32)
    b = (rng.standard_normal(b_shape) * 0.3).astype(np.float32)
    r = rng.standard_normal((3, 40, 29)).astype(np.float32)
    at, bt = (sg.tensor(x, requires_grad=True) for x in (a, b))
    with sg.autocast("bf16"):
        y = F.matmul(at, bt)
    (y * sg.tensor(r)).sum().backward()
    A, B, R = (bf(x).numpy() for x in (a, b, r))
    Bt = np.swapaxes(B, -1, -2)
    if B.ndim == 2:  # the shared matrix's gradient: one product over every row of the batch
        gb_ref = A.reshape(-1, 33).T @ R.reshape(-1, 29)
        gb_size = np.abs(A.reshape(-1, 33).T) @ np.abs(R.reshape(-1, 29))
        gb_n = 120
    else:
        gb_ref, gb_size, gb_n = np.swapaxes(A, -1, -2) @ R, np.abs(np.swapaxes(A, -1, -2)) @ np.abs(R), 40
    checks = [(y.numpy(), A @ B, np.abs(A) @ np.abs(B), 33),
              (at.grad.numpy(), R @ Bt, np.abs(R) @ np.abs(Bt), 29),
              (bt.grad.numpy(), gb_ref, gb_size, gb_n)]
    for value, ref, size, n in checks:
        err = np.abs(value - ref)
        assert (err <= gamma(n) * size).all(), (err / size).max() / gamma(n)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert (np.abs(y.numpy() - exact) / checks[0][2]).max() > 30 * gamma(33)  # the operands were rounded


@needs_amx
def test_matmul_below_the_side_stays_float32():
    # attention's q k^T with 10-channel heads: padding to 32 made bfloat16 slower; float32 operands,
    # within float32's bound of the exact product (rounded operands would be off by up to 2^-8)
    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((4, 16, 10), (4, 10, 16)))
    with sg.autocast("bf16"):
        y = F.matmul(sg.tensor(a), sg.tensor(b))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    size = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert (np.abs(y.numpy() - exact) <= gamma(10) * size).all()

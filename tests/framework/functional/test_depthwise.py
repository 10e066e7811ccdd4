"""conv.py's direct route (_depthwise.py): depthwise and large-kernel stride-1 convolutions, forward and
both gradients, against torch and by float64 gradcheck; the route is taken where it should be; its
results do not depend on the task split or the thread count."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.functional import _depthwise, _tiles
from framework.functional import conv as conv_module
from tests.conftest import t64


@pytest.fixture
def direct_calls(monkeypatch):
    """The names of the direct routines that ran (correlate, adjoint, weight_grad)."""
    calls = []
    for name in ("correlate", "adjoint", "weight_grad"):
        real = getattr(_depthwise, name)
        monkeypatch.setattr(_depthwise, name, lambda *a, _r=real, _n=name: calls.append(_n) or _r(*a))
    return calls


def _parity(x_shape, w_shape, options, dtype=np.float64, transpose=False, seed=0):
    """Output, input, weight and bias gradients against torch; returns ours."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    out_ch = w_shape[1] * options.get("groups", 1) if transpose else w_shape[0]
    arrays = [rng.standard_normal(s) for s in (x_shape, w_shape, (out_ch,))]
    x, w, b = (sg.tensor(a, requires_grad=True, dtype=dtype) for a in arrays)
    fn = F.conv_transpose2d if transpose else F.conv2d
    y = fn(x, w, b, **options)
    g = rng.standard_normal(y.shape).astype(dtype)
    y.backward(g)
    tx, tw, tb = (torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays)
    tfn = torch.nn.functional.conv_transpose2d if transpose else torch.nn.functional.conv2d
    ty = tfn(tx, tw, tb, **options)
    ty.backward(torch.from_numpy(g))
    tol = 1e-11 if dtype == np.float64 else 2e-5
    for what, ours, theirs in (("output", y, ty), ("input grad", x.grad, tx.grad),
                               ("weight grad", w.grad, tw.grad), ("bias grad", b.grad, tb.grad)):
        theirs = theirs.detach().numpy()
        assert ours.dtype == dtype and ours.shape == theirs.shape, what
        err = np.abs(ours.numpy() - theirs).max()
        assert err <= tol * max(1.0, np.abs(theirs).max()), f"{what}: {err:.3g}"
    return y


DEPTHWISE = [  # (x, w, options): 3x3 .. 17x17, odd and one-pixel sizes, batches, maps smaller than the kernel
    ((2, 3, 8, 9), (3, 1, 3, 3), dict(padding=1, groups=3)),
    ((3, 4, 10, 7), (4, 1, 7, 7), dict(padding=3, groups=4)),
    ((2, 2, 13, 15), (2, 1, 13, 13), dict(padding=6, groups=2)),
    ((2, 3, 20, 17), (3, 1, 17, 17), dict(padding=8, groups=3)),
    ((1, 2, 1, 1), (2, 1, 17, 17), dict(padding=8, groups=2)),  # one pixel: one tap reads it
    ((2, 2, 1, 9), (2, 1, 5, 5), dict(padding=2, groups=2)),
    ((1, 5, 5, 3), (5, 1, 31, 31), dict(padding=15, groups=5)),  # the largest kernel, a tiny map
    ((2, 3, 6, 7), (3, 1, 3, 5), dict(padding=(1, 2), groups=3)),  # non-square
    ((2, 3, 9, 8), (3, 1, 3, 3), dict(padding=2, dilation=2, groups=3)),
    ((2, 3, 9, 8), (3, 1, 5, 5), dict(padding=(0, 1), groups=3)),  # shrinking output
    ((1, 2, 4, 5), (2, 1, 3, 3), dict(padding=3, groups=2)),  # padding beyond the kernel: a crop in dx
    ((2, 4, 6, 6), (4, 1, 4, 4), dict(padding="same", groups=4)),  # even kernel: bottom/right extra
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("x_shape,w_shape,options", DEPTHWISE)
def test_depthwise_matches_torch(x_shape, w_shape, options, direct_calls):
    _parity(x_shape, w_shape, options)
    assert sorted(direct_calls) == ["adjoint", "correlate", "weight_grad"]


LARGE = [  # dense and grouped convolutions with kernels of >= 49 taps and few channels per group
    ((2, 4, 9, 10), (5, 4, 7, 7), dict(padding=3)),
    ((1, 3, 12, 11), (2, 3, 17, 17), dict(padding=8)),
    ((2, 6, 8, 7), (4, 3, 9, 9), dict(padding=4, groups=2)),
    ((2, 4, 10, 9), (8, 1, 7, 7), dict(padding=3, groups=4)),  # depthwise with a channel multiplier
    ((1, 2, 11, 12), (3, 2, 5, 11), dict(padding=(2, 5), dilation=(2, 1))),
]


@pytest.mark.parametrize("x_shape,w_shape,options", LARGE)
def test_large_kernels_match_torch(x_shape, w_shape, options, direct_calls):
    _parity(x_shape, w_shape, options)
    assert sorted(direct_calls) == ["adjoint", "correlate", "weight_grad"]


@pytest.mark.parametrize("x_shape,w_shape,options", [
    ((2, 3, 5, 6), (3, 1, 3, 3), dict(padding=1, groups=3)),
    ((2, 3, 4, 5), (3, 1, 3, 3), dict(padding=1, output_padding=0, groups=3, dilation=2)),
])
def test_depthwise_transposed_stride_1_matches_torch(x_shape, w_shape, options, direct_calls):
    """conv_transpose2d's forward is the direct adjoint, its input gradient the direct forward."""
    _parity(x_shape, w_shape, options, transpose=True)
    assert sorted(direct_calls) == ["adjoint", "correlate", "weight_grad"]


@pytest.mark.parametrize("k", [3, 17])
def test_float32_matches_torch(k, direct_calls):
    y = _parity((2, 4, 19, 21), (4, 1, k, k), dict(padding=k // 2, groups=4), dtype=np.float32)
    assert y.dtype == np.float32 and "correlate" in direct_calls


@pytest.mark.parametrize("x_shape,w_shape,options", [
    ((2, 2, 5, 6), (2, 1, 3, 3), dict(padding=1, groups=2)),
    ((1, 2, 4, 3), (2, 1, 5, 5), dict(padding=(2, 3), dilation=(1, 2), groups=2)),
    ((1, 2, 5, 4), (3, 2, 7, 7), dict(padding=3)),
])
def test_gradcheck(x_shape, w_shape, options, rng, direct_calls):
    x, w, b = t64(rng, *x_shape), t64(rng, *w_shape), t64(rng, w_shape[0])
    assert sg.gradcheck(lambda x, w, b: F.conv2d(x, w, b, **options), (x, w, b))
    assert "weight_grad" in direct_calls


def test_hand_worked_value():
    """A 3x3 depthwise kernel of ones sums each pixel's neighbourhood (zero padding): corners 4 terms."""
    x = sg.tensor(np.arange(12.0).reshape(1, 1, 3, 4), dtype=np.float64)
    y = F.conv2d(x, sg.tensor(np.ones((1, 1, 3, 3))), padding=1, groups=1)
    want = [[10, 18, 24, 18], [27, 45, 54, 39], [26, 42, 48, 34]]
    np.testing.assert_array_equal(y.numpy()[0, 0], want)
    x2 = sg.tensor(np.stack([x.numpy()[0, 0], -x.numpy()[0, 0]])[None])  # two channels, groups=2
    np.testing.assert_array_equal(F.conv2d(x2, sg.tensor(np.ones((2, 1, 3, 3))), padding=1, groups=2).numpy()[0],
                                  [want, np.negative(want)])


@pytest.mark.parametrize("geo_args,c,o,taken", [
    (((3, 3), (1, 1), 64), 64, 64, True),  # depthwise, any kernel
    (((17, 17), (2, 2), 64), 64, 64, False),  # strided: im2col
    (((7, 7), (1, 1), 1), 16, 8, True),  # 49 taps, 16 channels, too few outputs for the direct route
    (((7, 7), (1, 1), 1), 16, 16, False),  # the direct route (_direct.py) takes it
    (((17, 17), (1, 1), 1), 16, 16, False),  # PLKSR's partial large kernel: the direct route too
    (((5, 5), (1, 1), 1), 16, 8, False),  # 25 taps: im2col
    (((17, 17), (1, 1), 1), 64, 8, False),  # 64 channels: the column matrix's GEMM pays
    (((17, 17), (1, 1), 4), 64, 64, True),  # 16 per group
])
def test_route_choice(geo_args, c, o, taken):
    kernel, stride, groups = geo_args
    geo = conv_module._Geometry(kernel, stride, (0, 0), (1, 1), groups, (20, 20), (20, 20))
    assert conv_module._large_route(geo, c, o) is taken


@pytest.mark.parametrize("plane_bytes", [1, 3000])
@pytest.mark.parametrize("w_shape,groups", [((6, 1, 5, 5), 6), ((4, 6, 7, 7), 1), ((6, 2, 7, 7), 3)])
def test_task_split_and_threads_do_not_change_the_results(plane_bytes, w_shape, groups, monkeypatch):
    """One row per band (a 1-byte plane cap), a few rows, and one worker give bit-identical outputs and
    gradients: each element's terms come in one fixed order."""
    rng = np.random.default_rng(5)
    xs, ws = rng.standard_normal((3, 6, 11, 9)), rng.standard_normal(w_shape)

    def run():
        x, w = (sg.tensor(a, requires_grad=True, dtype=np.float32) for a in (xs, ws))
        y = F.conv2d(x, w, padding=w_shape[2] // 2, groups=groups)
        y.backward(np.cos(np.arange(y.numel())).reshape(y.shape).astype(np.float32))
        return [y.numpy(), x.grad.numpy(), w.grad.numpy()]

    ref = run()  # small: its forward's tasks on the calling thread (SERIAL_MACS)
    monkeypatch.setattr(_depthwise, "SERIAL_MACS", 0)
    pool = run()
    monkeypatch.setattr(_depthwise, "PLANE_BYTES", plane_bytes)
    split = run()
    monkeypatch.setattr(conv_module, "_workers", lambda: 1)
    serial = run()
    for a, b, c, r in zip(pool, split, serial, ref):
        for got in (a, b, c):
            np.testing.assert_array_equal(got, r)


def test_a_small_forward_runs_on_the_calling_thread(monkeypatch):
    """Below SERIAL_MACS the forward's tasks run inline (the pool's fork/join cost more); above, on
    the workers: the rule of sizes, not a timing."""
    seen = []
    real = _tiles.run
    monkeypatch.setattr(_tiles, "run", lambda tasks, work, elems, dtype, workers: seen.append(workers) or
                        real(tasks, work, elems, dtype, workers))
    monkeypatch.setattr(conv_module, "_workers", lambda: 2)
    x = sg.tensor(np.ones((1, 8, 16, 16), np.float32))
    w = sg.tensor(np.ones((8, 1, 3, 3), np.float32))
    with sg.no_grad():
        small = F.conv2d(x, w, padding=1, groups=8).numpy()  # 8 x 16^2 x 9 multiply-adds
        monkeypatch.setattr(_depthwise, "SERIAL_MACS", 8 * 16 * 16 * 9)
        large = F.conv2d(x, w, padding=1, groups=8).numpy()
    assert seen == [1, 2]
    np.testing.assert_array_equal(small, large)
    assert small[0, 0, 0, 0] == 4 and small[0, 0, 5, 5] == 9  # a corner's 4 taps, an inner pixel's 9


def test_forward_tasks_cover_every_output_once():
    for n, o, opg, rows, cap, workers in [(1, 16, 1, 64, 64, 2), (8, 64, 1, 64, 64, 2), (1, 16, 16, 7, 3, 2),
                                          (3, 6, 2, 5, 1, 4), (1, 1, 1, 1, 1, 2)]:
        tasks = _depthwise._forward_tasks(n, o, opg, rows, cap, workers)
        cells = sorted((b, c, r) for b0, b1, o0, o1, r0, r1 in tasks
                       for b in range(b0, b1) for c in range(o0, o1) for r in range(r0, r1))
        assert cells == [(b, c, r) for b in range(n) for c in range(o) for r in range(rows)]
        assert all(r1 - r0 <= cap for *_, r0, r1 in tasks)


def test_empty_batch():
    x = sg.tensor(np.zeros((0, 3, 5, 4)), requires_grad=True, dtype=np.float64)
    w = sg.tensor(np.ones((3, 1, 3, 3)), requires_grad=True, dtype=np.float64)
    y = F.conv2d(x, w, padding=1, groups=3)
    y.backward(np.zeros(y.shape))
    assert y.shape == (0, 3, 5, 4) and x.grad.shape == x.shape
    np.testing.assert_array_equal(w.grad.numpy(), 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_buffers_full_of_nan_are_never_read_unwritten(dtype, monkeypatch):
    """Task buffers are reused between calls (_tiles keeps spares): with every fresh buffer full of NaN
    bytes, a 7x7 kernel over a 4x4 map of ones still gives exact counts. dW[p, q] counts the outputs
    whose tap (p, q) falls inside the map: (4 - |p - 3|) (4 - |q - 3|)."""
    from framework.functional import _tiles
    monkeypatch.setattr(_tiles, "_take_buffer", lambda nbytes: np.full(nbytes, 0xFF, np.uint8))
    x = sg.tensor(np.ones((1, 2, 4, 4)), requires_grad=True, dtype=dtype)
    w = sg.tensor(np.ones((2, 1, 7, 7)), requires_grad=True, dtype=dtype)
    y = F.conv2d(x, w, padding=3, groups=2)
    y.backward(np.ones(y.shape, dtype))
    np.testing.assert_array_equal(y.numpy(), 16)  # every window covers the whole 4x4 map
    cnt = 4 - np.abs(np.arange(7) - 3)
    np.testing.assert_array_equal(w.grad.numpy()[:, 0], np.broadcast_to(np.outer(cnt, cnt), (2, 7, 7)))
    np.testing.assert_array_equal(x.grad.numpy(), 16)  # each of the 16 outputs reads each pixel once


# -- the frequency-domain route (_fftconv.py) ---------------------------------------------------------
@pytest.fixture
def fft_calls(monkeypatch):
    """The FFT routines that ran (correlate, weight_grad)."""
    from framework.functional import _fftconv
    calls = []
    for name in ("correlate", "weight_grad"):
        real = getattr(_fftconv, name)
        monkeypatch.setattr(_fftconv, name, lambda *a, _r=real, _n=name: calls.append(_n) or _r(*a))
    return calls


FFT = [  # dense convolutions with >= FFT_WORK multiply-adds per output and fewer outputs than the
    # direct route takes (16 -> 16, PLKSR's partial large kernel, takes the direct route: test below)
    ((2, 16, 11, 9), (8, 16, 13, 13), dict(padding=6)),
    ((1, 16, 20, 23), (11, 16, 17, 17), dict(padding=8)),
    ((2, 16, 5, 3), (3, 16, 15, 13), dict(padding=(7, 6))),  # a map smaller than the kernel
    ((1, 16, 9, 8), (4, 16, 13, 13), dict(padding=(2, 9))),  # asymmetric, beyond the kernel: a crop
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("x_shape,w_shape,options", FFT)
def test_fft_route_matches_torch(x_shape, w_shape, options, dtype, fft_calls):
    _parity(x_shape, w_shape, options, dtype=dtype)
    # forward and dW; dx too when the flipped kernel (O input channels) also does the work
    dx = w_shape[0] * w_shape[2] * w_shape[3] >= _depthwise.FFT_WORK
    assert sorted(fft_calls) == ["correlate"] * (1 + dx) + ["weight_grad"]


def test_fft_route_on_large_maps_cuts_tiles(monkeypatch, fft_calls):
    """A map wider than FFT_SIDE is cut into tiles (one patch per tile), the output the same."""
    from framework.functional import _fftconv
    monkeypatch.setattr(_fftconv, "FFT_SIDE", 32)
    assert _fftconv._plan(70, 13) == (32, 20, 4)
    _parity((1, 16, 70, 45), (2, 16, 13, 13), dict(padding=6), seed=3)
    assert "correlate" in fft_calls


@pytest.mark.parametrize("x_shape,w_shape,options", [
    ((2, 3, 5, 4), (2, 3, 3, 3), dict(padding=1)),
    ((1, 2, 4, 6), (3, 2, 5, 3), dict(padding=(3, 0))),
])
def test_fft_route_gradcheck(x_shape, w_shape, options, rng, monkeypatch, fft_calls):
    """With FFT_WORK at 1 every dense direct-route conv takes the FFT (LARGE_KERNEL lowered too)."""
    monkeypatch.setattr(_depthwise, "FFT_WORK", 1)
    monkeypatch.setattr(_depthwise, "LARGE_KERNEL", 1)
    x, w, b = t64(rng, *x_shape), t64(rng, *w_shape), t64(rng, w_shape[0])
    assert sg.gradcheck(lambda x, w, b: F.conv2d(x, w, b, **options), (x, w, b))
    assert "weight_grad" in fft_calls


def test_fft_sizes_are_smooth():
    from framework.functional._fftconv import _smooth
    assert [_smooth(n) for n in (1, 7, 29, 37, 81, 97, 121)] == [1, 8, 30, 40, 81, 100, 125]


# -- an input that keeps each pixel's channels together (_forward_last) -------------------------------
def _channels_last_view(rng, n, c, h, w, dtype, extra=0):
    """(n, c, h, w) read from tokens (n, h w, c + extra) (a slice of them where extra > 0), as a
    transformer's depthwise conv reads its tokens: channel stride one element, no copy."""
    tokens = rng.standard_normal((n, h * w, c + extra)).astype(dtype)
    return tokens[:, :, extra:].transpose(0, 2, 1).reshape(n, c, h, w)


CHANNELS_LAST = [  # (C, H, W, kernel, options): vector-sized and odd channel counts, dilation, padding
    (48, 16, 16, (3, 3), dict(padding=1)),
    (5, 9, 11, (7, 7), dict(padding=6, dilation=2)),
    (24, 7, 13, (5, 3), dict(padding=(2, 0))),
    (60, 6, 6, (3, 3), dict(padding=0)),
    (33, 5, 4, (1, 1), dict(padding=1)),
    (16, 1, 1, (3, 3), dict(padding=1)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("c,h,w,kernel,options", CHANNELS_LAST)
def test_a_channels_last_input_gives_the_planes_bits(c, h, w, kernel, options, dtype, monkeypatch):
    """A depthwise conv of a channels-last view (_forward_last: no copy into planes) gives exactly the
    bits of the same values laid out in planes, with and without a bias, inline and on the workers in
    bands of rows; its output keeps the channels last (a reader that permutes it back into tokens
    gets a contiguous array), and both gradients are the planes' too."""
    rng = np.random.default_rng(c)
    xv = _channels_last_view(rng, 2, c, h, w, dtype, extra=7)
    assert _depthwise.channels_together(xv)
    wa, ba = rng.standard_normal((c, 1, *kernel)).astype(dtype), rng.standard_normal(c).astype(dtype)

    def run(x, bias, **patch):
        for name, value in patch.items():
            monkeypatch.setattr(_depthwise, name, value)
        xt = sg.tensor(x, requires_grad=True)
        wt, bt = sg.tensor(wa, requires_grad=True), None if bias is None else sg.tensor(bias)
        y = F.conv2d(xt, wt, bt, groups=c, **options)
        y.backward(np.sin(np.arange(y.numel())).reshape(y.shape).astype(dtype))
        return y.numpy(), xt.grad.numpy(), wt.grad.numpy()

    for bias in (ba, None):
        planes = run(np.ascontiguousarray(xv), bias)
        last = run(xv, bias)
        pool = run(xv, bias, SERIAL_MACS=0, PLANE_BYTES=1)  # every band one row, on the workers
        for got in (last, pool):
            for a, b in zip(got, planes):
                np.testing.assert_array_equal(a, b)
        y = last[0]
        assert y.transpose(0, 2, 3, 1).flags.c_contiguous and y.strides[1] == y.itemsize


def test_a_channels_last_input_is_read_where_it_is(monkeypatch):
    """The view itself is read (_forward_last runs) only where the conv is depthwise: a grouped conv
    (2 channels a group) of the same view takes the planes, and so would a view with a negative
    stride or planes themselves (channels_together says no)."""
    rng = np.random.default_rng(1)
    xv = _channels_last_view(rng, 1, 8, 6, 5, np.float32)
    seen = []
    real = _depthwise._forward_last
    monkeypatch.setattr(_depthwise, "_forward_last", lambda *a: seen.append(a[0].shape) or real(*a))
    with sg.no_grad():
        F.conv2d(sg.tensor(xv), sg.tensor(np.ones((8, 1, 3, 3), np.float32)), padding=1, groups=8)
        assert len(seen) == 1
        F.conv2d(sg.tensor(xv), sg.tensor(np.ones((8, 2, 3, 3), np.float32)), padding=1, groups=4)
    assert len(seen) == 1
    assert not _depthwise.channels_together(xv[:, :, ::-1]) and not _depthwise.channels_together(np.ones((1, 8, 2, 2)))


@pytest.mark.parametrize("slope", [0.0, 0.2])
def test_a_fused_activation_on_a_channels_last_output(slope):
    """conv2d's relu_slope (a captured graph's fused ReLU or LeakyReLU) on the channels-last output:
    applied in place as on planes (the conv's bits, then leaky_relu's), its gradient the planes' too."""
    rng = np.random.default_rng(2)
    xv = _channels_last_view(rng, 1, 16, 5, 7, np.float32)
    wa = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    g = rng.standard_normal((1, 16, 5, 7)).astype(np.float32)
    out = []
    for x in (np.ascontiguousarray(xv), xv):
        xt, wt = sg.tensor(x, requires_grad=True), sg.tensor(wa, requires_grad=True)
        y = F.conv2d(xt, wt, padding=1, groups=16, relu_slope=slope)
        y.backward(g)
        out.append((y.numpy(), xt.grad.numpy(), wt.grad.numpy()))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)
    y = out[1][0]
    assert not y.flags.c_contiguous and ((y < 0).any() == (slope > 0)) and (y == 0).any() == (slope == 0)

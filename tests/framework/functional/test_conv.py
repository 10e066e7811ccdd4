import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.functional import conv as conv_module
from tests.conftest import t64

# (input shape, weight shape, options): strides, paddings (int, pair, "same" with odd and even kernels,
# "valid"), dilations, groups, 1x1 kernels, odd sizes and a 1-pixel input.
CONV_CASES = [
    ((2, 4, 5, 6), (3, 4, 3, 3), dict(padding=1)),
    ((2, 4, 5, 6), (3, 4, 3, 3), dict()),
    ((2, 4, 7, 6), (3, 4, 3, 2), dict(stride=2, padding=(1, 0))),
    ((1, 4, 7, 9), (6, 2, 3, 3), dict(stride=(2, 3), padding=(2, 1), dilation=(1, 2), groups=2)),
    ((2, 4, 5, 6), (4, 1, 3, 3), dict(padding=1, groups=4)),
    ((2, 4, 5, 6), (3, 4, 2, 4), dict(padding="same")),
    ((2, 3, 6, 5), (2, 3, 3, 2), dict(padding="same", dilation=(2, 3))),
    ((2, 3, 6, 5), (2, 3, 3, 3), dict(padding="valid", dilation=2)),
    ((2, 4, 5, 6), (3, 4, 1, 1), dict()),
    ((2, 4, 5, 6), (6, 2, 1, 1), dict(groups=2)),
    ((2, 4, 5, 6), (3, 4, 1, 1), dict(stride=2, padding=1)),
    ((2, 4, 5, 6), (3, 4, 1, 1), dict(padding=1)),  # padding beyond the kernel: no flipped-kernel adjoint
    ((2, 3, 1, 1), (2, 3, 3, 3), dict(padding=1)),
    ((1, 2, 1, 1), (3, 2, 1, 1), dict()),
    # windows wholly in the padding (found by tests/reliability under NUMBA_BOUNDSCHECK)
    ((1, 1, 2, 1), (1, 1, 1, 4), dict(stride=2, dilation=2, padding=3)),
    ((1, 1, 1, 1), (2, 1, 3, 2), dict(dilation=2, padding="same")),
]

# conv_transpose2d: weight (in, out/groups, kh, kw); output_padding below max(stride, dilation).
TRANSPOSE_CASES = [
    ((2, 4, 3, 4), (4, 3, 3, 3), dict()),
    ((2, 4, 3, 4), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 3, 5), (4, 2, 3, 2), dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2,
                                      dilation=(1, 2))),
    ((2, 4, 2, 3), (4, 1, 2, 2), dict(stride=2, groups=4)),
    ((2, 2, 3, 3), (2, 3, 3, 3), dict(dilation=3, output_padding=2)),
    ((2, 2, 4, 5), (2, 3, 3, 2), dict(padding=1)),  # stride 1, in <= out: the flipped-kernel correlation
    ((2, 4, 3, 4), (4, 3, 1, 1), dict()),
    ((2, 4, 3, 4), (4, 3, 1, 1), dict(stride=2, output_padding=1)),
    ((2, 3, 1, 1), (3, 2, 4, 4), dict(stride=2, padding=1)),
    ((1, 2, 4, 4), (2, 1, 5, 5), dict(stride=2, padding=2, output_padding=1)),
    ((1, 1, 1, 1), (1, 1, 3, 3), dict(stride=2, dilation=3, padding=3)),
    ((1, 1, 4, 1), (1, 1, 2, 3), dict(dilation=3, padding=3)),  # a band whose every column is padding
]


def _operands(rng, x_shape, w_shape, out_channels):
    return t64(rng, *x_shape), t64(rng, *w_shape), t64(rng, out_channels)


def _torch_parity(fn, tfn, x, w, b, options):
    """Forward and every gradient (input, weight, bias) against torch in float64."""
    torch = pytest.importorskip("torch")
    y = fn(x, w, b, **options)
    g = np.random.default_rng(7).standard_normal(y.shape)
    y.backward(g)
    tx, tw, tb = (torch.tensor(t.numpy(), requires_grad=True) for t in (x, w, b))
    ty = tfn(tx, tw, tb, **options)
    ty.backward(torch.tensor(g))
    assert y.shape == tuple(ty.shape) and y.dtype == np.float64
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    for ours, theirs in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("x_shape,w_shape,options", CONV_CASES)
def test_conv2d_parity_with_torch(x_shape, w_shape, options, rng):
    torch = pytest.importorskip("torch")
    x, w, b = _operands(rng, x_shape, w_shape, w_shape[0])
    _torch_parity(F.conv2d, torch.nn.functional.conv2d, x, w, b, options)


@pytest.mark.parametrize("x_shape,w_shape,options", TRANSPOSE_CASES)
def test_conv_transpose2d_parity_with_torch(x_shape, w_shape, options, rng):
    torch = pytest.importorskip("torch")
    x, w, b = _operands(rng, x_shape, w_shape, w_shape[1] * options.get("groups", 1))
    _torch_parity(F.conv_transpose2d, torch.nn.functional.conv_transpose2d, x, w, b, options)


@pytest.mark.parametrize("x_shape,w_shape,options", [
    ((2, 4, 5, 6), (3, 4, 3, 3), dict(padding=1)),
    ((1, 4, 5, 6), (4, 2, 2, 3), dict(stride=(2, 1), padding="valid", dilation=(1, 2), groups=2)),
    ((1, 2, 4, 5), (3, 2, 2, 2), dict(padding="same", dilation=2)),
    ((1, 4, 3, 4), (2, 4, 1, 1), dict()),
])
def test_conv2d_gradcheck(x_shape, w_shape, options, rng):
    x, w, b = _operands(rng, x_shape, w_shape, w_shape[0])
    assert sg.gradcheck(lambda x, w, b: F.conv2d(x, w, b, **options), (x, w, b))


@pytest.mark.parametrize("x_shape,w_shape,options", [
    ((2, 4, 3, 3), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 3, 2), (4, 1, 2, 3), dict(stride=(1, 2), dilation=(2, 1), groups=2, output_padding=(1, 0))),
    ((1, 3, 2, 3), (3, 2, 1, 1), dict()),
])
def test_conv_transpose2d_gradcheck(x_shape, w_shape, options, rng):
    x, w, b = _operands(rng, x_shape, w_shape, w_shape[1] * options.get("groups", 1))
    assert sg.gradcheck(lambda x, w, b: F.conv_transpose2d(x, w, b, **options), (x, w, b))


def test_conv2d_hand_worked_value():
    x = sg.tensor(np.arange(9.0).reshape(1, 1, 3, 3), dtype=np.float64)
    w = sg.tensor(np.array([[[[1.0, 2.0], [3.0, 4.0]]]]), dtype=np.float64)
    # top-left window [[0, 1], [3, 4]] . [[1, 2], [3, 4]] = 0 + 2 + 9 + 16 = 27, plus bias 0.5
    y = F.conv2d(x, w, sg.tensor(np.array([0.5]), dtype=np.float64))
    np.testing.assert_array_equal(y.numpy()[0, 0], [[27.5, 37.5], [57.5, 67.5]])
    # transposed: a single 1 at (0, 0) with stride 2 stamps the kernel at the top-left of a 4x4 output
    one = sg.tensor(np.array([[[[1.0, 0.0], [0.0, 0.0]]]]), dtype=np.float64)
    z = F.conv_transpose2d(one, w, stride=2)
    np.testing.assert_array_equal(z.numpy()[0, 0], [[1, 2, 0, 0], [3, 4, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])


@pytest.mark.parametrize("options", [dict(stride=2, padding=1, dilation=(1, 2), groups=2), dict()])
def test_conv_and_transpose_are_adjoint(options, rng):
    """<conv2d(x, w), y> == <x, conv_transpose2d(y, w)> for every x, y."""
    x, w = rng.standard_normal((2, 4, 7, 8)), rng.standard_normal((6, 2, 3, 3))
    if not options:
        w = rng.standard_normal((6, 4, 3, 3))
    cx = F.conv2d(sg.tensor(x, dtype=np.float64), sg.tensor(w, dtype=np.float64), **options).numpy()
    y = rng.standard_normal(cx.shape)
    extra = {k: v for k, v in options.items()}
    # output_padding recovers the input size lost to the stride's floor
    full = F.conv_transpose2d(sg.tensor(y, dtype=np.float64), sg.tensor(w, dtype=np.float64), **extra)
    pad = tuple(a - b for a, b in zip(x.shape[2:], full.shape[2:]))
    ty = F.conv_transpose2d(sg.tensor(y, dtype=np.float64), sg.tensor(w, dtype=np.float64),
                            output_padding=pad, **extra).numpy()
    assert np.isclose(np.vdot(cx, y), np.vdot(x, ty), rtol=1e-12)


def test_float32_stays_float32_and_matches_float64(rng):
    arrays = [rng.standard_normal(s) for s in ((2, 4, 6, 5), (3, 4, 3, 3), (3,), (4,))]
    results = {}
    for dt in (np.float32, np.float64):
        X, W, B, B2 = (sg.tensor(a, requires_grad=True, dtype=dt) for a in arrays)
        y = F.conv2d(X, W, B, padding=1)
        z = F.conv_transpose2d(y, W, B2, padding=1)
        z.backward(np.ones(z.shape, dt))
        assert y.dtype == z.dtype == X.grad.dtype == W.grad.dtype == B.grad.dtype == B2.grad.dtype == dt
        results[dt] = (z.numpy(), X.grad.numpy(), W.grad.numpy(), B.grad.numpy(), B2.grad.numpy())
    for a, b64 in zip(results[np.float32], results[np.float64]):
        np.testing.assert_allclose(a, b64, rtol=1e-4, atol=1e-4 * np.abs(b64).max())


def test_only_the_needed_gradients_are_computed(rng, monkeypatch):
    x, w = t64(rng, 1, 2, 4, 4, requires_grad=False), t64(rng, 3, 2, 3, 3)
    calls = []
    for name in ("_correlate_adjoint", "_weight_grad"):
        real = getattr(conv_module, name)
        monkeypatch.setattr(conv_module, name,
                            lambda *a, _r=real, _n=name, **k: calls.append(_n) or _r(*a, **k))
    F.conv2d(x, w).sum().backward()  # also a broadcast (non-contiguous) upstream gradient
    assert calls == ["_weight_grad"] and x.grad is None
    np.testing.assert_allclose(w.grad.numpy()[0], w.grad.numpy()[1])  # sum(): the same for every output


@pytest.mark.parametrize("transpose,x_shape,w_shape,options", [
    (False, (3, 4, 7, 6), (4, 2, 3, 3), dict(stride=2, padding=1, groups=2)),
    (True, (3, 4, 7, 6), (4, 2, 3, 3), dict(stride=2, padding=1, groups=2, output_padding=1)),
    (False, (3, 4, 7, 6), (4, 4, 3, 3), dict(padding=(1, 2), dilation=(1, 2))),
    (True, (3, 4, 7, 6), (4, 4, 3, 3), dict(padding=(1, 2), dilation=(1, 2))),
    (False, (3, 4, 7, 6), (3, 4, 3, 3), dict(padding=1)),
    (True, (3, 3, 7, 6), (3, 4, 3, 3), dict(padding=1)),
])
def test_tiny_column_buffer_gives_the_same_results(transpose, x_shape, w_shape, options, monkeypatch):
    """Tiles of one output row of one image (a 1-byte cap) equal the whole-batch computation: strided
    (col2im), and stride 1 with each side having the fewer channels (the flipped-kernel forms)."""
    fn = F.conv_transpose2d if transpose else F.conv2d
    out_channels = w_shape[1] * options.get("groups", 1) if transpose else w_shape[0]
    results = []
    for cap in (conv_module.COL_BUFFER_BYTES, 1, 700):  # whole batch, single rows, a few rows
        monkeypatch.setattr(conv_module, "COL_BUFFER_BYTES", cap)
        x, w, b = _operands(np.random.default_rng(3), x_shape, w_shape, out_channels)
        y = fn(x, w, b, **options)
        y.backward(np.cos(np.arange(y.numel())).reshape(y.shape))
        results.append([y.numpy(), x.grad.numpy(), w.grad.numpy(), b.grad.numpy()])
    for other in results[1:]:
        for a, ref in zip(other, results[0]):
            np.testing.assert_allclose(a, ref, rtol=1e-13, atol=1e-13)


def test_column_buffer_of_a_large_batch_stays_under_the_cap():
    """The issue's case: a 3x3 conv on (16, 64, 96, 96) float32 never builds a column matrix > 512 MB."""
    geo = conv_module._Geometry((3, 3), (1, 1), (1, 1), (1, 1), 1, (96, 96), (96, 96))
    tiles, elems, _ = conv_module._column_tiles((16, 64, np.float32), geo, 64)
    assert 4 * elems * conv_module._workers() <= conv_module.COL_BUFFER_BYTES <= 512 * 2**20
    direct_elems = conv_module._direct_tiles((16, 64, np.float32), geo)[1]
    assert 4 * direct_elems * conv_module._workers() <= conv_module.COL_BUFFER_BYTES
    covered = sorted((b, r) for b0, b1, r0, r1 in tiles for b in range(b0, b1) for r in range(r0, r1))
    assert covered == [(b, r) for b in range(16) for r in range(96)]  # every output row exactly once


def test_a_tiny_im2col_conv_is_one_tile_and_a_large_one_is_split():
    """Below _SERIAL_MACS (RCAN's channel attention: 1x1 on 1x1 maps) one tile, run on the calling
    thread; the same layer on 24 px maps is cut into tiles for the workers."""
    tiny = conv_module._Geometry((1, 1), (1, 1), (0, 0), (1, 1), 1, (1, 1), (1, 1))
    tiles, elems, K = conv_module._column_tiles((16, 32, np.float32), tiny, 4)
    assert (tiles, elems, K) == ([(0, 16, 0, 1)], 16 * 32, 32)
    large = conv_module._Geometry((3, 3), (1, 1), (1, 1), (1, 1), 1, (24, 24), (24, 24))
    assert 16 * 24 * 24 * 9 * 32 * 32 >= conv_module._SERIAL_MACS
    assert len(conv_module._column_tiles((16, 32, np.float32), large, 32)[0]) >= 2


def test_pointwise_and_wide_tiles_split_rows_of_one_image(monkeypatch):
    monkeypatch.setattr(conv_module, "COL_BUFFER_BYTES", 1000)
    tiles, nbytes = conv_module._split(2, 5, 300)  # 3 rows of 300 bytes fit the cap
    assert tiles == [(0, 1, 0, 3), (0, 1, 3, 5), (1, 2, 0, 3), (1, 2, 3, 5)] and nbytes == 900
    tiles, nbytes = conv_module._split(5, 2, 200)  # 2 images of 400 bytes fit
    assert tiles == [(0, 2, 0, 2), (2, 4, 0, 2), (4, 5, 0, 2)] and nbytes == 800


def test_worker_threads_match_one_thread_and_restore_blas_threads(rng, monkeypatch):
    """Tiles on the thread pool (also from two user threads at once) give the one-thread results, and
    BLAS gets its thread count back afterwards."""
    import threading
    x, w = rng.standard_normal((6, 4, 9, 8)), rng.standard_normal((5, 4, 3, 3))

    def grads():
        X, W = (sg.tensor(a, requires_grad=True, dtype=np.float64) for a in (x, w))
        y = F.conv2d(X, W, padding=1, stride=(1, 2))
        y.backward(np.cos(np.arange(y.numel())).reshape(y.shape))
        return [y.numpy(), X.grad.numpy(), W.grad.numpy()]

    before = sg.threads.blas_threads()
    results = [None, None]
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, grads())) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    monkeypatch.setattr(conv_module, "_workers", lambda: 1)
    serial = grads()
    for got in results:
        for a, ref in zip(got, serial):
            np.testing.assert_allclose(a, ref, rtol=1e-13, atol=1e-13)
    assert sg.threads.blas_threads() == before


@pytest.mark.parametrize("w_shape", [(3, 2, 3, 3), (16, 16, 3, 3)])  # im2col, direct
def test_empty_batch(w_shape, rng):
    x = sg.tensor(np.zeros((0, w_shape[1], 5, 4)), requires_grad=True, dtype=np.float64)
    w = t64(rng, *w_shape)
    y = F.conv2d(x, w, padding=1)
    y.backward(np.zeros(y.shape))
    assert y.shape == (0, w_shape[0], 5, 4) and x.grad.shape == x.shape
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros(w_shape))


def test_non_contiguous_input(rng):
    x = rng.standard_normal((2, 5, 6, 3)).transpose(0, 3, 1, 2)  # (2, 3, 5, 6), not C-contiguous
    w = rng.standard_normal((2, 3, 3, 3))
    ref = F.conv2d(sg.tensor(np.ascontiguousarray(x)), sg.tensor(w)).numpy()
    np.testing.assert_allclose(F.conv2d(sg.tensor(x), sg.tensor(w)).numpy(), ref, rtol=1e-12)


def _x(*shape, dtype=np.float64):
    return sg.tensor(np.zeros(shape), dtype=dtype)


@pytest.mark.parametrize("call,err,match", [
    (lambda: F.conv2d(_x(4, 5, 6), _x(3, 4, 3, 3)), ValueError,
     r"conv2d: expected a 4-D input \(N, C, H, W\), got input of shape \(4, 5, 6\) "
     r"\(weight \(3, 4, 3, 3\)\)"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(3, 4, 3)), ValueError, r"conv2d: expected a 4-D weight"),
    (lambda: F.conv2d(_x(1, 5, 5, 6), _x(3, 4, 3, 3)), ValueError,
     r"conv2d: input \(1, 5, 5, 6\) has 5 channels but weight \(3, 4, 3, 3\) with groups=1 expects 4"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(3, 2, 3, 3), groups=2), ValueError,
     r"conv2d: groups=2 does not divide the 3 output channels of weight \(3, 2, 3, 3\) "
     r"\(input \(1, 4, 5, 6\)\)"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(4, 2, 3, 3), groups=0), ValueError,
     r"groups must be a positive int"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(3, 4, 7, 3)), ValueError,
     r"conv2d: kernel \(7, 3\) with dilation \(1, 1\) spans \(7, 3\), larger than the padded input \(5, 6\) "
     r"\(input \(1, 4, 5, 6\), weight \(3, 4, 7, 3\)\)"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(3, 4, 3, 3), dilation=3), ValueError, r"spans \(7, 7\)"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(3, 4, 3, 3), stride=0), ValueError,
     r"conv2d: stride must be >= 1, got 0"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(3, 4, 3, 3), stride=(1, -2)), ValueError, r"stride must be >= 1"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(3, 4, 3, 3), padding=-1), ValueError,
     r"conv2d: padding must be >= 0, got -1"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(3, 4, 3, 3), padding=(1, 2, 3)), ValueError,
     r"padding must have 2 entries \(H, W\), got \(1, 2, 3\)"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(3, 4, 3, 3), padding="full"), ValueError,
     r"padding must be an int, a pair, 'same' or 'valid', got 'full'"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(3, 4, 3, 3), dilation=0), ValueError, r"dilation must be >= 1"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(3, 4, 3, 3), padding="same", stride=2), ValueError,
     r"padding='same' is not supported for strided convolutions"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(3, 4, 3, 3), _x(4)), ValueError,
     r"conv2d: bias of shape \(4,\) must have shape \(3,\)"),
    (lambda: F.conv2d(_x(1, 4, 5, 6, dtype=np.int64), _x(3, 4, 3, 3)), TypeError,
     r"conv2d: input must be float32 or float64, got dtype int64"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(3, 4, 3, 3, dtype=np.float32)), TypeError,
     r"conv2d: weight dtype float32 differs from input dtype float64"),
    (lambda: F.conv2d(_x(1, 4, 5, 6), _x(3, 4, 3, 3), _x(3, dtype=np.float32)), TypeError,
     r"conv2d: bias dtype float32 differs"),
    (lambda: F.conv_transpose2d(_x(2, 3, 4), _x(3, 2, 3, 3)), ValueError,
     r"conv_transpose2d: expected a 4-D input \(N, C, H, W\), got input of shape \(2, 3, 4\)"),
    (lambda: F.conv_transpose2d(_x(1, 4, 3, 3), _x(3, 2, 3, 3)), ValueError,
     r"conv_transpose2d: input \(1, 4, 3, 3\) has 4 channels but weight \(3, 2, 3, 3\) expects 3"),
    (lambda: F.conv_transpose2d(_x(1, 3, 3, 3), _x(3, 2, 3, 3), groups=2), ValueError,
     r"conv_transpose2d: groups=2 does not divide the 3 input channels of weight \(3, 2, 3, 3\)"),
    (lambda: F.conv_transpose2d(_x(1, 3, 3, 3), _x(3, 2, 3, 3), stride=2, output_padding=2), ValueError,
     r"conv_transpose2d: output_padding \(2, 2\) must be smaller than stride \(2, 2\) or dilation \(1, 1\)"),
    (lambda: F.conv_transpose2d(_x(1, 3, 1, 1), _x(3, 2, 3, 3), padding=2), ValueError,
     r"conv_transpose2d: output size \(-1, -1\) is below 1 \(input \(1, 3, 1, 1\), weight \(3, 2, 3, 3\)"),
    (lambda: F.conv_transpose2d(_x(1, 3, 3, 3), _x(3, 2, 3, 3), _x(3)), ValueError,
     r"conv_transpose2d: bias of shape \(3,\) must have shape \(2,\)"),
    (lambda: F.conv_transpose2d(_x(1, 3, 3, 3), _x(3, 2, 3, 3), padding="same"), TypeError,
     r"conv_transpose2d: padding must be an int or a pair of ints, got 'same'"),
    (lambda: F.conv_transpose2d(_x(1, 3, 3, 3, dtype=np.float32), _x(3, 2, 3, 3)), TypeError,
     r"conv_transpose2d: weight dtype float64 differs from input dtype float32"),
])
def test_errors(call, err, match):
    with pytest.raises(err, match=match):
        call()


@pytest.mark.parametrize("transpose,w_shape,options", [
    (False, (2, 6, 5, 5), dict(padding=2)),                       # fewer outputs: input grad by col2im
    (False, (3, 6, 3, 3), dict(stride=2, padding=1)),             # strided: col2im adjoint
    (True, (6, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),  # strided transpose forward
])
@pytest.mark.parametrize("cap", [1, 2000, None])
def test_one_image_adjoint_tasks_match_torch(transpose, w_shape, options, cap, monkeypatch):
    """One image and two workers: the adjoint (col2im) runs an image's bands as tasks that own
    disjoint rows of x (the inference path); any tile cap gives torch's values and gradients."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(conv_module, "_workers", lambda: 2)
    if cap is not None:
        monkeypatch.setattr(conv_module, "COL_BUFFER_BYTES", cap)
    fn, tfn = (F.conv_transpose2d, torch.nn.functional.conv_transpose2d) if transpose else (
        F.conv2d, torch.nn.functional.conv2d)
    rng = np.random.default_rng(7)
    out_channels = w_shape[1] if transpose else w_shape[0]
    x, w, b = _operands(rng, (1, 6, 11, 9), w_shape, out_channels)
    y = fn(x, w, b, **options)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    tx, tw, tb = (torch.tensor(a.numpy(), requires_grad=True) for a in (x, w, b))
    ty = tfn(tx, tw, tb, **options)
    ty.backward(torch.tensor(g))
    for ours, ref in ((y, ty), (x.grad, tx.grad), (w.grad, tw.grad), (b.grad, tb.grad)):
        np.testing.assert_allclose(ours.numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-10)


# -- relu_slope: leaky_relu / relu fused into conv2d ----------------------------------------------------

RELU_CASES = [((2, 3, 5, 7), (4, 3, 3, 3), dict(padding=1)),           # im2col
              ((1, 1, 1, 1), (2, 1, 1, 1), dict()),                      # one pixel, pointwise
              ((2, 16, 6, 5), (16, 16, 3, 3), dict(padding=1)),         # direct
              ((1, 3, 9, 8), (5, 3, 3, 3), dict(stride=2, padding=1))]  # strided


@pytest.mark.parametrize("slope", [0.0, 0.2])
@pytest.mark.parametrize("x_shape,w_shape,options", RELU_CASES)
def test_conv2d_relu_slope_matches_torch(slope, x_shape, w_shape, options, rng):
    """conv2d(relu_slope=s) = leaky_relu(conv2d(...), s) in value and every gradient (float64)."""
    torch = pytest.importorskip("torch")
    x, w, b = t64(rng, *x_shape), t64(rng, *w_shape), t64(rng, w_shape[0])
    y = F.conv2d(x, w, b, relu_slope=slope, **options)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    tx, tw, tb = (torch.tensor(t.numpy(), requires_grad=True) for t in (x, w, b))
    ty = torch.nn.functional.leaky_relu(torch.nn.functional.conv2d(tx, tw, tb, **options), slope)
    ty.backward(torch.from_numpy(g))
    assert (y.numpy() < 0).any() == (slope > 0) and (y.numpy() > 0).any()  # both branches taken
    for ours, theirs in ((y, ty), (x.grad, tx.grad), (w.grad, tw.grad), (b.grad, tb.grad)):
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("slope", [0.0, 0.3])
def test_conv2d_relu_slope_gradcheck_float32_and_errors(slope, rng):
    x, w, b = t64(rng, 2, 3, 4, 5), t64(rng, 4, 3, 3, 3), t64(rng, 4)
    assert sg.gradcheck(lambda x, w, b: F.conv2d(x, w, b, padding=1, relu_slope=slope), (x, w, b))
    x32 = sg.tensor(x.numpy().astype(np.float32), requires_grad=True)
    y = F.conv2d(x32, sg.tensor(w.numpy().astype(np.float32)), relu_slope=slope)
    y.backward(np.ones(y.shape, np.float32))
    assert y.dtype == x32.grad.dtype == np.float32
    ref = F.leaky_relu(F.conv2d(x32, sg.tensor(w.numpy().astype(np.float32))), slope)
    np.testing.assert_array_equal(y.numpy(), ref.numpy())  # the same float32 values as unfused
    with pytest.raises(ValueError, match="conv2d: relu_slope"):
        F.conv2d(x, w, relu_slope=-0.1)

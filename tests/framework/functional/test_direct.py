"""The direct convolution route (functional/_direct.py): forward, input gradient and weight gradient
against torch in float64 and by gradcheck, the fused bias and activation, tiles and threads, float32
accuracy against float64, the route's rule. That an AVX2 build (its blocks of 6 channels x 16 pixels)
gives the same bits as an AVX-512 one (8 x 32): tests/framework/test_isa_independence.py."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.functional import _direct
from framework.functional import conv as conv_module
from tests.conftest import t64

# (input, weight, options): widths that are and are not a multiple of the vector, more output
# channels than one block of 8 and a partial last block, 5x5 and 7x7 (one input channel), a 1x1 with
# padding, no padding, uneven "same" padding, one pixel; every one with >= 32 products per output
CASES = [
    ((2, 4, 5, 9), (16, 4, 3, 3), dict(padding=1)),
    ((1, 4, 6, 17), (19, 4, 3, 3), dict(padding=1)),
    ((2, 1, 6, 8), (40, 1, 7, 7), dict(padding=3)),
    ((1, 2, 7, 6), (16, 2, 5, 5), dict(padding=2)),
    ((2, 4, 6, 5), (17, 4, 3, 3), dict()),
    ((1, 4, 5, 6), (16, 4, 2, 4), dict(padding="same")),
    ((2, 32, 3, 4), (16, 32, 1, 1), dict(padding=1)),
    ((1, 4, 1, 1), (16, 4, 3, 3), dict(padding=1)),
]


def _spy(monkeypatch):
    """Count the direct route's forward (and input-gradient) and weight-gradient calls."""
    calls = {"correlate": 0, "weight_grad": 0}
    for name in calls:
        real = getattr(_direct, name)

        def counted(*args, _name=name, _real=real, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)
        monkeypatch.setattr(_direct, name, counted)
    return calls


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("x_shape,w_shape,options", CASES)
def test_matches_torch_and_gradcheck(x_shape, w_shape, options, rng, monkeypatch):
    """conv2d's value and every gradient through the direct route against torch (float64); the input
    gradient is the direct forward of the flipped kernel wherever it has 12+ channels to fill."""
    torch = pytest.importorskip("torch")
    calls = _spy(monkeypatch)
    x, w, b = t64(rng, *x_shape), t64(rng, *w_shape), t64(rng, w_shape[0])
    y = F.conv2d(x, w, b, **options)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    tx, tw, tb = (torch.tensor(t.numpy(), requires_grad=True) for t in (x, w, b))
    ty = torch.nn.functional.conv2d(tx, tw, tb, **options)
    ty.backward(torch.from_numpy(g))
    for ours, theirs in ((y, ty), (x.grad, tx.grad), (w.grad, tw.grad), (b.grad, tb.grad)):
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-11, atol=1e-11)
    assert calls == {"correlate": 1, "weight_grad": 1}  # the input gradient has < 12 channels
    x, w, b = t64(rng, *x_shape), t64(rng, *w_shape), t64(rng, w_shape[0])
    assert sg.gradcheck(lambda x, w, b: F.conv2d(x, w, b, **options), (x, w, b))


def test_input_gradient_and_transposed_conv_take_the_direct_route(rng, monkeypatch):
    """16 channels on both sides: the input gradient is the flipped kernel's direct forward, and so is
    a stride-1 conv_transpose2d (whose weight gradient is the direct weight gradient too)."""
    torch = pytest.importorskip("torch")
    calls = _spy(monkeypatch)
    x, w = t64(rng, 1, 16, 5, 6), t64(rng, 16, 16, 3, 3)
    F.conv2d(x, w, padding=1).backward(np.ones((1, 16, 5, 6)))
    assert calls == {"correlate": 2, "weight_grad": 1}
    xt, wt, bt = t64(rng, 2, 16, 4, 3), t64(rng, 16, 18, 3, 3), t64(rng, 18)
    yt = F.conv_transpose2d(xt, wt, bt, padding=1)
    yt.backward(np.ones(yt.shape))
    assert calls == {"correlate": 4, "weight_grad": 2}
    tx, tw, tb = (torch.tensor(t.numpy(), requires_grad=True) for t in (xt, wt, bt))
    ty = torch.nn.functional.conv_transpose2d(tx, tw, tb, padding=1)
    ty.backward(torch.ones(ty.shape, dtype=torch.float64))
    for ours, theirs in ((yt, ty), (xt.grad, tx.grad), (wt.grad, tw.grad), (bt.grad, tb.grad)):
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("w_shape", [(32, 3, 3, 3), (16, 1, 3, 3), (12, 2, 2, 2)])
def test_a_first_layer_takes_the_direct_route(w_shape, rng, monkeypatch):
    """3 x 3 x 3 taps (and down to 8): the forward and the weight gradient are the direct route's (the
    input gradient, to 3 channels or fewer, im2col's); value and gradients against torch in float64."""
    torch = pytest.importorskip("torch")
    calls = _spy(monkeypatch)
    x, w, b = t64(rng, 3, w_shape[1], 7, 9), t64(rng, *w_shape), t64(rng, w_shape[0])
    y = F.conv2d(x, w, b, padding=1)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    assert calls == {"correlate": 1, "weight_grad": 1}
    tx, tw, tb = (torch.tensor(t.numpy(), requires_grad=True) for t in (x, w, b))
    ty = torch.nn.functional.conv2d(tx, tw, tb, padding=1)
    ty.backward(torch.from_numpy(g))
    for ours, theirs in ((y, ty), (x.grad, tx.grad), (w.grad, tw.grad), (b.grad, tb.grad)):
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("slope", [0.0, 0.25])
def test_fused_activation_is_the_unfused_one_bit_for_bit(slope, dtype, rng):
    """relu_slope in the store: the same bits as rectify_ after the conv, -0 to +0 under relu, NaN
    kept; and its gradient."""
    x = rng.standard_normal((2, 4, 6, 9)).astype(dtype)
    x[0, 0, 2, 3] = np.nan
    w = rng.standard_normal((16, 4, 3, 3)).astype(dtype)
    w[5] = -0.0  # channel 5 is -0.0 everywhere outside the NaN's reach
    X = sg.tensor(x, requires_grad=True)
    y = F.conv2d(X, sg.tensor(w), padding=1, relu_slope=slope)
    act = (lambda t: F.relu(t)) if slope == 0 else (lambda t: F.leaky_relu(t, slope))
    ref = act(F.conv2d(sg.tensor(x), sg.tensor(w), padding=1)).numpy()
    np.testing.assert_array_equal(y.numpy(), ref)
    assert np.array_equal(np.signbit(y.numpy()), np.signbit(ref)) and np.isnan(y.numpy()).any()
    if slope == 0:
        assert not np.signbit(y.numpy()[1, 5]).any()
    g = rng.standard_normal(y.shape).astype(dtype)
    y.backward(g)
    X2 = sg.tensor(x, requires_grad=True)
    act(F.conv2d(X2, sg.tensor(w), padding=1)).backward(g)
    np.testing.assert_array_equal(X.grad.numpy(), X2.grad.numpy())


def test_tiles_and_threads_do_not_change_a_bit(rng, monkeypatch):
    """Whole images, bands of rows (a tiny buffer cap), one worker and two: the same bits; one image
    alone equals that image in the batch (each output is one fixed chain of multiply-adds)."""
    x = rng.standard_normal((3, 32, 11, 13)).astype(np.float32)
    w = (rng.standard_normal((48, 32, 3, 3)) * 0.1).astype(np.float32)
    b = rng.standard_normal(48).astype(np.float32)
    g = rng.standard_normal((3, 48, 11, 13)).astype(np.float32)

    def run():
        X, W, B = (sg.tensor(a, requires_grad=True) for a in (x, w, b))
        y = F.conv2d(X, W, B, padding=1, relu_slope=0.1)
        y.backward(g)
        return y.numpy(), X.grad.numpy(), W.grad.numpy()

    ref = run()
    for workers, cap in ((1, conv_module.COL_BUFFER_BYTES), (2, conv_module.COL_BUFFER_BYTES), (2, 1)):
        monkeypatch.setattr(conv_module, "_workers", lambda workers=workers: workers)
        monkeypatch.setattr(conv_module, "COL_BUFFER_BYTES", cap)
        for a, r in zip(run(), ref):
            np.testing.assert_array_equal(a, r)
    one = F.conv2d(sg.tensor(x[1:2]), sg.tensor(w), sg.tensor(b), padding=1, relu_slope=0.1).numpy()
    np.testing.assert_array_equal(one, ref[0][1:2])


def _float32_errors(x_shape, w_shape, rng):
    """Max |float32 - float64| / max |float64| of conv2d's output, input gradient and weight gradient
    (3x3, padding 1), inputs like a ReLU network's: nonnegative activations, He weights."""
    x = np.maximum(rng.standard_normal(x_shape), 0)
    w = rng.standard_normal(w_shape) * np.sqrt(2 / (w_shape[1] * 9))
    g = rng.standard_normal((x_shape[0], w_shape[0], *x_shape[2:])) * 1e-3
    out = {}
    for dt in (np.float64, np.float32):
        X, W = sg.tensor(x.astype(np.float32).astype(dt), requires_grad=True), sg.tensor(
            w.astype(np.float32).astype(dt), requires_grad=True)
        y = F.conv2d(X, W, padding=1)
        y.backward(g.astype(np.float32).astype(dt))
        out[dt] = (y.numpy(), X.grad.numpy(), W.grad.numpy())
    return [float(np.abs(a - r).max() / np.abs(r).max()) for a, r in zip(out[np.float32], out[np.float64])]


# (input, weight): the small-map training layers, the 64-channel layers of VGG19 at 64 px (Winograd
# F(4, 3) before, 6e-6: issue 31), a deep VGG layer
@pytest.mark.parametrize("x_shape,w_shape", [((8, 64, 16, 16), (64, 64, 3, 3)),
                                             ((4, 32, 24, 24), (32, 32, 3, 3)),
                                             ((1, 64, 64, 64), (64, 64, 3, 3)),
                                             ((1, 256, 16, 16), (256, 256, 3, 3))])
def test_float32_error_is_im2cols(x_shape, w_shape, rng):
    """The forward, input gradient and weight gradient in float32 within 8e-7 of the largest float64
    value: im2col's (OpenBLAS) error on these shapes is 2-6e-7, Winograd F(4, 3)'s was 3-11e-6
    (docs/benchmarks.md); the direct route's blocked sums stay at 2-5e-7."""
    errors = _float32_errors(x_shape, w_shape, rng)
    assert max(errors) < 8e-7, errors


def test_route_choice():
    """Stride 1, no dilation, no groups, not a plain 1x1 GEMM, 12+ output channels and 8+ products
    per output; a function of the shapes only (docs/benchmarks.md's thresholds)."""
    def geo(k=3, side=8, **kw):
        pad = kw.get("padding", k // 2)
        return conv_module._Geometry((k, k), kw.get("stride", (1, 1)), (pad, pad), kw.get("dilation", (1, 1)),
                                     kw.get("groups", 1), (side, side), (side, side))
    route = conv_module._direct_route
    assert route(geo(), 4, 16) and route(geo(side=512), 64, 64) and route(geo(5), 2, 16)
    assert route(geo(1, padding=1), 32, 16)  # a padded 1x1 is no plain GEMM
    assert route(geo(), 3, 64) and route(geo(), 1, 16)  # a first layer's 27 products, a grey image's 9
    assert not route(geo(2), 1, 16)  # 4 products: im2col's GEMM
    assert route(geo(side=48), 12, 12)  # FSRCNN's mapping layers
    assert not route(geo(), 64, 11) and not route(geo(1, padding=0), 64, 64)
    for g in (geo(stride=(2, 2)), geo(dilation=(2, 2)), geo(groups=2)):
        assert not route(g, 64, 64)

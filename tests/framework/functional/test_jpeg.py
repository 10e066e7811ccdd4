"""F.diff_jpeg against the torch twin of BasicSR's DiffJPEG (tests/twins/diffjpeg.py): values at
every integer quality 1..99 and fractional ones, sizes that are not multiples of 16, both
roundings, every gradient; float64 gradchecks; quality 100 as the no-quantisation limit; a gray
image as DiffJPEG's Y; the clamp's tie rule; argument errors."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework import nn
from framework.functional import jpeg as J

torch = pytest.importorskip("torch")
from tests.twins.diffjpeg import DiffJPEG  # noqa: E402

DTYPES = {np.float64: torch.float64, np.float32: torch.float32}


def images(rng, shape, dtype=np.float64):
    """Random images with a black and a white patch (clamped outputs, saturated blocks)."""
    x = rng.random(shape)
    x[0, :, :5, :5] = 0
    x[-1, :, -6:, -6:] = 1
    return x.astype(dtype)


def twin(x, quality, differentiable, g=None):
    """The twin's output (and input gradient for upstream g), in x's dtype."""
    xt = torch.tensor(x, requires_grad=g is not None)
    q = torch.tensor(np.broadcast_to(quality, (x.shape[0],)), dtype=DTYPES[x.dtype.type])
    out = DiffJPEG(differentiable).to(DTYPES[x.dtype.type])(xt, q)
    if g is None:
        return out.detach().numpy(), None
    out.backward(torch.tensor(g))
    return out.detach().numpy(), xt.grad.numpy()


def ours(x, quality, differentiable, g=None):
    xs = sg.tensor(x, requires_grad=g is not None)
    out = F.diff_jpeg(xs, quality, differentiable)
    assert out.dtype == x.dtype and out.shape == x.shape
    if g is None:
        return out.numpy(), None
    out.backward(g)
    return out.numpy(), xs.grad.numpy()


@pytest.mark.parametrize("differentiable", [True, False])
def test_every_quality_1_to_99_matches_diffjpeg(differentiable):
    # one image per quality (each its own table scale), 20 x 27: padded to 32 x 32 and cropped
    rng = np.random.default_rng(0)
    q = np.concatenate([np.arange(1, 100), [1.5, 33.3, 49.99, 50.0, 50.01, 64.7, 94.9]])
    x = images(rng, (q.size, 3, 20, 27))
    want, _ = twin(x, q, differentiable)
    got, _ = ours(x, q, differentiable)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert np.abs(got - x).mean() > 0.01  # it did compress (and differently per quality)


@pytest.mark.parametrize("shape", [(2, 3, 16, 16), (2, 3, 37, 45), (1, 3, 8, 1), (3, 3, 33, 17)])
@pytest.mark.parametrize("differentiable", [True, False])
def test_values_and_gradient_match_diffjpeg_float64(shape, differentiable):
    rng = np.random.default_rng(1)
    x = images(rng, shape)
    q = rng.uniform(5, 95, shape[0])
    g = rng.standard_normal(shape)
    want, want_grad = twin(x, q, differentiable, g)
    got, grad = ours(x, q, differentiable, g)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    scale = np.abs(want_grad).max()
    assert (scale > 0.1) == differentiable  # plain rounding: zero gradient, as torch.round's
    np.testing.assert_allclose(grad, want_grad, rtol=0, atol=1e-12 * max(scale, 1))


@pytest.mark.parametrize("differentiable", [True, False])
def test_float32_matches_diffjpeg_float32(differentiable):
    # float32 rounding can move a coefficient across a rounding boundary (in torch as here), which
    # changes its whole block: nearly every value agrees to float32 precision
    rng = np.random.default_rng(2)
    x = images(rng, (3, 3, 40, 56), np.float32)
    q = np.array([22.5, 50.0, 87.25])
    g = rng.standard_normal(x.shape).astype(np.float32)
    want, want_grad = twin(x, q, differentiable, g)
    got, grad = ours(x, q, differentiable, g)
    err = np.abs(got - want)
    assert np.quantile(err, 0.99) <= 1e-6 and np.mean(err > 1e-5) < 0.01
    if differentiable:  # 3 (q - round q)^2 loses digits in float32: relative to the largest
        gerr = np.abs(grad - want_grad) / np.abs(want_grad).max()
        assert np.quantile(gerr, 0.99) <= 1e-4 and np.mean(gerr > 1e-3) < 0.01
    else:
        assert not grad.any() and not want_grad.any()


def test_gradcheck_rgb_with_a_quality_per_image():
    rng = np.random.default_rng(3)
    x = sg.tensor(rng.uniform(0.2, 0.8, (3, 3, 10, 13)), requires_grad=True)
    assert sg.gradcheck(lambda t: F.diff_jpeg(t, [30.3, 71.9, 100]), (x,))


def test_gradcheck_gray():
    rng = np.random.default_rng(4)
    x = sg.tensor(rng.uniform(0.2, 0.8, (1, 1, 9, 17)), requires_grad=True)
    assert sg.gradcheck(lambda t: F.diff_jpeg(t, 61.7), (x,))


def test_quality_100_is_the_limit_without_quantisation():
    # DiffJPEG divides by a factor of 0 at quality 100 (NaN); here the tables scale to 0, i.e. only
    # the 4:2:0 chroma and the transforms remain: DiffJPEG's value as the quality tends to 100
    rng = np.random.default_rng(5)
    x = images(rng, (2, 3, 24, 19))
    got, _ = ours(x, 100, True)
    assert np.isnan(twin(x, 100.0, True)[0]).all()
    np.testing.assert_allclose(got, twin(x, 100 - 1e-7, True)[0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(got, ours(x, 100, False)[0], rtol=0, atol=0)
    gray = np.repeat(x[:, :1], 3, axis=1)  # no chroma: lossless up to the float32 constants
    np.testing.assert_allclose(ours(gray, 100, True)[0], gray, rtol=0, atol=1e-7)
    # its derivative is the transforms' (inverse pairs, to the float32 constants): away from the
    # clamp a gray image's gradient passes through
    inside = rng.uniform(0.1, 0.9, (2, 1, 24, 19))
    g = rng.standard_normal(inside.shape)
    np.testing.assert_allclose(ours(inside, 100, False, g)[1], g, rtol=0, atol=1e-6)


def test_gray_is_diffjpeg_s_luma():
    # a 1-channel image is coded as DiffJPEG codes Y: its RGB repetition's output (any channel)
    rng = np.random.default_rng(6)
    x = images(rng, (2, 1, 21, 30))
    g = rng.standard_normal(x.shape)
    want, want_grad = twin(np.repeat(x, 3, axis=1), [35.0, 80.0], True,
                           np.concatenate([g, 0 * g, 0 * g], axis=1))
    got, grad = ours(x, [35.0, 80.0], True, g)
    # DiffJPEG's float32 colour constants give Y = (1 + ~1e-8) gray and chroma of ~1e-8
    np.testing.assert_allclose(got[:, 0], want[:, 0], rtol=0, atol=1e-7)
    np.testing.assert_allclose(grad, want_grad.sum(axis=1, keepdims=True), rtol=0, atol=1e-6)


def test_quality_to_factor_is_diffjpeg_s():
    np.testing.assert_allclose(J.quality_to_factor([1, 25, 49.5, 50, 75, 95, 100]),
                               [50, 2, 5000 / 49.5 / 100, 1, 0.5, 0.1, 0], rtol=1e-15)


def test_the_clamp_halves_the_gradient_at_a_tie():
    # torch.min(255, torch.max(0, v)) gives 1/2 of the gradient where v is exactly 0 or 255
    y = np.array([[[0.0, 255.0, 10.0, -3.0, 300.0, 254.999]]])
    zero = np.zeros((1, 1, 3))
    out, slope = np.empty((1, 3, 1, 6)), np.empty((1, 3, 1, 6))
    J._join(y, zero, zero, np.eye(3), np.zeros(3), 1.0, 1.0, out, slope)
    np.testing.assert_array_equal(slope[0, 0, 0], [0.5, 0.5, 1, 0, 0, 1])
    np.testing.assert_array_equal(out[0, 0, 0], np.clip(y[0, 0], 0, 255) / 255)


def test_layer_in_a_loss_trains_through_the_compression():
    # a loss through compression: a conv, then DiffJPEG, then L1; the conv's gradients as torch's
    rng = np.random.default_rng(7)
    x, target = rng.random((2, 3, 12, 20)), rng.random((2, 3, 12, 20))
    conv = nn.Conv2d(3, 3, 3, padding=1).to(np.float64)
    jpeg = nn.DiffJPEG()
    loss = F.l1_loss(jpeg(conv(sg.tensor(x)), [40.0, 90.0]), sg.tensor(target))
    loss.backward()
    tconv = torch.nn.Conv2d(3, 3, 3, padding=1).double()
    with torch.no_grad():
        tconv.weight.copy_(torch.tensor(conv.weight.numpy()))
        tconv.bias.copy_(torch.tensor(conv.bias.numpy()))
    tloss = torch.nn.functional.l1_loss(
        DiffJPEG().double()(tconv(torch.tensor(x)), torch.tensor([40.0, 90.0], dtype=torch.float64)),
        torch.tensor(target))
    tloss.backward()
    assert loss.item() == pytest.approx(tloss.item(), rel=1e-12)
    np.testing.assert_allclose(conv.weight.grad.numpy(), tconv.weight.grad.numpy(), rtol=0,
                               atol=1e-12)
    assert np.abs(conv.weight.grad.numpy()).max() > 1e-3


def test_layer_default_quality_and_registry():
    from framework.registry import LAYERS
    layer = LAYERS.build({"type": "DiffJPEG", "differentiable": False, "quality": 55})
    x = np.random.default_rng(8).random((1, 3, 16, 16))
    np.testing.assert_array_equal(layer(sg.tensor(x)).numpy(), F.diff_jpeg(x, 55, False).numpy())
    assert repr(layer) == "DiffJPEG(differentiable=False, quality=55)"
    with pytest.raises(ValueError, match="DiffJPEG: no quality"):
        nn.DiffJPEG()(sg.tensor(x))
    with pytest.raises(ValueError, match=r"DiffJPEG\(differentiable=True\): diff_jpeg: expected"):
        nn.DiffJPEG()(sg.tensor(x[:, :2]), 50)


@pytest.mark.parametrize("call, error, match", [
    (lambda x: F.diff_jpeg(x[:, :2], 50), ValueError, r"expected \(N, 3, H, W\) or \(N, 1, H, W\)"),
    (lambda x: F.diff_jpeg(x[0], 50), ValueError, r"got shape \(3, 8, 8\)"),
    (lambda x: F.diff_jpeg(x[:, :, :0], 50), ValueError, "must not be empty"),
    (lambda x: F.diff_jpeg(x.astype(np.int64), 50), TypeError, "must be float32 or float64"),
    (lambda x: F.diff_jpeg(x, 0.5), ValueError, r"quality must be in \[1, 100\], got 0.5"),
    (lambda x: F.diff_jpeg(x, [50, 101]), ValueError, r"quality must be in \[1, 100\]"),
    (lambda x: F.diff_jpeg(x, float("nan")), ValueError, r"quality must be in \[1, 100\]"),
    (lambda x: F.diff_jpeg(x, [50, 60, 70]), ValueError, "a number or 2 numbers"),
    (lambda x: F.diff_jpeg(x, "high"), ValueError, "a number or 2 numbers"),
    (lambda x: F.diff_jpeg(x, 50, differentiable=1), TypeError, "differentiable must be a bool"),
])
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call(np.zeros((2, 3, 8, 8)))

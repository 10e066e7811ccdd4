"""imresize (MATLAB's): its published weights, Pillow's BICUBIC away from the borders, a line-by-line
port of MATLAB's `contributions` (borders included), gradcheck, dtypes and errors."""
import math

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.functional.imresize import matlab_table
from tests.conftest import t64


def _matlab_cubic(x):
    absx = np.abs(x)
    return ((1.5 * absx ** 3 - 2.5 * absx ** 2 + 1) * (absx <= 1)
            + (-0.5 * absx ** 3 + 2.5 * absx ** 2 - 4 * absx + 2) * ((1 < absx) & (absx <= 2)))


def _matlab_contributions(in_length, out_length, scale):
    """MATLAB imresize.m's contributions() for the cubic kernel with antialiasing, 1-based as there,
    returned as a dense (out, in) matrix."""
    kernel_width = 4.0
    if scale < 1:
        h = lambda x: scale * _matlab_cubic(scale * x)
        kernel_width = kernel_width / scale
    else:
        h = _matlab_cubic
    x = np.arange(1, out_length + 1)[:, None]
    u = x / scale + 0.5 * (1 - 1 / scale)
    left = np.floor(u - kernel_width / 2)
    p = math.ceil(kernel_width) + 2
    indices = left + np.arange(p)[None, :]
    weights = h(u - indices)
    weights = weights / weights.sum(axis=1, keepdims=True)
    aux = np.concatenate([np.arange(1, in_length + 1), np.arange(in_length, 0, -1)])
    indices = aux[np.mod(indices - 1, aux.size).astype(int)]
    dense = np.zeros((out_length, in_length))
    np.add.at(dense, (np.repeat(np.arange(out_length), p), indices.ravel() - 1), weights.ravel())
    return dense


@pytest.mark.parametrize("n,scale,published", [
    (40, 1 / 2, [-0.011719, -0.035156, 0.113281, 0.433594, 0.433594, 0.113281, -0.035156, -0.011719]),
    (60, 1 / 3, [-0.012346, -0.024691, 0.111111, 0.259259, 0.333333, 0.259259, 0.111111, -0.024691,
                 -0.012346]),
    (20, 2.0, [-0.0703125, 0.8671875, 0.2265625, -0.0234375]),  # x2 up, odd output: phase 0.25
])
def test_published_matlab_weights(n, scale, published):
    m = math.ceil(n * scale)
    table = matlab_table(n, m, scale, "cubic", True)
    o = m // 2 + 1  # an interior output (odd, for the x2 phase)
    row = table.dense()[o]
    np.testing.assert_allclose(row[row != 0], published, atol=1e-6)


@pytest.mark.parametrize("in_hw,scale", [((12, 9), 0.5), ((10, 13), 1 / 3), ((7, 5), 0.25),
                                         ((5, 6), 2.0), ((4, 3), 3.0), ((9, 11), 0.7)])
def test_matches_matlab_port_borders_included(in_hw, scale, rng):
    x = rng.standard_normal((2, 1, *in_hw))
    y = F.imresize(sg.Tensor(x), scale).data
    wh = _matlab_contributions(in_hw[0], math.ceil(in_hw[0] * scale), scale)
    ww = _matlab_contributions(in_hw[1], math.ceil(in_hw[1] * scale), scale)
    np.testing.assert_allclose(y, np.einsum("oh,nchw,pw->ncop", wh, x, ww), rtol=1e-12, atol=1e-12)


def test_mirrored_border_hand_worked():
    # x2 up, output 0 sits at u = -0.25: taps -2, -1, 0, 1 fold onto 1, 0, 0, 1
    x = np.array([[[[3.0, 5.0, 7.0, 11.0]]]])
    y = F.imresize(sg.Tensor(x), (1, 2)).data[0, 0, 0, 0]
    k = _matlab_cubic
    assert y == pytest.approx((k(1.75) + k(1.25)) * 5.0 + (k(0.75) + k(0.25)) * 3.0, abs=1e-14)


@pytest.mark.parametrize("n,scale", [(192, 0.5), (192, 1 / 3), (192, 0.25), (24, 2.0), (16, 3.0)])
def test_matches_pillow_bicubic_interior(n, scale, rng):
    """Pillow's BICUBIC is the same a=-0.5 cubic widened the same way; only the borders differ
    (Pillow renormalises, MATLAB mirrors), so compare away from them."""
    Image = pytest.importorskip("PIL.Image")
    m = round(n * scale)
    img = rng.uniform(0, 1, (n, n)).astype(np.float32)
    ref = np.asarray(Image.fromarray(img, mode="F").resize((m, m), Image.BICUBIC))
    y = F.imresize(sg.Tensor(img[None, None].astype(np.float64)), scale).data[0, 0]
    # the kernel reaches 2 input pixels, i.e. 2 output pixels when shrinking, 2 * scale when growing
    band = 2 * math.ceil(2 / scale) if scale < 1 else 2 * math.ceil(2 * scale)
    inner = (slice(band, m - band),) * 2
    assert y[inner].size >= 16
    np.testing.assert_allclose(y[inner], ref[inner], atol=1e-4)
    assert np.abs(y[0] - ref[0]).max() > 1e-4  # the borders do differ: the test can tell


@pytest.mark.parametrize("kernel", ["cubic", "triangle", "box", "lanczos2", "lanczos3"])
@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("in_hw,kw", [((4, 6), dict(scale_factor=0.5)), ((3, 2), dict(scale_factor=2)),
                                      ((5, 4), dict(size=(2, 7))), ((1, 3), dict(scale_factor=(3, 1 / 3)))])
def test_gradcheck(kernel, antialias, in_hw, kw, rng):
    x = t64(rng, 1, 2, *in_hw)
    assert sg.gradcheck(lambda t: F.imresize(t, kernel=kernel, antialias=antialias, **kw), (x,))


def test_output_size_is_ceil_and_size_means_scale_out_over_in(rng):
    x = t64(rng, 1, 1, 7, 10, requires_grad=False)
    assert F.imresize(x, 0.5).shape == (1, 1, 4, 5)
    assert F.imresize(x, (1 / 3, 0.25)).shape == (1, 1, 3, 3)
    x = t64(rng, 1, 1, 8, 12, requires_grad=False)
    np.testing.assert_allclose(F.imresize(x, size=(4, 3)).data, F.imresize(x, (0.5, 0.25)).data,
                               rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(F.imresize(x, size=6).data, F.imresize(x, (0.75, 0.5)).data,
                               rtol=1e-13, atol=1e-13)


def test_constant_image_stays_constant_and_aliases(rng):
    x = sg.Tensor(np.full((1, 3, 9, 7), 0.25))
    for kernel in ["cubic", "bicubic", "triangle", "bilinear", "box", "lanczos2", "lanczos3"]:
        np.testing.assert_allclose(F.imresize(x, 0.37, kernel=kernel).data, 0.25, rtol=1e-12)


def test_dtype_3d_numpy_and_no_grad(rng):
    img = rng.uniform(0, 1, (3, 8, 8)).astype(np.float32)
    with sg.no_grad():
        y = F.imresize(img, 0.5)  # (C, H, W) numpy, as data preparation uses it
    assert y.shape == (3, 4, 4) and y.dtype == np.float32 and not y.requires_grad
    ref = F.imresize(sg.Tensor(img[None].astype(np.float64)), 0.5).data[0]
    np.testing.assert_allclose(y.data, ref, rtol=1e-5, atol=1e-6)
    x = sg.Tensor(img[None], requires_grad=True)
    F.imresize(x, 2).sum().backward()
    assert x.grad.dtype == np.float32


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(), ValueError, "either size or scale_factor"),
    (dict(scale_factor=0.5, size=3), ValueError, "only one of size or scale_factor"),
    (dict(scale_factor=0), ValueError, "scale_factor must be positive"),
    (dict(size=(0, 3)), ValueError, "size must be positive"),
    (dict(scale_factor=0.5, kernel="gauss"), ValueError, "unknown kernel 'gauss'; known kernels: cubic"),
    (dict(scale_factor=0.5, antialias="yes"), TypeError, "antialias must be a bool"),
])
def test_errors(kwargs, exc, match, rng):
    with pytest.raises(exc, match=match):
        F.imresize(t64(rng, 1, 1, 4, 4), **kwargs)


def test_input_errors(rng):
    with pytest.raises(ValueError, match="expected a 3-D or 4-D input"):
        F.imresize(t64(rng, 4, 4), 0.5)
    with pytest.raises(TypeError, match="float32 or float64, got dtype uint8"):
        F.imresize(np.zeros((1, 4, 4), np.uint8), 0.5)

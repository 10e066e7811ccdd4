"""filter2d and USM (framework/data/degradations/filtering.py): filter2d against torch's
reflect-padded conv2d and by hand, OpenCV's Gaussian kernel, USM against a direct formula."""
import math

import numpy as np
import pytest

from framework.data import degradations as D

E = math.exp


def _normalised(rows):
    a = np.array(rows, dtype=np.float64)
    return a / a.sum()


def _torch_filter2d(img, kern):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    kh, kw = kern.shape
    x = torch.from_numpy(np.ascontiguousarray(img)).reshape(-1, 1, *img.shape[-2:])
    x = tf.pad(x, (kw // 2, kw // 2, kh // 2, kh // 2), mode="reflect")
    return tf.conv2d(x, torch.from_numpy(np.ascontiguousarray(kern))[None, None]).numpy().reshape(
        img.shape)


_KERNELS = {
    "random 7x5": lambda r: r.random((7, 5)),
    "gaussian 9x9 (rank 1)": lambda r: D.bivariate_Gaussian(9, 1.7, 1.7, 0),
    "narrow gaussian 21x21 (trimmed)": lambda r: D.bivariate_Gaussian(21, 0.2, 0.2, 0),
    "aniso 21x21": lambda r: D.bivariate_Gaussian(21, 3.0, 0.8, 0.6, isotropic=False),
    "random 25x25 (fft)": lambda r: r.random((25, 25)) - 0.3,
    "1x1": lambda r: np.array([[0.7]]),
}


@pytest.mark.parametrize("name", list(_KERNELS))
@pytest.mark.parametrize("method", ["auto", "direct", "fft"])
def test_filter2d_matches_torch_reflect_conv2d(name, method):
    rng = np.random.default_rng(0)
    img = rng.random((2, 3, 27, 30))
    kern = _KERNELS[name](rng)
    want = _torch_filter2d(img, kern)
    out = D.filter2d(img, kern, method)
    assert out.shape == img.shape and out.dtype == np.float64
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-14 * np.abs(kern).sum())
    out32 = D.filter2d(img.astype(np.float32), kern, method)
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, want, rtol=0, atol=3e-5 * np.abs(kern).sum())


def test_filter2d_hand_values_and_pads_beyond_the_size():
    img = np.array([[[1.0, 2.0, 3.0, 4.0]]])
    # kernel [0, 0, 1] reads the right neighbour; reflect: beyond 4 is 3
    np.testing.assert_array_equal(D.filter2d(img, np.array([[0.0, 0.0, 1.0]])), [[[2, 3, 4, 3]]])
    np.testing.assert_array_equal(D.filter2d(img, np.array([[1.0, 0.0, 0.0]])), [[[2, 1, 2, 3]]])
    tiny = np.arange(6.0).reshape(1, 2, 3)
    out = D.filter2d(tiny, np.ones((9, 9)) / 81)  # pads of 4 on a 2 x 3 image keep reflecting
    period = np.pad(tiny[0], 4, mode="reflect")
    np.testing.assert_allclose(out[0, 0, 0], period[:9, :9].mean(), atol=1e-14)


# -- USM -----------------------------------------------------------------------------------------
def test_gaussian_kernel1d_is_opencv_s():
    g = D.gaussian_kernel1d(51)  # sigma 0 -> 0.3 * (25 - 1) + 0.8 = 8
    ref = np.exp(-((np.arange(51) - 25.0) ** 2) / 128)
    np.testing.assert_allclose(g, ref / ref.sum(), rtol=0, atol=1e-16)
    np.testing.assert_array_equal(D.gaussian_kernel1d(3), [0.25, 0.5, 0.25])
    np.testing.assert_allclose(D.gaussian_kernel1d(5, 1.0), _normalised(
        [E(-2), E(-0.5), 1, E(-0.5), E(-2)]), atol=1e-16)


def test_usm_sharp_matches_the_direct_formula():
    rng = np.random.default_rng(1)
    img = np.clip(np.kron(rng.random((3, 6, 6)), np.ones((7, 7)))[:, :40, :41]
                  + 0.02 * rng.standard_normal((3, 40, 41)), 0, 1)
    g = np.exp(-((np.arange(51) - 25.0) ** 2) / 128)
    kern = np.outer(g, g) / g.sum() ** 2

    def blur(x):  # reflect pad by 25, then the 51 x 51 window sums, written out directly
        p = np.pad(x, ((0, 0), (25, 25), (25, 25)), mode="reflect")
        win = np.lib.stride_tricks.sliding_window_view(p, (51, 51), axis=(1, 2))
        return np.einsum("chwij,ij->chw", win, kern)

    residual = img - blur(img)
    soft = blur((np.abs(residual) * 255 > 10).astype(np.float64))
    want = soft * np.clip(img + 0.5 * residual, 0, 1) + (1 - soft) * img
    out = D.usm_sharp(img)
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-12)
    assert 0.05 < soft.mean() < 0.95  # both masked and unmasked pixels took part
    out32 = D.usm_sharp(img.astype(np.float32))
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, want, rtol=0, atol=1e-5)


@pytest.mark.parametrize("call, match", [
    (lambda: D.filter2d(np.zeros((1, 5, 5)), np.ones((2, 3))), "odd sizes"),
    (lambda: D.filter2d(np.zeros((1, 5, 5), np.int32), np.ones((3, 3))), "float32 or float64"),
    (lambda: D.usm_sharp(np.zeros((3, 4, 4)), radius=0), "radius must be a positive int"),
])
def test_bad_arguments_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()

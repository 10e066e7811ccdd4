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


@pytest.mark.parametrize("ksize, table", [
    (1, [256]), (3, [64, 128, 64]), (5, [16, 64, 96, 64, 16]), (7, [8, 28, 56, 72, 56, 28, 8]),
    (9, [4, 13, 30, 51, 60, 51, 30, 13, 4])])
@pytest.mark.parametrize("sigma", [0, -1.5])
def test_gaussian_kernel1d_fixed_tables_for_sigma_at_most_0(ksize, table, sigma):
    # OpenCV's getGaussianKernelBitExact returns these exact tables (9 included: usm_sharp's
    # radius 8 or 9), not the sampled Gaussian (which differs by up to 0.002 at 9)
    np.testing.assert_array_equal(D.gaussian_kernel1d(ksize, sigma), np.array(table) / 256)


# the first half of cv2.getGaussianKernel(ksize, sigma) (float64) from opencv-python-headless
# 4.10.0.84, as float.hex: the sampled sizes, a sigma > 0, and even sizes (OpenCV gives both centre
# taps weight 1 before normalising)
_CV2 = {
    (11, 0): ["0x1.20c2564ee6772p-7", "0x1.bcb86a082c301p-6", "0x1.0ab50979aaf94p-4",
              "0x1.f2464c62edaf4p-4", "0x1.6a7e1d504a91dp-3", "0x1.9ac20a36ea596p-3"],
    (13, 0): ["0x1.7c090614dc85bp-8", "0x1.0cb82167c249dp-6", "0x1.3a8fe850a8f47p-5",
              "0x1.30cd237f01688p-4", "0x1.e8f1e9d4d4f8bp-4", "0x1.449ed5bf3520ap-3",
              "0x1.64ccba4a2c88fp-3"],
    (9, 1.4): ["0x1.3b8ebd1ecd25dp-8", "0x1.d67bcc4d9e3f5p-6", "0x1.a525171337593p-4",
               "0x1.c4a8548b4ef95p-3", "0x1.241930786b291p-2"],
    (4, 0): ["0x1.c951911b0a11ap-4", "0x1.8dab9bb93d7b9p-2"],
    (10, 0): ["0x1.6b679021aeb40p-7", "0x1.245a1d859ef94p-5", "0x1.5f33e665b5378p-4",
              "0x1.3b00f750656abp-3", "0x1.b59815193d500p-3"],
}


@pytest.mark.parametrize("ksize, sigma", list(_CV2))
def test_gaussian_kernel1d_matches_opencv_s_values(ksize, sigma):
    half = np.array([float.fromhex(h) for h in _CV2[ksize, sigma]])
    want = np.concatenate([half, half[:ksize // 2][::-1]])
    got = D.gaussian_kernel1d(ksize, sigma)
    # OpenCV's softfloat exp against numpy's: a few ulps of the largest tap
    np.testing.assert_allclose(got, want, rtol=0, atol=8 * np.spacing(want.max()))
    assert got.sum() == pytest.approx(1, abs=1e-15)


def test_usm_sharp_radius_9_blurs_with_the_fixed_table():
    img = np.random.default_rng(0).random((1, 20, 20))
    g = np.array([4, 13, 30, 51, 60, 51, 30, 13, 4]) / 256
    mask = np.abs(img - D.filter2d(img, np.outer(g, g))) * 255 > 10
    soft = D.filter2d(mask.astype(np.float64), np.outer(g, g))
    sharp = np.clip(img + 0.5 * (img - D.filter2d(img, np.outer(g, g))), 0, 1)
    np.testing.assert_allclose(D.usm_sharp(img, radius=9), soft * sharp + (1 - soft) * img,
                               rtol=0, atol=1e-14)


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

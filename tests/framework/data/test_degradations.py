"""Real-ESRGAN's degradation primitives: kernels against their formulas (hand values), the Bessel J1
against Bessel's integral and torch, filter2d against torch's reflect-padded conv2d, noise
statistics and exact draws, JPEG, USM against a direct formula, and argument errors."""
import math

import numpy as np
import pytest

from framework.data import degradations as D

E = math.exp


# -- kernels -------------------------------------------------------------------------------------
def test_sigma_matrix2_and_mesh_grid_hand_values():
    c, s = math.cos(math.pi / 6), math.sin(math.pi / 6)
    want = [[4 * c * c + s * s, 3 * c * s], [3 * c * s, 4 * s * s + c * c]]
    np.testing.assert_allclose(D.sigma_matrix2(2.0, 1.0, math.pi / 6), want, rtol=0, atol=1e-14)
    xy, xx, yy = D.mesh_grid(3)
    np.testing.assert_array_equal(xx, [[-1, 0, 1]] * 3)
    np.testing.assert_array_equal(yy, [[-1] * 3, [0] * 3, [1] * 3])
    assert xy.shape == (3, 3, 2) and tuple(xy[0, 2]) == (1.0, -1.0)


def _normalised(rows):
    a = np.array(rows, dtype=np.float64)
    return a / a.sum()


def test_isotropic_gaussian_hand_values():
    e, c = E(-0.5), E(-1.0)  # exp(-r^2 / 2) at r^2 = 1 (edge) and 2 (corner)
    want = _normalised([[c, e, c], [e, 1, e], [c, e, c]])
    np.testing.assert_allclose(D.bivariate_Gaussian(3, 1.0, 5.0, 0.3), want, rtol=0, atol=1e-15)


def test_anisotropic_gaussian_rotated_90_degrees_swaps_the_axes():
    # sig_x = 2, sig_y = 1 turned by pi/2: Sigma = diag(1, 4), q = x^2 + y^2 / 4 (x along columns)
    k = D.bivariate_Gaussian(3, 2.0, 1.0, math.pi / 2, isotropic=False)
    fx, fy = [E(-0.5), 1, E(-0.5)], [E(-0.125), 1, E(-0.125)]
    want = _normalised(np.outer(fy, fx))
    np.testing.assert_allclose(k, want, rtol=0, atol=1e-15)
    assert k[1, 2] < k[2, 1]  # narrower along x


def test_generalized_gaussian_and_plateau_hand_values():
    g = D.bivariate_generalized_Gaussian(3, 1.0, 1.0, 0.0, 2.0)  # exp(-q^2 / 2)
    e, c = E(-0.5), E(-2.0)
    np.testing.assert_allclose(g, _normalised([[c, e, c], [e, 1, e], [c, e, c]]), atol=1e-15)
    p = D.bivariate_plateau(3, 1.0, 1.0, 0.0, 2.0)  # 1 / (q^2 + 1): 1, 1/2, 1/5; sum 3.8
    np.testing.assert_allclose(p, np.array([[.2, .5, .2], [.5, 1, .5], [.2, .5, .2]]) / 3.8,
                               rtol=0, atol=1e-15)
    # beta = 1 generalized is the Gaussian
    one = D.bivariate_generalized_Gaussian(7, 1.3, 0.7, 0.4, 1.0, isotropic=False)
    np.testing.assert_allclose(one, D.bivariate_Gaussian(7, 1.3, 0.7, 0.4, isotropic=False),
                               atol=1e-15)


def _j1_integral(x):
    """Bessel's integral J1(x) = (1/pi) int_0^pi cos(t - x sin t) dt (midpoint rule: exponentially
    accurate for this periodic integrand)."""
    t = (np.arange(2000) + 0.5) * np.pi / 2000
    return np.array([np.cos(t - xi * np.sin(t)).mean() for xi in np.atleast_1d(x)])


def test_circular_lowpass_kernel_formula_and_padding():
    cut = math.pi / 2
    edge = cut * _j1_integral(cut)[0] / (2 * math.pi)
    corner = cut * _j1_integral(cut * math.sqrt(2))[0] / (2 * math.pi * math.sqrt(2))
    centre = cut ** 2 / (4 * math.pi)
    want = _normalised([[corner, edge, corner], [edge, centre, edge], [corner, edge, corner]])
    np.testing.assert_allclose(D.circular_lowpass_kernel(cut, 3), want, rtol=0, atol=1e-15)
    padded = D.circular_lowpass_kernel(math.pi / 3, 7, pad_to=21)
    assert padded.shape == (21, 21) and abs(padded.sum() - 1) < 1e-15
    np.testing.assert_array_equal(padded[7:14, 7:14], D.circular_lowpass_kernel(math.pi / 3, 7))
    assert padded[:7].sum() == 0 and padded[:, 14:].sum() == 0
    assert D.circular_lowpass_kernel(1.0, 5, pad_to=False).shape == (5, 5)  # BasicSR's call


@pytest.mark.parametrize("kind", list(D.KERNEL_TYPES))
@pytest.mark.parametrize("size", [1, 7, 21])
def test_random_kernels_are_normalised_odd_and_finite(kind, size):
    rng = np.random.default_rng(size)
    k = D.random_mixed_kernels([kind], [1.0], size, (0.2, 3), (0.2, 3), (-math.pi, math.pi),
                               (0.5, 4), (1, 2), noise_range=(0.75, 1.25), rng=rng)
    assert k.shape == (size, size) and k.dtype == np.float64 and np.all(k >= 0)
    assert abs(k.sum() - 1) < 1e-14
    np.testing.assert_allclose(k, k[::-1, ::-1], atol=1e-15 if "plateau" in kind else 1)


def test_random_kernel_draw_order_is_basicsr_s():
    # kind pick, then sig_x, sig_y, theta, then beta (coin, value), then kernel noise
    a = D.random_mixed_kernels(["iso", "generalized_aniso"], [0.0, 1.0], 9, (0.5, 3), (0.5, 3),
                               (-1, 1), (0.5, 4), (1, 2), rng=np.random.default_rng(7))
    r = np.random.default_rng(7)
    r.random()
    sx, sy, th = r.uniform(0.5, 3), r.uniform(0.5, 3), r.uniform(-1, 1)
    beta = r.uniform(0.5, 1) if r.uniform() < 0.5 else r.uniform(1, 4)
    want = D.bivariate_generalized_Gaussian(9, sx, sy, th, beta, isotropic=False)
    np.testing.assert_allclose(a, want, rtol=0, atol=1e-16)
    fixed = D.random_bivariate_Gaussian(5, (1.5, 1.5), None, None, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(fixed, D.bivariate_Gaussian(5, 1.5, 1.5, 0))


def test_pick_follows_the_probabilities():
    rng = np.random.default_rng(3)
    draws = [D.pick(rng, "abc", np.array([0.2, 0.7, 0.1])) for _ in range(20000)]
    freq = [draws.count(x) / len(draws) for x in "abc"]
    np.testing.assert_allclose(freq, [0.2, 0.7, 0.1], atol=0.015)
    assert {D.pick(rng, "ab", np.array([0.0, 1.0])) for _ in range(200)} == {"b"}


@pytest.mark.parametrize("call, match", [
    (lambda: D.bivariate_Gaussian(4, 1, 1, 0), "kernel_size must be odd"),
    (lambda: D.circular_lowpass_kernel(1.0, 6), "kernel_size must be odd"),
    (lambda: D.circular_lowpass_kernel(1.0, 5, pad_to=20), "pad_to must be odd"),
    (lambda: D.circular_lowpass_kernel(0.0, 5), "cutoff must be > 0"),
    (lambda: D.random_mixed_kernels(["iso", "aniso"], [0.5, 0.6], 7, rng=np.random.default_rng()),
     "kernel_prob must sum to 1"),
    (lambda: D.random_mixed_kernels(["iso"], [0.5, 0.5], 7, rng=np.random.default_rng()),
     "kernel_prob must be a list of 1 probabilities"),
    (lambda: D.random_mixed_kernels(["anisso"], [1.0], 7, rng=np.random.default_rng()),
     "kernel_list must be one of .*did you mean 'aniso'"),
    (lambda: D.random_bivariate_Gaussian(7, (3, 1), None, None, rng=np.random.default_rng()),
     "sigma_x_range must have low <= high"),
    (lambda: D.bivariate_plateau(3, 1, 1, 0, -1.0), "beta must be > 0"),
    (lambda: D.bivariate_Gaussian(3, 0.0, 1, 0), "sig_x must be > 0"),
    (lambda: D.filter2d(np.zeros((1, 5, 5)), np.ones((2, 3))), "odd sizes"),
    (lambda: D.filter2d(np.zeros((1, 5, 5), np.int32), np.ones((3, 3))), "float32 or float64"),
    (lambda: D.add_jpg_compression(np.zeros((3, 4, 4)), 101), "quality must be in 1..100"),
    (lambda: D.add_jpg_compression(np.zeros((2, 4, 4)), 50), "1 or 3 channels"),
    (lambda: D.usm_sharp(np.zeros((3, 4, 4)), radius=0), "radius must be a positive int"),
])
def test_bad_arguments_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# -- Bessel J1 -----------------------------------------------------------------------------------
def test_bessel_j1_hand_values_symmetry_and_zero():
    table = {1.0: 0.44005058574493351596, 2.0: 0.57672480775687338720,
             5.0: -0.32757913759146522204, 10.0: 0.04347274616886143667}
    for x, want in table.items():
        assert abs(D.bessel_j1(x) - want) < 2e-16, x
    assert abs(D.bessel_j1(3.8317059702075123156)) < 1e-15  # its first zero
    x = np.linspace(0, 40, 101)
    np.testing.assert_array_equal(D.bessel_j1(-x), -D.bessel_j1(x))
    assert D.bessel_j1(0.0) == 0.0 and abs(D.bessel_j1(1e-9) - 5e-10) < 1e-25


def test_bessel_j1_matches_bessels_integral_over_every_branch():
    x = np.concatenate([np.linspace(0, 60, 601), [0.999, 1.0, 1.001, 24.99, 25.0, 25.01]])
    np.testing.assert_allclose(D.bessel_j1(x), _j1_integral(x), rtol=0, atol=1e-15)


def test_bessel_j1_against_torch():
    torch = pytest.importorskip("torch")
    x = np.linspace(-50, 50, 4001)
    ref = torch.special.bessel_j1(torch.from_numpy(x)).numpy()
    # torch 2.13's CPU bessel_j1 is itself only good to ~5e-7 near x = 5 (measured against the
    # integral above, which ours matches to 1e-15)
    np.testing.assert_allclose(D.bessel_j1(x), ref, rtol=0, atol=1e-6)


# -- filter2d ------------------------------------------------------------------------------------
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


# -- noise ---------------------------------------------------------------------------------------
def test_gaussian_noise_statistics_and_exact_draw():
    img = np.full((3, 200, 200), 0.5, np.float32)
    noise = D.generate_gaussian_noise(img, 10, rng=np.random.default_rng(4))
    assert noise.dtype == np.float32 and noise.shape == img.shape
    assert abs(noise.mean()) < 0.01 * 10 / 255 * 10  # 120k samples: sd of the mean ~0.3% of sigma
    assert abs(noise.std() / (10 / 255) - 1) < 0.02
    z = np.random.default_rng(4).standard_normal(img.shape, dtype=np.float32)
    assert noise[1, 17, 123] == z[1, 17, 123] * np.float32(10) / np.float32(255)
    gray = D.generate_gaussian_noise(img, 10, True, rng=np.random.default_rng(4))
    np.testing.assert_array_equal(gray[0], gray[2])
    assert gray[0, 3, 4] == z[0, 3, 4] * np.float32(10) / np.float32(255)


def test_random_add_gaussian_noise_draw_order_and_clip():
    img = np.random.default_rng(0).random((3, 20, 30)).astype(np.float32)
    out = D.random_add_gaussian_noise(img, (5, 40), 0.5, rng=np.random.default_rng(9))
    r = np.random.default_rng(9)
    sigma, gray = r.uniform(5, 40), r.uniform() < 0.5
    want = np.clip(img + D.generate_gaussian_noise(img, sigma, gray, rng=r), 0, 1)
    np.testing.assert_array_equal(out, want)
    assert out.min() == 0.0 and out.max() == 1.0  # sigma >= 5 on U(0, 1) clips somewhere
    rounded = D.random_add_gaussian_noise(img, (5, 5), rounds=True, rng=np.random.default_rng(1))
    np.testing.assert_allclose(rounded * 255, np.round(rounded * 255), atol=1e-4)


def test_poisson_noise_statistics():
    # row L holds level L: 256 levels used -> vals = 256, counts ~ Poisson(L / 255 * 256)
    img = np.repeat((np.arange(256) / 255.0)[:, None], 2000, axis=1)[None].astype(np.float32)
    noise = D.generate_poisson_noise(img, 1.0, rng=np.random.default_rng(5)).astype(np.float64)
    for level in (3, 64, 200):
        lam = level / 255 * 256
        row = noise[0, level]
        assert abs(row.mean()) < 4 * math.sqrt(lam / 2000) / 256
        assert abs(row.var() * 256 ** 2 / lam - 1) < 0.08
    # a constant image uses one level: vals = 1 and the noise variance is the level itself
    flat = D.generate_poisson_noise(np.ones((1, 300, 300), np.float32), 0.5,
                                    rng=np.random.default_rng(6))
    assert abs(flat.var() / 0.25 - 1) < 0.02  # scale 0.5: Var = 0.25 * 1


def test_poisson_noise_one_pixel_by_hand():
    img = np.random.default_rng(2).random((3, 7, 9)).astype(np.float32)
    noise = D.generate_poisson_noise(img, 0.7, rng=np.random.default_rng(8))
    levels = np.clip(np.round(img * 255), 0, 255)
    vals = 2 ** math.ceil(math.log2(len(np.unique(levels))))
    u = np.random.default_rng(8).random(img.size).reshape(img.shape)
    c, i, j = 2, 5, 6
    lam = float(levels[c, i, j]) / 255 * vals
    k, pmf, cdf = 0, math.exp(-lam), math.exp(-lam)
    while cdf <= u[c, i, j]:  # the smallest k with P(X <= k) > u
        k += 1
        pmf *= lam / k
        cdf += pmf
    want = np.float32(k / vals - float(levels[c, i, j]) / 255) * np.float32(0.7)
    assert noise[c, i, j] == want
    gray = D.generate_poisson_noise(img, 1.0, True, rng=np.random.default_rng(8))
    np.testing.assert_array_equal(gray[0], gray[1])


def test_random_add_poisson_noise_draw_order():
    img = np.random.default_rng(0).random((3, 16, 16)).astype(np.float32)
    out = D.random_add_poisson_noise(img, (0.05, 3), 0.4, rng=np.random.default_rng(3))
    r = np.random.default_rng(3)
    scale, gray = r.uniform(0.05, 3), r.uniform() < 0.4
    want = np.clip(img + D.generate_poisson_noise(img, scale, gray, rng=r), 0, 1)
    np.testing.assert_array_equal(out, want)


# -- JPEG ----------------------------------------------------------------------------------------
def _smooth(rng, c, h, w):
    from PIL import Image
    small = (rng.random((h // 16 + 1, w // 16 + 1, c)) * 255).astype(np.uint8)
    big = Image.fromarray(small if c == 3 else small[..., 0]).resize((w, h), Image.BICUBIC)
    arr = np.asarray(big, np.float32) / 255
    return arr.transpose(2, 0, 1) if c == 3 else arr[None]


@pytest.mark.parametrize("channels", [3, 1])
def test_jpeg_round_trip(channels):
    img = _smooth(np.random.default_rng(0), channels, 64, 72)
    low, high = D.add_jpg_compression(img, 20), D.add_jpg_compression(img, 100)
    for out in (low, high):
        assert out.shape == img.shape and out.dtype == np.float32
        np.testing.assert_array_equal(out * 255, np.round(out * 255))
    # quality 100 still rounds YCbCr and halves the chroma resolution (4:2:0), hence ~1 level
    assert np.abs(high - img).mean() < 1 / 255
    assert np.abs(low - img).mean() > 4 * np.abs(high - img).mean()
    same = D.random_add_jpg_compression(img, (20.2, 20.4), rng=np.random.default_rng(0))
    np.testing.assert_array_equal(same, low)  # the quality is rounded to the nearest integer

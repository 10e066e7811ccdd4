"""Blur kernels (framework/data/degradations/kernels.py): the formulas against hand values,
the random kernels' draw order (BasicSR's), `pick`, and argument errors."""
import math

import numpy as np
import pytest

from framework.data import degradations as D

E = math.exp


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
])
def test_bad_arguments_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("kind", ["iso", "aniso", "generalized_aniso", "plateau_iso"])
def test_random_mixed_kernels_trace_is_the_draws(kind):
    args = ([kind, "iso"], [1.0, 0.0], 9, (0.5, 3), (0.5, 3), (-1, 1), (0.5, 4), (1, 2))
    trace = {}
    kern = D.random_mixed_kernels(*args, rng=np.random.default_rng(4), trace=trace)
    np.testing.assert_array_equal(kern, D.random_mixed_kernels(*args, rng=np.random.default_rng(4)))
    r = np.random.default_rng(4)
    r.random()  # the type
    sx = r.uniform(0.5, 3)
    isotropic = not kind.endswith("aniso")
    sy, th = (sx, 0.0) if isotropic else (r.uniform(0.5, 3), r.uniform(-1, 1))
    beta = None
    if kind not in ("iso", "aniso"):  # betag_range (0.5, 4), betap_range (1, 2)
        hi = 4 if kind.startswith("generalized") else 2
        beta = r.uniform(0.5, 1) if r.uniform() < 0.5 else r.uniform(1, hi)
    assert trace == dict(kernel=kind, sigma_x=sx, sigma_y=sy, theta=th, beta=beta)

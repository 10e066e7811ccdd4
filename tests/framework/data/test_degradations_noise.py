"""Gaussian and Poisson noise (framework/data/degradations/noise.py): statistics and exact draws."""
import math

import numpy as np

from framework.data import degradations as D


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


def test_random_add_noise_trace_is_the_draws():
    img = np.random.default_rng(0).random((3, 8, 8)).astype(np.float32)
    for fn, level in ((D.random_add_gaussian_noise, "sigma"),
                      (D.random_add_poisson_noise, "scale")):
        trace = {}
        out = fn(img, (0.5, 3), 0.5, rng=np.random.default_rng(2), trace=trace)
        np.testing.assert_array_equal(out, fn(img, (0.5, 3), 0.5, rng=np.random.default_rng(2)))
        r = np.random.default_rng(2)
        assert trace == {level: r.uniform(0.5, 3), "gray": r.uniform() < 0.5}

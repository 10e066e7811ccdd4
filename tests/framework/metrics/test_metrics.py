"""PSNR / SSIM against hand-worked values and against BasicSR's recipe re-derived here."""
import math

import numpy as np
import pytest

import framework as sg
from framework.color import rgb_to_y
from framework.metrics import gaussian_window, psnr, ssim
from framework.registry import METRICS


def _rand(rng, *shape):
    return rng.random(shape).astype(np.float32)


# -- PSNR --------------------------------------------------------------------------------------

def test_psnr_known_mse():
    hr = np.zeros((1, 10, 10), np.float32)
    sr = hr.copy()
    sr[0, 3, 4] = 10 / 255  # squared error 100 on 1 of 100 pixels: MSE = 1
    assert psnr(sr, hr, crop_border=0) == pytest.approx(10 * math.log10(255 ** 2), abs=1e-12)
    # the error sits inside a 3-pixel border: cropping it away makes the images identical
    sr2 = hr.copy()
    sr2[0, 0, 0] = 1
    assert psnr(sr2, hr, crop_border=1) == math.inf


def test_psnr_y_channel_hand_value():
    hr = np.zeros((3, 6, 6), np.float32)
    sr = hr.copy()
    sr[0] = 1  # pure red vs black: Y differs by 65.481 everywhere
    assert psnr(sr, hr, 0, y_channel=True) == pytest.approx(20 * math.log10(255 / 65.481), abs=1e-9)
    # RGB: one channel of three differs by 255: MSE = 255^2 / 3
    assert psnr(sr, hr, 0, y_channel=False) == pytest.approx(10 * math.log10(3), abs=1e-9)


def test_psnr_quantises_like_tensor2img():
    hr = np.full((1, 8, 8), 100 / 255, np.float32)
    assert psnr(hr + np.float32(0.4 / 255), hr, 0) == math.inf  # rounds to the same 8-bit value
    assert psnr(hr + np.float32(0.6 / 255), hr, 0) == pytest.approx(10 * math.log10(255 ** 2))
    over = np.full((1, 8, 8), 1.7, np.float32)  # clipped to 1 before measuring
    assert psnr(over, np.ones((1, 8, 8), np.float32), 0) == math.inf


def test_one_channel_is_taken_as_y(rng):
    sr, hr = _rand(rng, 1, 12, 12), _rand(rng, 1, 12, 12)
    assert psnr(sr, hr, 1, y_channel=True) == psnr(sr, hr, 1, y_channel=False)
    assert psnr(sr[0], hr[0], 1) == psnr(sr, hr, 1)  # (H, W) accepted as one channel
    assert ssim(sr, hr, 0, y_channel=True) == ssim(sr, hr, 0, y_channel=False)


def _basicsr_y(img_chw):
    """BasicSR's path re-derived: tensor2img (float32 round, RGB->BGR, uint8) then to_y_channel
    (float32 /255, bgr2ycbcr y_only in float64 dot, back to float32, * 255)."""
    q = np.round(np.clip(img_chw.astype(np.float32), 0, 1) * np.float32(255)).astype(np.uint8)
    bgr = q.transpose(1, 2, 0)[:, :, ::-1]
    f = bgr.astype(np.float32) / np.float32(255)
    y = (np.dot(f, [24.966, 128.553, 65.481]) + 16.0) / 255.0
    return (y.astype(np.float32) * np.float32(255)).astype(np.float64)


def test_psnr_matches_basicsr_recipe(rng):
    hr = _rand(rng, 3, 20, 18)
    sr = np.clip(hr + 0.05 * rng.standard_normal(hr.shape), 0, 1).astype(np.float32)
    a, b = _basicsr_y(sr)[2:-2, 2:-2], _basicsr_y(hr)[2:-2, 2:-2]
    expected = 10 * math.log10(255 ** 2 / np.mean((a - b) ** 2))
    # BasicSR keeps Y in float32; we keep float64: the two agree far below any reported digit.
    assert psnr(sr, hr, crop_border=2) == pytest.approx(expected, abs=1e-4)


# -- SSIM --------------------------------------------------------------------------------------

def test_gaussian_window():
    k = gaussian_window()
    assert k.shape == (11,) and k.sum() == pytest.approx(1, abs=1e-15)
    np.testing.assert_allclose(k[6] / k[5], math.exp(-1 / (2 * 1.5 ** 2)), rtol=1e-14)
    np.testing.assert_array_equal(k, k[::-1])


def _ssim_direct(a, b):
    """Wang et al.'s SSIM on one (H, W) float64 channel in [0, 255], window by window (2-D)."""
    w = np.outer(gaussian_window(), gaussian_window())
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    vals = []
    for i in range(a.shape[0] - 10):
        for j in range(a.shape[1] - 10):
            pa, pb = a[i:i + 11, j:j + 11], b[i:i + 11, j:j + 11]
            m1, m2 = (w * pa).sum(), (w * pb).sum()
            s1, s2 = (w * pa * pa).sum() - m1 ** 2, (w * pb * pb).sum() - m2 ** 2
            s12 = (w * pa * pb).sum() - m1 * m2
            vals.append((2 * m1 * m2 + c1) * (2 * s12 + c2)
                        / ((m1 ** 2 + m2 ** 2 + c1) * (s1 + s2 + c2)))
    return np.mean(vals)


def test_ssim_matches_direct_windowed_formula(rng):
    hr = _rand(rng, 3, 17, 15)
    sr = np.clip(hr + 0.1 * rng.standard_normal(hr.shape), 0, 1).astype(np.float32)
    a, b = _basicsr_y(sr)[1:-1, 1:-1], _basicsr_y(hr)[1:-1, 1:-1]
    assert ssim(sr, hr, crop_border=1) == pytest.approx(_ssim_direct(a, b), abs=1e-6)
    q = lambda x: np.round(x * np.float32(255)).astype(np.float64)  # noqa: E731
    per_channel = [_ssim_direct(q(sr[c]), q(hr[c])) for c in range(3)]
    assert ssim(sr, hr, 0, y_channel=False) == pytest.approx(np.mean(per_channel), abs=1e-12)


def test_ssim_constant_images_hand_value():
    p, q = 100.0, 140.0  # no variance: SSIM reduces to the luminance term
    sr, hr = np.full((1, 12, 12), p / 255, np.float32), np.full((1, 12, 12), q / 255, np.float32)
    c1 = (0.01 * 255) ** 2
    assert ssim(sr, hr, 0) == pytest.approx((2 * p * q + c1) / (p * p + q * q + c1), abs=1e-9)


def test_identical_images(rng):
    img = _rand(rng, 3, 13, 13)
    assert psnr(img, img, 1) == math.inf
    assert ssim(img, img, 1) == 1.0
    assert ssim(sg.tensor(img), sg.tensor(img), 0, y_channel=False) == 1.0  # Tensors accepted


@pytest.mark.parametrize("fn", [psnr, ssim])
def test_metric_errors(fn):
    a = np.zeros((3, 16, 16), np.float32)
    with pytest.raises(ValueError, match=r"sr \(3, 16, 16\) vs hr \(3, 16, 15\)"):
        fn(a, np.zeros((3, 16, 15), np.float32), 0)
    with pytest.raises(TypeError, match="sr must be a float image.*uint8"):
        fn(a.astype(np.uint8), a, 0)
    with pytest.raises(ValueError, match="crop_border must be an int >= 0, got -1"):
        fn(a, a, -1)
    with pytest.raises(ValueError, match="crop_border=8 leaves nothing of a 16x16"):
        fn(a, a, 8)
    with pytest.raises(ValueError, match="y_channel=True needs 1 or 3 channels, got 4"):
        fn(np.zeros((4, 16, 16), np.float32), np.zeros((4, 16, 16), np.float32), 0)


def test_ssim_too_small():
    a = np.zeros((1, 14, 14), np.float32)
    with pytest.raises(ValueError, match=r"at least 11x11.*got 10x10"):
        ssim(a, a, 2)


def test_registered():
    assert METRICS.get("psnr") is psnr and METRICS.get("ssim") is ssim


def test_ssim_torch_conv_parity(rng):
    """BasicSR's torch form (_ssim_pth: grouped conv2d with the 2-D window) on the same 8-bit data."""
    torch = pytest.importorskip("torch")
    hr = _rand(rng, 3, 19, 16)
    sr = np.clip(hr + 0.08 * rng.standard_normal(hr.shape), 0, 1).astype(np.float32)
    q = [torch.from_numpy(np.round(x * np.float32(255)).astype(np.float64))[None] for x in (sr, hr)]
    k = torch.from_numpy(gaussian_window())
    win = torch.outer(k, k).expand(3, 1, 11, 11)
    conv = lambda x: torch.nn.functional.conv2d(x, win, groups=3)  # noqa: E731
    mu1, mu2 = conv(q[0]), conv(q[1])
    s1, s2 = conv(q[0] * q[0]) - mu1 ** 2, conv(q[1] * q[1]) - mu2 ** 2
    s12 = conv(q[0] * q[1]) - mu1 * mu2
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    smap = (2 * mu1 * mu2 + c1) * (2 * s12 + c2) / ((mu1 ** 2 + mu2 ** 2 + c1) * (s1 + s2 + c2))
    assert ssim(sr, hr, 0, y_channel=False) == pytest.approx(float(smap.mean()), abs=1e-12)

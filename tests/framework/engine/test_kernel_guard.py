"""The guard of `srgrad-zssr --kernel estimate` (framework/engine/zeroshot/kernel_guard.py, issue
43): the estimate's shape read back from known Gaussians, the decision on a bicubic-downscaled
image (falls back to bicubic and says so) and on an anisotropically blurred one (keeps the
estimate), and the command end to end (a fallback run is the --kernel bicubic run)."""
from pathlib import Path

import numpy as np
import pytest

from framework.data.degradations import bivariate_Gaussian
from framework.data.zssr import downscale
from framework.engine.zeroshot import zssr as Z
from framework.engine.zeroshot.kernel_guard import MAX_SIGMA, MIN_CONFIDENCE, bicubic_kernel, \
    kernel_error, kernel_guard, kernel_shape, sharpness_profile
from framework.io.image import read_image, write_image

COFFEE = Path(__file__).resolve().parents[3] / "data" / "train" / "coffee.png"
BLUR = bivariate_Gaussian(13, 2.5, 0.8, 0.5, isotropic=False)   # the image's true kernel
WRONG = bivariate_Gaussian(13, 1.8, 0.7, 2.0, isotropic=False)  # an estimate with a wrong axis


def _crop(size):
    img = read_image(COFFEE)[0]
    h, w = img.shape[1:]
    return img[:, (h - size) // 2:(h + size) // 2, (w - size) // 2:(w + size) // 2]


def _lr(hr, kernel):
    return (np.round(np.clip(downscale(hr, 2, kernel), 0, 1) * 255) / 255).astype(np.float32)


@pytest.fixture(scope="module")
def images():
    hr = _crop(128)
    return _lr(hr, "bicubic"), _lr(hr, BLUR)


def test_kernel_shape_reads_back_a_gaussian():
    s = kernel_shape(bivariate_Gaussian(31, 3.0, 1.0, 0.5, isotropic=False))
    assert s["sigma_major"] == pytest.approx(3.0, rel=1e-5)
    assert s["sigma_minor"] == pytest.approx(1.0, rel=1e-5)
    assert s["theta"] == pytest.approx(np.degrees(0.5), abs=1e-4)
    # the axis swapped: theta + 90 degrees, folded into [0, 180)
    s = kernel_shape(bivariate_Gaussian(31, 1.0, 3.0, 2.0, isotropic=False))
    assert s["theta"] == pytest.approx((np.degrees(2.0) + 90) % 180, abs=1e-4)


def test_bicubic_kernel_and_kernel_error():
    k = bicubic_kernel(2)
    assert k.shape == (8, 8) and k.sum() == pytest.approx(1.0, abs=1e-12)
    # the 1-D weights are MATLAB's x1/2 cubic: cubic(d / 2) / 2 at d = 0.5, 1.5, 2.5, 3.5
    w = k.sum(axis=0)
    assert w[4] == pytest.approx(0.5 * (1.5 * 0.25 ** 3 - 2.5 * 0.25 ** 2 + 1), rel=1e-12)
    assert kernel_error(k, k) == 0.0 and kernel_error(BLUR, k) > 0.5


def test_sharpness_profile_sees_the_blur_direction():
    rng = np.random.default_rng(0)
    noise = rng.random((1, 256, 258))
    # white noise: neighbours 1 and 2 apart differ alike, log 1 in every direction
    assert np.allclose(sharpness_profile(noise), 0.0, atol=0.06)
    # blurred by [1, 2, 1] / 4 along x: autocorrelation 6, 4, 1 (/16) at lags 0, 1, 2, so along
    # x the ratio is (6 - 4) / (6 - 1) = 0.4; across (y) it stays 1
    blur = (noise[..., :-2] + 2 * noise[..., 1:-1] + noise[..., 2:]) / 4
    prof = sharpness_profile(blur)
    assert prof[0] == pytest.approx(np.log(0.4), abs=0.05) and abs(prof[1]) < 0.06
    ramp = np.tile(np.linspace(0, 1, 64), (64, 1))[None]  # linear along x: d(2) = 2 d(1)
    assert sharpness_profile(ramp)[0] == pytest.approx(np.log(0.25), abs=1e-6)


def test_guard_falls_back_on_a_bicubic_image(images):
    lr, _ = images
    for estimate in (BLUR, WRONG):
        d = kernel_guard(lr, estimate)
        assert not d.use_estimate and d.confidence < -0.5  # the blur explains it far worse
        assert d.d_estimate > 2 * d.d_bicubic
        assert "falling back to the bicubic kernel" in d.describe()


def test_guard_keeps_the_estimate_on_a_blurred_image(images):
    _, lr = images
    d = kernel_guard(lr, BLUR)
    assert d.use_estimate and d.confidence > MIN_CONFIDENCE + 0.2
    line = d.describe()
    assert "orientation 29 deg, sigmas 2.4" in line and "using the estimate" in line
    # an estimate that is bicubic's own spread is bicubic: the exact kernel is used instead
    near = kernel_guard(lr, bivariate_Gaussian(13, 0.85, 0.85, 0))
    assert not near.use_estimate and "bicubic's spread" in near.reason


def test_guard_refuses_an_estimate_wider_than_kernelgans_family():
    wide = bivariate_Gaussian(21, 3.2, 0.8, 0.5, isotropic=False)
    lr = _lr(_crop(128), wide)
    d = kernel_guard(lr, wide)  # the true kernel, explaining the image well ...
    assert d.confidence > MIN_CONFIDENCE and d.shape["sigma_major"] > MAX_SIGMA
    assert not d.use_estimate and "wider than the x2 kernels KernelGAN is made for" in d.reason
    assert kernel_guard(lr, wide, max_sigma=4.0).use_estimate  # ... refused by the width alone


def test_command_falls_back_and_says_so(tmp_path, capsys):
    lr = _lr(_crop(144), "bicubic")  # 72x72: KernelGAN's crops are 64
    write_image(tmp_path / "lr.png", lr)
    common = ["--input", tmp_path / "lr.png", "--iters", "3", "--bp-iters", "1", "--no-progress"]
    est = common + ["--output", tmp_path / "est.png", "--kernel", "estimate",
                    "--kernelgan-iters", "3"]
    assert Z.main(list(map(str, est))) == 0
    err = capsys.readouterr().err
    assert "falling back to the bicubic kernel" in err and "confidence" in err
    assert Z.main(list(map(str, common + ["--output", tmp_path / "bic.png", "--kernel",
                                          "bicubic"]))) == 0
    # the fallback run is the bicubic-kernel run (same seed), pixel for pixel
    assert (tmp_path / "est.png").read_bytes() == (tmp_path / "bic.png").read_bytes()
    raw = common + ["--output", tmp_path / "raw.png", "--kernel", "estimate",
                    "--kernelgan-iters", "3", "--no-guard"]
    assert Z.main(list(map(str, raw))) == 0
    assert "--no-guard: using the estimate" in capsys.readouterr().err
    assert (tmp_path / "raw.png").read_bytes() != (tmp_path / "bic.png").read_bytes()

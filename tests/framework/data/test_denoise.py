"""GaussianNoiseDataset: the noise is N(0, sigma / 255) per element and unclipped (KAIR's); the
validation pair is the whole image with the same noise every time; a training sample is an aligned
crop + flips of the clean image with fresh noise from the sample's generator only; errors."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from framework.data import GaussianNoiseDataset
from framework.registry import DATASETS


@pytest.fixture
def folder(tmp_path):
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate(((40, 56), (48, 40))):
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(tmp_path / f"{i}.png")
    return tmp_path


def test_validation_pair_is_the_image_plus_fixed_unclipped_noise(folder):
    ds = GaussianNoiseDataset(folder, sigma=25)
    a, b = ds.get(0), GaussianNoiseDataset(folder, sigma=25, cache=False).get(0)
    clean = np.asarray(Image.open(folder / "0.png"), np.float32).transpose(2, 0, 1) / 255
    np.testing.assert_array_equal(a["gt"], clean)
    np.testing.assert_array_equal(a["lq"], b["lq"])  # the same noise, cached or not
    noise = a["lq"] - a["gt"]
    assert a["lq"].shape == a["gt"].shape == (3, 40, 56) and a["lq"].dtype == np.float32
    assert abs(noise.std() * 255 - 25) < 1.0 and abs(noise.mean() * 255) < 0.5  # 6720 draws
    assert a["lq"].min() < 0 and a["lq"].max() > 1  # not clipped, as KAIR
    assert not np.array_equal(noise[:, :40, :40], ds.get(1)["lq"][:, :40, :40] - ds.get(1)["gt"][:, :40, :40])


def test_a_training_sample_is_a_crop_with_fresh_noise_from_its_generator(folder):
    ds = GaussianNoiseDataset(folder, sigma=50, gt_size=16, use_rot=False)
    x = ds.get(1, np.random.default_rng(7))
    y = ds.get(1, np.random.default_rng(7))
    z = ds.get(1, np.random.default_rng(8))
    np.testing.assert_array_equal(x["lq"], y["lq"])
    assert x["lq"].shape == x["gt"].shape == (3, 16, 16)
    assert not np.array_equal(x["lq"] - x["gt"], z["lq"] - z["gt"])
    full = ds.get(1)["gt"]  # the crop is a window of the clean image (flipped or not)
    windows = [full[:, i:i + 16, j:j + 16] for i in range(48 - 15) for j in range(40 - 15)]
    assert any(np.array_equal(x["gt"], w) or np.array_equal(x["gt"], w[:, :, ::-1]) for w in windows)
    assert abs((x["lq"] - x["gt"]).std() * 255 - 50) < 5


def test_sigma_zero_is_the_clean_image_and_y(folder):
    ds = GaussianNoiseDataset(folder, sigma=0, color="y")
    s = ds.get(0)
    assert s["lq"].shape == (1, 40, 56)
    np.testing.assert_array_equal(s["lq"], s["gt"])


@pytest.mark.parametrize("kw,match", [
    ({"scale": 2}, r"GaussianNoiseDataset: scale must be 1"),
    ({"sigma": -1}, r"GaussianNoiseDataset: sigma must be >= 0"),
    ({"gt_size": 64}, r"smaller than the 64x64 crop"),
])
def test_errors(folder, kw, match):
    with pytest.raises(ValueError, match=match):
        DATASETS.build({"type": "GaussianNoiseDataset", "root": str(folder), "sigma": 15, **kw})

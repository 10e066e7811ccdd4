"""JPEGDataset: the LQ is libjpeg's (Pillow) encoding of the HR at the drawn quality, and qf its
(100 - QF) / 100; FBCNN's draw (the list with odds 0.75, else the range); validation fixed per image
(or at val_quality); a training sample is an aligned crop of gt_size, the grid shifted off its
corner only sometimes; errors."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from framework.data import JPEGDataset, add_jpg_compression
from framework.registry import DATASETS


@pytest.fixture
def folder(tmp_path):
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate(((40, 56), (48, 40))):
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(tmp_path / f"{i}.png")
    return tmp_path


def test_validation_is_the_jpeg_of_the_image_at_a_fixed_quality(folder):
    ds = JPEGDataset(folder)
    a = ds.get(0)
    clean = np.asarray(Image.open(folder / "0.png"), np.float32).transpose(2, 0, 1) / 255
    np.testing.assert_array_equal(a["gt"], clean)
    q = ds.quality(0)
    assert q == JPEGDataset(folder, cache=False).quality(0)  # the same every time
    np.testing.assert_array_equal(a["lq"], add_jpg_compression(clean, q))
    assert a["qf"].dtype == np.float32 and a["qf"][0] == np.float32((100 - q) / 100)
    fixed = JPEGDataset(folder, val_quality=10).get(1)
    assert fixed["qf"][0] == np.float32(0.9)
    np.testing.assert_array_equal(fixed["lq"], add_jpg_compression(fixed["gt"], 10))
    assert np.abs(fixed["lq"] - add_jpg_compression(fixed["gt"], 90)).max() > 0.1  # QF tells


def test_the_draw_is_fbccns():
    """The list with odds list_prob, else an integer of the range (both ends reachable)."""
    ds = object.__new__(JPEGDataset)
    ds.qualities, ds.list_prob, ds.quality_range = (10, 20, 30, 40, 50, 60), 0.75, (8, 96)
    rng = np.random.default_rng(0)
    draws = np.array([ds.draw_quality(rng) for _ in range(4000)])
    listed = np.isin(draws, ds.qualities)
    assert 0.745 < listed.mean() < 0.79  # 0.75 + 0.25 * 6 / 89 of the range's draws (sd 0.007)
    assert draws.min() == 8 and draws.max() == 96
    ds.list_prob = 0.0
    assert set(ds.draw_quality(rng) for _ in range(2000)) == set(range(8, 97))


def test_a_training_sample_is_an_aligned_crop_of_the_jpeg(folder):
    """lq is the JPEG of the gt_size + 8 crop cut like gt; the same generator, the same sample;
    the offsets cover 0 (FBCNN's corner) and others."""
    ds = JPEGDataset(folder, gt_size=16, use_flip=False, use_rot=False, list_prob=0.0,
                     quality_range=[30, 30])
    x, y = ds.get(1, np.random.default_rng(7)), ds.get(1, np.random.default_rng(7))
    np.testing.assert_array_equal(x["lq"], y["lq"])
    assert x["lq"].shape == x["gt"].shape == (3, 16, 16) and x["qf"][0] == np.float32(0.7)
    clean = np.asarray(Image.open(folder / "1.png"), np.float32).transpose(2, 0, 1) / 255
    offsets = set()
    for seed in range(10):
        s = ds.get(1, np.random.default_rng(seed))
        (t, l), = [(t, l) for t in range(33) for l in range(25)
                   if np.array_equal(clean[:, t:t + 16, l:l + 16], s["gt"])]
        # the compressed crop of 24 held gt at (dt, dl): its JPEG, cut there, is lq
        found = [(dt, dl) for dt in range(min(t, 8) + 1) for dl in range(min(l, 8) + 1)
                 if t - dt + 24 <= 48 and l - dl + 24 <= 40 and np.array_equal(
                     add_jpg_compression(clean[:, t - dt:t - dt + 24, l - dl:l - dl + 24], 30)
                     [:, dt:dt + 16, dl:dl + 16], s["lq"])]
        assert found, seed
        offsets.update(found)
    assert (0, 0) in offsets and len(offsets) > 1


@pytest.mark.parametrize("kw,match", [
    ({"quality_range": [50, 20]}, r"JPEGDataset: quality_range must be \[low, high\] with"),
    ({"quality_range": [10, 101]}, r"JPEGDataset: quality_range must be"),
    ({"qualities": [10, 200]}, r"JPEGDataset: qualities must be in 1..100"),
    ({"qualities": []}, r"JPEGDataset: list_prob 0.75 draws from qualities, which is empty"),
    ({"list_prob": 2}, r"JPEGDataset: list_prob must be"),
    ({"val_quality": 0}, r"JPEGDataset: val_quality must be"),
    ({"scale": 2}, r"JPEGDataset: scale must be 1"),
])
def test_errors(folder, kw, match):
    with pytest.raises(ValueError, match=match):
        JPEGDataset(folder, **kw)


def test_registered(folder):
    ds = DATASETS.build({"type": "JPEGDataset", "root": str(folder), "val_quality": 40})
    assert ds.get(0)["qf"][0] == np.float32(0.6)

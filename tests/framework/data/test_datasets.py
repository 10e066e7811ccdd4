"""HRImageDataset / PairedImageDataset on tiny synthetic folders (and once on the bundled images)."""
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import framework as sg
import framework.data.datasets as datasets_mod
import framework.functional as F
from framework.data import HRImageDataset, PairedImageDataset, apply_flags, mod_crop
from framework.color import rgb_to_y
from framework.registry import DATASETS

DATA = Path(__file__).resolve().parents[3] / "data"


def _save(path, arr, mode=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr, mode=mode).save(path)
    return path


def _rgb(rng, h, w):
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def _imresize_lr(gt, scale, quantize=True):
    with sg.no_grad():
        lq = F.imresize(sg.Tensor(gt[None]), scale_factor=1 / scale).data[0]
    return np.round(np.clip(lq, 0, 1) * 255) / 255 if quantize else lq


# -- HRImageDataset ----------------------------------------------------------------------------

def test_constant_image_lr_is_the_constant_and_mod_crop(tmp_path):
    _save(tmp_path / "c.png", np.full((10, 13, 3), 77, np.uint8))
    ds = HRImageDataset(tmp_path, scale=3)
    s = ds.get(0)
    assert s["name"] == "c.png" and len(ds) == 1
    assert s["gt"].shape == (3, 9, 12) and s["lq"].shape == (3, 3, 4)
    assert s["lq"].dtype == np.float32 and s["gt"].dtype == np.float32
    np.testing.assert_array_equal(s["lq"], np.float32(77 / 255))
    np.testing.assert_array_equal(s["gt"], np.float32(77 / 255))


@pytest.mark.parametrize("quantize", [True, False])
def test_lr_is_imresize_of_mod_cropped_hr(tmp_path, quantize):
    rng = np.random.default_rng(0)
    raw = _rgb(rng, 11, 14)
    _save(tmp_path / "a.png", raw)
    s = HRImageDataset(tmp_path, scale=2, lq_quantize=quantize).get(0)
    gt = raw[:10, :14].transpose(2, 0, 1).astype(np.float32) / 255
    np.testing.assert_array_equal(s["gt"], gt)
    np.testing.assert_allclose(s["lq"], _imresize_lr(gt, 2, quantize), atol=1e-6)
    if quantize:
        np.testing.assert_allclose(s["lq"] * 255, np.round(s["lq"] * 255), atol=1e-4)


def test_random_crop_pairs_align_with_the_full_lr(tmp_path):
    rng = np.random.default_rng(1)
    _save(tmp_path / "a.png", _rgb(rng, 24, 30))
    ds = HRImageDataset(tmp_path, scale=3, gt_size=9, use_flip=False, use_rot=False)
    full = ds.get(0)
    offsets = set()
    for seed in range(8):
        s = ds.get(0, np.random.default_rng(seed))
        assert s["lq"].shape == (3, 3, 3) and s["gt"].shape == (3, 9, 9)
        hits = [(t, l) for t in range(6) for l in range(8)
                if np.array_equal(full["lq"][:, t:t + 3, l:l + 3], s["lq"])]
        assert len(hits) == 1
        t, l = hits[0]
        np.testing.assert_array_equal(full["gt"][:, 3 * t:3 * t + 9, 3 * l:3 * l + 9], s["gt"])
        offsets.add(hits[0])
    assert len(offsets) > 3


def test_lr_crop_is_the_degradation_of_its_gt_crop(tmp_path):
    # x2 antialiased cubic reads HR pixels 2o-3..2o+4 for LR pixel o, so away from the crop's edge
    # (LR pixels 2..5 of an 8-pixel crop) the cached full-image LR equals imresize(gt crop).
    _save(tmp_path / "a.png", _rgb(np.random.default_rng(6), 30, 34))
    ds = HRImageDataset(tmp_path, scale=2, gt_size=16, lq_quantize=False)
    for seed in range(3):
        s = ds.get(0, np.random.default_rng(seed))
        own = _imresize_lr(s["gt"], 2, quantize=False)
        np.testing.assert_allclose(s["lq"][:, 2:6, 2:6], own[:, 2:6, 2:6], atol=1e-6)
        assert np.abs(s["lq"] - own).max() > 1e-3  # at the edges the full image's context shows


def test_same_rng_same_sample_and_augment_consistent(tmp_path):
    rng = np.random.default_rng(2)
    _save(tmp_path / "a.png", _rgb(rng, 16, 16))
    ds = HRImageDataset(tmp_path, scale=2, gt_size=8)
    a, b = ds.get(0, np.random.default_rng(9)), ds.get(0, np.random.default_rng(9))
    np.testing.assert_array_equal(a["lq"], b["lq"])
    np.testing.assert_array_equal(a["gt"], b["gt"])
    # with augmentation the pair is still the same transform of an aligned full-image crop
    full = ds.get(0)
    found = False
    for flags in [(h, v, t) for h in (0, 1) for v in (0, 1) for t in (0, 1)]:
        lq = apply_flags(a["lq"], flags)
        hits = [(t_, l) for t_ in range(5) for l in range(5)
                if np.array_equal(full["lq"][:, t_:t_ + 4, l:l + 4], lq)]
        for t_, l in hits:
            if np.array_equal(full["gt"][:, 2 * t_:2 * t_ + 8, 2 * l:2 * l + 8],
                              apply_flags(a["gt"], flags)):
                found = True
    assert found


def test_decoded_once_and_cache_protected(tmp_path, monkeypatch):
    _save(tmp_path / "a.png", np.full((8, 8, 3), 10, np.uint8))
    calls = []
    real = datasets_mod.read_image
    monkeypatch.setattr(datasets_mod, "read_image", lambda p: calls.append(p) or real(p))
    ds = HRImageDataset(tmp_path, scale=2)
    s = ds.get(0)
    s["gt"][:] = 0  # the caller owns its copy
    ds.get(0, np.random.default_rng(0))
    np.testing.assert_array_equal(ds.get(0)["gt"], np.float32(10 / 255))
    assert len(calls) == 1
    HRImageDataset(tmp_path, scale=2, cache=False).get(0)
    nocache = HRImageDataset(tmp_path, scale=2, cache=False)
    nocache.get(0)
    nocache.get(0)
    assert len(calls) == 4


def test_mixed_modes_become_rgb_or_y(tmp_path):
    rng = np.random.default_rng(3)
    gray = rng.integers(0, 256, (6, 6), dtype=np.uint8)
    _save(tmp_path / "1_gray.png", gray)
    rgba = rng.integers(0, 256, (6, 6, 4), dtype=np.uint8)
    _save(tmp_path / "2_rgba.png", rgba)
    g16 = rng.integers(0, 65536, (6, 6), dtype=np.uint16)
    _save(tmp_path / "3_g16.png", g16)
    pal = Image.fromarray(rgba[:, :, :3] // 128 * 255).convert("P")
    pal.save(tmp_path / "4_pal.png")
    ds = HRImageDataset(tmp_path, scale=2)
    gts = [ds.get(i)["gt"] for i in range(4)]
    assert all(g.shape == (3, 6, 6) for g in gts)
    np.testing.assert_array_equal(gts[0], np.repeat(gray[None] / np.float32(255), 3, axis=0))
    np.testing.assert_array_equal(gts[1], rgba[:, :, :3].transpose(2, 0, 1) / np.float32(255))
    np.testing.assert_allclose(gts[2], np.repeat(g16[None] / 65535.0, 3, axis=0), atol=1e-7)
    np.testing.assert_array_equal(gts[3], (rgba[:, :, :3] // 128 * 255).transpose(2, 0, 1) / 255.0)
    dy = HRImageDataset(tmp_path, scale=2, color="y")
    y = [dy.get(i) for i in range(4)]
    assert all(s["gt"].shape == (1, 6, 6) and s["lq"].shape == (1, 3, 3) for s in y)
    np.testing.assert_allclose(y[1]["gt"], rgb_to_y(gts[1]), atol=1e-7)
    # gray -> RGB -> Y: BT.601 maps gray g to 16/255 + g * 219/255
    np.testing.assert_allclose(y[0]["gt"][0], (16 + gray.astype(np.float64) * 219 / 255) / 255,
                               atol=1e-6)


def test_too_small_for_crop_named_at_construction(tmp_path):
    _save(tmp_path / "ok.png", np.zeros((16, 16, 3), np.uint8))
    _save(tmp_path / "tiny.png", np.zeros((9, 20, 3), np.uint8))
    with pytest.raises(ValueError, match=r"tiny\.png: image is 20x8 .*smaller than the 12x12 crop"):
        HRImageDataset(tmp_path, scale=2, gt_size=12)


def test_bad_files_error_or_skip(tmp_path):
    _save(tmp_path / "good.png", np.zeros((8, 8, 3), np.uint8))
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    with pytest.raises(ValueError, match=r"broken\.png"):
        HRImageDataset(tmp_path, scale=2)
    with pytest.warns(UserWarning, match=r"skipping unreadable image.*broken\.png"):
        ds = HRImageDataset(tmp_path, scale=2, bad_files="skip")
    assert ds.names == ["good.png"]
    # truncated pixel data passes the header check; "skip" decodes up front and finds it
    (tmp_path / "broken.png").unlink()
    data = _save(tmp_path / "cut.png", _rgb(np.random.default_rng(0), 64, 64)).read_bytes()
    (tmp_path / "cut.png").write_bytes(data[:len(data) // 2])
    with pytest.warns(UserWarning, match=r"cut\.png"):
        assert HRImageDataset(tmp_path, scale=2, bad_files="skip").names == ["good.png"]


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(scale=0), ValueError, "HRImageDataset: scale must be a positive int, got 0"),
    (dict(scale=2.0), TypeError, "HRImageDataset: scale must be a positive int, got 2.0"),
    (dict(gt_size=5), ValueError, "gt_size=5 must be a multiple of scale=2"),
    (dict(color="ycbcr"), ValueError, "color must be one of .*'ycbcr'"),
    (dict(bad_files="ignore"), ValueError, "bad_files must be"),
])
def test_argument_errors(tmp_path, kwargs, error, match):
    _save(tmp_path / "a.png", np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(error, match=match):
        HRImageDataset(tmp_path, **{"scale": 2, **kwargs})


def test_folder_errors_and_index(tmp_path):
    with pytest.raises(ValueError, match="no image files.*empty"):
        (tmp_path / "empty").mkdir()
        HRImageDataset(tmp_path / "empty", scale=2)
    with pytest.raises(FileNotFoundError, match="nope"):
        HRImageDataset(tmp_path / "nope", scale=2)
    _save(tmp_path / "x" / "a.png", np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(IndexError, match="index 1 out of range for a dataset of 1"):
        HRImageDataset(tmp_path / "x", scale=2).get(1)


def test_registered_and_built_from_spec(tmp_path):
    _save(tmp_path / "a.png", np.zeros((8, 8, 3), np.uint8))
    ds = DATASETS.build({"type": "HRImageDataset", "root": str(tmp_path), "scale": 2, "gt_size": 4})
    assert isinstance(ds, HRImageDataset)
    assert ds.get(0, np.random.default_rng(0))["gt"].shape == (3, 4, 4)
    assert DATASETS.get("PairedImageDataset") is PairedImageDataset


def test_mod_crop():
    np.testing.assert_array_equal(mod_crop(np.arange(35.0).reshape(1, 5, 7), 3),
                                  np.arange(35.0).reshape(1, 5, 7)[:, :3, :6])


def test_bundled_validation_images():
    ds = HRImageDataset(DATA / "val", scale=4, gt_size=32)
    assert ds.names == ["gravel.png", "ihc.png"]
    s = ds.get(0)
    assert s["gt"].shape == (3, 512, 512) and s["lq"].shape == (3, 128, 128)
    np.testing.assert_array_equal(s["gt"][0], s["gt"][2])  # grayscale replicated to RGB
    assert 0 <= s["lq"].min() and s["lq"].max() <= 1 and s["gt"].std() > 0.05


# -- PairedImageDataset ------------------------------------------------------------------------

DIV2K = "{name}x{scale}"  # DIV2K's own LR names, 0001x2.png


def _div2k(tmp_path, names=("0001", "0002"), scale=2, hr=(12, 10), lq_ext=".png"):
    rng = np.random.default_rng(4)
    for n in names:
        _save(tmp_path / "HR" / f"{n}.png", _rgb(rng, *hr))
        _save(tmp_path / "LR" / f"{n}x{scale}{lq_ext}", _rgb(rng, hr[0] // scale, hr[1] // scale))
    return tmp_path / "HR", tmp_path / "LR"


def test_paired_layout_and_values(tmp_path):
    gt_root, lq_root = _div2k(tmp_path, hr=(13, 11), lq_ext=".bmp")  # HR mod-cropped to 12x10
    ds = PairedImageDataset(gt_root, lq_root, scale=2, gt_size=4, filename_tmpl=DIV2K)
    assert ds.names == ["0001.png", "0002.png"]
    s = ds.get(1)
    lq_file = np.asarray(Image.open(lq_root / "0002x2.bmp")).transpose(2, 0, 1) / np.float32(255)
    gt_file = np.asarray(Image.open(gt_root / "0002.png")).transpose(2, 0, 1) / np.float32(255)
    np.testing.assert_array_equal(s["lq"], lq_file)
    np.testing.assert_array_equal(s["gt"], gt_file[:, :12, :10])
    c = ds.get(0, np.random.default_rng(0))
    assert c["lq"].shape == (3, 2, 2) and c["gt"].shape == (3, 4, 4)


def test_paired_custom_template(tmp_path):
    rng = np.random.default_rng(5)
    _save(tmp_path / "HR" / "img.png", _rgb(rng, 9, 9))
    _save(tmp_path / "LR" / "img_x3_bicubic.png", _rgb(rng, 3, 3))
    ds = PairedImageDataset(tmp_path / "HR", tmp_path / "LR", 3,
                            filename_tmpl="{name}_x{scale}_bicubic")
    assert ds.get(0)["lq"].shape == (3, 3, 3)
    with pytest.raises(ValueError, match=r"filename_tmpl '\{name\}\{other\}' must use only"):
        PairedImageDataset(tmp_path / "HR", tmp_path / "LR", 3, filename_tmpl="{name}{other}")


def test_the_default_template_is_basicsrs_and_a_mismatch_names_the_fix(tmp_path):
    """BasicSR's filename_tmpl defaults to '{}' (LR named as HR: its sub-image folders, Set5's
    LRbicx2, srgrad-prepare's output); DIV2K's own 0001x2.png names are pointed out."""
    rng = np.random.default_rng(6)
    for name in ("baby", "bird"):
        _save(tmp_path / "GT" / f"{name}.png", _rgb(rng, 8, 8))
        _save(tmp_path / "LRbicx2" / f"{name}.png", _rgb(rng, 4, 4))
    ds = PairedImageDataset(tmp_path / "GT", tmp_path / "LRbicx2", 2)
    assert [p.name for p in ds.lq_paths] == ["baby.png", "bird.png"]
    gt_root, lq_root = _div2k(tmp_path / "div2k")
    with pytest.raises(ValueError, match=r"2 HR image\(s\) .* no LR partner .*filename_tmpl "
                                         r"'\{name\}'.*missing: 0001, 0002\. The LR files there are "
                                         r"named '\{name\}x\{scale\}' \(0001 -> 0001x2\): set "
                                         r"filename_tmpl: '\{name\}x\{scale\}'"):
        PairedImageDataset(gt_root, lq_root, 2)
    with pytest.raises(ValueError, match=r"named '\{name\}' \(baby -> baby\): set filename_tmpl: "
                                         r"'\{name\}'$"):
        PairedImageDataset(tmp_path / "GT", tmp_path / "LRbicx2", 2, filename_tmpl=DIV2K)


def test_paired_missing_partners_listed(tmp_path):
    gt_root, lq_root = _div2k(tmp_path, names=[f"{i:04d}" for i in range(8)])
    for i in (1, 2, 3, 4, 5, 6, 7):
        (lq_root / f"{i:04d}x2.png").unlink()
    with pytest.raises(ValueError, match=r"7 HR image\(s\) .*no LR partner.*0001x2, 0002x2, 0003x2, "
                                         r"0004x2, 0005x2, \.\.\."):
        PairedImageDataset(gt_root, lq_root, 2, filename_tmpl=DIV2K)


def test_paired_size_mismatch_and_ambiguity(tmp_path):
    gt_root, lq_root = _div2k(tmp_path, names=["0001"])
    with pytest.raises(ValueError, match=r"0001x3\.png|no LR partner"):
        PairedImageDataset(gt_root, lq_root, 3)
    _save(lq_root / "0001x2.png", np.zeros((5, 6, 3), np.uint8))  # transposed: 6 wide, 5 high
    with pytest.raises(ValueError,
                       match=r"0001x2\.png: LR size 6x5 should be 5x6 \(HR 0001\.png is 10x12"):
        PairedImageDataset(gt_root, lq_root, 2, filename_tmpl=DIV2K)
    _save(lq_root / "0001x2.png", np.zeros((6, 5, 3), np.uint8))
    _save(lq_root / "0001x2.jpg", np.zeros((6, 5, 3), np.uint8))
    with pytest.raises(ValueError, match=r"several LR files match '0001x2'.*0001x2\.jpg, 0001x2\.png"):
        PairedImageDataset(gt_root, lq_root, 2, filename_tmpl=DIV2K)

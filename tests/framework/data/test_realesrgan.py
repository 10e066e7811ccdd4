"""RealESRGANDataset and `degrade`: options (BasicSR's keys and defaults, clear errors), the
pipeline's shapes and levels, determinism through BatchLoader, the crop/pad, gt_usm (also stacked
by the loader), and an end-to-end HR folder -> batches."""
import numpy as np
import pytest
from PIL import Image

from framework.data import (BatchLoader, DegradationOptions, RealESRGANDataset, degrade,
                            usm_sharp)
from framework.data.degradations import KERNEL_TYPES
from framework.registry import DATASETS

# a CPU-sized setting: x4, 48 -> 32 crops
SMALL = dict(scale=4, gt_size=32, crop_pad_size=48)


@pytest.fixture(scope="module")
def hr_folder(tmp_path_factory):
    """Four smooth RGB images: two larger than crop_pad_size, one smaller (padded), one exact."""
    root = tmp_path_factory.mktemp("hr")
    rng = np.random.default_rng(0)
    for name, (w, h) in {"a.png": (70, 60), "b.png": (52, 90), "c.png": (30, 20),
                         "d.png": (48, 48)}.items():
        small = (rng.random((4, 4, 3)) * 255).astype(np.uint8)
        Image.fromarray(small).resize((w, h), Image.BICUBIC).save(root / name)
    return root


def _read(path):
    return np.asarray(Image.open(path), np.float32).transpose(2, 0, 1) / 255


# -- options ---------------------------------------------------------------------------------------
def test_defaults_are_basicsr_s():
    o = DegradationOptions()
    assert o.blur_kernel_size == 21 and o.kernel_list == tuple(KERNEL_TYPES)
    assert o.kernel_prob == (0.45, 0.25, 0.12, 0.03, 0.12, 0.03)
    assert o.blur_sigma == (0.2, 3.0) and o.blur_sigma2 == (0.2, 1.5)
    assert o.resize_prob == (0.2, 0.7, 0.1) and o.resize_range == (0.15, 1.5)
    assert o.resize_prob2 == (0.3, 0.4, 0.3) and o.resize_range2 == (0.3, 1.2)
    assert (o.noise_range, o.noise_range2) == ((1, 30), (1, 25))
    assert (o.poisson_scale_range, o.poisson_scale_range2) == ((0.05, 3), (0.05, 2.5))
    assert (o.final_sinc_prob, o.second_blur_prob, o.jpeg_range) == (0.8, 0.8, (30, 95))
    # YAML lists become tuples and are validated
    assert DegradationOptions(blur_sigma=[0.5, 1]).blur_sigma == (0.5, 1.0)


@pytest.mark.parametrize("options, match", [
    (dict(blur_sigm=[1, 2]), "unknown degradation option 'blur_sigm'; did you mean 'blur_sigma'"),
    (dict(kernel_prob=[0.5, 0.5, 0, 0, 0, 0.1]), "kernel_prob must sum to 1"),
    (dict(kernel_list2=["iso", "plateu_iso"], kernel_prob2=[0.5, 0.5]),
     "kernel_list2 must be one of .*did you mean 'plateau_iso'"),
    (dict(resize_prob=[0.5, 0.5]), "resize_prob must be a list of 3 probabilities"),
    (dict(blur_kernel_size=20), "blur_kernel_size must be odd"),
    (dict(blur_kernel_size2=5), "blur_kernel_size2 must be an int >= 7"),
    (dict(jpeg_range=[30, 120]), "jpeg_range must be in \\[1, 100\\]"),
    (dict(noise_range=[5, 1]), "noise_range must have low <= high"),
    (dict(resize_range2=[1.1, 1.2]), "resize_range2 must have 0 < low <= 1 <= high"),
    (dict(second_blur_prob=1.5), "second_blur_prob must be in \\[0.0, 1.0\\]"),
])
def test_bad_options_name_the_key(options, match):
    with pytest.raises(ValueError, match=match):
        DegradationOptions.from_dict(options)


# -- degrade ---------------------------------------------------------------------------------------
def test_degrade_shapes_levels_and_determinism():
    gt = np.random.default_rng(0).random((3, 48, 40)).astype(np.float32)
    times = {}
    lq = degrade(gt, np.random.default_rng(1), None, 4, times)
    assert lq.shape == (3, 12, 10) and lq.dtype == np.float32
    assert lq.min() >= 0 and lq.max() <= 1
    np.testing.assert_array_equal(lq * 255, np.round(lq * 255))
    assert set(times) <= {"kernels", "filter", "resize", "noise", "jpeg"} and "jpeg" in times
    np.testing.assert_array_equal(lq, degrade(gt, np.random.default_rng(1), {}, 4))
    assert not np.array_equal(lq, degrade(gt, np.random.default_rng(2), {}, 4))
    assert degrade(gt.astype(np.float64), np.random.default_rng(1)).dtype == np.float64
    gray = degrade(gt[:1], np.random.default_rng(3), {"gray_noise_prob": 1.0}, 2)
    assert gray.shape == (1, 24, 20)


def test_degrade_with_every_stage_off_is_two_lossless_jpegs():
    # a delta blur, no resize, zero noise, no sinc: what is left is JPEG at quality 100, twice
    off = dict(blur_sigma=[1e-3, 1e-3], blur_sigma2=[1e-3, 1e-3], kernel_list=["iso"],
               kernel_prob=[1], kernel_list2=["iso"], kernel_prob2=[1], sinc_prob=0, sinc_prob2=0,
               final_sinc_prob=0, resize_prob=[0, 0, 1], resize_prob2=[0, 0, 1],
               gaussian_noise_prob=1, gaussian_noise_prob2=1, noise_range=[0, 0],
               noise_range2=[0, 0], jpeg_range=[100, 100], jpeg_range2=[100, 100])
    rng = np.random.default_rng(0)
    gt = np.kron(rng.random((1, 4, 4)), np.ones((1, 12, 12))).astype(np.float32)  # gray blocks
    lq = degrade(gt, rng, off, 1)
    assert np.abs(lq - gt).max() <= 3 / 255 and np.abs(lq - gt).mean() < 1 / 255


def test_degrade_rejects_bad_input():
    with pytest.raises(ValueError, match="multiple of scale=4"):
        degrade(np.zeros((3, 30, 32), np.float32), np.random.default_rng(), None, 4)
    with pytest.raises(ValueError, match="shrinks below one pixel"):
        degrade(np.zeros((3, 8, 8), np.float32), np.random.default_rng(), None, 4)
    with pytest.raises(ValueError, match="float32/float64 \\(C, H, W\\)"):
        degrade(np.zeros((48, 48), np.float32), np.random.default_rng(), None, 4)


# -- the dataset -----------------------------------------------------------------------------------
def test_sample_shapes_levels_and_gt_is_a_crop_of_the_image(hr_folder):
    ds = RealESRGANDataset(hr_folder, use_flip=False, **SMALL)
    assert ds.names == ["a.png", "b.png", "c.png", "d.png"] and len(ds) == 4
    s = ds.get(0, np.random.default_rng(5))
    assert s["lq"].shape == (3, 8, 8) and s["gt"].shape == (3, 32, 32) and s["name"] == "a.png"
    assert s["lq"].dtype == s["gt"].dtype == np.float32 and "gt_usm" not in s
    np.testing.assert_array_equal(s["lq"] * 255, np.round(s["lq"] * 255))
    img = _read(hr_folder / "a.png")
    windows = np.lib.stride_tricks.sliding_window_view(img, (32, 32), axis=(1, 2))
    hits = np.argwhere((windows == s["gt"][:, None, None]).all(axis=(0, 3, 4)))
    assert len(hits) >= 1  # the HR target is an untouched window of the file
    small = ds.get(2, np.random.default_rng(5))  # 30 x 20: reflect-padded up to 48 first
    assert small["gt"].shape == (3, 32, 32)


def test_same_position_same_sample_through_the_loader(hr_folder):
    a = BatchLoader(RealESRGANDataset(hr_folder, **SMALL), 4, seed=3)
    b = BatchLoader(RealESRGANDataset(hr_folder, cache=False, **SMALL), 4, seed=3)
    x, y = a.get_batch(2), b.get_batch(2)  # another instance, no cache: bit-identical
    np.testing.assert_array_equal(x["lq"], y["lq"])
    np.testing.assert_array_equal(x["gt"], y["gt"])
    assert x["names"] == y["names"]
    assert not np.array_equal(x["lq"], a.get_batch(3)["lq"])
    ds = RealESRGANDataset(hr_folder, **SMALL)
    np.testing.assert_array_equal(ds.get(1)["lq"], ds.get(1)["lq"])  # no rng: fixed per image


def test_end_to_end_two_batches_with_gt_usm(hr_folder):
    ds = DATASETS.build({"type": "RealESRGANDataset", "root": str(hr_folder), "gt_usm": True,
                         "use_hflip": True, "use_rot": True, **SMALL})
    loader = BatchLoader(ds, 4, seed=0)
    for it in range(2):
        batch = loader.get_batch(it)
        assert batch["lq"].shape == (4, 3, 8, 8) and batch["gt"].shape == (4, 3, 32, 32)
        assert batch["gt_usm"].shape == (4, 3, 32, 32) and batch["gt_usm"].dtype == np.float32
        for key in ("lq", "gt", "gt_usm"):
            assert 0 <= batch[key].min() and batch[key].max() <= 1
        assert not np.array_equal(batch["gt_usm"], batch["gt"])


def test_gt_usm_is_the_sharpened_crop(hr_folder):
    # d.png is exactly crop_pad_size and gt_size == crop_pad_size: the crop is the whole image
    ds = RealESRGANDataset(hr_folder, scale=4, gt_size=48, crop_pad_size=48, use_flip=False,
                           gt_usm=True)
    s = ds.get(3, np.random.default_rng(0))
    img = _read(hr_folder / "d.png")
    np.testing.assert_array_equal(s["gt"], img)
    np.testing.assert_array_equal(s["gt_usm"], usm_sharp(img))


def test_color_y_gives_one_channel(hr_folder):
    s = RealESRGANDataset(hr_folder, color="y", **SMALL).get(0, np.random.default_rng(0))
    assert s["lq"].shape == (1, 8, 8) and s["gt"].shape == (1, 32, 32)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(crop_pad_size=50), ValueError, "crop_pad_size=50 must be a multiple of scale=4"),
    (dict(crop_pad_size=28), ValueError, "and >= gt_size=32"),
    (dict(crop_pad_size=8, gt_size=8), ValueError, "shrinks below one pixel"),
    (dict(use_flip=True, use_hflip=False), ValueError, "use_flip=True and use_hflip=False"),
    (dict(gt_usm=1), TypeError, "gt_usm must be a bool"),
    (dict(resize_rnage=[0.2, 1.5]), ValueError, "did you mean 'resize_range'"),
])
def test_bad_dataset_arguments(hr_folder, kwargs, error, match):
    with pytest.raises(error, match=match):
        RealESRGANDataset(hr_folder, **{**SMALL, **kwargs})


def test_the_config_checker_checks_every_degradation_key():
    # the keys arrive through **degradation (the signature is the constructor's own): the
    # dataset's check_kwargs judges them as the constructor does
    spec = {"type": "RealESRGANDataset", "root": "hr", **SMALL}
    assert DATASETS.check({**spec, "blur_sigma": [0.1, 2], "jpeg_range2": [40, 90]}) == []
    assert DATASETS.check({**spec, "blur_sigm": [1, 2]}) == [
        ("", "RealESRGANDataset: unknown degradation option 'blur_sigm'; did you mean "
             "'blur_sigma'?")]
    assert "did you mean 'crop_pad_size'" in DATASETS.check({**spec, "crop_pad_sise": 48})[0][1]
    assert "jpeg_range2 must be in [1, 100]" in DATASETS.check({**spec, "jpeg_range2": [0, 9]})[0][1]
    assert "sinc_prob must be a number" in DATASETS.check({**spec, "sinc_prob": "0.1"})[0][1]


def test_jpeg_is_diffjpeg_by_default_and_pillow_on_request(hr_folder):
    rng = np.random.default_rng
    diff = RealESRGANDataset(hr_folder, **SMALL)
    pil = DATASETS.build({"type": "RealESRGANDataset", "root": str(hr_folder), "jpeg": "pillow",
                          **SMALL})
    assert (diff.jpeg, pil.jpeg) == ("diffjpeg", "pillow")
    for ds, method in ((diff, "diffjpeg"), (pil, "pillow")):  # Pillow's quality is an integer
        trace = {}
        ds.get(0, rng(4), trace=trace)
        assert isinstance(trace["jpeg1_quality"], int) == (method == "pillow")
    a, b = diff.get(1, rng(9)), pil.get(1, rng(9))
    np.testing.assert_array_equal(a["gt"], b["gt"])  # the same draws: only the JPEG differs
    assert not np.array_equal(a["lq"], b["lq"])
    assert DATASETS.check({"type": "RealESRGANDataset", "root": "x", "jpeg": "cv2"}) == [
        ("", "RealESRGANDataset: jpeg must be one of 'diffjpeg', 'pillow', got 'cv2'")]
    with pytest.raises(ValueError, match="jpeg must be one of 'diffjpeg', 'pillow'"):
        RealESRGANDataset(hr_folder, jpeg="DiffJPEG", **SMALL)


def test_the_two_orders_are_records_of_one_type():
    o = DegradationOptions(blur_sigma2=[0.5, 1], jpeg_range=[40, 50], kernel_list2=["iso"],
                           kernel_prob2=[1.0])
    assert type(o.first) is type(o.second) and (o.first.n, o.second.n) == (1, 2)
    assert (o.first.blur_sigma, o.second.blur_sigma) == ((0.2, 3.0), (0.5, 1.0))
    assert (o.first.jpeg_range, o.second.jpeg_range) == ((40, 50), (30, 95))
    assert o.second.kernel_list == ("iso",) and o.second.kernel_prob == (1.0,)
    assert o.second.resize_prob == (0.3, 0.4, 0.3) and o.first.resize_range == (0.15, 1.5)


def test_any_sequence_of_numbers_is_taken():
    # numpy arrays and tuples as YAML lists: same options, checked the same way
    o = DegradationOptions(kernel_prob=np.array([0.45, 0.25, 0.12, 0.03, 0.12, 0.03]),
                           blur_sigma=np.array([0.5, 1.0]), resize_prob2=(0.2, 0.4, 0.4),
                           kernel_list2=np.array(["iso", "aniso"]), kernel_prob2=np.array([0.5, 0.5]))
    assert o == DegradationOptions(kernel_prob=[0.45, 0.25, 0.12, 0.03, 0.12, 0.03],
                                   blur_sigma=[0.5, 1.0], resize_prob2=[0.2, 0.4, 0.4],
                                   kernel_list2=["iso", "aniso"], kernel_prob2=[0.5, 0.5])
    assert o.kernel_list2 == ("iso", "aniso") and type(o.kernel_list2[0]) is str
    with pytest.raises(ValueError, match="kernel_prob must sum to 1"):
        DegradationOptions(kernel_prob=np.full(6, 0.5))
    with pytest.raises(ValueError, match="kernel_prob must be a list of 6 probabilities"):
        DegradationOptions(kernel_prob=np.full((2, 3), 1 / 6))
    with pytest.raises(ValueError, match="blur_sigma must be a \\[low, high\\] pair"):
        DegradationOptions(blur_sigma="0.2 3")


def test_pair_is_refused(hr_folder):
    with pytest.raises(TypeError, match="use get\\(index, rng\\)"):
        RealESRGANDataset(hr_folder, **SMALL).pair(0)


# -- the loader's extra keys -----------------------------------------------------------------------
class _Extra:
    def __len__(self):
        return 3

    def get(self, index, rng=None):
        lq = np.full((1, 2, 2), index, np.float32)
        return {"lq": lq, "gt": np.repeat(lq, 2, axis=1), "name": str(index),
                "gt_usm": lq + 0.5, "note": "not an array"}


def test_loader_stacks_every_extra_array_key():
    batch = BatchLoader(_Extra(), 3, shuffle=False).get_batch(0)
    np.testing.assert_array_equal(batch["gt_usm"][:, 0, 0, 0], [0.5, 1.5, 2.5])
    assert "note" not in batch and batch["names"] == ["0", "1", "2"]


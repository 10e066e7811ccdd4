"""degrade(..., trace=) and RealESRGANDataset.get(..., trace=): the trace changes no draw (outputs
bit-identical with and without it), holds every TRACE_KEYS key, and its values are the draws
(replayed by hand from the same generator, or forced by degenerate ranges)."""
import math

import numpy as np
import pytest
from PIL import Image

from framework.data import RealESRGANDataset, degrade
from framework.data.realesrgan import TRACE_KEYS

GT = np.random.default_rng(0).random((3, 48, 40)).astype(np.float32)


@pytest.mark.parametrize("seed", range(6))
def test_trace_changes_no_draw(seed):
    plain = degrade(GT, np.random.default_rng(seed), None, 4)
    trace, times = {}, {}
    traced = degrade(GT, np.random.default_rng(seed), None, 4, times, trace)
    assert traced.tobytes() == plain.tobytes()
    assert tuple(trace) == TRACE_KEYS and times


def test_every_key_is_drawn_by_some_sample_and_none_means_not_drawn():
    seen, often = set(), {"sinc_prob": 0.4, "sinc_prob2": 0.4}  # every branch within 30 seeds
    for seed in range(30):
        trace = {}
        degrade(GT, np.random.default_rng(seed), often, 4, trace=trace)
        seen |= {k for k, v in trace.items() if v is not None}
        sinc1 = trace["kernel1"] == "sinc"
        assert (trace["omega1"] is None) != sinc1 and (trace["sigma1_x"] is None) == sinc1
        assert (trace["kernel2_size"] is None) == (trace["kernel2"] == "none")
        assert (trace["resize1_mode"] is None) == (trace["resize1"] == "keep")
        assert (trace["final_sinc_size"] is None) == (trace["final_omega"] is None)
        assert trace["noise1"] in ("gaussian", "poisson") and isinstance(trace["noise2_gray"], bool)
        assert 30 <= trace["jpeg1_quality"] <= 95 and isinstance(trace["jpeg2_quality"], float)
    assert seen == set(TRACE_KEYS)


@pytest.mark.parametrize("seed", range(4))
def test_both_jpegs_make_the_same_draws(seed):
    # DiffJPEG takes the drawn quality as it is, Pillow the nearest integer: one uniform either
    # way, so every draw of a seed is the same
    diff, pil = {}, {}
    a = degrade(GT, np.random.default_rng(seed), None, 4, trace=diff)
    b = degrade(GT, np.random.default_rng(seed), None, 4, trace=pil, jpeg="pillow")
    for key in TRACE_KEYS:
        if key.startswith("jpeg"):
            assert isinstance(pil[key], int) and pil[key] == round(diff[key]), key
        else:
            assert pil[key] == diff[key], key
    assert not np.array_equal(a, b) and np.abs(a - b).mean() < 0.1


def test_trace_holds_the_first_draws_replayed_by_hand():
    opts = {"kernel_list": ["generalized_aniso"], "kernel_prob": [1.0], "sinc_prob": 0.0}
    trace = {}
    degrade(GT, np.random.default_rng(11), opts, 4, trace=trace)
    r = np.random.default_rng(11)  # BasicSR's order: size, sinc coin, type, sigmas, angle, beta
    size = range(7, 22, 2)[int(r.integers(8))]
    r.uniform()  # the sinc coin (sinc_prob 0: never a sinc)
    r.random()  # the kernel type (one type)
    sx, sy, theta = r.uniform(0.2, 3), r.uniform(0.2, 3), r.uniform(-math.pi, math.pi)
    beta = r.uniform(0.5, 1) if r.uniform() < 0.5 else r.uniform(1, 4)
    assert (trace["kernel1"], trace["kernel1_size"]) == ("generalized_aniso", size)
    assert (trace["sigma1_x"], trace["sigma1_y"], trace["theta1"], trace["beta1"]) == (
        sx, sy, theta, beta)


def test_trace_of_forced_draws():
    forced = dict(kernel_list=["iso"], kernel_prob=[1], blur_sigma=[1.5, 1.5], sinc_prob=0,
                  resize_prob=[0, 0, 1], gaussian_noise_prob=1, noise_range=[7, 7],
                  gray_noise_prob=1, jpeg_range=[50, 50], second_blur_prob=0,
                  resize_prob2=[1, 0, 0], resize_range2=[0.5, 1.0], gaussian_noise_prob2=0,
                  poisson_scale_range2=[0.25, 0.25], gray_noise_prob2=0, final_sinc_prob=1,
                  jpeg_range2=[80, 80])
    trace = {}
    degrade(GT, np.random.default_rng(3), forced, 4, trace=trace)
    assert {k: trace[k] for k in ("kernel1", "sigma1_x", "sigma1_y", "theta1", "beta1",
                                  "resize1", "resize1_scale", "resize1_mode", "noise1",
                                  "noise1_level", "noise1_gray", "jpeg1_quality", "kernel2",
                                  "resize2", "resize2_scale", "noise2", "noise2_level",
                                  "noise2_gray", "jpeg2_quality")} == dict(
        kernel1="iso", sigma1_x=1.5, sigma1_y=1.5, theta1=0.0, beta1=None, resize1="keep",
        resize1_scale=1.0, resize1_mode=None, noise1="gaussian", noise1_level=7.0,
        noise1_gray=True, jpeg1_quality=50, kernel2="none", resize2="up", resize2_scale=1.0,
        noise2="poisson", noise2_level=0.25, noise2_gray=False, jpeg2_quality=80)
    assert trace["final_sinc_size"] in range(7, 22, 2)
    assert math.pi / 3 <= trace["final_omega"] <= math.pi


def test_dataset_get_with_trace_is_the_same_sample(tmp_path):
    small = (np.random.default_rng(1).random((4, 4, 3)) * 255).astype(np.uint8)
    Image.fromarray(small).resize((56, 50), Image.BICUBIC).save(tmp_path / "a.png")
    ds = RealESRGANDataset(tmp_path, scale=4, gt_size=32, crop_pad_size=48, gt_usm=True)
    trace = {}
    a = ds.get(0, np.random.default_rng([5, 0, 0]), trace=trace)
    b = ds.get(0, np.random.default_rng([5, 0, 0]))
    for key in ("lq", "gt", "gt_usm"):
        assert a[key].tobytes() == b[key].tobytes()
    assert tuple(trace) == TRACE_KEYS


# -- traiNNer-redux's keys ------------------------------------------------------------------------
def _traces(opts, seeds=range(40)):
    out = []
    for seed in seeds:
        trace = {}
        degrade(GT, np.random.default_rng(seed), opts, 4, trace=trace)
        out.append(trace)
    return out


def test_redux_keys_at_their_defaults_change_no_draw():
    """blur_prob / jpeg_prob(2) 1, kernel_range 7..blur_kernel_size: Real-ESRGAN's pipeline,
    bit for bit (no draw is spent on a certain outcome)."""
    explicit = {"blur_prob": 1.0, "jpeg_prob": 1.0, "jpeg_prob2": 1.0, "kernel_range": [7, 21],
                "kernel_range2": [7, 21], "final_kernel_range": [7, 21]}
    for seed in range(4):
        plain = degrade(GT, np.random.default_rng(seed), None, 4)
        assert degrade(GT, np.random.default_rng(seed), explicit, 4).tobytes() == plain.tobytes()


def test_blur_and_jpeg_odds_skip_their_stage():
    traces = _traces({"blur_prob": 0.5, "jpeg_prob": 0.0, "jpeg_prob2": 0.5})
    blurred = sum(t["kernel1"] != "none" for t in traces)
    assert 12 <= blurred <= 28 and all((t["kernel1"] == "none") == (t["kernel1_size"] is None)
                                       for t in traces)
    assert all(t["jpeg1_quality"] is None for t in traces)
    assert 12 <= sum(t["jpeg2_quality"] is not None for t in traces) <= 28
    never = _traces({"blur_prob": 0.0, "jpeg_prob": 0.0, "jpeg_prob2": 0.0}, range(3))
    assert all(t["kernel1"] == "none" and t["jpeg2_quality"] is None for t in never)
    # no blur and no JPEG at all: the LR is smoother-edged than with them, never equal
    for seed in range(3):
        a = degrade(GT, np.random.default_rng(seed), {"blur_prob": 0.0}, 4)
        assert a.tobytes() != degrade(GT, np.random.default_rng(seed), None, 4).tobytes()


def test_resize_modes_and_kernel_ranges_are_drawn_from_the_lists():
    traces = _traces({"resize_mode_list": ["nearest-exact", "lanczos"],
                      "resize_mode_prob": [0.5, 0.5], "resize_mode_list2": ["nearest-exact"],
                      "resize_mode_list3": ["bicubic", "lanczos"], "resize_mode_prob3": [0, 1],
                      "kernel_range": [3, 5], "kernel_range2": [9, 9], "second_blur_prob": 1.0,
                      "final_sinc_prob": 1.0, "final_kernel_range": [11, 13]})
    assert {t["resize1_mode"] for t in traces} - {None} == {"nearest-exact", "lanczos"}
    assert {t["resize2_mode"] for t in traces} == {"nearest-exact"}
    assert {t["final_resize_mode"] for t in traces} == {"lanczos"}
    assert {t["kernel1_size"] for t in traces} == {3, 5}
    assert {t["kernel2_size"] for t in traces} == {9}
    assert {t["final_sinc_size"] for t in traces} == {11, 13}


@pytest.mark.parametrize("opts,match", [
    ({"kernel_range": [4, 8]}, r"kernel_range must be two odd sizes \[low, high\], got \[4, 8\]"),
    ({"kernel_range2": [9, 7]}, r"kernel_range2 must have low <= high"),
    ({"resize_mode_list": ["cubic"]}, r"resize_mode_list: unknown resize mode 'cubic'"),
    ({"resize_mode_prob2": [1.0]}, r"resize_mode_prob2 is given without resize_mode_list2"),
    ({"resize_mode_list3": ["area", "bilinear"], "resize_mode_prob3": [1.0]},
     r"resize_mode_prob3 must be a list of 2 probabilities"),
    ({"blur_prob": 1.5}, r"blur_prob"),
])
def test_redux_keys_are_checked(opts, match):
    with pytest.raises(ValueError, match=match):
        degrade(GT, np.random.default_rng(0), opts, 4)

"""JPEG (framework/data/degradations/jpeg.py): Pillow's round trip at two qualities, the rounded
quality, the trace; DiffJPEG's (F.diff_jpeg with plain rounding after a clip) and its continuous
quality."""
import numpy as np
import pytest

from framework.data import degradations as D


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


@pytest.mark.parametrize("channels", [3, 1])
def test_diffjpeg_is_f_diff_jpeg_with_plain_rounding_on_the_clipped_image(channels):
    import framework.functional as F
    img = _smooth(np.random.default_rng(2), channels, 40, 52) * 1.2 - 0.1  # beyond [0, 1] too
    out = D.add_diffjpeg_compression(img, 37.5)
    assert out.shape == img.shape and out.dtype == np.float32
    want = F.diff_jpeg(np.clip(img, 0, 1)[None], 37.5, differentiable=False).numpy()[0]
    np.testing.assert_array_equal(out, want)
    assert 0 <= out.min() and out.max() <= 1 and not np.array_equal(out * 255, np.round(out * 255))
    errors = [np.abs(D.add_diffjpeg_compression(img, q) - np.clip(img, 0, 1)).mean()
              for q in (10, 37.5, 90)]
    assert errors[0] > 1.5 * errors[1] and errors[1] > errors[2] > 0  # coarser tables, larger errors


def test_random_diffjpeg_takes_the_drawn_quality_as_it_is():
    img = _smooth(np.random.default_rng(3), 3, 16, 24)
    trace = {}
    out = D.random_add_jpg_compression(img, (30, 95), rng=np.random.default_rng(6), trace=trace,
                                       method="diffjpeg")
    assert trace == {"quality": np.random.default_rng(6).uniform(30, 95)}
    np.testing.assert_array_equal(out, D.add_diffjpeg_compression(img, trace["quality"]))


@pytest.mark.parametrize("call, match", [
    (lambda: D.add_jpg_compression(np.zeros((3, 4, 4)), 101), "quality must be in 1..100"),
    (lambda: D.add_jpg_compression(np.zeros((2, 4, 4)), 50), "1 or 3 channels"),
    (lambda: D.add_diffjpeg_compression(np.zeros((2, 4, 4)), 50), "1 or 3 channels"),
    (lambda: D.add_diffjpeg_compression(np.zeros((3, 4, 4)), 0.5),
     r"add_diffjpeg_compression: quality must be in \[1, 100\]"),
    (lambda: D.random_add_jpg_compression(np.zeros((3, 4, 4)), (30, 95), rng=None, method="cv2"),
     "method must be one of 'diffjpeg', 'pillow'"),
])
def test_bad_arguments_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_random_add_jpg_compression_trace_is_the_quality():
    img = _smooth(np.random.default_rng(1), 3, 16, 16)
    trace = {}
    out = D.random_add_jpg_compression(img, (30, 95), rng=np.random.default_rng(6), trace=trace)
    assert trace == {"quality": int(round(np.random.default_rng(6).uniform(30, 95)))}
    np.testing.assert_array_equal(out, D.add_jpg_compression(img, trace["quality"]))

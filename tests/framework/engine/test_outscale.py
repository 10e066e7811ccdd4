"""--outscale's pieces: the output size (Real-ESRGAN's floor, without binary rounding), the checks,
and resize_quantised: band by band == one band exactly, == F.interpolate of the whole buffer
within one quantisation step, antialiased when shrinking, 8/16 bits kept, float memory bounded by
a band."""
import tracemalloc

import numpy as np
import pytest

from framework import functional as F
from framework.engine.inference.upscale import (OUTSCALE_MODES, check_outscale, checked_outscale_size,
                                        outscale_size, resize_quantised)
from framework.io import image as image_io
from framework.tensor import Tensor


def test_outscale_size_is_the_floor_of_the_exact_decimal_product():
    assert outscale_size((15, 7), 1.5) == (22, 10)  # Real-ESRGAN's int(h * outscale)
    assert outscale_size((15, 7), 4) == (60, 28)
    assert outscale_size((3, 1000), 0.5) == (1, 500)
    # in binary floating point 100 * 0.29 = 28.999999999999996, which int() takes to 28
    assert int(100 * 0.29) == 28 and outscale_size((100, 10), 0.29) == (29, 2)
    assert outscale_size((10, 10), 1.1) == (11, 11) and outscale_size((7, 3), 1 / 3) == (2, 0)


@pytest.mark.parametrize("value,match", [
    (0, "outscale must be > 0, got 0"), (-2.5, "outscale must be > 0, got -2.5"),
    (float("nan"), "outscale must be > 0, got nan"),
    (float("inf"), "outscale must be a finite number > 0, got inf"),
    ("3", "outscale must be a number, got str '3'"),
])
def test_bad_outscale_values_are_errors_naming_it(value, match):
    with pytest.raises(ValueError, match=match):
        check_outscale(value)
    assert check_outscale(2) == 2.0


def test_outputs_below_one_pixel_or_over_the_pixel_limit_are_refused(monkeypatch):
    with pytest.raises(ValueError, match=r"^--outscale 0.1: a.png \(12x5\) would become 1x0 "
                       r"pixels; the output must be at least 1x1$"):
        checked_outscale_size((5, 12), 0.1, "--outscale", "a.png")
    monkeypatch.setattr(image_io, "MAX_PIXELS", 600)
    assert checked_outscale_size((10, 20), 1.7, "--outscale") == (17, 34)  # 578 pixels: fine
    with pytest.raises(ValueError, match=r"^--outscale 2: the image \(20x10\) would become 40x20 = "
                       r"800 pixels, over the limit of 600 \(framework.io.image.MAX_PIXELS\)$"):
        checked_outscale_size((10, 20), 2, "--outscale")


def _reference(q, size, mode, antialias):
    """F.interpolate of the whole buffer, in the dtype resize_quantised computes in, quantised."""
    peak, work = (255, np.float32) if q.dtype == np.uint8 else (65535, np.float64)
    x = Tensor(q.transpose(2, 0, 1)[None].astype(work))
    y = F.interpolate(x, size=size, mode=mode, antialias=antialias).data[0]
    return np.rint(np.clip(y, 0, peak)).transpose(1, 2, 0).astype(int)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("mode", OUTSCALE_MODES)
@pytest.mark.parametrize("size", [(25, 40), (11, 17), (1, 1), (17, 27)])
def test_band_by_band_equals_one_band_and_interpolate(dtype, mode, size):
    rng = np.random.default_rng(0)
    peak = np.iinfo(dtype).max
    q = rng.integers(0, peak + 1, (17, 27, 2)).astype(dtype)  # odd sizes, gray + alpha
    whole = resize_quantised(q, size, mode, band=10 ** 9)
    assert whole.dtype == dtype and whole.shape == size + (2,)
    for band in (1, 40, 700):  # one output row per band, a few rows, many
        np.testing.assert_array_equal(resize_quantised(q, size, mode, band=band), whole)
    # Against F.interpolate: its resample() picks the pass order (H or W first) by its own cost
    # model, so float rounding can differ and move a value across a rounding boundary: one step
    # at most, rarely (in practice these cases are all exact).
    shrink = size[0] < q.shape[0] and mode in ("bicubic", "bilinear", "lanczos")
    diff = np.abs(whole.astype(int) - _reference(q, size, mode, shrink))
    assert diff.max() <= 1 and diff.mean() < 1e-3
    if size == (17, 27):  # the same size: a copy
        np.testing.assert_array_equal(whole, q)


def test_shrinking_is_antialiased_and_area_is_the_block_mean():
    q = np.arange(4 * 6, dtype=np.uint8).reshape(4, 6, 1) * 10
    area = resize_quantised(q, (2, 3), "area")
    blocks = q[:, :, 0].reshape(2, 2, 3, 2).astype(float).mean(axis=(1, 3))
    np.testing.assert_array_equal(area[:, :, 0], np.round(blocks))
    # antialiased bilinear at 1/2: taps 1/8, 3/8, 3/8, 1/8 along each axis, clipped at the border
    # (then renormalised): the first output row is (3 q0 + 3 q1 + q2) / 7
    bil = resize_quantised(q, (2, 3), "bilinear").astype(float)[:, :, 0]
    v = q[:, :, 0].astype(float)
    rows = (3 * v[0] + 3 * v[1] + v[2]) / 7.0
    assert bil[0, 0] == np.round((3 * rows[0] + 3 * rows[1] + rows[2]) / 7.0)
    plain = F.interpolate(Tensor(q.transpose(2, 0, 1)[None].astype(np.float32)), size=(2, 3),
                          mode="bilinear").data[0, 0]
    assert np.abs(bil - np.rint(plain)).max() > 5  # not the aliased (2-tap) resize


def test_nearest_enlarging_repeats_pixels():
    q = np.array([[[0], [255]], [[7], [9]]], np.uint8)
    out = resize_quantised(q, (4, 6), "nearest")[:, :, 0]
    np.testing.assert_array_equal(out, [[0, 0, 0, 255, 255, 255]] * 2 + [[7, 7, 7, 9, 9, 9]] * 2)


def test_bad_arguments():
    q = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="resize_quantised: mode must be one of 'bicubic'.*got "
                       "'cubic'; did you mean 'bicubic'"):
        resize_quantised(q, (2, 2), "cubic")
    with pytest.raises(ValueError, match="q must be a uint8/uint16 .* got float32"):
        resize_quantised(q.astype(np.float32), (2, 2))
    with pytest.raises(ValueError, match=r"resize_quantised: size must be positive, got \(0, 2\)"):
        resize_quantised(q, (0, 2))


def test_float_memory_is_one_band():
    """300x400 RGB -> 450x600: numpy's peak is the output plus a band's float arrays, far below
    one float32 copy of the output (3.2 MB)."""
    q = np.random.default_rng(1).integers(0, 256, (300, 400, 3)).astype(np.uint8)
    resize_quantised(q, (450, 600), band=1 << 15)  # compile
    tracemalloc.start()
    out = resize_quantised(q, (450, 600), band=1 << 15)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < out.nbytes + 2 ** 20, peak / 2 ** 20

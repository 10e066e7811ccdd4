"""BT.601 colour conversions: hand-worked values, round trip, dtypes, errors."""
import numpy as np
import pytest

from framework.color import rgb_to_y, rgb_to_ycbcr, ycbcr_to_rgb


def test_rgb_to_y_hand_values_and_dtype():
    img = np.zeros((3, 1, 4), np.float32)
    img[0, 0, 1] = 1  # red
    img[1, 0, 2] = 1  # green
    img[:, 0, 3] = 1  # white
    y = rgb_to_y(img)
    assert y.shape == (1, 1, 4) and y.dtype == np.float32
    np.testing.assert_allclose(y[0, 0] * 255, [16, 16 + 65.481, 16 + 128.553, 235.0], rtol=1e-6)
    assert rgb_to_y(img.astype(np.float64)).dtype == np.float64


def test_ycbcr_round_trip_and_batch_axis(rng):
    img = rng.random((2, 3, 4, 5))
    ycc = rgb_to_ycbcr(img)
    np.testing.assert_allclose(ycc[:, :1], rgb_to_y(img), atol=1e-15)
    np.testing.assert_allclose(ycbcr_to_rgb(ycc), img, atol=1e-12)
    gray = np.full((3, 2, 2), 0.5)
    np.testing.assert_allclose(rgb_to_ycbcr(gray)[1:], 128 / 255, atol=1e-12)  # no chroma


def test_color_errors():
    with pytest.raises(ValueError, match=r"3 channels.*\(1, 4, 4\)"):
        rgb_to_y(np.zeros((1, 4, 4)))
    with pytest.raises(TypeError, match="uint8"):
        rgb_to_y(np.zeros((3, 4, 4), np.uint8))

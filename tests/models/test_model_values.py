"""Hand-worked values (no torch needed): with chosen weights each model reduces to something known,
which pins down its wiring (padding, residuals, mean shift, sub-pixel order, resampling skip)."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
import framework.functional as F

from .cases import build, lr_batch


def _zero(conv):
    conv.weight.data[...] = 0
    conv.bias.data[...] = 0


def _delta(conv):
    """Channel i -> channel i through the kernel's centre tap: the identity when sizes agree."""
    conv.weight.data[...] = 0
    k = conv.weight.shape[-1] // 2
    for i in range(min(conv.weight.shape[:2])):
        conv.weight.data[i, i, k, k] = 1
    conv.bias.data[...] = 0


@pytest.mark.parametrize("channels", [1, 3])
def test_srcnn_without_upsampling_is_the_identity_with_centre_taps(channels):
    model, _ = build("SRCNN", 3, channels, upsample=False)
    for conv in (model.conv1, model.conv2, model.conv3):
        _delta(conv)
    x = lr_batch(channels, h=7, w=4)  # in [0, 1]: ReLU lets it through
    y = model(x)
    assert y.shape == x.shape  # the 9-5-5 padding keeps the size
    # every route sums exact zeros and one exact product: the input comes back bit for bit
    np.testing.assert_array_equal(y.data, x.data)


@pytest.mark.parametrize("scale", [2, 3])
def test_srcnn_upsamples_bicubically_inside(scale):
    model, _ = build("SRCNN", scale, 1)
    for conv in (model.conv1, model.conv2, model.conv3):
        _delta(conv)
    x = sg.tensor(np.full((1, 1, 4, 5), 0.3), dtype=np.float32)  # bicubic keeps a constant
    np.testing.assert_allclose(model(x).data, 0.3, rtol=1e-6)


@pytest.mark.parametrize("scale", [2, 4])
def test_vdsr_with_a_silent_body_returns_the_bicubic_upsampling(scale):
    model, _ = build("VDSR", scale, 3, small=True)
    _zero(model.body[-1])
    x = lr_batch(3)
    want = F.interpolate(x, scale_factor=scale, mode="bicubic", align_corners=False)
    np.testing.assert_array_equal(model(x).data, want.data)
    flat = sg.tensor(np.full((1, 3, 3, 3), 0.6), dtype=np.float32)
    np.testing.assert_allclose(model(flat).data, 0.6, rtol=1e-6)


@pytest.mark.parametrize("channels", [1, 3])
def test_edsr_with_a_silent_last_conv_returns_the_mean(channels):
    model, _ = build("EDSR", 2, channels, small=True)
    _zero(model.conv_last)
    mean = (0.4488, 0.4371, 0.4040) if channels == 3 else ((0.4488 + 0.4371 + 0.4040) / 3,)
    y = model(lr_batch(channels))
    np.testing.assert_allclose(y.data, np.broadcast_to(np.float32(mean)[None, :, None, None], y.shape),
                               rtol=1e-6)


def test_espcn_puts_channel_c_s2_plus_a_s_plus_b_at_sub_pixel_a_b():
    s, c = 3, 2
    model, _ = build("ESPCN", s, c)
    model.last_part[0].weight.data[...] = 0
    model.last_part[0].bias.data[...] = np.arange(c * s * s, dtype=np.float32)
    y = model(lr_batch(c, h=2, w=3)).data
    for ch in range(c):
        for a in range(s):
            for b in range(s):
                np.testing.assert_array_equal(y[0, ch, a::s, b::s], ch * s * s + a * s + b)


def test_fsrcnn_transposed_conv_places_each_lr_pixel_at_its_hr_block():
    """A single 1 at LR (i, j) with a centre-tap deconv lands at HR (i*s, j*s): the padding 4 /
    output_padding s-1 geometry the paper uses."""
    s = 3
    model, _ = build("FSRCNN", s, 1)
    deconv = model.last_part
    deconv.weight.data[...] = 0
    deconv.weight.data[0, 0, 4, 4] = 1
    deconv.bias.data[...] = 0
    feats = np.zeros((1, 56, 4, 5), np.float32)
    feats[0, 0, 1, 2] = 1
    y = deconv(sg.tensor(feats)).data
    assert y.shape == (1, 1, 12, 15)
    want = np.zeros((12, 15), np.float32)
    want[1 * s, 2 * s] = 1
    np.testing.assert_array_equal(y[0, 0], want)


@pytest.mark.parametrize("mode", ["bicubic", "bilinear", "nearest", "lanczos"])
def test_upsample_net_with_a_silent_tail_returns_the_resampled_input(mode):
    model, _ = build("UpsampleNet", 2, 3, mode=mode)
    _zero(model.tail[-1])
    x = lr_batch(3)
    align = False if mode in ("bicubic", "bilinear") else None
    want = F.interpolate(x, scale_factor=2, mode=mode, align_corners=align)
    np.testing.assert_array_equal(model(x).data, want.data)


@pytest.mark.parametrize("mode", ["bicubic", "lanczos"])
def test_upsample_net_gradient_reaches_the_first_conv_through_the_resampling(mode):
    model, _ = build("UpsampleNet", 2, 1, mode=mode)
    x = lr_batch(1)
    x.requires_grad = True
    model(x).sum().backward()
    grad = model.head[0].weight.grad.data
    assert np.count_nonzero(grad) > grad.size // 2  # a filter whose ReLU is off everywhere has none
    assert np.abs(x.grad.data).sum() > 0


def test_upsample_net_without_residual_has_no_skip():
    model, _ = build("UpsampleNet", 2, 3, residual=False)
    _zero(model.tail[-1])
    np.testing.assert_array_equal(model(lr_batch(3)).data, 0)

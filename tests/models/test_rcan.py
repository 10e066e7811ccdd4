"""RCAN: BasicSR's keys (no mean key: a constant, as there), shapes, channel attention worked by
hand, parity with the torch twin (output and every gradient of an L1 loss), an Adam step, a .pth
round trip, errors."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.registry import MODELS

from . import basicsr_checks as checks

SMALL = {"type": "RCAN", "num_feat": 8, "num_group": 2, "num_block": 2, "squeeze_factor": 4}


def spec(scale=4, channels=3, **kw):
    return {**SMALL, "scale": scale, "num_in_ch": channels, "num_out_ch": channels, **kw}


def test_state_dict_keys_are_basicsrs():
    s = spec(4, num_group=1, num_block=1)
    rcab = "body.0.residual_group.0.rcab"
    convs = ["conv_first", f"{rcab}.0", f"{rcab}.2", f"{rcab}.3.attention.1", f"{rcab}.3.attention.3",
             "body.0.conv", "conv_after_body", "upsample.0", "upsample.2", "conv_last"]
    assert checks.check_keys(s) == [f"{c}.{p}" for c in convs for p in ("weight", "bias")]
    sd = checks.build(s).state_dict()
    assert sd[f"{rcab}.3.attention.1.weight"].shape == (2, 8, 1, 1)  # 8 // squeeze_factor 4
    assert sd[f"{rcab}.3.attention.3.weight"].shape == (8, 2, 1, 1)


def test_published_size():
    """RCAN (10 groups x 20 blocks, 64 features, squeeze 16), x4: 15,592,355 parameters (the
    paper's "about 16M"), counted as the 0-block network plus 20 x (10 groups of one block)."""
    counts = [checks.build({"type": "RCAN", "num_block": n}).num_parameters() for n in (0, 1)]
    assert counts[0] + 20 * (counts[1] - counts[0]) == 15_592_355


@pytest.mark.parametrize("scale,channels,out_shape", [
    (2, 3, (2, 3, 10, 6)), (3, 1, (2, 1, 15, 9)), (4, 3, (2, 3, 20, 12)), (8, 1, (2, 1, 40, 24))])
def test_output_shape(scale, channels, out_shape):
    y = checks.build(spec(scale, channels))(sg.tensor(np.zeros((2, channels, 5, 3), np.float32)))
    assert y.shape == out_shape and y.dtype == np.float32


def test_channel_attention_by_hand():
    """Zero 1x1 convs, bias b2 on the second: each channel is scaled by sigmoid(b2[c]) whatever x."""
    model = checks.build(spec(2, num_group=1, num_block=1))
    ca = model.body[0].residual_group[0].rcab[3]
    for conv in (ca.attention[1], ca.attention[3]):
        conv.weight.data[...] = 0
        conv.bias.data[...] = 0
    ca.attention[3].bias.data[...] = np.arange(8, dtype=np.float32) - 4
    x = np.random.default_rng(0).uniform(-1, 1, (2, 8, 3, 5)).astype(np.float32)
    gate = 1 / (1 + np.exp(-(np.arange(8) - 4.0)))
    np.testing.assert_allclose(ca(sg.tensor(x)).data, x * gate[None, :, None, None], rtol=1e-6)


@pytest.mark.parametrize("channels", [1, 3])
def test_silent_last_conv_returns_the_mean(channels):
    model = checks.build(spec(2, channels))
    model.conv_last.weight.data[...] = 0
    model.conv_last.bias.data[...] = 0
    y = model(sg.tensor(np.random.default_rng(1).uniform(0, 1, (1, channels, 3, 4)), dtype=np.float32))
    mean = [0.4488, 0.4371, 0.4040] if channels == 3 else [(0.4488 + 0.4371 + 0.4040) / 3]
    np.testing.assert_allclose(y.data, np.broadcast_to(np.float32(mean)[None, :, None, None], y.shape),
                               rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,channels,kw", [(4, 3, {}), (3, 1, {}), (2, 3, {"res_scale": 0.5})])
def test_matches_the_twin(scale, channels, kw, dtype):
    checks.check_parity(spec(scale, channels, **kw), (2, channels, 5, 3), dtype)


def test_init_is_torchs_default():
    checks.check_init_matches_twin(spec(2, num_feat=32, num_group=1, num_block=1), normal_scaled=set())


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(2), (2, 3, 8, 8))


def test_pth_round_trip(tmp_path):
    checks.check_pth_round_trip(spec(3), (1, 3, 4, 5), tmp_path)


@pytest.mark.parametrize("kw,error,match", [
    ({"scale": 5}, ValueError, r"RCAN: scale x5 is not supported by the pixel-shuffle upsampler"),
    ({"scale": 0}, ValueError, r"RCAN: scale must be a positive int"),
    ({"squeeze_factor": 128}, ValueError, r"RCAN: squeeze_factor must be <= num_feat"),
    ({"squeeze_factor": 0}, ValueError, r"RCAN: squeeze_factor must be a positive int"),
    ({"num_group": -1}, ValueError, r"RCAN: num_group must be an int >= 0"),
    ({"res_scale": 0}, ValueError, r"RCAN: res_scale must be > 0"),
    ({"img_range": "255"}, TypeError, r"RCAN: img_range must be a number"),
    ({"rgb_mean": [0.5, 0.5]}, ValueError, r"RCAN: rgb_mean has 2 values for 3 channels"),
    ({"upscale": 4}, TypeError, r"upscale"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "RCAN", "num_group": 1, "num_block": 1, **kw})

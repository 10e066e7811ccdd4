"""MSRResNet: BasicSR's keys (upconv2 only at x4), shapes, the bilinear skip, BasicSR's init
(kaiming normal x 0.1 everywhere), parity with the torch twin (output and every gradient of an L1
loss), an Adam step, a .pth round trip, errors."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.registry import MODELS

from . import basicsr_checks as checks

SMALL = {"type": "MSRResNet", "num_feat": 8, "num_block": 2}


def spec(scale=4, channels=3, **kw):
    return {**SMALL, "scale": scale, "num_in_ch": channels, "num_out_ch": channels, **kw}


@pytest.mark.parametrize("scale,ups", [(2, ["upconv1"]), (3, ["upconv1"]), (4, ["upconv1", "upconv2"])])
def test_state_dict_keys_are_basicsrs(scale, ups):
    s = spec(scale, num_block=1)
    convs = ["conv_first", "body.0.conv1", "body.0.conv2", *ups, "conv_hr", "conv_last"]
    assert checks.check_keys(s) == [f"{c}.{p}" for c in convs for p in ("weight", "bias")]
    want = 8 * 4 if scale == 4 else 8 * scale * scale
    assert checks.build(s).state_dict()["upconv1.weight"].shape == (want, 8, 3, 3)


def test_published_size():
    """BasicSR's MSRResNet x4 (16 blocks, 64 features): 1,517,571 parameters."""
    assert checks.build({"type": "MSRResNet"}).num_parameters() == 1_517_571


@pytest.mark.parametrize("scale,channels,out_shape", [
    (2, 3, (2, 3, 10, 6)), (3, 1, (2, 1, 15, 9)), (4, 3, (2, 3, 20, 12)), (4, 1, (2, 1, 20, 12))])
def test_output_shape(scale, channels, out_shape):
    y = checks.build(spec(scale, channels))(sg.tensor(np.zeros((2, channels, 5, 3), np.float32)))
    assert y.shape == out_shape and y.dtype == np.float32


@pytest.mark.parametrize("scale", [2, 3, 4])
def test_silent_last_conv_gives_the_bilinear_upsampling(scale):
    model = checks.build(spec(scale))
    model.conv_last.weight.data[...] = 0
    x = sg.tensor(np.random.default_rng(0).uniform(0, 1, (1, 3, 4, 3)), dtype=np.float32)
    want = F.interpolate(x, scale_factor=scale, mode="bilinear", align_corners=False)
    np.testing.assert_array_equal(model(x).data, want.data)  # the init zeroes every bias


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,channels", [(2, 3), (3, 1), (4, 3)])
def test_matches_the_twin(scale, channels, dtype):
    checks.check_parity(spec(scale, channels), (2, channels, 5, 3), dtype)


def test_init_is_basicsrs_kaiming_normal_times_0_1():
    s = spec(4, num_feat=32)
    convs = ["conv_first", "body.0.conv1", "body.0.conv2", "body.1.conv1", "body.1.conv2", "upconv1",
             "upconv2", "conv_hr", "conv_last"]
    checks.check_init_matches_twin(s, normal_scaled={f"{c}.weight" for c in convs})


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(2), (2, 3, 8, 8))


def test_pth_round_trip(tmp_path):
    checks.check_pth_round_trip(spec(3), (1, 3, 4, 5), tmp_path)


@pytest.mark.parametrize("kw,error,match", [
    ({"scale": 8}, ValueError, r"MSRResNet: scale x8 is not supported \(supported: x2, x3, x4\)"),
    ({"scale": 1}, ValueError, r"MSRResNet: scale x1 is not supported"),
    ({"scale": "4"}, TypeError, r"MSRResNet: scale must be a positive int"),
    ({"num_in_ch": 1}, ValueError, r"MSRResNet: .*num_in_ch == num_out_ch"),
    ({"num_block": -1}, ValueError, r"MSRResNet: num_block must be an int >= 0"),
    ({"num_feat": 1.5}, TypeError, r"MSRResNet: num_feat must be a positive int"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "MSRResNet", **kw})

"""SRVGGNetCompact: BasicSR's keys, shapes, the nearest-upsampling residual, parity with the torch
twin (output and every gradient of an L1 loss), an Adam step, a .pth round trip, errors."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.registry import MODELS

from . import basicsr_checks as checks

SMALL = {"type": "SRVGGNetCompact", "num_feat": 8, "num_conv": 2}


def spec(scale=4, channels=3, **kw):
    return {**SMALL, "scale": scale, "num_in_ch": channels, "num_out_ch": channels, **kw}


@pytest.mark.parametrize("act_type,keys", [
    ("prelu", ["body.0.weight", "body.0.bias", "body.1.weight", "body.2.weight", "body.2.bias",
               "body.3.weight", "body.4.weight", "body.4.bias"]),
    ("relu", ["body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias", "body.4.weight",
              "body.4.bias"]),
])
def test_state_dict_keys_are_basicsrs(act_type, keys):
    s = spec(2, num_conv=1, act_type=act_type)
    assert list(checks.build(s).state_dict()) == keys
    assert checks.build(s).state_dict()["body.4.weight"].shape == (3 * 2 * 2, 8, 3, 3)
    checks.check_keys(s)


def test_published_sizes():
    """realesr-general-x4v3 (num_conv 32) and realesr-animevideov3 (16), 64 features, x4:
    first conv 1,792 + 64 slopes, per body conv 36,928 + 64, last conv (64 -> 48) 27,696."""
    assert checks.build({"type": "SRVGGNetCompact", "num_conv": 32}).num_parameters() == 1_213_296
    assert checks.build({"type": "SRVGGNetCompact"}).num_parameters() == 621_424


@pytest.mark.parametrize("scale,channels,out_shape", [
    (1, 3, (2, 3, 5, 7)), (2, 1, (2, 1, 10, 14)), (3, 3, (2, 3, 15, 21)), (4, 3, (2, 3, 20, 28)),
    (4, 1, (2, 1, 20, 28)),
])
def test_output_shape(scale, channels, out_shape):
    y = checks.build(spec(scale, channels))(sg.tensor(np.zeros((2, channels, 5, 7), np.float32)))
    assert y.shape == out_shape and y.dtype == np.float32


@pytest.mark.parametrize("scale", [1, 3])
def test_silent_last_conv_gives_the_nearest_upsampling(scale):
    model = checks.build(spec(scale))
    model.body[-1].weight.data[...] = 0
    model.body[-1].bias.data[...] = 0
    x = sg.tensor(np.random.default_rng(0).uniform(0, 1, (1, 3, 3, 4)), dtype=np.float32)
    want = np.repeat(np.repeat(x.data, scale, axis=2), scale, axis=3)
    np.testing.assert_array_equal(model(x).data, want)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,act_type,channels", [
    (4, "prelu", 3), (1, "relu", 1), (3, "leakyrelu", 3), (2, "prelu", 1)])
def test_matches_the_twin(scale, act_type, channels, dtype):
    checks.check_parity(spec(scale, channels, act_type=act_type), (2, channels, 5, 3), dtype)


def test_init_is_torchs_default():
    checks.check_init_matches_twin(spec(2, num_feat=32), normal_scaled=set())


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(2), (2, 3, 8, 8))


def test_pth_round_trip(tmp_path):
    checks.check_pth_round_trip(spec(4), (1, 3, 4, 5), tmp_path)


@pytest.mark.parametrize("kw,error,match", [
    ({"act_type": "PReLU"}, ValueError,
     r"SRVGGNetCompact: act_type must be one of .*did you mean 'prelu'"),
    ({"num_out_ch": 1}, ValueError, r"SRVGGNetCompact: .*num_in_ch == num_out_ch"),
    ({"num_conv": -1}, ValueError, r"SRVGGNetCompact: num_conv must be an int >= 0"),
    ({"num_feat": 0}, ValueError, r"SRVGGNetCompact: num_feat must be a positive int"),
    ({"scale": 0}, ValueError, r"SRVGGNetCompact: scale must be a positive int"),
    ({"scale": 2.0}, TypeError, r"SRVGGNetCompact: scale must be a positive int"),
    ({"upscale": 4}, TypeError, r"upscale"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "SRVGGNetCompact", **kw})


def test_num_conv_zero_is_two_convs():
    model = checks.build(spec(2, num_conv=0))
    assert [k for k in model.state_dict() if k.endswith("weight")] == [
        "body.0.weight", "body.1.weight", "body.2.weight"]
    assert F.l1_loss(model(sg.tensor(np.ones((1, 3, 2, 2), np.float32))),
                     sg.tensor(np.ones((1, 3, 4, 4), np.float32))).item() >= 0


@pytest.mark.parametrize("act_type,slope", [("prelu", 0.25), ("relu", 0.0), ("leakyrelu", 0.1)])
def test_kaiming_init_keeps_the_signal_and_starts_the_residual_small(act_type, slope):
    """init="kaiming": body convs ~ N(0, 2 / ((1 + a^2) fan_in)), the last x 0.1, zero biases; a
    deep stack then passes its input's scale through, where torch's init loses it."""
    from framework import nn
    from framework.nn import init
    init.manual_seed(0)
    model = MODELS.build(spec(4, num_feat=64, num_conv=16, act_type=act_type, init="kaiming"))
    convs = [m for m in model.body if isinstance(m, nn.Conv2d)]
    for i, conv in enumerate(convs):
        w = conv.weight.numpy().astype(np.float64)
        want = np.sqrt(2.0 / ((1 + slope ** 2) * np.prod(w.shape[1:])))
        want *= 0.1 if i == len(convs) - 1 else 1.0
        np.testing.assert_allclose(w.std(), want, rtol=0.05)
        assert not conv.bias.numpy().any()
    x = np.random.default_rng(0).uniform(0, 1, (2, 3, 16, 16)).astype(np.float32)

    def input_signal(m):
        """How much the features before the last conv depend on the input: the std of the
        difference of two images' features (biases cancel)."""
        out = sg.tensor(x)
        with sg.no_grad():
            for layer in m.body[:-1]:
                out = layer(out)
        return float((out.numpy()[0] - out.numpy()[1]).std())
    init.manual_seed(0)
    torch_init = MODELS.build(spec(4, num_feat=64, num_conv=16, act_type=act_type))
    assert input_signal(model) > 0.05 and input_signal(torch_init) < 1e-4 * input_signal(model)  # ~1e-6 measured


def test_init_is_checked():
    with pytest.raises(ValueError, match="SRVGGNetCompact: init must be one of"):
        MODELS.build(spec(2, init="xavier"))

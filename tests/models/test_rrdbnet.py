"""RRDBNet: BasicSR's keys (conv_first sees num_in_ch * 1, 4, 16 channels at x4, x2, x1), shapes,
BasicSR's init (kaiming normal x 0.1 in the dense blocks), parity with the torch twin (output and
every gradient of an L1 loss) at every scale, Real-ESRGAN's padding of sides the pixel unshuffle does
not divide, an Adam step, a .pth round trip, errors. Not in the generic tests of test_models.py,
which build x3."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.registry import MODELS

from . import basicsr_checks as checks

SMALL = {"type": "RRDBNet", "num_feat": 8, "num_block": 1, "num_grow_ch": 4}


def spec(scale=4, channels=3, **kw):
    return {**SMALL, "scale": scale, "num_in_ch": channels, "num_out_ch": channels, **kw}


def test_state_dict_keys_are_basicsrs():
    rdb = [f"body.0.rdb{r}.conv{c}" for r in (1, 2, 3) for c in range(1, 6)]
    convs = ["conv_first", *rdb, "conv_body", "conv_up1", "conv_up2", "conv_hr", "conv_last"]
    assert checks.check_keys(spec(4)) == [f"{c}.{p}" for c in convs for p in ("weight", "bias")]
    sd = checks.build(spec(4)).state_dict()
    # dense connections: conv_i sees num_feat + (i - 1) * num_grow_ch channels
    assert [sd[f"body.0.rdb2.conv{i}.weight"].shape for i in range(1, 6)] == [
        (4, 8, 3, 3), (4, 12, 3, 3), (4, 16, 3, 3), (4, 20, 3, 3), (8, 24, 3, 3)]


@pytest.mark.parametrize("scale,channels,first_in", [(4, 3, 3), (2, 3, 12), (1, 3, 48), (2, 1, 4),
                                                     (1, 1, 16)])
def test_pixel_unshuffle_widens_conv_first(scale, channels, first_in):
    s = spec(scale, channels)
    assert checks.check_keys(s)[0] == "conv_first.weight"
    assert checks.build(s).conv_first.weight.shape == (8, first_in, 3, 3)


def test_published_size():
    """RealESRGAN_x4plus / ESRGAN (23 blocks, 64 features, 32 growth): 16,697,987 parameters,
    counted as the 0-block network plus 23 blocks (building all 23 would be slow)."""
    base, one = (checks.build({"type": "RRDBNet", "num_block": n}).num_parameters() for n in (0, 1))
    assert base + 23 * (one - base) == 16_697_987


@pytest.mark.parametrize("scale,channels,in_hw,out_shape", [
    (4, 3, (5, 3), (2, 3, 20, 12)), (4, 1, (5, 3), (2, 1, 20, 12)), (2, 3, (6, 4), (2, 3, 12, 8)),
    (1, 3, (8, 4), (2, 3, 8, 4)), (1, 1, (4, 12), (2, 1, 4, 12))])
def test_output_shape(scale, channels, in_hw, out_shape):
    y = checks.build(spec(scale, channels))(sg.tensor(np.zeros((2, channels, *in_hw), np.float32)))
    assert y.shape == out_shape and y.dtype == np.float32


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,channels,hw", [(4, 3, (5, 3)), (2, 1, (6, 4)), (1, 3, (4, 8))])
def test_matches_the_twin(scale, channels, hw, dtype):
    checks.check_parity(spec(scale, channels), (2, channels, *hw), dtype)


def test_init_is_basicsrs():
    """Dense-block convs: kaiming normal x 0.1, zero bias; the others: torch's default."""
    s = spec(4, num_feat=32, num_grow_ch=16)
    rdb = {f"body.0.rdb{r}.conv{c}.weight" for r in (1, 2, 3) for c in range(1, 6)}
    checks.check_init_matches_twin(s, normal_scaled=rdb)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(2), (2, 3, 8, 8))


def test_pth_round_trip(tmp_path):
    checks.check_pth_round_trip(spec(1), (1, 3, 4, 8), tmp_path)


@pytest.mark.parametrize("kw,error,match", [
    ({"scale": 3}, ValueError, r"RRDBNet: scale x3 is not supported \(supported: x1, x2, x4\)"),
    ({"scale": 8}, ValueError, r"RRDBNet: scale x8 is not supported"),
    ({"scale": None}, TypeError, r"RRDBNet: scale must be a positive int"),
    ({"num_grow_ch": 0}, ValueError, r"RRDBNet: num_grow_ch must be a positive int"),
    ({"num_block": -1}, ValueError, r"RRDBNet: num_block must be an int >= 0"),
    ({"num_in_ch": "3"}, TypeError, r"RRDBNet: num_in_ch must be a positive int"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "RRDBNet", **kw})


@pytest.mark.parametrize("scale,hw", [(2, (5, 4)), (1, (6, 7)), (1, (1, 2))])
def test_sides_the_unshuffle_does_not_divide_are_padded_as_real_esrgan_does(scale, hw):
    """Real-ESRGAN's inference: reflect-pad bottom/right to a multiple of 2 (x2) or 4 (x1), run
    BasicSR's model, crop (replicate when the image is too small to reflect)."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    s = spec(scale)
    model = checks.build(s).double()
    twin = twins.twin_of(model, s)
    (h, w), r = hw, {2: 2, 1: 4}[scale]
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, h, w))
    pad_h, pad_w = -h % r, -w % r
    mode = "reflect" if pad_h < h and pad_w < w else "replicate"
    with torch.no_grad():
        padded = torch.nn.functional.pad(torch.from_numpy(x), (0, pad_w, 0, pad_h), mode=mode)
        want = twin(padded)[:, :, :h * scale, :w * scale].numpy()
    xt = sg.tensor(x, requires_grad=True)
    y = model(xt)
    assert y.shape == (1, 3, h * scale, w * scale)
    np.testing.assert_allclose(y.data, want, rtol=0, atol=1e-12)
    y.sum().backward()
    assert xt.grad.shape == x.shape and np.abs(xt.grad.data).sum() > 0


def test_kaiming_init_outside_the_dense_blocks():
    """init="kaiming": trunk and upsampling convs ~ N(0, 2 / (1.04 fan_in)), conv_last x 0.1, zero
    biases; the dense blocks as BasicSR's (0.1-scaled kaiming) either way."""
    from framework.nn import init
    init.manual_seed(0)
    model = MODELS.build(spec(4, num_feat=32, num_block=1, num_grow_ch=16, init="kaiming"))
    params = dict(model.named_parameters())
    for name in ("conv_first", "conv_body", "conv_up1", "conv_up2", "conv_hr", "conv_last"):
        w = params[f"{name}.weight"].numpy().astype(np.float64)
        want = np.sqrt(2.0 / (1.04 * np.prod(w.shape[1:]))) * (0.1 if name == "conv_last" else 1.0)
        np.testing.assert_allclose(w.std(), want, rtol=0.1, err_msg=name)
        assert not params[f"{name}.bias"].numpy().any()
    w = params["body.0.rdb1.conv1.weight"].numpy().astype(np.float64)
    np.testing.assert_allclose(w.std(), 0.1 * np.sqrt(2.0 / np.prod(w.shape[1:])), rtol=0.1)
    with pytest.raises(ValueError, match="RRDBNet: init must be one of"):
        MODELS.build(spec(4, init="xavier"))

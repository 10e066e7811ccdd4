"""Real-CUGAN: the original's keys (spandrel's detection keys, the pro buffer), parity with the torch
twin (spandrel's upcunet_v3 network under its call API's size requirement) for x2, x3, x4, x2 fast
and pro, output and every gradient; the padding rules worked by hand; detection of every variant
(spandrel's rule and its convention for the x4 / fast tie); .pth both ways; a published-layout file
through srgrad's inference with no model spec; errors. The network has fixed widths (64-256
features) and runs at >= 32 pixels, so each variant is tested once or twice."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.registry import MODELS
from framework.detect import detect

from . import basicsr_checks as checks
from . import published_checks

SPANDREL_KEYS = [  # spandrel 0.4.2's KeyCondition for RealCUGAN
    "unet1.conv1.conv.0.weight", "unet1.conv1.conv.2.weight", "unet1.conv1_down.weight",
    "unet1.conv2.conv.0.weight", "unet1.conv2.conv.2.weight", "unet1.conv2.seblock.conv1.weight",
    "unet1.conv2_up.weight", "unet1.conv_bottom.weight", "unet2.conv1.conv.0.weight",
    "unet2.conv1_down.weight", "unet2.conv2.conv.0.weight", "unet2.conv2.seblock.conv1.weight",
    "unet2.conv3.conv.0.weight", "unet2.conv3.seblock.conv1.weight", "unet2.conv3_up.weight",
    "unet2.conv4.conv.0.weight", "unet2.conv4_up.weight", "unet2.conv5.weight",
    "unet2.conv_bottom.weight"]


def spec(**kw):
    return {"type": "RealCUGAN", "scale": 2, **kw}


@pytest.mark.parametrize("kw", [{}, {"scale": 3, "pro": True}, {"scale": 4},
                                {"scale": 2, "fast": True, "in_channels": 1, "out_channels": 1}])
def test_keys_are_the_originals(kw):
    keys = checks.check_keys(spec(**kw))
    assert set(SPANDREL_KEYS) <= set(keys)
    assert ("pro" in keys) == kw.get("pro", False)
    assert ("conv_final.weight" in keys) == (kw.get("scale") == 4 or kw.get("fast", False))
    sd = checks.build(spec(**kw)).state_dict()
    assert sd["unet2.conv3.seblock.conv1.weight"].shape == (16, 128, 1, 1)  # SE: 128 -> 128 / 8
    bottom = {2: (64, 3, 4, 4), 3: (64, 3, 5, 5), 4: (64, 64, 4, 4)}[kw.get("scale", 2)]
    if kw.get("fast"):
        bottom = (64, 64, 4, 4)
        assert sd["unet1.conv1.conv.0.weight"].shape == (32, 4, 3, 3)  # unshuffled: 4 x 1 channel
    assert sd["unet1.conv_bottom.weight"].shape == bottom


def conv(cin, cout, k):
    return cin * cout * k * k + cout  # the same count for a transposed conv


def unet_conv(a, m, b, se):
    return conv(a, m, 3) + conv(m, b, 3) + (conv(b, b // 8, 1) + conv(b // 8, b, 1) if se else 0)


def unet1(cin, cout, k):
    return (unet_conv(cin, 32, 64, False) + conv(64, 64, 2) + unet_conv(64, 128, 64, True)
            + conv(64, 64, 2) + conv(64, 64, 3) + conv(64, cout, k))


def unet2(cin, cout):
    return (unet_conv(cin, 32, 64, False) + conv(64, 64, 2) + unet_conv(64, 64, 128, True)
            + conv(128, 128, 2) + unet_conv(128, 256, 128, True) + conv(128, 128, 2)
            + unet_conv(128, 64, 64, True) + conv(64, 64, 2) + conv(64, 64, 3) + conv(64, cout, 3))


@pytest.mark.parametrize("kw,want", [
    ({}, unet1(3, 3, 4) + unet2(3, 3)),  # up2x-*.pth: 1,284,598
    ({"scale": 3}, unet1(3, 3, 5) + unet2(3, 3)),
    ({"scale": 4, "pro": True}, unet1(3, 64, 4) + unet2(64, 64) + conv(64, 12, 3)),
    ({"fast": True}, unet1(12, 64, 4) + unet2(64, 64) + conv(64, 12, 3))])
def test_parameter_counts_layer_by_layer(kw, want):
    assert checks.build(spec(**kw)).num_parameters() == want
    if not kw:
        assert want == 1_284_598


PARITY = [  # (keywords, LR shape): odd sizes take the x2/x4 internal padding; < 32 spandrel's too
    ({}, (1, 3, 33, 35)),
    ({"scale": 3, "pro": True}, (1, 3, 9, 14)),
    ({"scale": 4, "in_channels": 1, "out_channels": 3}, (1, 1, 33, 6)),
    ({"scale": 2, "fast": True}, (1, 3, 42, 13)),
]


@pytest.mark.parametrize("kw,shape,dtype", [(kw, shape, np.float64) for kw, shape in PARITY]
                         + [(kw, shape, np.float32) for kw, shape in PARITY[::3]])
def test_matches_the_twin(kw, shape, dtype):
    """float32: 1e-4 of each array's scale (20 convs deep, sums over 10^4-pixel maps; float64
    holds 1e-10)."""
    checks.check_parity(spec(**kw), shape, dtype, tolerance=1e-4 if dtype == np.float32 else None)


def test_alpha_matches_the_twin():
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    s = spec(scale=4, pro=True)
    model = checks.build(s).to(np.float64)
    twin = twins.twin_of(model, s)
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 32, 32))
    with sg.no_grad(), torch.no_grad():
        ours, theirs = model(sg.tensor(x), alpha=0.7).data, twin(torch.from_numpy(x), 0.7).numpy()
        assert np.abs(ours - model(sg.tensor(x)).data).max() > 1e-3  # alpha acts
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-10 * np.abs(theirs).max())
    fast = checks.build(spec(fast=True))
    with pytest.raises(ValueError, match="RealCUGAN: fast .* has no alpha setting, got 0.7"):
        fast(sg.tensor(np.zeros((1, 3, 40, 40), np.float32)), alpha=0.7)


def test_pro_maps_the_range_and_back():
    """unet1 and unet2 silenced, x4: the output is the nearest-upsampled input, mapped x 0.7 +
    0.15 and back (exactly the input up to rounding), plus conv_final's bias / 0.7."""
    model = checks.build(spec(scale=4, pro=True)).to(np.float64)
    for name in ("unet1.conv_bottom", "unet2.conv_bottom", "conv_final"):
        conv = dict(model.named_modules())[name]
        conv.weight.data[...] = 0
        conv.bias.data[...] = 0
    model.conv_final.bias.data[...] = 0.07  # every sub-pixel of every channel
    x = np.random.default_rng(2).uniform(0, 1, (1, 3, 5, 6))
    with sg.no_grad():
        y = model(sg.tensor(x)).data
    np.testing.assert_allclose(y, np.repeat(np.repeat(x, 4, 2), 4, 3) + 0.1, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kw", [
    {"scale": 2}, {"scale": 3}, {"scale": 4}, {"scale": 2, "pro": True}, {"scale": 3, "pro": True},
    {"scale": 4, "pro": True}, {"scale": 2, "fast": True}, {"scale": 2, "in_channels": 1, "out_channels": 1},
    {"scale": 4, "in_channels": 1, "out_channels": 3}, {"scale": 2, "fast": True, "in_channels": 1,
                                                        "out_channels": 1}])
def test_detect_every_variant(kw):
    """up2x/3x/4x in every weight variant (conservative, denoise, no-denoise: the same shapes),
    pro, fast (sudo_shuffle_cugan), gray: the keywords spandrel reads."""
    sd = checks.build(spec(**kw)).state_dict()
    want = {"in_channels": 3, "out_channels": 3, "pro": False, "fast": False, "scale": 2, **kw}
    assert detect(sd) == {"type": "RealCUGAN", **want}


def test_detect_conv_final_with_four_times_the_outputs_in_unet1_is_fast():
    """unet1 seeing 4 x out_channels is x2 fast (spandrel's convention: the x4 with those shapes,
    in_channels = 4 out_channels, cannot run); with a pro key (fast has none) it is that x4."""
    sd = checks.build(spec(fast=True, in_channels=1, out_channels=1)).state_dict()
    assert detect(sd) == {"type": "RealCUGAN", "in_channels": 1, "out_channels": 1, "scale": 2,
                          "pro": False, "fast": True}
    assert detect({**sd, "pro": np.zeros(1, np.float32)}) == {
        "type": "RealCUGAN", "in_channels": 4, "out_channels": 1, "scale": 4, "pro": True, "fast": False}


@pytest.mark.parametrize("kw,match", [
    ({"scale": 2, "in_channels": 1, "out_channels": 4}, r"x2 feeds unet1's output \(4 channels\) to unet2"),
    ({"scale": 3, "in_channels": 1, "out_channels": 4}, r"x3 feeds unet1's output"),
    ({"scale": 4, "in_channels": 3, "out_channels": 1}, r"the nearest-upsampled input \(3 channels\)")])
def test_channel_counts_that_cannot_run_build_and_are_detected_but_refuse_to_run(kw, match):
    """spandrel loads these (its tests build UpCunet2x(in_channels=1, out_channels=4)): detected with
    its keywords, and the forward says why it cannot run."""
    model = checks.build(spec(**kw))
    assert detect(model.state_dict()) == {"type": "RealCUGAN", "pro": False, "fast": False, **kw}
    with pytest.raises(ValueError, match="RealCUGAN: " + match):
        model(sg.tensor(np.zeros((1, kw["in_channels"], 8, 8), np.float32)))


def test_twin_state_dicts_are_detected():
    twins = pytest.importorskip("tests.twins")
    for kw in ({"scale": 3, "pro": True}, {"scale": 2, "fast": True}):
        state = {k: v.numpy() for k, v in twins.build_twin(spec(**kw)).state_dict().items()}
        assert detect(state) == {"type": "RealCUGAN", "in_channels": 3, "out_channels": 3,
                                 "pro": False, "fast": False, **kw}


def test_pth_both_ways(tmp_path):
    published_checks.check_pth_both_ways(spec(scale=4, pro=True), (1, 3, 7, 5), tmp_path)


@pytest.mark.parametrize("kw", [{"scale": 2, "pro": True}, {"scale": 2, "fast": True}])
def test_published_file_runs_without_a_model_spec(kw, tmp_path):
    published_checks.check_published_file(
        spec(**kw), (1, 3, 11, 9), tmp_path,
        want={"in_channels": 3, "out_channels": 3, "pro": False, "fast": False, **kw})


def test_init_is_the_originals():
    """The U-Nets' convs and transposed convs: kaiming_normal_(fan_out, relu), std sqrt(2 / fan_out)
    with fan_out = weight.shape[0] x kernel area (torch's rule, for a transposed conv too); biases
    and conv_final keep torch's default (uniform): as the twin."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    model = checks.build(spec(scale=4))
    torch.manual_seed(0)
    twin = dict(twins.build_twin(spec(scale=4)).named_parameters())
    for key, fan_out in (("unet2.conv3.conv.0.weight", 256 * 9), ("unet1.conv_bottom.weight", 64 * 16),
                         ("unet2.conv3_up.weight", 128 * 4)):
        for w in (model.state_dict()[key], twin[key].detach().numpy()):
            np.testing.assert_allclose(w.std(), np.sqrt(2 / fan_out), rtol=0.05, err_msg=key)
            assert np.abs(w).max() > 3 * w.std()  # normal, not uniform
    for w in (model.state_dict()["conv_final.weight"], twin["conv_final.weight"].detach().numpy()):
        bound = 1 / np.sqrt(64 * 9)  # torch's default: U(+-1/sqrt(fan_in))
        assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(), (1, 3, 8, 8))


@pytest.mark.parametrize("kw,match", [
    ({"scale": 5}, r"RealCUGAN: scale x5 is not supported \(supported: x2, x3, x4\)"),
    ({"scale": 3, "fast": True}, r"RealCUGAN: fast \(UpCunet2x_fast\) is x2 and not pro"),
    ({"fast": True, "pro": True}, r"RealCUGAN: fast \(UpCunet2x_fast\) is x2 and not pro"),
    ({"in_channels": 0}, r"RealCUGAN: in_channels must be a positive int"),
])
def test_argument_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        MODELS.build(spec(**kw))
    with pytest.raises(TypeError, match="pro must be"):
        MODELS.build(spec(pro="yes"))

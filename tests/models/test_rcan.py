"""RCAN: BasicSR's keys (no mean key: a constant, as there), shapes, channel attention worked by
hand, parity with the torch twin (output and every gradient of an L1 loss; traiNNer's unshuffle_mod
too), an Adam step, a .pth round trip, errors; the official RCAN repository's layout (MeanShift
convs, head/body/tail) and traiNNer-redux's (no MeanShift, an unshuffle at head.0) loaded with no
model named."""
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
@pytest.mark.parametrize("scale,channels,kw", [
    (4, 3, {}), (3, 1, {}), (2, 3, {"res_scale": 0.5}), (2, 3, {"unshuffle_mod": True}),
    (1, 1, {"unshuffle_mod": True, "rgb_mean": [0.0], "img_range": 1.0})])
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
    ({"unshuffle_mod": True}, ValueError, r"RCAN: unshuffle_mod is for scale 1 or 2 .* got 4"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "RCAN", "num_group": 1, "num_block": 1, **kw})


def test_unshuffle_mod_pads_sides_it_does_not_divide():
    """x1 with unshuffle 4 on a 5x6 image: padded to 8x8 inside, the output cropped to 5x6."""
    y = checks.build(spec(1, unshuffle_mod=True))(sg.tensor(np.zeros((1, 3, 5, 6), np.float32)))
    assert y.shape == (1, 3, 5, 6)


# -- published layouts, loaded with no model named ---------------------------------------------------
OFFICIAL = [  # (twin keywords, the keywords detection must find besides the sizes)
    ({"scale": 4}, {"img_range": 255.0, "rgb_mean": (0.4488, 0.4371, 0.404)}),
    ({"scale": 3, "rgb_mean": (0.4690, 0.4490, 0.4036)},  # DIVFlickr2K's mean (RCAN's option)
     {"img_range": 255.0, "rgb_mean": (0.469, 0.449, 0.4036)}),
    ({"scale": 8, "rgb_range": 1}, {"img_range": 1.0, "rgb_mean": (0.4488, 0.4371, 0.404)}),
    ({"scale": 2, "norm": False}, {"img_range": 1.0, "rgb_mean": (0.0, 0.0, 0.0)}),
    ({"scale": 1, "norm": False, "unshuffle_mod": True},
     {"img_range": 1.0, "rgb_mean": (0.0, 0.0, 0.0), "unshuffle_mod": True}),
    ({"scale": 2, "unshuffle_mod": True},
     {"img_range": 255.0, "rgb_mean": (0.4488, 0.4371, 0.404), "unshuffle_mod": True}),
]


@pytest.mark.parametrize("fmt", ["legacy", "zip"])
@pytest.mark.parametrize("kw,want", OFFICIAL)
def test_official_layout_loads_and_matches_its_twin(kw, want, fmt, tmp_path):
    """sub_mean, head.0, body.G.body.B.body.N, tail.0.*, tail.1, add_mean (RCAN_BIX2/3/4/8.pt, legacy
    torch.save files): the mean and range read from the MeanShift convs; traiNNer-redux's RCAN
    without them (no shift, range 1) and with a pixel unshuffle at head.0."""
    torch = pytest.importorskip("torch")
    from tests.twins.edsr_pytorch import RCANOfficial
    from .published import assert_close, run_published
    torch.manual_seed(0)
    twin = RCANOfficial(n_resgroups=2, n_resblocks=2, n_feats=16, reduction=4, **kw)
    ours, ref, info, said = run_published(twin, tmp_path, fmt, (1, 3, 7, 6))
    assert info["layout"].startswith("the official RCAN repository's layout")
    assert info["model"] == {"type": "RCAN", "num_in_ch": 3, "num_out_ch": 3, "num_feat": 16,
                             "num_group": 2, "num_block": 2, "squeeze_factor": 4,
                             "unshuffle_mod": False, "scale": kw["scale"], **want}
    assert_close(ours, ref, 5e-5 if kw.get("rgb_range", 255) == 255 and kw.get("norm", True) else 2e-5)


def test_a_meanshift_with_a_std_is_refused_by_name(tmp_path):
    pytest.importorskip("torch")
    from framework.engine import load_model
    from framework.weights import CheckpointError
    from tests.twins.edsr_pytorch import MeanShift, RCANOfficial
    from .published import save_pth
    twin = RCANOfficial(scale=2, n_resgroups=1, n_resblocks=1, n_feats=8, reduction=4)
    twin.sub_mean = MeanShift(255, rgb_std=(0.5, 1.0, 1.0))
    with pytest.raises(CheckpointError, match=r"RCAN: as the official RCAN repository's layout .*: "
                                              r"sub_mean.weight is not the identity \(a MeanShift "
                                              r"with a std other than 1"):
        load_model(save_pth(twin, tmp_path / "std.pth", "zip"), say=lambda m: None)


def test_fine_tuning_from_the_official_layout_checks_its_mean(tmp_path):
    """train.pretrained's path (load_into with the config's model): the file's keys are mapped; a
    config whose rgb_mean differs from the file's MeanShift is told which to set."""
    pytest.importorskip("torch")
    from framework.loading import load_into
    from framework.weights import CheckpointError
    from tests.twins.edsr_pytorch import RCANOfficial
    from .published import save_pth
    twin = RCANOfficial(scale=2, n_resgroups=1, n_resblocks=1, n_feats=8, reduction=4,
                        rgb_mean=(0.5, 0.4, 0.3))
    path = save_pth(twin, tmp_path / "rcan.pth", "zip")
    base = {"type": "RCAN", "scale": 2, "num_feat": 8, "num_group": 1, "num_block": 1,
            "squeeze_factor": 4}
    model = MODELS.build(base)
    with pytest.raises(CheckpointError, match=r"train.pretrained: .*rcan.pth is in the official "
                                              r"RCAN repository's layout .* whose weights say "
                                              r"rgb_mean=\(0.5, 0.4, 0.3\) \(the model: \(0.4488"):
        load_into(model, path, spec=base, where="train.pretrained")
    spec = {**base, "rgb_mean": [0.5, 0.4, 0.3]}
    model = MODELS.build(spec)
    info = load_into(model, path, spec=spec, where="train.pretrained")
    assert info["layout"].startswith("the official RCAN")
    want = {k: v.numpy() for k, v in twin.state_dict().items()}
    got = model.state_dict()
    np.testing.assert_array_equal(got["body.0.residual_group.0.rcab.3.attention.1.weight"],
                                  want["body.0.body.0.body.3.conv_du.0.weight"])
    np.testing.assert_array_equal(got["conv_last.bias"], want["tail.1.bias"])

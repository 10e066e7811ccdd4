"""MM-RealSR: the original's keys in order, parity with the torch twin (output and every gradient of
an L1 loss, float64 and float32) with estimated and user-given degradation scores (custom_degrees),
de_net's stage layouts (the published one, stride-1 width changes, tanh); BasicSR's init; the
modulation's values by hand; an Adam step; .pth round trips both ways; shapes and spandrel's 16 px
minimum; errors; detection (round trips, the published layout, the x2 / x1 refusal, stated stages);
and the done-when check: files built by spandrel 0.4.2's own MMRealSR class through srgrad-infer
give spandrel's image, with and without custom_degrees."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.detect import detect, identify
from framework.registry import MODELS

from . import basicsr_checks as checks
from .published_checks import check_pth_both_ways
from .spandrel_checks import check_spandrel_file

SMALL = {"type": "MMRealSR", "scale": 4, "num_feat": 8, "num_block": 2, "num_grow_ch": 4,
         "num_feats": [8, 12], "num_blocks": [1, 1], "downscales": [2, 1]}
PUBLISHED_DE = {"num_feats": [64, 64, 64, 128], "num_blocks": [2, 2, 2, 2],
                "downscales": [1, 1, 2, 1]}  # inference_mmrealsr.py's MMRRDBNet_test


def spec(**kw):
    return {**SMALL, **kw}


def test_state_dict_keys_are_the_originals():
    keys = checks.check_keys(spec(num_block=1, num_feats=[4], num_blocks=[1], downscales=[2]))
    rrdb = [f"body.0.rdb{r}.conv{c}.{p}" for r in (1, 2, 3) for c in range(1, 6)
            for p in ("weight", "bias")]
    de = [f"de_net.{k}" for i in (0, 1) for k in (f"conv_first.{i}.weight", f"conv_first.{i}.bias")]
    de += [f"de_net.body.{i}.{k}" for i in (0, 1) for k in (
        "0.conv1.weight", "0.conv1.bias", "0.conv2.weight", "0.conv2.bias", "1.weight", "1.bias")]
    de += [f"de_net.fc_degree.{i}.{j}.{p}" for i in (0, 1) for j in (0, 2)
           for p in ("weight", "bias")]
    assert keys == ["conv_first.weight", "conv_first.bias", *rrdb,
                    *[f"am_list.0.fc.{j}.{p}" for j in (0, 2, 4) for p in ("weight", "bias")],
                    *[f"{c}.{p}" for c in ("conv_body", "conv_up1", "conv_up2", "conv_hr",
                                           "conv_last") for p in ("weight", "bias")],
                    *de, "dd_embed.0.weight", "dd_embed.0.bias"]
    sd = checks.build(spec()).state_dict()
    assert sd["am_list.1.fc.0.weight"].shape == (264, 512)  # (512 + 2 x 8) // 2
    assert sd["am_list.1.fc.4.weight"].shape == (16, 264)
    assert sd["de_net.body.1.1.weight"].shape == (12, 8, 3, 3)  # the stride-2 conv to 12
    assert sd["de_net.fc_degree.1.0.weight"].shape == (512, 12)
    assert sd["dd_embed.0.weight"].shape == (512, 2)


PARITY = [
    {},
    {"custom_degrees": [0.3, None]},  # blur given, noise estimated (the demo's sweep)
    {"custom_degrees": [None, 1.0], "num_in_ch": 1, "num_out_ch": 1},
    # stride-1 width changes (downscale 1 between widths), a downscale at the last stage, tanh,
    # three scores
    {"num_feats": [4, 6, 6], "num_blocks": [1, 0, 1], "downscales": [1, 2, 2],
     "degradation_degree_actv": "tanh", "num_degradation": 3, "num_block": 1},
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw", PARITY)
def test_matches_the_twin(kw, dtype):
    # 17 x 16: no padding; float32 at 7 x 9: spandrel's padding to 16
    shape = (2, kw.get("num_in_ch", 3), 17, 16) if dtype == np.float64 else \
        (1, kw.get("num_in_ch", 3), 7, 9)
    checks.check_parity(spec(**kw), shape, dtype)


def test_custom_degrees_replace_the_estimates():
    """A given score is what dd_embed sees (the estimate of the other is untouched), and it
    changes the image; the estimate itself is de_net's sigmoid output."""
    model = checks.build(spec())
    for k, p in model.named_parameters():  # BasicSR's 0.1 init makes the modulation ~1e-5: lift it
        if k.startswith(("dd_embed", "am_list")) and k.endswith("weight"):
            p.data *= np.float32(10)
    x = sg.tensor(np.random.default_rng(3).uniform(0, 1, (2, 3, 16, 16)), dtype=np.float32)
    with sg.no_grad():
        estimated = model.degrees(x).data
        model.custom_degrees = (0.25, None)
        given = model.degrees(x).data
        y_given = model(x).data
        model.custom_degrees = (None, None)
        y_est = model(x).data
    assert estimated.shape == (2, 2) and np.all((estimated > 0) & (estimated < 1))
    np.testing.assert_array_equal(given[:, 0], np.float32(0.25))
    np.testing.assert_array_equal(given[:, 1], estimated[:, 1])
    assert np.abs(y_given - y_est).max() > 1e-4


def test_modulation_by_hand():
    """AffineModulate: (1 + gamma) x + beta per sample and channel, gamma and beta the halves of
    fc(d)."""
    from models.mmrealsr import AffineModulate
    am = AffineModulate(2)
    rng = np.random.default_rng(0)
    x, d = rng.normal(size=(2, 2, 3, 4)), rng.normal(size=(2, 512))
    am.to(np.float64)
    with sg.no_grad():
        gb = am.fc(sg.tensor(d)).data
        got = am(sg.tensor(x), sg.tensor(d)).data
    want = (1 + gb[:, :2, None, None]) * x + gb[:, 2:, None, None]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_init_is_basicsrs():
    """de_net, dd_embed, am_list and the dense blocks: kaiming normal x 0.1, zero biases (a normal
    sample's peak passes sqrt(3) std, a uniform one's cannot); the trunk convs torch's uniform."""
    model = checks.build(spec(num_feat=16, num_feats=[16, 32]))
    sd = {k: v.data.astype(np.float64) for k, v in model.named_parameters()}
    for k in ("de_net.conv_first.0", "de_net.body.1.0.conv1", "de_net.fc_degree.0.0",
              "dd_embed.0", "am_list.1.fc.2", "body.0.rdb2.conv3"):
        w, b = sd[f"{k}.weight"], sd[f"{k}.bias"]
        fan_in = w[0].size
        assert w.std() == pytest.approx(0.1 * np.sqrt(2 / fan_in), rel=0.25), k
        assert np.all(b == 0), k
    w = sd["conv_hr.weight"]
    assert np.abs(w).max() <= 1 / np.sqrt(w[0].size) and np.any(sd["conv_hr.bias"] != 0)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(), (1, 3, 16, 16))


def test_pth_round_trips(tmp_path):
    checks.check_pth_round_trip(spec(), (1, 3, 16, 18), tmp_path)
    check_pth_both_ways(spec(custom_degrees=[None, 0.5]), (1, 3, 9, 16), tmp_path)


@pytest.mark.parametrize("hw,want", [((5, 3), (20, 12)), ((16, 21), (64, 84)), ((1, 1), (4, 4))])
def test_output_shapes(hw, want):
    y = checks.build(spec())(sg.tensor(np.zeros((2, 3, *hw), np.float32)))
    assert y.shape == (2, 3, *want) and y.dtype == np.float32


@pytest.mark.parametrize("kw,error,match", [
    ({"scale": 2}, ValueError, r"MMRealSR: scale must be 4, got 2: the original's x2 and x1"),
    ({"downscales": [3, 1]}, ValueError, r"MMRealSR: downscales must be 1 or 2 per stage"),
    ({"num_blocks": [1]}, ValueError, r"MMRealSR: num_blocks must be a list of 2 ints >= 0"),
    ({"degradation_degree_actv": "relu"}, ValueError, r"degradation_degree_actv must be one of"),
    ({"custom_degrees": [0.5]}, ValueError, r"custom_degrees must be a list of 2 entries"),
    ({"custom_degrees": [1.5, None]}, ValueError, r"custom_degrees\[0\] must be"),
    ({"custom_degrees": [-0.5, None], "degradation_degree_actv": "tanh"}, None, None),
    ({"custom_degrees": [None, "high"]}, TypeError, r"custom_degrees\[1\] must be a number"),
    ({"de_net_type": "DEResNet"}, None, None),  # the original's option files name it
    ({"de_net_type": "ResNet"}, ValueError, r"MMRealSR: de_net_type must be one of 'DEResNet'"),
])
def test_argument_errors(kw, error, match):
    if error is None:
        MODELS.build(spec(**kw))  # tanh's range is [-1, 1]; the original's only de_net_type
        return
    with pytest.raises(error, match=match):
        MODELS.build(spec(**kw))


@pytest.mark.parametrize("kw", [
    {},
    {"num_in_ch": 1, "num_out_ch": 1, "num_degradation": 3, "num_block": 1},
    {"num_feats": [4, 4, 6], "num_blocks": [1, 2, 1], "downscales": [1, 2, 1]},
    {"num_feats": [4, 6], "num_blocks": [0, 1], "downscales": [2, 2]},
])
def test_detect_round_trip(kw):
    s = spec(**kw)
    state = checks.build(s).state_dict()
    got = detect(state)
    assert got["type"] == "MMRealSR"
    model = MODELS.build(got)
    model.load_state_dict(state, strict=True)
    for k in ("num_in_ch", "num_out_ch", "num_feat", "num_block", "num_grow_ch",
              "num_degradation"):
        assert got[k] == s.get(k, 2 if k == "num_degradation" else 3), k
    assert got["degradation_degree_actv"] == "sigmoid"
    x = sg.tensor(np.random.default_rng(0).uniform(0, 1, (1, s.get("num_in_ch", 3), 16, 16)),
                  dtype=np.float32)
    built = checks.build(s)
    with sg.no_grad():  # the stages read back build the same network
        np.testing.assert_allclose(model(x).data, built(x).data, rtol=0, atol=1e-6)


def test_detects_the_published_layout_as_spandrel():
    """inference_mmrealsr.py's MMRRDBNet_test (blocks of 64: 23 there, 2 here; de_net [64, 64,
    64, 128] / [2, 2, 2, 2] / [1, 1, 2, 1]) reads as spandrel reads it: six blocks of 64, the
    stride-2 conv, two of 128; quietly (the published convention)."""
    twins = pytest.importorskip("tests.twins")
    shapes = twins.build_twin({"type": "MMRealSR", "num_block": 2, **PUBLISHED_DE}).state_dict()
    match = identify(shapes)
    assert match.spec == {"type": "MMRealSR", "num_in_ch": 3, "num_out_ch": 3, "scale": 4,
                          "num_feat": 64, "num_block": 2, "num_grow_ch": 32,
                          "num_degradation": 2, "degradation_degree_actv": "sigmoid",
                          "num_feats": [64, 128], "num_blocks": [6, 2], "downscales": [2, 1]}
    assert match.notes == []
    # the original's own three lists, given together, are taken as they are
    given = identify(shapes, **PUBLISHED_DE).spec
    assert given["downscales"] == [1, 1, 2, 1] and given["num_feats"] == [64, 64, 64, 128]


def test_detection_refusals():
    state = checks.build(spec()).state_dict()
    with pytest.raises(ValueError, match=r"downscales given alone: de_net's stages need num_feats, "
                                         r"num_blocks and downscales together"):
        identify(state, types=["MMRealSR"], downscales=[1, 1])
    with pytest.raises(ValueError, match=r"do not build de_net's body as the file has it"):
        identify(state, types=["MMRealSR"], num_feats=[8, 12], num_blocks=[2, 0],
                 downscales=[2, 1])
    # an x2 file as spandrel reads it (12 = 4 x 3 channels into conv_first): refused, saying why
    x2 = {k: v for k, v in state.items()}
    x2["conv_first.weight"] = np.zeros((8, 12, 3, 3), np.float32)
    for i in (0, 1):
        x2[f"de_net.conv_first.{i}.weight"] = np.zeros((8, 12, 3, 3), np.float32)
    with pytest.raises(ValueError, match=r"spandrel reads the file as MM-RealSR x2, which the "
                                         r"original cannot run"):
        identify(x2, types=["MMRealSR"])
    assert identify(x2, types=["MMRealSR"], scale=4).spec["num_in_ch"] == 12


SPANDREL = [  # (keywords of spandrel's MMRRDBNet_test, input size, key, custom_degrees)
    ({"num_feat": 64, "num_block": 1, "num_grow_ch": 32, **PUBLISHED_DE}, (18, 21), "params",
     None),
    ({"num_feat": 16, "num_block": 2, "num_grow_ch": 8, "num_feats": [8, 16],
      "num_blocks": [1, 1], "downscales": [2, 1]}, (12, 17), None, None),
    ({"num_feat": 64, "num_block": 1, "num_grow_ch": 32, **PUBLISHED_DE}, (16, 16), "params_ema",
     [0.8, None]),  # 6 levels from the estimates' image: an ignored score fails
]


@pytest.mark.parametrize("kw,size,wrap,custom", SPANDREL)
def test_a_file_spandrel_builds_gives_spandrels_image(kw, size, wrap, custom, tmp_path,
                                                     monkeypatch):
    """The published layout (one block: the modulated trunk is the same at any depth), a small
    one, and the published one with a user-given blur score (srgrad-infer's --model-arg
    custom_degrees; spandrel's model called with the same tuple, as inference_mmrealsr.py calls
    it)."""
    torch = pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture("MMRealSR")
    torch.manual_seed(0)
    network = module.MMRealSR(num_in_ch=3, num_out_ch=3, scale=4, **kw)
    with torch.no_grad():  # BasicSR's init leaves biases at 0: perturb all; lift the modulation
        for k, p in network.named_parameters():  # (~1e-5 at init) to where a score moves 8-bit
            p.add_(torch.randn_like(p) * 0.02)  # levels; an image around 0.5 (none clipped)
            if k == "dd_embed.0.weight" or k.endswith("fc.4.weight"):
                p.mul_(10)
        network.conv_last.bias.add_(0.5)
    if custom is not None:
        from framework.engine.commands import cli
        call = module.MMRealSR.forward
        monkeypatch.setattr(module.MMRealSR, "forward",
                            lambda self, x, custom_degrees=None: call(self, x, tuple(custom)))
        infer = cli.infer_main
        monkeypatch.setattr(cli, "infer_main", lambda argv: infer(
            [*argv, "--model-arg", f"custom_degrees=[{', '.join(map(_yaml, custom))}]"]))
    check_spandrel_file(module, network, tmp_path, size, wrap)


def _yaml(v):
    return "null" if v is None else repr(v)

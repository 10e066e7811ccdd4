"""MoSR: the original's keys in order, parity with the torch twin (output and every gradient of an
L1 loss, float64 and float32) for each upsampler (ps, gps, dys with its own out_ch), kernel sizes
and ratios; the original's init and its - 0.5 shifts; drop path in eval mode; an Adam step; .pth
round trips both ways; shapes; errors; detection (round trips, traiNNer-redux's mosr and mosr_t);
and the done-when check: files built by spandrel 0.4.2's own MoSR class through srgrad-infer give
spandrel's image."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.detect import detect
from framework.registry import MODELS

from . import basicsr_checks as checks
from .published_checks import check_pth_both_ways
from .spandrel_checks import check_spandrel_file

SMALL = {"type": "MoSR", "dim": 8, "n_block": 2, "kernel_size": 5}


def spec(scale=2, **kw):
    return {**SMALL, "scale": scale, **kw}


def test_state_dict_keys_are_the_originals():
    keys = checks.check_keys(spec(2, n_block=1))
    assert keys == [
        "gblocks.0.weight", "gblocks.0.bias", "gblocks.1.norm.weight", "gblocks.1.norm.bias",
        "gblocks.1.fc1.weight", "gblocks.1.fc1.bias", "gblocks.1.conv.weight", "gblocks.1.conv.bias",
        "gblocks.1.fc2.weight", "gblocks.1.fc2.bias", "gblocks.2.weight", "gblocks.2.bias",
        "gblocks.4.weight", "gblocks.4.bias", "gblocks.6.weight", "gblocks.6.bias",
        "shortcut.block.0.weight", "shortcut.block.0.bias", "shortcut.block.2.weight",
        "shortcut.block.2.bias", "shortcut.conv11.weight", "shortcut.conv11.bias",
        "upsampler.0.weight", "upsampler.0.bias"]
    sd = checks.build(spec(3, expansion_ratio=2.0, conv_ratio=0.5)).state_dict()
    assert sd["gblocks.1.fc1.weight"].shape == (32, 8, 3, 3)  # 2 hidden, hidden = 16
    assert sd["gblocks.1.conv.weight"].shape == (4, 1, 5, 5)  # depthwise on int(0.5 dim)
    assert sd["upsampler.0.weight"].shape == (27, 8, 3, 3)


PARITY = [(2, {}), (3, {"upsampler": "gps", "expansion_ratio": 2.0, "conv_ratio": 0.5}),
          (4, {"upsampler": "dys", "out_ch": 1, "kernel_size": 3}),
          (1, {"upsampler": "pixelshuffle", "in_ch": 1, "n_block": 3})]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,kw", PARITY)
def test_matches_the_twin(scale, kw, dtype):
    checks.check_parity(spec(scale, **kw), (2, kw.get("in_ch", 3), 7, 9), dtype)


def test_eval_mode_matches_the_twin_with_drop_path():
    checks.check_eval_output(spec(2, drop_path=0.5, n_block=3), (1, 3, 5, 7))


def test_init_is_the_originals():
    """The blocks' convs trunc_normal(0.02) with zero biases (the original's _init_weights); the
    others torch's default (uniform, bound 1 / sqrt(fan_in))."""
    model = checks.build(spec(2, dim=32, n_block=2, kernel_size=7))
    for k, p in model.named_parameters():
        w = p.data.astype(np.float64)
        if k.startswith("gblocks.1.") and not k.startswith("gblocks.1.norm"):
            if k.endswith("bias"):
                assert np.all(w == 0), k
            else:
                assert w.std() == pytest.approx(0.02, rel=0.2), k
    fan_in = 32 * 9
    assert np.abs(model.gblocks[3].weight.data).max() <= 1 / np.sqrt(fan_in)


def test_zero_network_gives_the_originals_shifts():
    """With every conv at zero each block adds its - 0.5 (three blocks: -1.5), the tail's zero
    conv drops them, and the shortcut's - 0.5 is what the upsampler sees."""
    model = checks.build(spec(2, n_block=3, upsampler="gps"))
    for k, p in model.named_parameters():
        if "norm" not in k:
            p.data[...] = 0
    x = sg.tensor(np.random.default_rng(0).uniform(0, 1, (1, 3, 4, 5)), dtype=np.float32)
    with sg.no_grad():
        body = model.gblocks(x) + (model.shortcut(x) - 0.5)
    np.testing.assert_array_equal(body.data, np.full((1, 8, 4, 5), -0.5, np.float32))
    with sg.no_grad():
        y = model.gblocks[0](x)
        for blk in list(model.gblocks)[1:4]:
            y = blk(y)
    np.testing.assert_array_equal(y.data, np.full((1, 8, 4, 5), -1.5, np.float32))


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(2), (2, 3, 8, 8))


def test_pth_round_trips(tmp_path):
    checks.check_pth_round_trip(spec(3, upsampler="gps"), (1, 3, 5, 6), tmp_path)
    check_pth_both_ways(spec(2, upsampler="dys", out_ch=1), (1, 3, 6, 9), tmp_path)


@pytest.mark.parametrize("scale,hw,want", [(2, (5, 3), (10, 6)), (3, (5, 3), (15, 9)),
                                           (1, (1, 2), (1, 2))])
def test_output_shapes(scale, hw, want):
    y = checks.build(spec(scale))(sg.tensor(np.zeros((2, 3, *hw), np.float32)))
    assert y.shape == (2, 3, *want) and y.dtype == np.float32


@pytest.mark.parametrize("kw,error,match", [
    ({"upsampler": "nearest"}, ValueError, r"MoSR: upsampler must be one of 'ps', 'gps', 'dys'"),
    ({"kernel_size": 4}, ValueError, r"MoSR: kernel_size must be odd"),
    ({"conv_ratio": 2.0}, ValueError, r"MoSR: conv_ratio 2.0 gives the depthwise conv 16 channels; "
                                      r"it needs 1 to int\(expansion_ratio dim\) = 12"),
    ({"upsampler": "dys", "dim": 6}, ValueError, r"MoSR: the 'dys' upsampler's 4 groups need dim"),
    ({"drop_path": 1.0}, ValueError, r"MoSR: drop_path must be"),
    ({"scale": 0}, ValueError, r"MoSR: scale must be a positive int"),
    ({"upscale": 4}, TypeError, r"upscale"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "MoSR", "dim": 8, "n_block": 1, **kw})


@pytest.mark.parametrize("kw", [
    {"scale": 4, "upsampler": "dys", "out_ch": 1, "kernel_size": 3},
    {"scale": 3, "in_ch": 1, "upsampler": "gps", "expansion_ratio": 7 / 3, "conv_ratio": 0.4},
    {"scale": 1, "n_block": 5, "dim": 6, "expansion_ratio": 1.5},
])
def test_detect_round_trip(kw):
    s = spec(**kw)
    state = checks.build(s).state_dict()
    got = detect(state)
    assert got["type"] == "MoSR"
    MODELS.build(got).load_state_dict(state, strict=True)
    for k in ("scale", "in_ch", "n_block", "dim", "upsampler", "kernel_size"):
        if k in s:
            assert got[k] == s[k], k
    for k in ("expansion_ratio", "conv_ratio"):  # the width they give (7 / 3 of 8 -> 18 -> 2.25)
        if k in s:
            assert int(got[k] * s["dim"]) == int(s[k] * s["dim"]), k
    assert got["out_ch"] == s.get("out_ch", s.get("in_ch", 3))


@pytest.mark.parametrize("name,kw", [("mosr", {"n_block": 24, "dim": 64}),
                                     ("mosr_t", {"n_block": 5, "dim": 48})])
def test_detects_traiNNer_redux_variants(name, kw):
    """traiNNer-redux's mosr and mosr_t (expansion 1.5, conv ratio 1, kernel 7), x4 pixel shuffle."""
    twins = pytest.importorskip("tests.twins")
    shapes = {k: tuple(v.shape) for k, v in twins.build_twin({"type": "MoSR", **kw}).state_dict().items()}
    assert MODELS.get("MoSR").detect(shapes, {}) == {
        "in_ch": 3, "out_ch": 3, "scale": 4, "upsampler": "ps", "kernel_size": 7,
        "expansion_ratio": 1.5, "conv_ratio": 1.0, **kw}


SPANDREL = [  # (keywords of spandrel's MoSR, input size, the key the file is saved under)
    ({"n_block": 24, "dim": 64, "upscale": 4, "upsampler": "dys"}, (20, 27), None),  # mosr
    ({"n_block": 5, "dim": 48, "upscale": 2, "upsampler": "ps"}, (17, 9), "params"),  # mosr_t
    ({"n_block": 2, "dim": 16, "upscale": 3, "upsampler": "gps", "kernel_size": 5,
      "expansion_ratio": 2.0, "conv_ratio": 0.5}, (12, 13), "params_ema"),
]


@pytest.mark.parametrize("kw,size,wrap", SPANDREL)
def test_a_file_spandrel_builds_gives_spandrels_image(kw, size, wrap, tmp_path):
    torch = pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture("MoSR")
    torch.manual_seed(0)
    network = module.MoSR(**kw)
    with torch.no_grad():  # the original's init leaves biases and norms at 0 / 1: perturb all
        for p in network.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    check_spandrel_file(module, network, tmp_path, size, wrap)

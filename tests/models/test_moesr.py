"""MoESR: the original's keys and its MetaUpsample buffer (values, dtype, the uint8 limit), parity
with the twin (spandrel 0.4.2's own MoESR: output and every gradient of an L1 loss, float64 and
float32) for each of the five upsampler kinds; .pth round trips both ways (the buffer's bytes kept);
detection reading the kind and scale from MetaUpsample (an unknown kind index refused naming it);
and the done-when check: files built by spandrel's MoESR through srgrad-infer give spandrel's
image."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.detect import detect
from framework.registry import MODELS

from . import basicsr_checks as checks
from .published_checks import check_pth_both_ways
from .spandrel_checks import check_spandrel_file

SMALL = {"type": "MoESR", "dim": 8, "n_blocks": 1, "n_block": 1, "upsample_dim": 12}


def spec(scale=2, **kw):
    return {**SMALL, "scale": scale, **kw}


def test_keys_and_the_meta_buffer_are_the_originals():
    keys = checks.check_keys(spec(2))
    assert keys[:6] == ["in_to_dim.weight", "in_to_dim.bias", "blocks.0.blocks.0.gamma",
                        "blocks.0.blocks.0.norm.weight", "blocks.0.blocks.0.norm.bias",
                        "blocks.0.blocks.0.fc1.weight"]
    assert keys[-3:] == ["upscale.MetaUpsample", "upscale.0.weight", "upscale.0.bias"]
    sd = checks.build(spec(3, upsampler="pixelshuffle", expansion_factor=2.0)).state_dict()
    meta = np.asarray(sd["upscale.MetaUpsample"])
    assert meta.dtype == np.uint8 and meta.tolist() == [1, 2, 3, 8, 3, 12, 4]
    assert sd["blocks.0.blocks.0.fc1.weight"].shape == (32, 8, 3, 3)
    assert sd["blocks.0.blocks.0.conv.dwconv_w.weight"].shape == (1, 1, 1, 11)
    assert sd["upscale.2.weight"].shape == (108, 12, 3, 3)  # one x3 stage of 9 upsample_dim


PARITY = [(2, {}), (3, {"upsampler": "pixelshuffle", "expansion_msg": 2.0}),
          (4, {"upsampler": "nearest+conv", "in_ch": 1, "out_ch": 1}),
          (2, {"upsampler": "dysample", "out_ch": 1, "n_block": 2}),
          (1, {"upsampler": "conv", "dim": 16, "expansion_factor": 2.65625})]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,kw", PARITY)
def test_matches_the_twin(scale, kw, dtype):
    checks.check_parity(spec(scale, **kw), (2, kw.get("in_ch", 3), 7, 5), dtype)


def test_adam_step_lowers_the_loss():
    checks.check_adam_step(spec(2), (2, 3, 8, 8))


def test_pth_round_trips(tmp_path):
    checks.check_pth_round_trip(spec(3, upsampler="nearest+conv"), (1, 3, 5, 6), tmp_path)
    check_pth_both_ways(spec(2, upsampler="dysample", out_ch=1), (1, 3, 6, 9), tmp_path)
    from framework.weights.pth import load_pth_state_dict
    from framework.weights.pth_write import write_pth
    sd = checks.build(spec(4, upsampler="pixelshuffle")).state_dict()
    write_pth(tmp_path / "m.pth", dict(sd))
    back, _ = load_pth_state_dict(str(tmp_path / "m.pth"))
    meta = np.asarray(back["upscale.MetaUpsample"])
    assert meta.dtype == np.uint8 and meta.tolist() == [1, 2, 4, 8, 3, 12, 4]


@pytest.mark.parametrize("scale,hw,want", [(2, (5, 3), (10, 6)), (3, (1, 1), (3, 3)),
                                           (4, (2, 7), (8, 28))])
def test_output_shapes(scale, hw, want):
    y = checks.build(spec(scale))(sg.tensor(np.zeros((2, 3, *hw), np.float32)))
    assert y.shape == (2, 3, *want) and y.dtype == np.float32


def test_conv_upsampler_is_scale_1():
    model = checks.build(spec(4, upsampler="conv"))
    assert model.scale == 1 and np.asarray(model.state_dict()["upscale.MetaUpsample"])[2] == 1


@pytest.mark.parametrize("kw,match", [
    ({"upsampler": "lda"}, r"MoESR: upsampler must be one of 'conv', 'pixelshuffledirect'"),
    ({"dim": 12 + 2}, r"MoESR: dim must be a multiple of 4 and at least 8"),
    ({"dim": 4}, r"MoESR: dim must be a multiple of 4 and at least 8"),
    ({"expansion_factor": 0.9}, r"MoESR: expansion_factor 0.9 gives .* fewer than dim 8"),
    ({"upsample_dim": 256}, r"MoESR: upsample_dim 256 does not fit the MetaUpsample buffer \(uint8"),
    ({"scale": 5, "upsampler": "pixelshuffle"}, r"MoESR: the 'pixelshuffle' upsampler supports "
                                                r"scale 2\^n and 3, got 5"),
])
def test_argument_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        MODELS.build({**spec(2), **kw})


@pytest.mark.parametrize("kw", [
    {"scale": 4, "upsampler": "dysample", "out_ch": 1},
    {"scale": 3, "in_ch": 1, "upsampler": "pixelshuffle", "upsample_dim": 20, "n_blocks": 2},
    {"scale": 2, "upsampler": "nearest+conv", "expansion_factor": 2.65625, "dim": 16},
    {"scale": 2, "upsampler": "pixelshuffledirect", "out_ch": 1},  # out_ch only in the buffer
    {"scale": 1, "upsampler": "conv"},
])
def test_detect_reads_the_meta_buffer(kw):
    s = spec(**kw)
    state = checks.build(s).state_dict()
    got = detect(state)
    assert got["type"] == "MoESR"
    MODELS.build(got).load_state_dict(state, strict=True)
    for k in ("scale", "in_ch", "out_ch", "n_blocks", "n_block", "dim", "upsampler", "upsample_dim"):
        if k in s:
            assert got[k] == s[k], k
    assert int(got["expansion_factor"] * got["dim"]) == int(s.get("expansion_factor", 2.65625) * s["dim"])


def test_detect_refuses_a_kind_it_does_not_have():
    state = dict(checks.build(spec(2)).state_dict())
    meta = np.asarray(state["upscale.MetaUpsample"]).copy()
    meta[1] = 7
    state["upscale.MetaUpsample"] = meta
    with pytest.raises(ValueError, match=r"upsampler index 7, which MoESR does not have \(it has 5: "
                                         r"conv, pixelshuffledirect, pixelshuffle, nearest\+conv, dysample\)"):
        detect(state)


SPANDREL = [  # (keywords of spandrel's MoESR, input size, the key the file is saved under)
    ({"dim": 64, "n_blocks": 2, "n_block": 2, "scale": 4}, (11, 14), None),  # the defaults' widths
    ({"dim": 32, "n_blocks": 1, "n_block": 2, "scale": 2, "upsampler": "pixelshuffle",
      "upsample_dim": 24, "expansion_factor": 2.0}, (9, 8), "params"),
    ({"dim": 16, "n_blocks": 2, "n_block": 1, "scale": 3, "upsampler": "nearest+conv"}, (7, 6), None),
    ({"dim": 16, "n_blocks": 1, "n_block": 1, "scale": 2, "upsampler": "dysample"}, (6, 9), "params_ema"),
    ({"dim": 16, "n_blocks": 1, "n_block": 1, "upsampler": "conv"}, (9, 7), None),
]


@pytest.mark.parametrize("kw,size,wrap", SPANDREL)
def test_a_file_spandrel_builds_gives_spandrels_image(kw, size, wrap, tmp_path):
    torch = pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture("MoESR")
    torch.manual_seed(0)
    network = module.MoESR(**kw)
    with torch.no_grad():  # the original's init leaves biases, norms and gammas at 0 / 1: perturb
        for p in network.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    check_spandrel_file(module, network, tmp_path, size, wrap)

"""RealPLKSR: keys in order for its layouts (GroupNorm or LayerNorm; pixel shuffle or DySample, with
and without DySample's end conv), DySample's init_pos by hand, parity with the torch twin (train():
output and every gradient, float64 and float32; eval(): the output), Dropout2d, an Adam step, .pth
both ways, published files through the inference path, ONNX export, detection, errors."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework.registry import MODELS
from framework.detect import detect
from models.realplksr import _init_pos

from . import basicsr_checks as checks
from . import pth_checks

SMALL = {"type": "RealPLKSR", "dim": 8, "n_blocks": 2, "kernel_size": 5}


def spec(scale=2, **kw):
    return {**SMALL, "scale": scale, **kw}


VARIANTS = [spec(), spec(3, layer_norm=True, use_ea=False), spec(4, upsampler="dysample"),
            spec(3, upsampler="dysample", layer_norm=True), spec(1, upsampler="dysample"),
            spec(2, upsampler="dysample", in_ch=1, out_ch=1, norm_groups=2, split_ratio=0.5)]
IDS = ["gn-ps", "ln-ps-x3", "dysample-x4", "dysample-x3-ln", "dysample-x1", "dysample-1ch"]


def test_state_dict_keys_are_the_originals():
    block = ["channel_mixer.0.weight", "channel_mixer.0.bias", "channel_mixer.2.weight", "channel_mixer.2.bias",
             "lk.conv.weight", "lk.conv.bias", "attn.f.0.weight", "attn.f.0.bias", "refine.weight",
             "refine.bias", "norm.weight", "norm.bias"]
    want = ["feats.0.weight", "feats.0.bias"] + [f"feats.{i}.{k}" for i in (1, 2) for k in block] + [
        "feats.4.weight", "feats.4.bias"]  # feats.3: the Dropout2d
    assert checks.check_keys(spec()) == want
    keys = checks.check_keys(spec(4, upsampler="dysample", layer_norm=True))
    assert keys[:2] == ["feats.0.weight", "feats.0.bias"] and keys[2:4] == ["feats.1.layer_norm.weight",
                                                                           "feats.1.layer_norm.bias"]
    assert keys[-6:] == ["to_img.init_pos", "to_img.end_conv.weight", "to_img.end_conv.bias",
                         "to_img.offset.weight", "to_img.offset.bias", "to_img.scope.weight"]
    assert "to_img.end_conv.weight" not in checks.check_keys(spec(1, upsampler="dysample"))


@pytest.mark.parametrize("s", VARIANTS, ids=IDS)
def test_keys_and_shapes_equal_the_twins(s):
    checks.check_keys(s)


def test_init_pos_by_hand():
    """x2: sub-pixel offsets h = (-1/4, 1/4) of an LR pixel; per group 4 sub-pixels (a, b) in row
    order; the x offsets (h[b]) of every group first, then the y offsets (h[a])."""
    pos = _init_pos(2, 2).reshape(-1)
    q = 0.25
    np.testing.assert_array_equal(pos, [-q, q, -q, q] * 2 + [-q, -q, q, q] * 2)
    assert _init_pos(3, 1).reshape(-1)[:3].tolist() == pytest.approx([-1 / 3, 0, 1 / 3])
    twins = pytest.importorskip("tests.twins")
    for s, g in ((2, 4), (3, 3), (4, 4), (1, 3)):
        np.testing.assert_array_equal(_init_pos(s, g), twins.plksr.DySample(3 * s * s, 3, s, g)._init_pos().numpy())


def _count(dim, n_blocks, k, ea, ln, out=3, s=4):
    conv = (lambda ci, co, kk: ci * co * kk * kk + co)
    pdim = dim // 4
    block = conv(dim, 2 * dim, 3) + conv(2 * dim, dim, 3) + conv(pdim, pdim, k) + (conv(dim, dim, 3) if ea else 0) \
        + conv(dim, dim, 1) + 2 * dim
    return conv(3, dim, 3) + n_blocks * block + conv(dim, out * s * s, 3)


def test_published_sizes():
    """RealPLKSR (64 features, 28 blocks, 17x17, EA) and its DySample x4 form (4 groups: offset and
    scope 48 -> 128, end conv 48 -> 3), layer by layer."""
    base = _count(64, 28, 17, True, False)
    assert checks.build({"type": "RealPLKSR"}).num_parameters() == base == 7_389_680
    dys = (48 * 128 + 128) + 48 * 128 + (48 * 3 + 3)
    assert checks.build({"type": "RealPLKSR", "upsampler": "dysample"}).num_parameters() == base + dys


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("s", VARIANTS, ids=IDS)
def test_matches_the_twin_in_train(s, dtype):
    checks.check_parity(s, (2, s.get("in_ch", 3), 6, 5), dtype)


@pytest.mark.parametrize("s", VARIANTS, ids=IDS)
def test_matches_the_twin_in_eval(s):
    checks.check_eval_output(s, (2, s.get("in_ch", 3), 7, 4))


def test_dropout2d_before_the_last_conv():
    """eval(): dropout changes nothing; train() with p = 1: every feature channel is dropped, so the
    output is the pixel shuffle of the last conv's bias plus the repeated input."""
    model = checks.build(spec(2, dropout=1.0)).double()
    plain = checks.build(spec(2)).double()
    x = sg.tensor(np.random.default_rng(0).uniform(0, 1, (1, 3, 4, 5)))
    with sg.no_grad():
        np.testing.assert_array_equal(model.eval()(x).data, plain.eval()(x).data)
        y = model.train()(x).data
    bias = model.feats[-1].bias.data.reshape(1, -1, 1, 1)
    want = F.pixel_shuffle(sg.tensor(np.repeat(x.data, 4, axis=1) + bias), 2).data
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-15)


@pytest.mark.parametrize("s", [spec(), spec(2, upsampler="dysample")])
def test_adam_step_lowers_the_loss(s):
    checks.check_adam_step(s, (2, 3, 8, 8))


def test_pth_both_ways(tmp_path):
    pth_checks.check_pth_both_ways(spec(2, upsampler="dysample", layer_norm=True), (1, 3, 5, 6), tmp_path)


@pytest.mark.parametrize("s", [
    {"type": "RealPLKSR", "dim": 16, "n_blocks": 2, "scale": 2, "kernel_size": 17},  # realplksr_mssim_pretrain
    {"type": "RealPLKSR", "dim": 16, "n_blocks": 2, "scale": 4, "kernel_size": 13, "layer_norm": True,
     "use_ea": False},  # RealPLKSRLayerNorm, tiny
    {"type": "RealPLKSR", "dim": 16, "n_blocks": 1, "scale": 4, "kernel_size": 17, "upsampler": "dysample"},
])
def test_published_files_run_through_inference(s, tmp_path):
    want = {"in_ch": 3, "out_ch": 3, "split_ratio": 0.25, "use_ea": True, "layer_norm": False,
            "upsampler": "pixelshuffle", **s}
    pth_checks.check_published_file_infers(s, (1, 3, 6, 5), tmp_path, want)


def test_export_to_onnx(tmp_path):
    """The pixel-shuffle model exports with dynamic axes; DySample's sampling grid depends on the
    size (a fixed-size export, which srgrad-export warns about), still within 1e-4 of srgrad."""
    ops = pth_checks.check_export_cli(spec(2), (9, 11), tmp_path, other_shape=(2, 3, 6, 5))
    assert {"Conv", "Mish", "InstanceNormalization", "Gather", "DepthToSpace"} <= set(ops)
    (tmp_path / "dys").mkdir()
    ops = pth_checks.check_export_cli(spec(2, upsampler="dysample", layer_norm=True), (9, 11), tmp_path / "dys")
    assert {"GridSample", "LayerNormalization", "Sigmoid"} <= set(ops)


@pytest.mark.parametrize("s", VARIANTS + [spec(2, dim=12, split_ratio=0.3)], ids=IDS + ["ratio"])
def test_detect_round_trip(s):
    state = checks.build(s).state_dict()
    got = detect(state)
    MODELS.build(got).load_state_dict(state, strict=True)
    for k in ("dim", "n_blocks", "scale", "kernel_size", "use_ea", "layer_norm", "upsampler", "in_ch"):
        if k in s:
            assert got[k] == s[k], k
    assert int(got["dim"] * got["split_ratio"]) == int(s["dim"] * s.get("split_ratio", 0.25))


def test_detect_norm_groups():
    """A GroupNorm's weights do not tell its groups: 4 (every published RealPLKSR's) unless given;
    a dim that 4 does not divide asks."""
    state = checks.build(spec(2, dim=6, norm_groups=3)).state_dict()
    with pytest.raises(ValueError, match=r"norm_groups \(dim 6 is not a multiple of the usual 4"):
        detect(state)
    assert detect(state, norm_groups=3)["norm_groups"] == 3
    assert "norm_groups" not in detect(checks.build(spec()).state_dict())


def test_detect_reads_spandrels_files():
    twins = pytest.importorskip("tests.twins")
    sd = twins.build_twin({"type": "RealPLKSR", "dim": 64, "n_blocks": 2, "scale": 4,
                           "upsampler": "dysample"}).state_dict()
    assert {"feats.0.weight", "feats.1.lk.conv.weight", "feats.1.refine.weight",
            "feats.1.channel_mixer.0.weight", "to_img.init_pos"} <= set(sd)
    assert detect(sd) == {"type": "RealPLKSR", "in_ch": 3, "out_ch": 3, "dim": 64, "n_blocks": 2, "scale": 4,
                          "kernel_size": 17, "split_ratio": 0.25, "use_ea": True, "layer_norm": False,
                          "upsampler": "dysample"}


@pytest.mark.parametrize("kw,error,match", [
    ({"in_ch": 1}, ValueError, r"RealPLKSR: .*in_ch == out_ch is needed, got 1 and 3"),
    ({"norm_groups": 5}, ValueError, r"RealPLKSR: norm_groups=5 does not divide dim=64"),
    ({"upsampler": "DySample"}, ValueError, r"RealPLKSR: upsampler must be one of .*did you mean 'dysample'"),
    ({"dropout": 1.5}, ValueError, r"RealPLKSR: dropout must be in \[0.0, 1.0\]"),
    ({"kernel_size": 16}, ValueError, r"RealPLKSR: kernel_size must be odd"),
    ({"layer_norm": "yes"}, TypeError, r"RealPLKSR: layer_norm must be a bool"),
    ({"dysample": True}, TypeError, r"dysample"),
])
def test_argument_errors(kw, error, match):
    with pytest.raises(error, match=match):
        MODELS.build({"type": "RealPLKSR", **kw})

"""framework/detect.py: every model round-trips (build -> state_dict -> detect -> the same keywords ->
a model with the same keys and shapes) at several settings; BasicSR-structured state_dicts (the torch
twins', published sizes) are recognised; unknown, ambiguous, tampered and under-determined state_dicts
raise ValueErrors that name each candidate and why."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import models
from framework.nn import init
from framework.registry import MODELS
from framework.detect import detect

CASES = [  # (spec, keywords the weights cannot tell, which the caller passes)
    ({"type": "SRCNN", "scale": 3, "num_in_ch": 1, "num_out_ch": 1, "num_feat": [16, 8],
      "kernel_size": [5, 3, 1]}, ("scale",)),
    ({"type": "SRCNN", "scale": 2, "num_feat": [8, 4]}, ("scale",)),
    ({"type": "FSRCNN", "scale": 3, "num_in_ch": 1, "num_out_ch": 1, "d": 12, "s": 4, "m": 2},
     ("scale",)),
    ({"type": "FSRCNN", "scale": 2, "d": 8, "s": 4, "m": 0}, ("scale",)),
    ({"type": "ESPCN", "scale": 3, "num_feat": [8, 4]}, ()),
    ({"type": "ESPCN", "scale": 2, "num_in_ch": 1, "num_out_ch": 3, "num_feat": [8, 4]}, ()),
    ({"type": "VDSR", "scale": 2, "num_in_ch": 1, "num_out_ch": 1, "num_feat": 8, "num_layers": 3},
     ("scale",)),
    ({"type": "VDSR", "scale": 4, "num_feat": 4, "num_layers": 5}, ("scale",)),
    ({"type": "EDSR", "scale": 2, "num_feat": 8, "num_block": 2}, ()),
    ({"type": "EDSR", "scale": 3, "num_in_ch": 1, "num_out_ch": 1, "num_feat": 8, "num_block": 1}, ()),
    ({"type": "EDSR", "scale": 8, "num_feat": 4, "num_block": 0}, ()),
    ({"type": "UpsampleNet", "scale": 2, "num_feat": 8, "num_conv": 1, "num_refine": 3}, ("scale",)),
    ({"type": "UpsampleNet", "scale": 3, "num_in_ch": 1, "num_out_ch": 3, "num_feat": 4,
      "residual": False}, ("scale",)),
    ({"type": "SRVGGNetCompact", "scale": 4, "num_feat": 8, "num_conv": 3}, ()),
    ({"type": "SRVGGNetCompact", "scale": 1, "num_in_ch": 1, "num_out_ch": 1, "num_feat": 4,
      "num_conv": 0}, ()),
    ({"type": "SRVGGNetCompact", "scale": 2, "num_feat": 8, "num_conv": 2, "act_type": "leakyrelu"},
     ("act_type",)),
    ({"type": "SRVGGNetCompact", "scale": 3, "num_feat": 8, "num_conv": 1, "act_type": "relu"},
     ("act_type",)),
    ({"type": "MSRResNet", "scale": 2, "num_feat": 8, "num_block": 1}, ()),
    ({"type": "MSRResNet", "scale": 3, "num_in_ch": 1, "num_out_ch": 1, "num_feat": 4,
      "num_block": 2}, ()),
    ({"type": "MSRResNet", "scale": 4, "num_feat": 8, "num_block": 0}, ()),
    ({"type": "RRDBNet", "scale": 4, "num_feat": 8, "num_block": 2, "num_grow_ch": 4}, ()),
    ({"type": "RRDBNet", "scale": 2, "num_feat": 8, "num_block": 1, "num_grow_ch": 6}, ()),
    ({"type": "RRDBNet", "scale": 1, "num_in_ch": 1, "num_out_ch": 1, "num_feat": 4, "num_block": 1,
      "num_grow_ch": 4}, ()),
    ({"type": "RCAN", "scale": 4, "num_feat": 8, "num_group": 2, "num_block": 2,
      "squeeze_factor": 4}, ()),
    ({"type": "RCAN", "scale": 3, "num_in_ch": 1, "num_out_ch": 1, "num_feat": 8, "num_group": 1,
      "num_block": 3, "squeeze_factor": 2}, ()),
    ({"type": "RCAN", "scale": 2, "num_feat": 16, "num_group": 1, "num_block": 1,
      "squeeze_factor": 16}, ()),
    ({"type": "ZSSRNet", "scale": 2, "num_feat": 8, "num_layers": 3}, ("scale",)),
    ({"type": "ZSSRNet", "scale": 4, "num_in_ch": 1, "num_out_ch": 1, "num_feat": 4}, ("scale",)),
    ({"type": "SwinIR", "scale": 2, "img_size": 16, "embed_dim": 8, "depths": [2, 1],
      "num_heads": [2, 4], "window_size": 4, "mlp_ratio": 2.0, "upsampler": "pixelshuffle"}, ()),
    ({"type": "HAT", "scale": 4, "embed_dim": 12, "depths": [2, 1], "num_heads": [2, 3],
      "window_size": 4, "mlp_ratio": 2.0, "compress_ratio": 3, "squeeze_factor": 4}, ()),
    ({"type": "MoSR", "scale": 2, "dim": 8, "n_block": 2, "upsampler": "dys", "out_ch": 1}, ()),
    ({"type": "MoSR", "scale": 3, "in_ch": 1, "out_ch": 1, "dim": 6, "n_block": 1, "upsampler": "gps",
      "kernel_size": 3, "expansion_ratio": 2.0}, ()),
    ({"type": "SwiftSRGAN", "scale": 4, "in_channels": 1, "num_channels": 8, "num_blocks": 2}, ()),
    ({"type": "DRCT", "scale": 3, "embed_dim": 12, "depths": [6, 6], "num_heads": [2, 4],
      "window_size": 4, "img_size": 16, "gc": 6, "resi_connection": "identity"}, ()),
    ({"type": "Swin2SR", "scale": 2, "img_size": 16, "embed_dim": 8, "depths": [2, 1],
      "num_heads": [2, 4], "window_size": 4, "mlp_ratio": 2.0, "upsampler": "pixelshuffle_aux"}, ()),
    ({"type": "DAT", "scale": 3, "img_size": 8, "embed_dim": 32, "split_size": [2, 4],
      "depth": [3, 1], "num_heads": [4, 2], "expansion_factor": 2.0}, ()),
    ({"type": "SPAN", "scale": 4, "feature_channels": 8, "num_blocks": 2}, ()),
    ({"type": "SPAN", "scale": 2, "num_in_ch": 1, "num_out_ch": 1, "feature_channels": 4, "num_blocks": 1,
      "norm": False, "deploy": True}, ()),
    ({"type": "PLKSR", "scale": 2, "dim": 8, "n_blocks": 2, "kernel_size": 7, "ccm_type": "DCCM"}, ()),
    ({"type": "PLKSR", "scale": 3, "dim": 8, "n_blocks": 1, "kernel_size": 9, "lk_type": "RectSparsePLK",
      "use_ea": False}, ()),
    ({"type": "RealPLKSR", "scale": 2, "dim": 8, "n_blocks": 1, "kernel_size": 5}, ()),
    ({"type": "RealPLKSR", "scale": 4, "dim": 8, "n_blocks": 2, "kernel_size": 7, "upsampler": "dysample",
      "layer_norm": True, "use_ea": False}, ()),
    ({"type": "RealCUGAN", "scale": 3, "pro": True}, ()),
    ({"type": "SAFMN", "dim": 8, "n_blocks": 2, "ffn_scale": 1.5, "scale": 3}, ()),
    ({"type": "OmniSR", "num_feat": 8, "window_size": 4, "res_num": 2, "scale": 2}, ()),
    ({"type": "NAFNet", "img_channel": 1, "width": 4, "middle_blk_num": 2, "enc_blk_nums": [1, 0],
      "dec_blk_nums": [2, 1]}, ()),
    ({"type": "DRUNet", "in_nc": 2, "out_nc": 1, "nc": [4, 6, 8, 10], "nb": 2,
      "upsample_mode": "pixelshuffle"}, ()),
    ({"type": "SCUNet", "in_nc": 1, "config": [1, 0, 0, 1, 0, 2, 0], "dim": 64}, ()),
    ({"type": "MMRealSR", "scale": 4, "num_in_ch": 1, "num_out_ch": 1, "num_feat": 8, "num_block": 1,
      "num_grow_ch": 4, "num_feats": [8, 12], "num_blocks": [1, 1], "downscales": [2, 1]}, ()),
    # without the original's buffers: spandrel's window / stripe / df for the upsampler (x1: 8, 8x8)
    ({"type": "GRL", "scale": 1, "embed_dim": 8, "depths": [2, 1], "num_heads_window": [2, 4],
      "num_heads_stripe": [4, 1], "window_size": 8, "stripe_size": [8, 8], "stripe_shift": True,
      "anchor_window_down_factor": 4, "mlp_ratio": 2.0, "in_channels": 1, "out_channels": 1}, ()),
    ({"type": "GRL", "scale": 4, "upsampler": "nearest+conv", "embed_dim": 36, "depths": [1],
      "num_heads_window": [2], "num_heads_stripe": [3], "window_size": 16, "stripe_size": [32, 64],
      "stripe_shift": True, "anchor_proj_type": "conv2d", "anchor_window_down_factor": 2,
      "local_connection": True, "qkv_proj_type": "separable_conv", "conv_type": "3conv"}, ()),
    ({"type": "RGT", "scale": 3, "img_size": 8, "embed_dim": 32, "split_size": [2, 2],
      "depth": [3, 2], "num_heads": [4, 2], "mlp_ratio": 2.0, "resi_connection": "3conv"}, ()),
    ({"type": "CRAFT", "scale": 2, "embed_dim": 16, "depths": [1, 2], "num_heads": [4, 2],
      "split_size_0": 4, "split_size_1": 4, "resi_connection": "identity"}, ()),
    ({"type": "ATD", "scale": 3, "embed_dim": 8, "depths": [2, 1], "num_heads": [2, 4],
      "window_size": 4, "num_tokens": 5, "reducted_dim": 3, "convffn_kernel_size": 3,
      "mlp_ratio": 1.0, "resi_connection": "3conv"}, ()),
    ({"type": "DnCNN", "in_nc": 1, "out_nc": 1, "nc": 4, "nb": 6}, ()),
    ({"type": "FBCNN", "in_nc": 1, "out_nc": 1, "nc": [4, 4, 4, 512], "nb": 2,
      "upsample_mode": "pixelshuffle"}, ()),
    ({"type": "Uformer", "dd_in": 1, "in_chans": 1, "embed_dim": 4, "depths": [1, 2, 1, 1, 2, 1, 1, 2, 1],
      "num_heads": [1, 2, 1, 2, 4, 2, 2, 1, 2], "win_size": 2, "token_mlp": "fastleff",
      "modulator": True}, ()),
    ({"type": "KBNet", "img_channel": 1, "width": 8, "middle_blk_num": 2, "enc_blk_nums": [1, 0],
      "dec_blk_nums": [2, 1], "lightweight": True, "ffn_scale": 1.5}, ()),
    ({"type": "DITN", "scale": 3, "inp_channels": 1, "dim": 8, "ITL_blocks": 2, "SAL_blocks": 1,
      "UFONE_blocks": 2, "bias": True, "ffn_expansion_factor": 1.5}, ()),
    ({"type": "SeemoRe", "scale": 2, "in_chans": 1, "embedding_dim": 8, "num_layers": 2,
      "num_experts": 4, "lr_space": "exp", "global_kernel_size": 5}, ()),
    ({"type": "DCTLSA", "scale": 3, "in_nc": 1, "out_nc": 1, "nf": 10, "num_head": 5}, ()),
    ({"type": "MoESR", "scale": 3, "in_ch": 1, "out_ch": 3, "dim": 8, "n_blocks": 2, "n_block": 1,
      "upsampler": "pixelshuffle", "upsample_dim": 6, "expansion_factor": 2.0}, ()),
    ({"type": "FDAT", "scale": 2, "num_in_ch": 1, "num_out_ch": 1, "embed_dim": 8, "num_groups": 2,
      "depth_per_group": 1, "num_heads": 2, "window_size": 2, "aim_reduction_ratio": 2,
      "ffn_expansion_ratio": 1.5, "mid_dim": 8, "upsampler_type": "pa_up"}, ()),
    ({"type": "SAFMNBCIE", "dim": 8, "n_blocks": 2, "num_layers": 3, "ffn_scale": 1.5,
      "upscaling_factor": 4}, ()),
]


def resolved(spec: dict) -> dict:
    """Every constructor keyword: the spec's value or the default; lists as tuples."""
    cls = MODELS.get(spec["type"])
    out = {k: p.default for k, p in inspect.signature(cls).parameters.items()}
    out.update({k: v for k, v in spec.items() if k != "type"})
    return {k: tuple(v) if isinstance(v, list) else v for k, v in out.items()}


def built(spec: dict, seed: int = 0):
    init.manual_seed(seed)
    return MODELS.build(spec)


def shapes(model) -> dict:
    return {k: v.shape for k, v in model.state_dict().items()}


def test_every_model_has_a_rule():
    assert all(callable(getattr(MODELS.get(n), "detect", None)) for n in models.__all__)
    assert {c[0]["type"] for c in CASES} == set(models.__all__)


@pytest.mark.parametrize("spec,needs", CASES, ids=lambda v: v["type"] if isinstance(v, dict) else "")
def test_round_trip(spec, needs):
    model = built(spec)
    state = model.state_dict()
    got = detect(state, **{k: spec[k] for k in needs})
    assert got["type"] == spec["type"]
    assert resolved(got) == resolved(spec)
    assert shapes(MODELS.build(got)) == shapes(model)
    MODELS.build(got).load_state_dict(state, strict=True)
    if needs:  # without them: an error naming them (alone, or beside another fit: VDSR's twin)
        with pytest.raises(ValueError, match=rf"{spec['type']}\(.*\)(, but its weights do not fix "
                                             rf"{needs[0]} \(| \(and {needs[0]} unknown\))"):
            detect(state)


def test_published_real_esrgan_state_dicts():
    """The torch twins' (BasicSR's) keys and shapes at the published sizes: realesr-general-x4v3,
    and RealESRGAN_x4plus (the twin's one-block state_dict with body.0 copied to body.0..22: a
    23-block torch build takes seconds)."""
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    general = twins.build_twin({"type": "SRVGGNetCompact", "num_conv": 32}).state_dict()
    assert len(general) == 2 * 34 + 33 and "body.66.bias" in general
    assert detect(general) == {"type": "SRVGGNetCompact", "num_in_ch": 3, "num_out_ch": 3,
                               "num_feat": 64, "num_conv": 32, "scale": 4, "act_type": "prelu"}
    one = twins.build_twin({"type": "RRDBNet", "num_block": 1}).state_dict()
    x4plus = {}
    for k, v in one.items():
        for i in range(23) if k.startswith("body.0.") else [None]:
            x4plus[k if i is None else f"body.{i}." + k[len("body.0."):]] = v
    assert sum(v.numel() for v in x4plus.values()) == 16_697_987
    assert detect(x4plus) == {"type": "RRDBNet", "num_in_ch": 3, "num_out_ch": 3, "scale": 4,
                              "num_feat": 64, "num_block": 23, "num_grow_ch": 32}


@pytest.mark.parametrize("spec", [
    {"type": "MSRResNet", "scale": 3, "num_feat": 8, "num_block": 2},
    {"type": "RCAN", "scale": 2, "num_feat": 8, "num_group": 2, "num_block": 1, "squeeze_factor": 2},
    {"type": "RRDBNet", "scale": 2, "num_feat": 8, "num_block": 1, "num_grow_ch": 4}])
def test_twin_state_dicts_load_strictly_after_detection(spec):
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    state = {k: v.numpy() for k, v in twins.build_twin(spec).state_dict().items()}
    got = detect(state)
    assert resolved(got) == resolved(spec)
    MODELS.build(got).load_state_dict(state, strict=True)


@pytest.mark.parametrize("first_in,known,want", [
    (3, {}, (3, 4)), (12, {}, (3, 2)), (48, {}, (3, 1)), (12, {"num_in_ch": 12}, (12, 4)),
    (12, {"scale": 4}, (12, 4)), (48, {"num_in_ch": 12}, (12, 2))])
def test_rrdbnet_scale_from_conv_first(first_in, known, want):
    """conv_first sees num_in_ch * 1, 4, 16 channels at x4, x2, x1: 3 -> x4, 12 -> x2, 48 -> x1 for
    RGB (num_out_ch 3); a given num_in_ch or scale decides otherwise."""
    in_ch, scale = want
    spec = {"type": "RRDBNet", "num_in_ch": in_ch, "num_out_ch": 3, "scale": scale, "num_feat": 4,
            "num_block": 0}
    state = built(spec).state_dict()
    assert state["conv_first.weight"].shape[1] == first_in
    got = detect(state, **known)
    assert (got["num_in_ch"], got["scale"]) == want


def test_rcan_squeeze_factor_is_the_largest_that_gives_the_width():
    """num_feat 8 with squeeze 3 keeps 8 // 3 = 2 channels, as squeeze 4 does: detect says 4, and
    the model it builds has the same shapes."""
    spec = {"type": "RCAN", "scale": 2, "num_feat": 8, "num_group": 1, "num_block": 1,
            "squeeze_factor": 3}
    model = built(spec)
    got = detect(model.state_dict())
    assert got["squeeze_factor"] == 4
    assert shapes(MODELS.build(got)) == shapes(model)


def test_unknown_state_dict_lists_every_candidate_and_why():
    with pytest.raises(ValueError) as err:
        detect({"model.0.weight": np.zeros((64, 3, 3, 3)), "model.0.bias": np.zeros(64)})
    msg = str(err.value)
    assert msg.startswith("detect: no architecture srgrad has matches this state_dict "
                          "(model.0.weight, model.0.bias).\nWhy each of srgrad's models does not fit:")
    for name in models.__all__:
        assert f"\n  {name}: " in msg
    assert "EDSR: no key 'conv_first.weight'" in msg
    assert "SRCNN: no key 'conv1.weight'" in msg


def test_ambiguous_state_dict_lists_the_fits_and_how_to_choose():
    """A ReLU SRVGGNetCompact at x1 and a VDSR have the same keys and shapes."""
    spec = {"type": "SRVGGNetCompact", "scale": 1, "num_feat": 4, "num_conv": 1, "act_type": "relu"}
    state = built(spec).state_dict()
    with pytest.raises(ValueError, match=r"fits 2 models:\n  SRVGGNetCompact\(.*\) \(and act_type "
                                         r"unknown\)\n  VDSR\(.*num_layers=3\) \(and scale unknown\)\n"
                                         r"pass types="):
        detect(state)
    assert detect(state, act_type="relu") == {
        "type": "SRVGGNetCompact", "num_in_ch": 3, "num_out_ch": 3, "num_feat": 4, "num_conv": 1,
        "scale": 1, "act_type": "relu"}
    assert detect(state, types="VDSR", scale=2)["num_layers"] == 3
    with pytest.raises(ValueError, match=r"VDSR\(.*\), but its weights do not fix scale"):
        detect(state, types=["VDSR"])


def test_tampered_state_dicts_name_the_key():
    spec = {"type": "EDSR", "scale": 2, "num_feat": 8, "num_block": 2}
    state = dict(built(spec).state_dict())
    wrong = {**state, "conv_last.weight": np.zeros((3, 9, 3, 3), np.float32)}
    with pytest.raises(ValueError, match=r"EDSR: EDSR\(.*\): shape mismatches conv_last.weight "
                                         r"\(3, 9, 3, 3\) \(model \(3, 8, 3, 3\)\)"):
        detect(wrong)
    cut = {k: v for k, v in state.items() if k != "body.1.conv2.bias"}
    with pytest.raises(ValueError, match=r"EDSR: .*missing keys body.1.conv2.bias"):
        detect(cut)
    extra = {**state, "body.0.extra.weight": np.ones(8, np.float32)}
    with pytest.raises(ValueError, match=r"EDSR: .*unexpected keys body.0.extra.weight"):
        detect(extra)


def test_given_keywords_are_checked_and_kept():
    spec = {"type": "EDSR", "scale": 2, "num_feat": 8, "num_block": 1}
    state = built(spec).state_dict()
    with pytest.raises(ValueError, match=r"EDSR: the weights say num_feat=8, 16 was given"):
        detect(state, num_feat=16)
    with pytest.raises(ValueError, match=r"EDSR: takes no keyword 'act_type'"):
        detect(state, act_type="relu")
    assert detect(state, res_scale=0.1, img_range=1.0)["res_scale"] == 0.1


def test_srgrad_tensors_are_read_by_shape():
    model = built({"type": "MSRResNet", "scale": 2, "num_feat": 4, "num_block": 1})
    assert detect(dict(model.named_parameters()))["scale"] == 2


def test_detect_leaves_the_init_stream_alone():
    state = built({"type": "EDSR", "scale": 2, "num_feat": 8, "num_block": 1}).state_dict()
    init.manual_seed(5)
    detect(state)
    a = MODELS.build({"type": "ESPCN", "scale": 2}).state_dict()
    b = built({"type": "ESPCN", "scale": 2}, seed=5).state_dict()
    assert all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("state,kw,error,match", [
    ({}, {}, ValueError, r"detect: the state_dict is empty"),
    ([1, 2], {}, TypeError, r"detect: expected a state_dict"),
    ({"a": 3}, {}, TypeError, r"detect: state_dict entry 'a' is not a named array"),
    ({"a": np.zeros(2)}, {"types": ["EDSR", "Nope"]}, ValueError, r"detect: no detect rule for 'Nope'"),
])
def test_bad_input(state, kw, error, match):
    with pytest.raises(error, match=match):
        detect(state, **kw)

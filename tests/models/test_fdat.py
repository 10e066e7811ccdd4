"""FDAT: the original's keys (the spatial attention's learned `bias`, the channel attention's `temp`)
and its MetaUpsample buffer for each kind (pa_up's recorded in_dim as the original writes it);
parity with the twin (spandrel 0.4.2's own FDAT: output and every gradient of an L1 loss, float64
and float32) for every upsampler kind srgrad builds, unshuffle_mod, padded windows and a custom
block pattern, and LDA-AQU (batch 1: the original's `view` fails on a batch of two); .pth round
trips both ways; detection from the keys and the buffer (traiNNer-redux's presets; an index beyond
the eight kinds refused naming it); and the done-when check: files built by spandrel's FDAT through
srgrad-infer give spandrel's image."""
from __future__ import annotations

import numpy as np
import pytest

import framework as sg
from framework.detect import detect
from framework.registry import MODELS

from . import basicsr_checks as checks
from .published_checks import check_pth_both_ways
from .spandrel_checks import check_spandrel_file

SMALL = {"type": "FDAT", "embed_dim": 12, "num_groups": 1, "depth_per_group": 1, "num_heads": 2,
         "window_size": 4, "aim_reduction_ratio": 4, "mid_dim": 16, "drop_path_rate": 0.0}


def spec(scale=2, **kw):
    return {**SMALL, "scale": scale, **kw}


def test_keys_and_the_meta_buffer_are_the_originals():
    keys = checks.check_keys(spec(2, upsampler_type="pixelshuffle"))
    block = [k[len("groups.0.blocks.0."):] for k in keys if k.startswith("groups.0.blocks.0.")]
    assert block == ["n1.weight", "n1.bias", "n2.weight", "n2.bias", "attn.bias", "attn.qkv.weight",
                     "attn.proj.weight", "attn.proj.bias", "conv.0.weight", "inter.sg.0.weight",
                     "inter.cg.1.weight", "inter.cg.3.weight", "ffn.fc1.weight", "ffn.fc2.weight",
                     "ffn.smix.weight"]
    assert "groups.0.blocks.1.attn.temp" in keys and keys[-1] == "upsampler.4.bias"
    sd = checks.build(spec(2, upsampler_type="pixelshuffle")).state_dict()
    assert sd["groups.0.blocks.0.attn.bias"].shape == (2, 16, 16)
    for kind, scale, want in [("pixelshuffle", 2, [3, 2, 2, 12, 3, 16, 4]),
                              ("pa_up", 4, [3, 7, 4, 16, 3, 16, 4]),  # the original's in_dim
                              ("pa_up", 3, [3, 7, 3, 12, 3, 16, 4]),
                              ("transpose+conv", 2, [3, 5, 4, 12, 3, 16, 4])]:
        s = spec(scale, upsampler_type=kind, unshuffle_mod=kind == "transpose+conv")
        meta = np.asarray(checks.build(s).state_dict()["upsampler.MetaUpsample"])
        assert meta.dtype == np.uint8 and meta.tolist() == want, kind


PARITY = [(2, {"upsampler_type": "pixelshuffle"}),
          (4, {"upsampler_type": "transpose+conv", "num_in_ch": 1, "num_out_ch": 1}),
          (3, {"upsampler_type": "transpose+conv", "ffn_expansion_ratio": 1.5}),
          (2, {"upsampler_type": "dysample", "mid_dim": 8, "num_out_ch": 1}),
          (2, {"upsampler_type": "pa_up", "group_block_pattern": ["channel", "spatial", "spatial"]}),
          (3, {"upsampler_type": "nearest+conv", "num_groups": 2}),
          (1, {"upsampler_type": "pixelshuffledirect", "unshuffle_mod": True}),
          (1, {"upsampler_type": "conv"})]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,kw", PARITY)
def test_matches_the_twin(scale, kw, dtype):
    """7 x 5 pixels: the windows of 4 zero-padded (the padded tokens are keys, as the original's)."""
    checks.check_parity(spec(scale, **kw), (2, kw.get("num_in_ch", 3), 7, 5), dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scale,kw", [(2, {}), (3, {"mid_dim": 24}), (4, {"mid_dim": 8}),
                                      (2, {"unshuffle_mod": True, "mid_dim": 24})])
def test_lda_upsampler_matches_the_twin(scale, kw, dtype):
    """LDA-AQU (learned offsets up to 11 HR pixels, bilinear taps of the keys and values, softmax
    over the 9 taps), with and without the conv to mid_dim; one image (module docstring)."""
    checks.check_parity(spec(scale, upsampler_type="lda", **kw), (1, 3, 5, 6), dtype)


def test_eval_mode_matches_the_twin_with_drop_path():
    checks.check_eval_output(spec(2, drop_path_rate=0.3, depth_per_group=2), (1, 3, 5, 6))


def test_pth_round_trips(tmp_path):
    checks.check_pth_round_trip(spec(4), (1, 3, 5, 6), tmp_path)
    check_pth_both_ways(spec(2, upsampler_type="pa_up", unshuffle_mod=True), (1, 3, 6, 9), tmp_path)


@pytest.mark.parametrize("scale,kw,hw,want", [(2, {}, (5, 3), (10, 6)),
                                              (1, {"unshuffle_mod": True}, (3, 1), (3, 1)),
                                              (2, {"unshuffle_mod": True}, (1, 2), (2, 4))])
def test_output_shapes(scale, kw, hw, want):
    y = checks.build(spec(scale, **kw))(sg.tensor(np.zeros((2, 3, *hw), np.float32)))
    assert y.shape == (2, 3, *want) and y.dtype == np.float32


@pytest.mark.parametrize("kw,match", [
    ({"upsampler_type": "lda", "mid_dim": 12}, r"FDAT: the 'lda' upsampler needs mid_dim a multiple of 8"),
    ({"upsampler_type": "bicubic"}, r"FDAT: upsampler_type must be one of 'conv'"),
    ({"num_heads": 5}, r"FDAT: embed_dim 12 is not a multiple of num_heads 5"),
    ({"group_block_pattern": ["spatial", "mlp"]}, r"FDAT: group_block_pattern must be"),
    ({"scale": 5, "upsampler_type": "transpose+conv"}, r"FDAT: the 'transpose\+conv' upsampler "
                                                        r"supports scale 2, 3, 4, got 5"),
    ({"upsampler_type": "dysample", "mid_dim": 4}, r"FDAT: DySample's 4 groups need mid_dim"),
    ({"mid_dim": 300}, r"FDAT: upsample_dim 300 does not fit the MetaUpsample buffer"),
    ({"unshuffle_mod": True, "upsampler_type": "conv"}, r"FDAT: unshuffle_mod with the 'conv'"),
])
def test_argument_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        MODELS.build({**spec(2), **kw})


@pytest.mark.parametrize("kw", [
    {"scale": 4, "upsampler_type": "dysample", "num_out_ch": 1, "mid_dim": 8},
    {"scale": 3, "num_in_ch": 1, "upsampler_type": "pa_up", "ffn_expansion_ratio": 1.5},
    {"scale": 2, "upsampler_type": "pa_up", "num_groups": 2, "depth_per_group": 2},
    {"scale": 1, "upsampler_type": "transpose+conv", "unshuffle_mod": True},
    {"scale": 2, "upsampler_type": "nearest+conv", "group_block_pattern": ["channel"]},
    {"scale": 2, "upsampler_type": "pixelshuffledirect", "num_out_ch": 1},
    {"scale": 3, "upsampler_type": "lda", "mid_dim": 8},
])
def test_detect_reads_keys_and_the_meta_buffer(kw):
    s = spec(**kw)
    state = checks.build(s).state_dict()
    got = detect(state)
    assert got["type"] == "FDAT"
    MODELS.build(got).load_state_dict(state, strict=True)
    for k in ("scale", "num_in_ch", "num_out_ch", "embed_dim", "num_groups", "depth_per_group",
              "num_heads", "upsampler_type", "mid_dim", "aim_reduction_ratio", "group_block_pattern"):
        if k in s:
            assert got[k] == s[k], k
    assert got.get("unshuffle_mod") == s.get("unshuffle_mod", False)


def test_detect_refuses_an_unknown_kind_naming_it():
    state = dict(checks.build(spec(2)).state_dict())
    meta = np.asarray(state["upsampler.MetaUpsample"]).copy()
    meta[1] = 8
    state["upsampler.MetaUpsample"] = meta
    with pytest.raises(ValueError, match=r"upsampler index 8, which FDAT does not have \(it has 8: "
                                         r"conv, .*transpose\+conv, lda, pa_up\)"):
        detect(state)


@pytest.mark.parametrize("preset,want", [
    ("fdat_tiny", {"embed_dim": 96, "num_groups": 2, "depth_per_group": 2, "num_heads": 3,
                   "ffn_expansion_ratio": 1.5}),
    ("fdat_light", {"embed_dim": 108, "num_groups": 3, "depth_per_group": 2, "num_heads": 4,
                    "ffn_expansion_ratio": 2.0}),
])
def test_detects_traiNNer_redux_presets(preset, want):
    """traiNNer-redux's presets (transpose+conv, x4): the keywords read back from their keys."""
    from framework.engine.config.redux_archs import PRESETS
    name, kw = PRESETS[preset]
    assert name == "FDAT" and {k: kw[k] for k in want} == want
    torch = pytest.importorskip("torch")
    twins = pytest.importorskip("tests.twins")
    state = twins.build_twin({"type": "FDAT", **kw}).state_dict()
    got = detect(state)
    assert {k: got[k] for k in want} == want
    assert (got["scale"], got["upsampler_type"], got["window_size"]) == (4, "transpose+conv", 8)


SPANDREL = [  # (keywords of spandrel's FDAT, input size, the key the file is saved under)
    ({"embed_dim": 96, "num_groups": 1, "depth_per_group": 1, "num_heads": 3,
      "ffn_expansion_ratio": 1.5, "scale": 4}, (11, 14), None),  # tiny's widths, transpose+conv
    ({"embed_dim": 24, "num_groups": 2, "depth_per_group": 1, "num_heads": 2, "window_size": 4,
      "scale": 2, "upsampler_type": "pixelshuffle", "mid_dim": 16}, (9, 10), "params_ema"),
    ({"embed_dim": 16, "num_groups": 1, "depth_per_group": 1, "num_heads": 2, "window_size": 4,
      "scale": 3, "upsampler_type": "pa_up", "mid_dim": 16}, (7, 6), None),
    ({"embed_dim": 16, "num_groups": 1, "depth_per_group": 1, "num_heads": 2, "window_size": 4,
      "scale": 2, "upsampler_type": "nearest+conv", "unshuffle_mod": True}, (9, 7), "params"),
    ({"embed_dim": 16, "num_groups": 1, "depth_per_group": 1, "num_heads": 2, "window_size": 4,
      "scale": 4, "upsampler_type": "pixelshuffledirect"}, (6, 9), None),
    ({"embed_dim": 16, "num_groups": 1, "depth_per_group": 1, "num_heads": 2, "window_size": 4,
      "scale": 2, "upsampler_type": "lda", "mid_dim": 24}, (7, 9), None),
]


@pytest.mark.parametrize("kw,size,wrap", SPANDREL)
def test_a_file_spandrel_builds_gives_spandrels_image(kw, size, wrap, tmp_path):
    torch = pytest.importorskip("torch")
    from tests.twins._spandrel import spandrel_architecture
    module = spandrel_architecture("FDAT")
    torch.manual_seed(0)
    network = module.FDAT(**kw)
    with torch.no_grad():  # the original's init leaves biases and norms at 0 / 1: perturb
        for p in network.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    check_spandrel_file(module, network, tmp_path, size, wrap)
